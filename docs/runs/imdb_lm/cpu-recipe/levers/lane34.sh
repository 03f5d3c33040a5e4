#!/bin/bash
# Issue 37: adversarial training in the last epoch only (--adversarial 0.2 --adversarial-from 2),
# buckets every 64 ids, to fit the 30 minutes: the head+tail CPU recipe from the 8,000-step CPU LM,
# seeds given as arguments, one after another alone on both cores (XLA's default threads); each
# seed then blended with its committed members (seconds).
cd /work/main
test -f runs/imdb_lm/cpu512-8k/lm.npz || exit 1
step() {  # LOG NOTE COMMAND...
  local L=$1 N=$2; shift 2
  { echo "# command: $* ($N)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  "$@" >> $L 2>&1
  echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
P=.venv/bin/python
OUT=runs/imdb_lm/cpu8k-b64-adv-last
for S in "$@"; do
  step $OUT-seed$S.log "alone on both cores, XLA default threads" $P -m experiments.sentiment.lstm_lm finetune \
    --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/cpu512-8k/lm.npz --seeds $S \
    --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --epochs 2 --max-len 512 \
    --widths 64 128 192 256 320 384 448 512 --head 128 --adversarial 0.2 --adversarial-from 2 --out $OUT
  M=docs/runs/imdb37/region6-lstm/seed$S/members
  step $OUT-seed$S.log "blend" $P -m experiments.sentiment.blend --seed $S --out $OUT/blend-seed$S.json \
    --member run=$M/run.npz --member nbsvm=$M/nbsvm.npz --member paragraph_vectors=$M/paragraph_vectors.npz \
    --member lstm=$OUT/classifier-seed$S.npz
done
