#!/bin/bash
# Issue 37: after lane23 (whose adversarial 0.6 fell to dev 0.8160 after its one epoch), the same
# fine-tuning at a third of the norm, 0.2. Both cores, XLA's default threads.
cd /work/main
while pgrep -f runs/lane23.sh > /dev/null; do sleep 10; done
L=runs/imdb_lm/cpu2k-adv1-0.2.log
C=".venv/bin/python -m experiments.sentiment.lstm_lm finetune --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/cpu512-2k/lm.npz --seeds 0 --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --max-len 512 --widths 64 128 192 256 320 384 448 512 --head 128 --also-first --out runs/imdb_lm/cpu2k-adv1-0.2 --epochs 1 --adversarial 0.2"
{ echo "# command: $C (both cores, XLA default threads)"
  echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
$C >> $L 2>&1
echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
