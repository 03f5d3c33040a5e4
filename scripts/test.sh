#!/usr/bin/env bash
# Sets up (if needed) and runs the whole test suite on the CPU. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
