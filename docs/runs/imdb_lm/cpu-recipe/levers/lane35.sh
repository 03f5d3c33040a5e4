#!/bin/bash
# Issue 37: what the CPU recipe's steps cost in bfloat16, and on one thread, one process and two
# at once (the machine otherwise idle; one benchmark after another).
cd /work/main
D=docs/runs/imdb_lm/cpu-recipe/levers
B="-m benchmarks.lstm_lm_steps --hidden-size 512 --embed-dim 128 --vocab 10000 --window 128 --batch-size 64 --widths 256 512 --epochs 2 --lm-steps 8000 --steps 5"
P=.venv/bin/python
ONE="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
{ date -u +%FT%TZ; $P $B --dtype float32 --json $D/cost-float32.json 2>&1 | tail -4
  date -u +%FT%TZ; $P $B --dtype bfloat16 --json $D/cost-bfloat16.json 2>&1 | tail -4
  date -u +%FT%TZ; XLA_FLAGS="$ONE" $P $B --json $D/cost-one-thread.json 2>&1 | tail -4
  date -u +%FT%TZ; XLA_FLAGS="$ONE" $P $B --json $D/cost-two-processes-a.json > /tmp/two-a.txt 2>&1 &
  XLA_FLAGS="$ONE" $P $B --json $D/cost-two-processes-b.json 2>&1 | tail -4; wait; tail -4 /tmp/two-a.txt
  date -u +%FT%TZ; } > $D/costs.log 2>&1
