"""A test hook that holds chosen Orbax checkpoints open: written, but not yet committed.

The kill test imports it into its training subprocesses (`python -m experiments --import
commit_gate ...`, with tests/reliability on PYTHONPATH) and sets RELIABILITY_COMMIT_GATE to the
path of a gate file. Orbax writes a checkpoint into `<kind>/<step>.orbax-checkpoint-tmp` and, as
the last act of the save, renames it to `<kind>/<step>` (kind: 'checkpoints' for the latest
checkpoints, 'best' for the best one). With the hook installed, that rename waits for as long as
the gate file exists and lists `<kind>/<step>` among its whitespace-separated entries. The save
runs in Orbax's background thread, so training goes on until the loop has to wait for it; a kill
at any moment while the temporary directory is on disk lands inside the save. When the hook starts
holding a checkpoint it writes the temporary directory's path to `<gate file>.<kind>-<step>.held`,
so the test knows that the moment has come.

Without the gate file the hook does nothing, so a run with it produces exactly what a run without
it does.
"""

from __future__ import annotations

import asyncio
import os
import time

from orbax.checkpoint._src.path import atomicity

GATE_ENV = "RELIABILITY_COMMIT_GATE"
MAX_HOLD_S = 120.0  # a forgotten subprocess is never held for ever

_commit = atomicity.on_commit_callback


def held_marker(gate: str, entry: str) -> str:
  """The file that says the checkpoint `entry` ('best/5') is being held."""
  return f"{gate}.{entry.replace('/', '-')}.held"


def _entry(tmp_dir) -> str:
  path = os.fspath(tmp_dir.get_final())
  return f"{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)}"


def _gated(gate: str, entry: str) -> bool:
  try:
    with open(gate, encoding="utf-8") as f:
      return entry in f.read().split()
  except FileNotFoundError:
    return False


async def _gated_commit(tmp_dir, **kwargs):
  gate, entry = os.environ.get(GATE_ENV), _entry(tmp_dir)
  if gate and _gated(gate, entry):
    marker = held_marker(gate, entry)
    with open(marker + ".part", "w", encoding="utf-8") as f:
      f.write(os.fspath(tmp_dir.get()))
    os.replace(marker + ".part", marker)  # appears complete or not at all
    deadline = time.monotonic() + MAX_HOLD_S
    while _gated(gate, entry) and time.monotonic() < deadline:
      await asyncio.sleep(0.01)
  return await _commit(tmp_dir, **kwargs)


atomicity.on_commit_callback = _gated_commit
