#!/usr/bin/env bash
# The GPU benchmark runs, for a session that is lent an H100/H200 through the device tool. Each
# PART fits one call of at most 10 minutes; run them in this order, close together (the machine
# stays warm 30 s between calls), about 20 minutes of device time in all:
#   run(command="bash benchmarks/gpu.sh checks-training", timeout_s=600)   # fast-path checks,
#                                                                          # training, decoding
#   run(command="bash benchmarks/gpu.sh attention", timeout_s=600)         # bfloat16 grid
#   run(command="bash benchmarks/gpu.sh memory-f32", timeout_s=600)        # memory + float32 grid
# or, where only one call fits (15 device minutes in all), every part but the bfloat16 grid in one
# call, each suite its own JSON, stopped DEADLINE_S seconds after the start (what is cut short
# writes nothing; the parts run in the order below, the float32 grid last and narrowed):
#   run(command="DEADLINE_S=560 bash benchmarks/gpu.sh all", timeout_s=600)
# Nothing needs carrying: the machine's python3 has jax (CUDA), flax, optax, chex and torch (CUDA),
# and these suites import nothing else from this project but zoo/ (experiments/, with its dacite
# and tyro, only for translation_runs). Each call leaves $OUT/gpu-NAME.json and a log ('all': the
# logs in logs.tar.gz); back on the CPU machine, with the files under FILES_AT, each JSON renamed
# for its GPU (gpu-training-h100.json, ...; the H100 session of 2026-11-27 did so):
#   cp FILES_AT/gpu-*.json benchmarks/results/
#   python -m benchmarks --from-json benchmarks/results/gpu.json \
#       benchmarks/results/gpu-checks-training.json \
#       benchmarks/results/gpu-attention.json benchmarks/results/gpu-attention-f32.json \
#       benchmarks/results/gpu-memory-f32.json --json benchmarks/results/gpu.json \
#       --out docs/BENCHMARKS.md      # merged into the GPU store, which keeps earlier suites
# (the store first, the new files after it: a later file's suite replaces the store's, and its
# attention rows join the store's, each row with its device).
# A dry run of the plumbing on a CPU (quick sizes):
#   OUT=/tmp/dry QUICK=1 PYTHON=.venv/bin/python bash benchmarks/gpu.sh attention
set -uo pipefail
part=${1:?usage: bash benchmarks/gpu.sh checks-training|attention|memory-f32|all}
start=$(date +%s)
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
left() { echo $(( ${DEADLINE_S:-100000} - ($(date +%s) - start) )); }
bench() {  # bench NAME ARGS...: one benchmark command, its JSON and log under $out, cut at the deadline
  local name=$1; shift
  if [ "$(left)" -lt 45 ]; then echo "skipped $name: $(left) s left"; return 1; fi
  timeout -k 5 $(( $(left) - 10 )) $py -m benchmarks "$@" ${QUICK:+--quick} --json "$out/gpu-$name.json" \
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
  all)
    timeout -k 5 120 $py -m benchmarks.gpu_checks 2>&1 | tee "$out/gpu-checks.log" || status=1
    bench training --suites training || status=1
    bench decoding --suites decoding || status=1
    bench memory --suites memory || status=1
    bench attention-f32 --suites attention --dtypes float32 --lengths 1024,4096 \
      --head-dims 64,128 || status=1
    # at most 8 files come back from a device call: the logs travel as one archive
    (cd "$out" && tar -czf logs.tar.gz ./*.log && rm -f training.log decoding.log memory.log \
      attention-f32.log) ;;
  *)
    echo "unknown part: $part" >&2; exit 2 ;;
esac
tail -n 60 "$out/BENCHMARKS.md" 2>/dev/null
exit $status
