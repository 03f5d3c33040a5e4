#!/usr/bin/env bash
# Sets up (if needed) and runs the whole test suite on the CPU, on both cores of a 2-core machine
# (pytest-xdist; WORKERS=N for another count, WORKERS=0 for one process), then lists the 15
# slowest tests. Extra arguments go to pytest. The exit status is pytest's: non-zero on any failure.
# --dist worksteal: each worker starts on half of the tests and an idle worker takes tests queued on
# the other, so the few slow end-to-end tests (tens of seconds each) end up spread over both
# workers instead of lining up behind each other at the end of one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
workers=${WORKERS:-2}
xdist=()
if [ "$workers" != 0 ]; then
  xdist=(-n "$workers" --dist worksteal)
fi
exec .venv/bin/python -m pytest ${xdist[@]+"${xdist[@]}"} --durations=15 "$@"
