#!/usr/bin/env bash
# Pretrains the LSTM language model on IMDB's reviews and fine-tunes the classifier for seeds 0, 1
# and 2 (and, for comparison, seed 0 from scratch) on one GPU, in one call of under 10 minutes
# (experiments/sentiment/lstm_lm.py; docs/RESULTS.md has what it gave).
#
# First, on the CPU machine, the reviews of seed 0's teacher (the README's chain) as ids:
#   python -m experiments.sentiment.export_reviews --workdir runs/imdb37/seed0/teacher \
#       --out runs/imdb_lm/reviews.npz
# then through the device tool (nothing to carry but the reviews; the GPU machine's python3 has
# jax, flax, optax and sentencepiece, all that lstm_lm.py imports):
#   run(command="bash scripts/lstm_lm_gpu.sh", carry=["runs/imdb_lm/reviews.npz"], timeout_s=600)
# and back here the files of $OUT (gpu.log, lm.json, classifier-seedS.npz, scratch/...) go to
# runs/imdb_lm/gpu/, where the ensemble's --member reads the .npz files.
# PRETRAIN_S (default 240) is the pretraining's time budget in seconds; QUICK=1 shrinks everything
# to a dry run of the plumbing on a CPU (OUT=/tmp/dry QUICK=1 bash scripts/lstm_lm_gpu.sh).
# RECIPE=cpu runs instead the recipe priced for the 2-core CPU (a 512-wide LSTM over the 9,996 most
# frequent words, STEPS steps, default 10,000; fine-tuning 2 epochs) with float32 matmuls at full
# precision as on the CPU, and brings lm.npz back too (11 MB), so the CPU can fine-tune from it.
set -uo pipefail
out=${OUT:-/tmp/lstm-lm-gpu}
work=${WORK:-/tmp/lstm-lm}
reviews=${REVIEWS:-runs/imdb_lm/reviews.npz}
py=${PYTHON:-python3}
mkdir -p "$out/scratch" "$work/scratch"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export JAX_COMPILATION_CACHE_DIR=$work/jax-cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"
$py -c "import jax, flax, optax; print('jax', jax.__version__, jax.devices(), 'flax', \
flax.__version__, 'optax', optax.__version__)"
if [ -n "${QUICK:-}" ]; then
  model="--embed-dim 8 --hidden-size 16"
  pre="--window 16 --batch-size 8 --steps 30 --warmup-steps 5"
  fine="--epochs 1 --max-len 32 --widths 16 32"
elif [ "${RECIPE:-gpu}" = cpu ]; then
  export JAX_DEFAULT_MATMUL_PRECISION=highest
  model="--embed-dim 128 --hidden-size 512 --vocab-cap 10000"
  pre="--window 128 --batch-size 64 --steps ${STEPS:-10000}"
  fine="--epochs 2 --max-len 512 --widths 256 512"
else
  model="--embed-dim 256 --hidden-size 1024 --dtype bfloat16"
  pre="--window 256 --batch-size 128 --epochs 40 --time-budget-s ${PRETRAIN_S:-240}"
  fine="--epochs 5 --max-len 512 --widths 256 512"
fi
lm=experiments/sentiment/lstm_lm.py
# What is finished reaches $OUT at once, so a call cut short still brings it back.
keep=("$work"/lm.json); [ "${RECIPE:-gpu}" = cpu ] && keep+=("$work"/lm.npz)
(while sleep 5; do cp "${keep[@]}" "$work"/classifier-seed*.npz "$out"/ 2>/dev/null
   cp "$work"/scratch/classifier-seed*.npz "$out"/scratch/ 2>/dev/null; done) &
copier=$!
$py $lm pretrain --reviews "$reviews" --out "$work" $model $pre 2>&1 | tee "$out/gpu.log" \
  || { kill $copier; exit 1; }
$py $lm finetune --reviews "$reviews" --pretrained "$work/lm.npz" --out "$work" --seeds 0 1 2 \
  $model $fine 2>&1 | tee -a "$out/gpu.log"
$py $lm finetune --reviews "$reviews" --out "$work/scratch" --seeds 0 $model $fine 2>&1 \
  | tee -a "$out/gpu.log"
sleep 6; kill $copier
cp "${keep[@]}" "$work"/classifier-seed*.npz "$out"/ 2>/dev/null
cp "$work"/scratch/classifier-seed*.npz "$out"/scratch/ 2>/dev/null
ls -la "$out" "$out/scratch"
