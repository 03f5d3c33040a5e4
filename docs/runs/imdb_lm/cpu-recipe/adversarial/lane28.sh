#!/bin/bash
# Issue 37: adversarial fine-tuning (0.2, both epochs) from the rebuilt 8,000-step CPU LM with the
# head+tail recipe, seed 0, and its blend; then the plain recipe from the same LM (the control,
# beside the first blend) and its blend. Both cores, XLA's default threads.
cd /work/main
while pgrep -f "runs/lane2[67].sh" > /dev/null; do sleep 10; done
test -f runs/imdb_lm/cpu512-8k/lm.npz || exit 1
step() {  # LOG NOTE COMMAND...
  local L=$1 N=$2; shift 2
  { echo "# command: $* ($N)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  "$@" >> $L 2>&1
  echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
P=.venv/bin/python
FT="-m experiments.sentiment.lstm_lm finetune --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/cpu512-8k/lm.npz --seeds 0 --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --epochs 2 --max-len 512 --widths 256 512 --head 128"
EN="-m experiments.sentiment.ensemble --workdir runs/imdb37/seed0/student --seed 0"
step runs/imdb_lm/cpu8k-adv2-0.2.log "both cores, XLA default threads" $P $FT --out runs/imdb_lm/cpu8k-adv2-0.2 --adversarial 0.2
step runs/imdb37/seed0/ensemble-lstm8k-adv.log "both cores shared with the control's fine-tuning, XLA default threads" \
  $P $EN --out runs/imdb37/seed0/student/ensemble-lstm8k-adv.json --member lstm=runs/imdb_lm/cpu8k-adv2-0.2/classifier-seed0.npz &
step runs/imdb_lm/cpu8k-head128.log "both cores, shared with the adversarial run's blend at first, XLA default threads" $P $FT --out runs/imdb_lm/cpu8k-head128
wait
step runs/imdb37/seed0/ensemble-lstm8k-head128.log "both cores, XLA default threads" \
  $P $EN --out runs/imdb37/seed0/student/ensemble-lstm8k-head128.json --member lstm=runs/imdb_lm/cpu8k-head128/classifier-seed0.npz
