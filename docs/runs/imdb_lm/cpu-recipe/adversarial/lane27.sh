#!/bin/bash
# Issue 37: seed 0's self-training chain rebuilt (its student was lost with a session's runs/; the
# teacher was rerun on 2026-11-28), so the rebuilt 8,000-step LM's classifiers can be blended.
# One core (taskset -c 1, XLA single-threaded), beside the LM's last 1,600 steps.
cd /work/main
export XLA_FLAGS=--xla_cpu_multi_thread_eigen=false\ intra_op_parallelism_threads=1
step() {  # LOG COMMAND...
  local L=$1; shift
  { echo "# command: $* (XLA_FLAGS=$XLA_FLAGS)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  "$@" >> $L 2>&1
  echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
P="taskset -c 1 .venv/bin/python"
L=runs/imdb37/seed0/chain-2026-11-29.log
step $L $P -m experiments.sentiment.pseudo_label --workdir runs/imdb37/seed0/teacher --out runs/imdb37/seed0/teacher/pseudo_labels.npz
step $L $P -m experiments train sentiment --model ngram_attn --data-dir ../shared/data/imdb --workdir runs/imdb37/seed0/student --data.pseudo_labels runs/imdb37/seed0/teacher/pseudo_labels.npz --data.pseudo_min_probability 0.7 --data.bigram_min_freq 5 --train.num_epochs 6 --train.seed 0 --train.progress_bar False
