#!/bin/bash
# The CPU-budget LSTM recipe priced in RESULTS (512-wide LSTM, 128-wide embedding, the 9,996 most
# frequent words): 8,000 steps (1.68 s a step in the loop here: 3.7 h on both cores), an Orbax checkpoint every 200 steps;
# rerun this script to resume (the same command resumes from runs/imdb_lm/cpu512-8k/checkpoints).
cd /work/main
L=runs/imdb_lm/cpu512-8k.log
C=".venv/bin/python -m experiments.sentiment.lstm_lm pretrain --reviews runs/imdb_lm/reviews.npz --out runs/imdb_lm/cpu512-8k --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --window 128 --batch-size 64 --steps 8000 --checkpoint-every 200"
{ echo "# command: $C (both cores, XLA default threads)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1
echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
