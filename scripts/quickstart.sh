#!/usr/bin/env bash
# The main job on a fresh machine: set up .venv, train the default IMDB sentiment model on the
# review sample shipped with the package (CPU, a few minutes), then classify a sentence and draw
# its attention heatmap. Everything lands in runs/quickstart/ (checkpoints, metrics.jsonl,
# curves.png, results.json, heatmap.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
WORKDIR=${WORKDIR:-runs/quickstart}
.venv/bin/python -m experiments train sentiment --workdir "$WORKDIR" --train.progress_bar=False
.venv/bin/python -m experiments predict sentiment --workdir "$WORKDIR" \
  --heatmap "$WORKDIR/heatmap.png" "this great science fiction film is really awesome"
echo "quickstart: wrote $WORKDIR/results.json, $WORKDIR/curves.png and $WORKDIR/heatmap.png"
