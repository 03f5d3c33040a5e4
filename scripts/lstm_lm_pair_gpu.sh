#!/usr/bin/env bash
# ULMFiT's pair within the CPU budget, on one GPU in one call: a forward and a backward LSTM
# language model of the recipe priced for the 2-core CPU (512 wide, the 9,996 most frequent words,
# STEPS steps each, default 4,000: the two together 8,000, 3.7 h on that CPU), then each direction's
# classifier fine-tuned for seeds 0, 1 and 2 with one epoch over the first 512 ids (then, if the
# call has time, with one epoch over the first 256). Float32 matmuls at full precision, as on the
# CPU. Needs runs/imdb_lm/reviews.npz (scripts/lstm_lm_gpu.sh's header says how to write it):
#   run(command="bash scripts/lstm_lm_pair_gpu.sh", carry=["runs/imdb_lm/reviews.npz"])
# $OUT gets gpu.log and forward.tar and backward.tar (lm.npz, lm.json, len512/ and len256/ with
# classifier-seedS.npz), rewritten after every stage so that a call cut short brings back what
# finished. QUICK=1 shrinks everything to a dry run on a CPU (OUT=/tmp/dry QUICK=1 bash ...).
set -uo pipefail
out=${OUT:-/tmp/lstm-lm-pair-gpu}
work=${WORK:-/tmp/lstm-lm-pair}
reviews=${REVIEWS:-runs/imdb_lm/reviews.npz}
py=${PYTHON:-python3}
mkdir -p "$out" "$work"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export JAX_COMPILATION_CACHE_DIR=$work/jax-cache JAX_DEFAULT_MATMUL_PRECISION=highest
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"
if [ -n "${QUICK:-}" ]; then
  model="--embed-dim 8 --hidden-size 16"
  pre="--window 16 --batch-size 8 --steps 20 --warmup-steps 5"
  lens=(32 16)
else
  model="--embed-dim 128 --hidden-size 512 --vocab-cap 10000"
  pre="--window 128 --batch-size 64 --steps ${STEPS:-4000}"
  lens=(512 256)
fi
lm=experiments/sentiment/lstm_lm.py
log=$out/gpu.log
pack() { tar -cf "$out/$1.tar" -C "$work" --exclude=checkpoints "$1"; }
for direction in forward backward; do
  flag=$([ $direction = backward ] && echo --backward)
  echo "== pretraining, $direction" | tee -a "$log"
  $py $lm pretrain --reviews "$reviews" --out "$work/$direction" $model $flag $pre 2>&1 \
    | tee -a "$log" || exit 1
  pack $direction
done
for len in "${lens[@]}"; do
  widths=$([ "$len" = "${lens[0]}" ] && echo "${lens[1]} $len" || echo "$len")
  for direction in forward backward; do
    flag=$([ $direction = backward ] && echo --backward)
    echo "== fine-tuning, $direction, first $len ids" | tee -a "$log"
    $py $lm finetune --reviews "$reviews" --pretrained "$work/$direction/lm.npz" \
      --out "$work/$direction/len$len" --seeds 0 1 2 $model $flag --epochs 1 \
      --max-len "$len" --widths $widths 2>&1 | tee -a "$log"
    pack $direction
  done
done
ls -la "$out"
