#!/bin/bash
# Issue 37, adversarial training measured at a smaller scale this session can hold: the teacher
# run (for its vocabulary and data), the reviews' export, a 2,000-step LM of the CPU recipe's
# shape (its own full schedule), then seed 0 fine-tuned three ways from it: plain 2 epochs, adversarial (0.6) 1 epoch
# (the same cost), plain 1 epoch (the control). Both cores, XLA's default threads.
cd /work/main
step() {  # LOG COMMAND...
  local L=$1; shift
  { echo "# command: $* (both cores, XLA default threads)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  "$@" >> $L 2>&1
  echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
P=.venv/bin/python
FT="-m experiments.sentiment.lstm_lm finetune --reviews runs/imdb_lm/reviews.npz --pretrained runs/imdb_lm/cpu512-2k/lm.npz --seeds 0 --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --max-len 512 --widths 64 128 192 256 320 384 448 512 --head 128 --also-first"
step runs/imdb37/seed0/teacher.log $P -m experiments train sentiment --model ngram_attn --data-dir ../shared/data/imdb --workdir runs/imdb37/seed0/teacher --train.seed 0 --train.progress_bar False
step runs/imdb_lm/export.log $P -m experiments.sentiment.export_reviews --workdir runs/imdb37/seed0/teacher --out runs/imdb_lm/reviews.npz
step runs/imdb_lm/cpu512-2k.log $P -m experiments.sentiment.lstm_lm pretrain --reviews runs/imdb_lm/reviews.npz --out runs/imdb_lm/cpu512-2k --embed-dim 128 --hidden-size 512 --vocab-cap 10000 --window 128 --batch-size 64 --steps 2000 --checkpoint-every 200
step runs/imdb_lm/cpu2k-plain2.log $P $FT --out runs/imdb_lm/cpu2k-plain2 --epochs 2
step runs/imdb_lm/cpu2k-adv1.log $P $FT --out runs/imdb_lm/cpu2k-adv1 --epochs 1 --adversarial 0.6
step runs/imdb_lm/cpu2k-plain1.log $P $FT --out runs/imdb_lm/cpu2k-plain1 --epochs 1
