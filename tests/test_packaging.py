"""The library's wheel installs only what zoo/ imports: the base distribution requires jax, flax,
chex and numpy, everything else of the project is an extra, and importing zoo (and zoo.nnx) loads
none of the pipelines', experiments' or explorer's libraries.

The wheel is built from a copy of the project (pip, no build isolation, no dependencies: about a
second, offline); installing it into an empty environment needs the package registry and a minute,
so scripts/check_wheel.sh does that in .ci/run (docs/BENCHMARKS.md, "The library alone").
"""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from test_layers import IMPORTS

ROOT = Path(__file__).resolve().parents[1]
BASE = {"jax", "flax", "chex", "numpy"}
HEAVY = ("tensorflow", "tensorflow_datasets", "gensim", "fastapi", "uvicorn", "sklearn",
         "matplotlib", "sentencepiece", "sacrebleu", "pipelines", "experiments")


@pytest.fixture(scope="module")
def metadata(tmp_path_factory) -> email.message.Message:
  """The METADATA of the wheel built from a copy of the project."""
  src = tmp_path_factory.mktemp("project")
  for name in ("pyproject.toml", "README.md"):
    shutil.copy(ROOT / name, src / name)
  for package in ("zoo", "pipelines", "experiments"):
    shutil.copytree(ROOT / package, src / package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
  out = tmp_path_factory.mktemp("wheel")
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                  "--no-index", "--disable-pip-version-check", "-w", str(out), str(src)],
                 check=True, capture_output=True, text=True)
  (wheel,) = out.glob("attention_zoo-*.whl")
  with zipfile.ZipFile(wheel) as archive:
    (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    return email.parser.Parser().parsestr(archive.read(name).decode())


def _requirements(metadata) -> list[Requirement]:
  return [Requirement(line) for line in metadata.get_all("Requires-Dist")]


def test_the_base_distribution_requires_jax_flax_chex_numpy_only(metadata):
  base = {r.name for r in _requirements(metadata) if r.marker is None}
  assert base == BASE


def test_zoo_imports_only_the_base_distribution():
  third_party = {name.split(".")[0] for module, imported in IMPORTS.items()
                 if module.split(".")[0] == "zoo" for name in imported}
  third_party -= set(sys.stdlib_module_names) | {"zoo", "__future__"}
  assert third_party == BASE


def test_the_rest_of_the_project_is_in_extras_that_dev_gathers(metadata):
  extras = set(metadata.get_all("Provides-Extra"))
  assert {"pipelines", "experiments", "serve", "benchmarks", "dev"} <= extras
  in_extra = {}
  for r in _requirements(metadata):
    if r.marker is not None:
      (extra,) = [e for e in extras if r.marker.evaluate({"extra": e})]
      in_extra.setdefault(extra, set()).add(r.name)
  assert {"tensorflow-datasets", "sentencepiece"} <= in_extra["pipelines"]
  assert {"optax", "orbax-checkpoint", "gensim", "scikit-learn", "matplotlib"} <= in_extra[
      "experiments"]
  assert {"fastapi", "uvicorn"} <= in_extra["serve"]
  # scripts/setup.sh installs .[dev]: the test suite and CI need every part of the project.
  dev_self = [r for r in _requirements(metadata)
              if r.name == "attention-zoo" and r.marker.evaluate({"extra": "dev"})]
  assert dev_self and {"pipelines", "experiments", "serve", "benchmarks"} <= dev_self[0].extras
  assert {"pytest", "mypy", "pdoc"} <= in_extra["dev"]


def test_importing_zoo_loads_no_library_of_the_rest_of_the_project():
  code = ("import sys, zoo, zoo.nnx\n"
          f"print(' '.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
  done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                        check=True)
  assert done.stdout.strip() == ""
