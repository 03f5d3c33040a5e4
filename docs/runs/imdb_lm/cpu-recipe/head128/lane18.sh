#!/bin/bash
# Issue 37's CPU budget, the last 0.001: seed 0 fine-tuned on this CPU from the CPU recipe's
# language model (the H200's run of the same command) with head+tail truncation (--head 128:
# a review longer than 512 tokens keeps its first 128 and its last 384).
cd /work/main
L=runs/imdb_lm/cpu8k-head128.log
C=".venv/bin/python -m experiments.sentiment.lstm_lm finetune --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/gpu-cpu8k/lm.npz --out runs/imdb_lm/cpu8k-head128 --seeds 0 --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --epochs 2 --max-len 512 --widths 256 512 --head 128"
{ echo "# command: $C (both cores, XLA default threads)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1; rc=$?
echo "# end: $(date -u +%FT%TZ) rc: $rc load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
