"""scripts/setup.sh and scripts/test.sh, run on a copy of the project with a stand-in .venv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A .venv/bin/python that runs `-c` code with the real interpreter and only records `-m pip`.
_FAKE_PYTHON = f"""#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  echo "pip ${{*:3}}" >> "$(dirname "$0")/../pip.log"
  exit 0
fi
exec {sys.executable} "$@"
"""


def _project(tmp_path: Path) -> Path:
  (tmp_path / "scripts").mkdir()
  shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
  shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
  python = tmp_path / ".venv" / "bin" / "python"
  python.parent.mkdir(parents=True)
  python.write_text(_FAKE_PYTHON)
  python.chmod(0o755)
  return tmp_path


def _env(**env: str) -> dict[str, str]:
  """This process's environment without the scripts' own settings (a suite run as
  `WORKERS=1 bash scripts/test.sh` must not hand WORKERS to the scripts under test), plus env."""
  outer = {k: v for k, v in os.environ.items() if k not in ("WORKERS", "EXTRAS")}
  return {**outer, **env}


def _setup(project: Path, **env) -> subprocess.CompletedProcess:
  return subprocess.run(["bash", "scripts/setup.sh"], cwd=project, capture_output=True, text=True,
                        env=_env(**env), check=True)


def _pip_calls(project: Path) -> list[str]:
  log = project / ".venv" / "pip.log"
  return log.read_text().splitlines() if log.exists() else []


def test_setup_installs_once_and_again_only_when_pyproject_or_extras_change(tmp_path):
  project = _project(tmp_path)
  first = _setup(project)
  assert _pip_calls(project) == ["pip install -q --upgrade pip", "pip install -q -e .[dev]"]
  assert first.stdout == ""
  second = _setup(project)  # installed and current: nothing at all
  assert (second.stdout, second.stderr) == ("", "")
  assert len(_pip_calls(project)) == 2
  with open(project / "pyproject.toml", "a", encoding="utf-8") as f:
    f.write("\n# a change\n")
  _setup(project)
  assert len(_pip_calls(project)) == 4
  _setup(project, EXTRAS="dev,cuda12")
  assert _pip_calls(project)[-1] == "pip install -q -e .[dev,cuda12]"
  _setup(project, EXTRAS="dev,cuda12")
  assert len(_pip_calls(project)) == 6


def test_test_script_runs_on_two_workers_reports_the_slowest_and_fails_on_a_failure(tmp_path):
  project = _project(tmp_path)
  shutil.copy(ROOT / "scripts" / "test.sh", project / "scripts" / "test.sh")
  (project / "probe").mkdir()
  (project / "probe" / "test_probe.py").write_text(
      "import os\n\n"
      "def test_passes():\n  assert os.environ['PYTEST_XDIST_WORKER_COUNT'] == '2'\n\n"
      "def test_fails():\n  assert False, 'the failure'\n")
  run = subprocess.run(["bash", "scripts/test.sh", "probe", "-p", "no:cacheprovider"],
                       cwd=project, capture_output=True, text=True, timeout=120, env=_env())
  assert run.returncode == 1, run.stdout + run.stderr
  assert "1 failed, 1 passed" in run.stdout and "the failure" in run.stdout
  assert "slowest 15 durations" in run.stdout
