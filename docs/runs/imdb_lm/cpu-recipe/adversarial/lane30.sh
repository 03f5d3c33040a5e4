#!/bin/bash
# Issue 37: seed 1's self-training chain rebuilt (lost with a session's runs/) on one core beside
# seed 1's adversarial fine-tuning, then seed 1's blend with that classifier (both cores).
cd /work/main
step() {  # LOG NOTE COMMAND...
  local L=$1 N=$2; shift 2
  { echo "# command: $* ($N)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  "$@" >> $L 2>&1
  echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
N1="one core beside seed 1's fine-tuning; XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
L=runs/imdb37/seed1/chain-2026-11-29.log
mkdir -p runs/imdb37/seed1
XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" bash -c "$(declare -f step); \
step $L \"$N1\" taskset -c 1 .venv/bin/python -m experiments train sentiment --model ngram_attn --data-dir ../shared/data/imdb --workdir runs/imdb37/seed1/teacher --train.seed 1 --train.progress_bar False; \
step $L \"$N1\" taskset -c 1 .venv/bin/python -m experiments.sentiment.pseudo_label --workdir runs/imdb37/seed1/teacher --out runs/imdb37/seed1/teacher/pseudo_labels.npz; \
step $L \"$N1\" taskset -c 1 .venv/bin/python -m experiments train sentiment --model ngram_attn --data-dir ../shared/data/imdb --workdir runs/imdb37/seed1/student --data.pseudo_labels runs/imdb37/seed1/teacher/pseudo_labels.npz --data.pseudo_min_probability 0.7 --data.bigram_min_freq 5 --train.num_epochs 6 --train.seed 1 --train.progress_bar False"
while pgrep -f runs/lane29.sh > /dev/null; do sleep 5; done
test -f runs/imdb_lm/cpu8k-adv2-0.2/classifier-seed1.npz || exit 1
step runs/imdb37/seed1/ensemble-lstm8k-adv.log "both cores, XLA default threads" .venv/bin/python -m experiments.sentiment.ensemble --workdir runs/imdb37/seed1/student --seed 1 --out runs/imdb37/seed1/student/ensemble-lstm8k-adv.json --member lstm=runs/imdb_lm/cpu8k-adv2-0.2/classifier-seed1.npz
