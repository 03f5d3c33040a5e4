#!/bin/bash
# Issue 37: the second view alone, on the head+tail recipe's own buckets (256 and 512): seed 0
# fine-tuned alone on this CPU with --also-first, which changes scoring, not training, so its
# head+tail view should be lane18's seed 0 to the bit; then its blend.
cd /work/main
L=runs/imdb_lm/cpu8k-head128-views.log
C=".venv/bin/python -m experiments.sentiment.lstm_lm finetune --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/gpu-cpu8k/lm.npz --out runs/imdb_lm/cpu8k-head128-views --seeds 0 --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --epochs 2 --max-len 512 --widths 256 512 --head 128 --also-first"
{ echo "# command: $C (both cores, XLA default threads; the CPU pretraining paused)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1; rc=$?
echo "# end: $(date -u +%FT%TZ) rc: $rc load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
L=runs/imdb37/seed0/ensemble-lstm8k-head128-views.log
C=".venv/bin/python -m experiments.sentiment.ensemble --workdir runs/imdb37/seed0/student --out runs/imdb37/seed0/student/ensemble-lstm8k-head128-views.json --seed 0 --member lstm=runs/imdb_lm/cpu8k-head128-views/classifier-seed0.npz"
{ echo "# command: $C (both cores, XLA default threads; the CPU pretraining paused)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1; rc=$?
echo "# end: $(date -u +%FT%TZ) rc: $rc load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
