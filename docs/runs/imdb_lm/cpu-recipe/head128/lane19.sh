#!/bin/bash
# Issue 37's CPU budget with head+tail truncation (lane18's seed 0: test 0.9212 against 0.9196):
# seed 0's blend beside seeds 1 and 2's fine-tuning (one process, --seeds 1 2), then their blends.
cd /work/main
blend() {  # seed
  local L=runs/imdb37/seed$1/ensemble-lstm8k-head128.log
  local C=".venv/bin/python -m experiments.sentiment.ensemble --workdir runs/imdb37/seed$1/student --out runs/imdb37/seed$1/student/ensemble-lstm8k-head128.json --seed $1 --member lstm=runs/imdb_lm/cpu8k-head128/classifier-seed$1.npz"
  { echo "# command: $C (both cores shared, XLA default threads)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  $C >> $L 2>&1; local rc=$?
  echo "# end: $(date -u +%FT%TZ) rc: $rc load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
blend 0 &
L=runs/imdb_lm/cpu8k-head128-seeds12.log
C=".venv/bin/python -m experiments.sentiment.lstm_lm finetune --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/gpu-cpu8k/lm.npz --out runs/imdb_lm/cpu8k-head128 --seeds 1 2 --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --epochs 2 --max-len 512 --widths 256 512 --head 128"
{ echo "# command: $C (both cores, XLA default threads; seed 0's blend beside it at first)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1; rc=$?
echo "# end: $(date -u +%FT%TZ) rc: $rc load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
blend 1 &
blend 2 &
wait
