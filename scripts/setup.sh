#!/usr/bin/env bash
# Creates .venv (if missing) and installs the project with its dev extra (every part of the
# project, pipelines, experiments, the explorer and the benchmarks, and the test tools: what the
# README's two commands, the test suite and CI need; the library alone is `pip install .`); does
# nothing, silently, when .venv already holds an install of the current pyproject.toml with the
# same extras.
# Usage: bash scripts/setup.sh            (CPU)
#        EXTRAS=dev,cuda12 bash scripts/setup.sh   (NVIDIA GPU, CUDA 12 wheels)
#        FORCE=1 bash scripts/setup.sh             (reinstall even when current)
# The stamp .venv/.setup-stamp holds the sha256 of pyproject.toml, the extras and the Python
# version of the last install that finished; any change to them reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
stamp=.venv/.setup-stamp
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
want="pyproject $(.venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest(), sys.version.split()[0])') extras ${EXTRAS:-dev}"
if [ -z "${FORCE:-}" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
rm -f "$stamp"  # an install cut short must not leave the old stamp looking current
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[${EXTRAS:-dev}]"
echo "$want" > "$stamp"
