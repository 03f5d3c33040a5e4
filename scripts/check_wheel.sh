#!/usr/bin/env bash
# The library alone, as a JAX project installs it: builds the wheel, installs it with no extras
# into an empty virtual environment (from the package registry), imports zoo and zoo.nnx, runs the
# README's module example ("Using a module", its first block), and fails when a library of the
# rest of the project got installed or imported. Run by .ci/run; needs .venv (scripts/setup.sh).
# Usage: bash scripts/check_wheel.sh    (PYTHON=python3.12 for another interpreter of the venv)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheel, built from a copy of the sources (no build/ left in the checkout).
mkdir "$work/src"
tar -c --exclude=__pycache__ pyproject.toml README.md zoo pipelines experiments |
  tar -x -C "$work/src"
.venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w "$work/wheel" "$work/src"
# The empty environment sees nothing of this shell's Python settings.
clean=(env -u PYTHONPATH -u PYTHONHOME)
"${clean[@]}" "${PYTHON:-python3}" -m venv "$work/venv"
"${clean[@]}" "$work/venv/bin/python" -m pip install -q "$work"/wheel/attention_zoo-*.whl
.venv/bin/python - "$work/example.py" <<'EOF'
import sys
sys.path.insert(0, "tests")
from test_docs import README, README_SECTION, _python_blocks
open(sys.argv[1], "w", encoding="utf-8").write(_python_blocks(README, README_SECTION)[0][1])
EOF
cd "$work"  # away from the checkout: zoo comes from the wheel
"${clean[@]}" venv/bin/python - <<'EOF'
import sys
import zoo, zoo.nnx
assert zoo.__file__.startswith(sys.prefix), f"zoo imported from {zoo.__file__}, not the wheel"
heavy = ("tensorflow", "tensorflow_datasets", "gensim", "fastapi", "uvicorn", "sklearn",
         "matplotlib", "sentencepiece", "sacrebleu", "pipelines", "experiments")
loaded = [m for m in heavy if m in sys.modules]
assert not loaded, f"import zoo loaded {loaded}"
EOF
"${clean[@]}" venv/bin/python example.py
installed=$("${clean[@]}" venv/bin/python -m pip list --format freeze)
rest='tensorflow|tensorflow-datasets|tfds-nightly|gensim|scikit-learn|fastapi|uvicorn|matplotlib'
if grep -iE "^($rest|sentencepiece|sacrebleu)==" <<< "$installed"; then
  echo "check_wheel: the base wheel installed the libraries above" >&2
  exit 1
fi
echo "check_wheel: the base wheel installs $(wc -l <<< "$installed") distributions, none of the" \
  "rest of the project's; import zoo and the README's module example ran"
