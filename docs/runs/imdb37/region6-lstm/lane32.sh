#!/bin/bash
# Issue 37: the region CNN as a fifth member beside the CPU recipe's head+tail LSTM (the committed
# docs/runs/imdb_lm/cpu-recipe/head128/classifier-seedS.npz), seeds 0-2: each seed's ensemble
# pretrains its region embedding (2 passes, the default), trains the CNN 6 epochs, and saves every
# model's scores (--save-members) for blend.py. Seeds 0 and 1 start at once; seed 2's after its
# chain (lane31.sh). Every process single-threaded, 2-3 processes on the 2 cores.
cd /work/main
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
step() {  # LOG NOTE COMMAND...
  local L=$1 N=$2; shift 2
  { echo "# command: $* ($N)"
    echo "# start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> $L
  "$@" >> $L 2>&1
  echo "# end: $(date -u +%FT%TZ) rc: $? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
}
N="single-threaded (XLA_FLAGS=$XLA_FLAGS), 2-3 such processes on the 2 cores"
ensemble() {  # SEED
  step runs/imdb37/seed$1/ensemble-region6-lstm.log "$N" .venv/bin/python -m \
    experiments.sentiment.ensemble --workdir runs/imdb37/seed$1/student --seed $1 \
    --out runs/imdb37/seed$1/student/ensemble-region6-lstm.json --region-epochs 6 \
    --member lstm=docs/runs/imdb_lm/cpu-recipe/head128/classifier-seed$1.npz \
    --save-members runs/imdb37/seed$1/members
}
ensemble 0 &
ensemble 1 &
while pgrep -f runs/lane31.sh > /dev/null; do sleep 10; done
test -f runs/imdb37/seed2/student/results.json && ensemble 2
wait
