#!/bin/bash
# Issue 37's CPU budget, the last 0.0007: three seeds fine-tuned alone on this CPU (one process)
# from the CPU recipe's language model (the H200's run of the same command), head+tail
# (--head 128), length buckets every 64 ids (a fifth fewer padded ids than 256/512) and the long
# reviews also scored by their first 512 ids (--also-first); then the three blends at once.
cd /work/main
L=runs/imdb_lm/cpu8k-views.log
C=".venv/bin/python -m experiments.sentiment.lstm_lm finetune --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/gpu-cpu8k/lm.npz --out runs/imdb_lm/cpu8k-views --seeds 0 1 2 --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --epochs 2 --max-len 512 --widths 64 128 192 256 320 384 448 512 --head 128 --also-first"
{ echo "# command: $C (both cores, XLA default threads)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1; rc=$?
echo "# end: $(date -u +%FT%TZ) rc: $rc load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
blend() {  # seed
  local L=runs/imdb37/seed$1/ensemble-lstm8k-views.log
  local C=".venv/bin/python -m experiments.sentiment.ensemble --workdir runs/imdb37/seed$1/student --out runs/imdb37/seed$1/student/ensemble-lstm8k-views.json --seed $1 --member lstm=runs/imdb_lm/cpu8k-views/classifier-seed$1.npz"
  { echo "# command: $C (both cores shared by the three seeds' blends, XLA default threads)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  $C >> $L 2>&1; local rc=$?
  echo "# end: $(date -u +%FT%TZ) rc: $rc load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
blend 0 & blend 1 & blend 2 &
wait
