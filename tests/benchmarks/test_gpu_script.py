"""benchmarks/gpu.sh's plumbing, with a stand-in python: what a device call brings back, and the
deadline of its one-call part ('all')."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Records each call; `-m benchmarks ... --json F --out M` writes F and M as the real one would.
_FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
if [ "$1" = "-m" ] && [ "$2" = "benchmarks" ]; then
  while [ $# -gt 0 ]; do
    case "$1" in --json) echo '{}' > "$2" ;; --out) echo '# Benchmarks' > "$2" ;; esac
    shift
  done
  echo "| a table row the log keeps and the console drops |"
fi
if [ "$1" = "-m" ] && [ "$2" = "benchmarks.gpu_checks" ]; then echo "14 passed, 0 failed"; fi
exit 0
"""


def _run(tmp_path: Path, part: str, deadline: int | None = None) -> tuple[Path, list[str], str]:
  fake = tmp_path / "python"
  fake.write_text(_FAKE_PYTHON)
  fake.chmod(0o755)
  out, calls = tmp_path / "out", tmp_path / "calls.txt"
  env = {**os.environ, "PYTHON": str(fake), "OUT": str(out), "CALLS": str(calls)}
  if deadline is not None:
    env["DEADLINE_S"] = str(deadline)
  done = subprocess.run(["bash", "benchmarks/gpu.sh", part], cwd=ROOT, env=env,
                        capture_output=True, text=True, check=False, timeout=60)
  return out, calls.read_text().splitlines(), done.stdout + done.stderr


def test_all_runs_every_suite_into_its_own_json_and_brings_back_at_most_8_files(tmp_path):
  out, calls, _ = _run(tmp_path, "all")
  suites = [c.split("--suites ")[1].split()[0] for c in calls if "--suites" in c]
  assert suites == ["training", "decoding", "memory", "attention"]
  assert any("--dtypes float32 --lengths 1024,4096 --head-dims 64,128" in c for c in calls)
  files = sorted(p.name for p in out.iterdir())
  assert files == ["BENCHMARKS.md", "gpu-attention-f32.json", "gpu-checks.log",
                   "gpu-decoding.json", "gpu-memory.json", "gpu-training.json", "logs.tar.gz"]
  assert len(files) <= 8  # the device tool's limit on what comes back


def test_all_skips_the_suites_the_deadline_leaves_no_room_for(tmp_path):
  out, calls, console = _run(tmp_path, "all", deadline=30)
  assert not [c for c in calls if "--suites" in c]
  assert "skipped training" in console and "skipped attention-f32" in console
  assert (out / "gpu-checks.log").exists()


def test_an_unknown_part_is_named(tmp_path):
  fake = tmp_path / "python"
  fake.write_text("#!/usr/bin/env bash\nexit 0\n")
  fake.chmod(0o755)
  done = subprocess.run(["bash", "benchmarks/gpu.sh", "attention-bf16"], cwd=ROOT,
                        env={**os.environ, "PYTHON": str(fake), "OUT": str(tmp_path / "o")},
                        capture_output=True, text=True, check=False, timeout=60)
  assert done.returncode == 2 and "unknown part: attention-bf16" in done.stderr
