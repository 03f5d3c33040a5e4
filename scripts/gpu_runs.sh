#!/usr/bin/env bash
# A full-size named run on a lent GPU (the device tool), inside one call of at most 10 minutes:
# the fast-path equality checks (CHECKS=0 skips them), then the run in bfloat16 until the time is
# nearly spent (SIGTERM: the trainer saves a checkpoint and stops), then the test evaluation of the
# best dev checkpoint when the run did not reach its own.
#
#   RUN                       command                                           data in .gpu_data/
#   translation-transformer   train translation --model transformer (default)   fra-eng.zip
#   translation-bahdanau      train translation --model bahdanau                fra-eng.zip
#   couplet-transformer       train couplet --model transformer                 couplet.tar.gz
#   couplet-lstm              train couplet --model lstm                        couplet.tar.gz
#
# On this machine, from the project root, once:
#   bash ../shared/device/wheels.sh tyro==1.0.17 dacite==1.9.2 tensorboardX==2.6.5 typeguard \
#       docstring-parser         # plus promise, built here: pip wheel --no-deps -w .whl promise
#   mkdir -p .gpu_data && cp ../shared/data/fra-eng/fra-eng.zip .gpu_data/   # ignored by git
# then the device call (carry [".whl", ".whl_pin", ".gpu_data"]):
#   run(command="DEADLINE_S=570 RUN=translation-transformer bash scripts/gpu_runs.sh", timeout_s=600)
# .whl_pin holds this project's tested flax/optax/orbax/chex wheels; they are used only if the
# machine's own versions cannot start the run. Everything comes back as $OUT/gpu-runs.tar.gz
# (the run's config, metrics, logs) beside the logs themselves.
# Measured (H200, 2026-11-26, docs/RESULTS.md): translation-transformer reached step 7,254 of
# 22,840 in a 565-second call (about 20 ms a step); by that pace (an estimate) its whole schedule
# needs about 10 minutes.
set -uo pipefail
start=$(date +%s)
deadline=${DEADLINE_S:-570}
left() { echo $(( deadline - ($(date +%s) - start) )); }
out=${OUT:-/tmp/gpu-runs}
work=/tmp/gpu-runs-work
mkdir -p "$out" "$work"
py=${PYTHON:-python3}

if [ -z "${SKIP_INSTALL:-}" ]; then  # SKIP_INSTALL=1: a dry run where everything is installed
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 ZOO_DATA_DIR=$work/data TQDM_MININTERVAL=30
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  $py -c "import jax, flax, optax, chex, orbax.checkpoint as oc, tensorflow_datasets as t; \
print('jax', jax.__version__, jax.devices(), 'flax', flax.__version__, 'optax', optax.__version__, \
'chex', chex.__version__, 'tfds', t.__version__)"
  lscpu | grep 'Model name'
} 2>&1 | tee "$out/environment.txt"

if [ "${CHECKS:-1}" != 0 ]; then
  timeout 75 $py -m benchmarks.gpu_checks 2>&1 | tee "$out/gpu-checks.log"
  echo "gpu_checks exit ${PIPESTATUS[0]}, $(left) s left"
fi

name=${RUN:-translation-transformer}
case "$name" in
  translation-transformer) args=(translation --model transformer --data-dir .gpu_data/fra-eng.zip) ;;
  translation-bahdanau) args=(translation --model bahdanau --data-dir .gpu_data/fra-eng.zip) ;;
  couplet-transformer) args=(couplet --model transformer --data-dir .gpu_data/couplet.tar.gz) ;;
  couplet-lstm) args=(couplet --model lstm --data-dir .gpu_data/couplet.tar.gz) ;;
  *) echo "unknown RUN: $name (translation-transformer, translation-bahdanau," \
         "couplet-transformer, couplet-lstm)" >&2; exit 2 ;;
esac
run=$work/$name
train() {  # SIGTERM with 110 s left (for the test evaluation), SIGKILL 30 s later
  timeout -s TERM -k 30 "$(( $(left) - 110 ))" $py -m experiments train "${args[@]}" \
      --workdir "$run" --train.dtype bfloat16 --train.progress_bar False
}
train 2>&1 | tee "$out/$name.log"
if [ ! -d "$run/checkpoints" ] && [ "$(left)" -gt 200 ]; then  # it did not start: try the pins
  echo "retrying with the pinned flax/optax/orbax/chex wheels"
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl_pin/*.whl
  rm -rf "$run"
  echo "$(left) s left"
  train 2>&1 | tee "$out/$name-pinned.log"
fi
if [ -d "$run/checkpoints" ] && [ ! -s "$run/results.json" ]; then
  checkpoint=best; [ -d "$run/best" ] || checkpoint=latest
  echo "evaluating the $checkpoint checkpoint on test, $(left) s left"
  timeout "$(( $(left) - 10 ))" $py -m experiments evaluate --workdir "$run" --split test \
      --checkpoint $checkpoint 2>&1 | tee "$out/$name-evaluate.log"
fi
tar -czf "$out/gpu-runs.tar.gz" -C "$work" --exclude=checkpoints --exclude=best --exclude=data \
    "$name" 2>/dev/null
ls -la "$out"
echo "done, $(left) s left"
