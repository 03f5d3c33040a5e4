#!/bin/bash
# Issue 37: adversarial fine-tuning at 0.2 for two epochs, the count the plain recipe trains, from
# the 2,000-step language model (one epoch at 0.2 gave dev 0.8784 against the plain epoch's 0.8812).
# Both cores, XLA's default threads.
cd /work/main
L=runs/imdb_lm/cpu2k-adv2-0.2.log
C=".venv/bin/python -m experiments.sentiment.lstm_lm finetune --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/cpu512-2k/lm.npz --seeds 0 --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --max-len 512 --widths 64 128 192 256 320 384 448 512 --head 128 --also-first --out runs/imdb_lm/cpu2k-adv2-0.2 --epochs 2 --adversarial 0.2"
{ echo "# command: $C (both cores, XLA default threads)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1
echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
