#!/bin/bash
# Issue 37: rebuild the CPU-budget LSTM language model (the 8,000-step recipe priced in RESULTS;
# its earlier build was lost with a session's runs/). An Orbax checkpoint every 200 steps;
# rerun this script to resume (the same command resumes from runs/imdb_lm/cpu512-8k/checkpoints).
cd /work/main
while pgrep -f runs/lane25.sh > /dev/null; do sleep 10; done
L=runs/imdb_lm/cpu512-8k.log
C=".venv/bin/python -m experiments.sentiment.lstm_lm pretrain --reviews runs/imdb_lm/reviews.npz --out runs/imdb_lm/cpu512-8k --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --window 128 --batch-size 64 --steps 8000 --checkpoint-every 200"
{ echo "# command: $C (both cores, XLA default threads)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1
echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
