#!/usr/bin/env bash
# The main job on a fresh machine: set up .venv, train the nndl chapter's BiLSTM with dot-product
# attention pooling (bilstm_attn_dot) on the review sample shipped with the package (2,000 training
# reviews, a tenth of them, whole movies, held out as dev; 8 epochs, about two minutes on a 2-core
# CPU), then classify two sentences, print each word's attention weight and draw the heatmaps. Everything lands in
# runs/quickstart/ (checkpoints, metrics.jsonl, curves.png, results.json, heatmap-1.png and
# heatmap-2.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
WORKDIR=${WORKDIR:-runs/quickstart}
.venv/bin/python -m experiments train sentiment --model bilstm_attn_dot --workdir "$WORKDIR" \
  --train.num_epochs 8 --train.progress_bar=False
.venv/bin/python -m experiments predict sentiment --workdir "$WORKDIR" --weights \
  --heatmap "$WORKDIR/heatmap.png" "this great science fiction film is really awesome" \
  "a dull, boring film with terrible acting"
echo "quickstart: wrote $WORKDIR/results.json, $WORKDIR/curves.png and the heatmaps" \
  "$WORKDIR/heatmap-1.png and $WORKDIR/heatmap-2.png"
