"""Damage to checkpoints, and the run that measures what the engine makes of it.

Imported by tests/reliability/test_damage.py for `damage` and `KINDS`; run as a script it
measures the figures docs/RELIABILITY.md reports (section 7), on the toy run of toy_runs.py:

    JAX_PLATFORMS=cpu .venv/bin/python tests/reliability/damage_matrix.py [--tries 5] \
        [--disk-tries 3]

  * every kind of damage to the newest latest checkpoint of a stopped run, then the same command
    again: what it said, where it resumed from, and whether it ended bit for bit where the
    uninterrupted run ends; and `evaluate` of a run whose best checkpoint has that damage;
  * two `train` commands started together on one work directory, `--tries` times;
  * a full disk (the file size limit of `ulimit -f`, set on the running process after step 6),
    then the same command without the limit, `--disk-tries` times;
  * bad input files and a workdir of another experiment, through the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
  sys.path.insert(0, HERE)

KINDS = ("data-file-cut", "data-file-flip-start", "data-file-flip-middle", "data-file-flip-end",
         "metadata-flip", "metadata-deleted", "ocdbt-manifest-deleted", "checksums-deleted")
FLIP_BYTES = 4


def data_file(folder: str) -> str:
  """The largest array data file of a checkpoint (an OCDBT file under a `d/` folder of its item)."""
  found = []
  for root, _, files in os.walk(folder):
    if os.path.basename(root) == "d":
      found += [os.path.join(root, name) for name in files]
  return max(sorted(found), key=os.path.getsize)


def _item(folder: str) -> str:
  """The checkpoint's array item: 'state' for a latest checkpoint, 'params' for a best one."""
  return os.path.join(folder, "state" if os.path.isdir(os.path.join(folder, "state")) else "params")


def _flip(path: str, offset: int) -> None:
  with open(path, "r+b") as f:
    f.seek(offset)
    data = f.read(FLIP_BYTES)
    f.seek(offset)
    f.write(bytes(b ^ 0xFF for b in data))


def damage(folder: str, kind: str) -> str:
  """Damages the checkpoint `folder` as `kind` says; returns what was done (a path and how)."""
  item = _item(folder)
  if kind.startswith("data-file"):
    path = data_file(folder)
    size = os.path.getsize(path)
    if kind == "data-file-cut":
      os.truncate(path, size // 2)
      return f"{os.path.relpath(path, folder)}: cut from {size} to {size // 2} bytes"
    offset = {"data-file-flip-start": 0, "data-file-flip-middle": size // 2,
              "data-file-flip-end": size - FLIP_BYTES}[kind]
    _flip(path, offset)
    return f"{os.path.relpath(path, folder)}: {FLIP_BYTES} bytes flipped at offset {offset}"
  if kind == "metadata-flip":
    path = os.path.join(item, "_METADATA")
    _flip(path, os.path.getsize(path) // 2)
    return f"{os.path.relpath(path, folder)}: {FLIP_BYTES} bytes flipped in the middle"
  path = {"metadata-deleted": os.path.join(item, "_METADATA"),
          "ocdbt-manifest-deleted": os.path.join(item, "manifest.ocdbt"),
          "checksums-deleted": os.path.join(folder, "checksums.json")}[kind]
  os.remove(path)
  return f"{os.path.relpath(path, folder)}: deleted"


# --------------------------------------------------------------------------------------------------
# The measurement (script only).


def _cli(argv: list[str]) -> tuple[int, list[str]]:
  """Runs the command line in this process: (exit status, the lines of stdout and stderr)."""
  from experiments.cli import main  # pylint: disable=import-outside-toplevel
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    status = main(argv)
  return status, (out.getvalue() + err.getvalue()).splitlines()


def _train_argv(workdir: str, extra: tuple[str, ...] = ()) -> list[str]:
  import toy_runs  # pylint: disable=import-outside-toplevel
  return ["train", "toy", "--workdir", workdir, *toy_runs.OVERRIDES, *extra]


def _same_as(reference: str, workdir: str) -> bool:
  import numpy as np  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  import toy_runs  # pylint: disable=import-outside-toplevel
  if toy_runs.records(workdir) != toy_runs.records(reference):
    return False
  for which in ("latest", "best"):
    a, step_a = toy_runs.restore(reference, which)
    b, step_b = toy_runs.restore(workdir, which)
    if step_a != step_b or not all(np.array_equal(x, y) for x, y in
                                   zip(jax.tree.leaves(a), jax.tree.leaves(b))):
      return False
  with open(os.path.join(reference, "results.json"), encoding="utf-8") as f:
    want = json.load(f)
  with open(os.path.join(workdir, "results.json"), encoding="utf-8") as f:
    have = json.load(f)
  return all(want[k] == have[k] for k in ("test", "dev", "best", "steps", "test_params"))


def damage_rows(root: str, reference: str) -> list[dict]:
  """Every kind of damage to the newest checkpoint of a run stopped by SIGTERM at step 12."""
  from experiments.checkpoints import Checkpoints  # pylint: disable=import-outside-toplevel
  rows = []
  for kind in KINDS:
    workdir = os.path.join(root, f"damage-{kind}")
    status, _ = _cli(_train_argv(workdir, ("--data.signal_at_batch=12",)))
    ckpts = Checkpoints(workdir)
    steps = ckpts.latest.all_steps()
    ckpts.close()
    what = damage(os.path.join(workdir, "checkpoints", str(steps[-1])), kind)
    status, lines = _cli(_train_argv(workdir))
    resumed = [line for line in lines if line.startswith("Resuming ")]
    rows.append({"kind": kind, "damage": f"checkpoints/{steps[-1]}/{what}", "stopped": status,
                 "status": status, "said": [line for line in lines if "damaged" in line],
                 "resumed": resumed[0].split(" from step ")[1].split()[0] if resumed else None,
                 "identical": status == 0 and _same_as(reference, workdir),
                 "tracebacks": sum("Traceback" in line for line in lines)})
    # The same damage to the best checkpoint, read by `evaluate`.
    best_dir = os.path.join(workdir, "best")
    best = os.path.join(best_dir, os.listdir(best_dir)[0])
    damage(best, kind)
    status, lines = _cli(["--import", "engine_toy", "evaluate", "--workdir", workdir])
    rows[-1]["evaluate"] = {"status": status, "lines": lines}
  return rows


def _environment() -> dict[str, str]:
  import toy_runs  # pylint: disable=import-outside-toplevel
  paths = [toy_runs.TOY_DIR, HERE, os.environ.get("PYTHONPATH", "")]
  return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), JAX_PLATFORMS="cpu",
              PYTHONUNBUFFERED="1")


def _command(workdir: str) -> list[str]:
  return [sys.executable, "-m", "experiments", "--import", "engine_toy", *_train_argv(workdir)]


def concurrency_rows(root: str, tries: int) -> list[dict]:
  """Two trainings started together on one work directory, `tries` times."""
  rows = []
  for attempt in range(tries):
    workdir = os.path.join(root, f"concurrent-{attempt}")
    procs = [subprocess.Popen(_command(workdir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=_environment()) for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    rows.append({"statuses": sorted(p.returncode for p in procs),
                 "refusal": [line for out in outputs for line in out.splitlines()
                             if "in use by another training run" in line]})
  return rows


def disk_full_row(root: str, reference: str, attempt: int = 0, limit: int = 4000) -> dict:
  """A file size limit of `limit` bytes put on the training process after step 6 is logged."""
  workdir = os.path.join(root, f"disk-full-{attempt}")
  proc = subprocess.Popen(_command(workdir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=_environment())
  lines = []
  for line in proc.stdout:
    lines.append(line.rstrip("\n"))
    if line.startswith("[train] step 6 "):
      resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (limit, limit))
  proc.wait()
  logged = [line for line in lines if line.startswith("[train] step ")]
  again = subprocess.run(_command(workdir), capture_output=True, text=True, env=_environment(),
                         check=False)
  return {"status": proc.returncode, "lines": len(lines), "output": lines,
          "errors": [line for line in lines if line.startswith("error:")],
          "tracebacks": sum("Traceback" in line for line in lines),
          "last_logged": logged[-1].split()[2] if logged else None,
          "again_status": again.returncode,
          "resumed": [line for line in again.stdout.splitlines() if line.startswith("Resuming")],
          "identical": again.returncode == 0 and _same_as(reference, workdir)}


def bad_input_rows(root: str) -> list[dict]:
  """Bad input files and work directories of another experiment, through the command line."""
  legacy = os.path.join(os.path.dirname(HERE), "fixtures", "legacy_runs")
  runs = {}
  for name, folder in (("sentiment", "sentiment-sanet"), ("translation", "translation-transformer"),
                       ("couplet", "couplet-lstm")):
    runs[name] = os.path.join(root, folder)
    shutil.copytree(os.path.join(legacy, folder), runs[name])
  files = {"invalid-utf8": b"a fine film\n\xff\xfe not text\n", "binary": b"\x89PNG\r\n\x1a\n\0\0",
           "long-words": ("word " * 20000 + "\n").encode(),
           "long-chars": ("\u98ce" * 100000 + "\n").encode()}
  for name, data in files.items():
    with open(os.path.join(root, name + ".txt"), "wb") as f:
      f.write(data)
  cases = [
      ("predict sentiment", "invalid-utf8", runs["sentiment"]),
      ("translate", "invalid-utf8", runs["translation"]),
      ("couplet", "binary", runs["couplet"]),
      ("predict sentiment", "long-words", runs["sentiment"]),
      ("translate", "long-words", runs["translation"]),
      ("couplet", "long-chars", runs["couplet"]),
      ("predict sentiment", None, runs["translation"]),
      ("translate", None, runs["sentiment"]),
      ("couplet", None, runs["sentiment"]),
  ]
  rows = []
  for command, file_name, workdir in cases:
    inputs = (["--input-file", os.path.join(root, file_name + ".txt")] if file_name else ["Go ."])
    status, lines = _cli([*command.split(), *inputs, "--workdir", workdir])
    said = [line for line in lines if line.startswith(("error:", "note: input"))]
    rows.append({"command": command, "input": file_name or "a run of another experiment",
                 "status": status, "said": said, "longest_line": max(map(len, said), default=0),
                 "tracebacks": sum("Traceback" in line for line in lines)})
  return rows


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--tries", type=int, default=5, help="concurrent starts to measure")
  parser.add_argument("--disk-tries", type=int, default=3, help="full disks to measure")
  args = parser.parse_args()
  import toy_runs  # pylint: disable=import-outside-toplevel
  root = tempfile.mkdtemp(prefix="damage-matrix-")
  started = time.time()
  reference = os.path.join(root, "reference")
  toy_runs.train(reference)
  report = {"damage": damage_rows(root, reference),
            "concurrency": concurrency_rows(root, args.tries),
            "disk_full": [disk_full_row(root, reference, attempt)
                          for attempt in range(args.disk_tries)],
            "bad_inputs": bad_input_rows(root),
            "seconds": round(time.time() - started, 1)}
  print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
  signal.signal(signal.SIGINT, signal.default_int_handler)
  main()
