#!/usr/bin/env bash
# Creates .venv (if missing) and installs the project with its test extras. Idempotent.
# Usage: bash scripts/setup.sh            (CPU)
#        EXTRAS=dev,cuda12 bash scripts/setup.sh   (NVIDIA GPU, CUDA 12 wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[${EXTRAS:-dev}]"
