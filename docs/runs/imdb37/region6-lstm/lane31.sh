#!/bin/bash
# Issue 37: seed 2's self-training chain rebuilt (lost with a session's runs/), single-threaded,
# while the ensemble learns to save its members' scores (lane32.sh runs the blends after).
cd /work/main
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
step() {  # LOG NOTE COMMAND...
  local L=$1 N=$2; shift 2
  { echo "# command: $* ($N)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  "$@" >> $L 2>&1
  echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
N="single-threaded (XLA_FLAGS=$XLA_FLAGS); alone at first, later beside seeds 0-1's ensembles"
L=runs/imdb37/seed2/chain-2026-11-29.log
mkdir -p runs/imdb37/seed2
step $L "$N" .venv/bin/python -m experiments train sentiment --model ngram_attn --data-dir ../shared/data/imdb --workdir runs/imdb37/seed2/teacher --train.seed 2 --train.progress_bar False
step $L "$N" .venv/bin/python -m experiments.sentiment.pseudo_label --workdir runs/imdb37/seed2/teacher --out runs/imdb37/seed2/teacher/pseudo_labels.npz
step $L "$N" .venv/bin/python -m experiments train sentiment --model ngram_attn --data-dir ../shared/data/imdb --workdir runs/imdb37/seed2/student --data.pseudo_labels runs/imdb37/seed2/teacher/pseudo_labels.npz --data.pseudo_min_probability 0.7 --data.bigram_min_freq 5 --train.num_epochs 6 --train.seed 2 --train.progress_bar False
