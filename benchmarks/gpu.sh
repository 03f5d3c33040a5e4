#!/usr/bin/env bash
# The GPU benchmark runs, for a session that is lent an H100/H200 through the device tool. Each
# PART fits one call of at most 10 minutes; run them in this order, close together (the machine
# stays warm 30 s between calls), about 20 minutes of device time in all:
#   run(command="bash benchmarks/gpu.sh checks-training", timeout_s=600)   # fast-path checks,
#                                                                          # training, decoding
#   run(command="bash benchmarks/gpu.sh attention", timeout_s=600)         # bfloat16 grid
#   run(command="bash benchmarks/gpu.sh memory-f32", timeout_s=600)        # memory + float32 grid
# Nothing needs carrying: the machine's python3 has jax (CUDA), flax, optax, chex and torch (CUDA),
# and benchmarks/ imports nothing else from this project but zoo/. Each call leaves
# $OUT/gpu-PART.json and a log; back on the CPU machine, with the files under FILES_AT:
#   cp FILES_AT/gpu-*.json benchmarks/results/
#   python -m benchmarks --from-json benchmarks/results/gpu.json \
#       benchmarks/results/gpu-checks-training.json \
#       benchmarks/results/gpu-attention.json benchmarks/results/gpu-attention-f32.json \
#       benchmarks/results/gpu-memory-f32.json --json benchmarks/results/gpu.json \
#       --out docs/BENCHMARKS.md      # merged into the GPU store, which keeps earlier suites
# A dry run of the plumbing on a CPU (quick sizes):
#   OUT=/tmp/dry QUICK=1 PYTHON=.venv/bin/python bash benchmarks/gpu.sh attention
set -uo pipefail
part=${1:?usage: bash benchmarks/gpu.sh checks-training|attention|memory-f32}
out=${OUT:-/tmp/benchmarks-gpu}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Memory probes run in child processes: the parent must not hold the device memory.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
py=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv \
  || echo "no nvidia-smi: not a GPU machine"
$py -c "import jax, flax, optax, torch; print('jax', jax.__version__, jax.devices(), 'flax', \
flax.__version__, 'optax', optax.__version__, 'torch', torch.__version__, torch.cuda.is_available())"
bench() {  # bench NAME ARGS...: one benchmark command, its JSON and log under $out
  local name=$1; shift
  $py -m benchmarks "$@" ${QUICK:+--quick} --json "$out/gpu-$name.json" \
    --out "$out/BENCHMARKS.md" 2>&1 | tee "$out/$name.log" | grep -v '^|'
}
status=0
case "$part" in
  checks-training)
    $py -m benchmarks.gpu_checks 2>&1 | tee "$out/gpu-checks.log" || status=1
    bench checks-training --suites training,decoding || status=1 ;;
  attention)
    bench attention --suites attention --dtypes bfloat16 || status=1 ;;
  memory-f32)
    bench memory-f32 --suites memory || status=1
    bench attention-f32 --suites attention --dtypes float32 || status=1 ;;
  *)
    echo "unknown part: $part" >&2; exit 2 ;;
esac
tail -n 60 "$out/BENCHMARKS.md" 2>/dev/null
exit $status
