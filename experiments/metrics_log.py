"""Where metrics go: console lines, `<workdir>/metrics.jsonl`, TensorBoard scalars, results.json.

(Named metrics_log rather than logging so that it never shadows the standard library's logging.)

Every metrics.jsonl record is one JSON object: {"step": int, "epoch": float, "split": "train" |
"dev" | "test", "<name>": float, ..., "time": seconds since the run started}. On resume, records
after the restored step are dropped, so the file ends up as if the run had never stopped.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from typing import Any, Mapping

import jax

METRICS_FILE = "metrics.jsonl"
RESULTS_FILE = "results.json"
TENSORBOARD_DIR = "tensorboard"


def read_metrics(path: str) -> list[dict[str, Any]]:
  """The records of a metrics.jsonl file (a partial last line from a crash is ignored)."""
  records = []
  if not os.path.exists(path):
    return records
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line:
        continue
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        break
  return records


def _format(value: float) -> str:
  if value != value or math.isinf(value):
    return str(value)
  if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
    return f"{value:.3e}"
  return f"{value:.4f}"


def _summary_writer_class():
  """tensorboardX's SummaryWriter, imported (on first use) without importing torch.

  tensorboardX's writer module imports torch whenever it is installed, only to name torch.Tensor
  in type hints; that costs about 2 s of CPU at every start, and scalars never need it. Unless
  torch is loaded already, it is hidden during that one import (`sys.modules['torch'] = None`
  makes `import torch` fail, so tensorboardX takes its numpy-only path) and unhidden right after,
  so later imports of torch work as usual.
  """
  if "tensorboardX" not in sys.modules and "torch" not in sys.modules:
    sys.modules["torch"] = None
    try:
      import tensorboardX  # pylint: disable=g-import-not-at-top,unused-import
    finally:
      if sys.modules.get("torch", 0) is None:
        del sys.modules["torch"]
  from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
  return SummaryWriter


class MetricsLogger:
  """Writes metrics to the console, metrics.jsonl and TensorBoard.

  Args:
    workdir: the run's directory.
    start_step: the step training (re)starts from; JSONL records beyond it are dropped and
      TensorBoard purges later events.
    console: a function taking one line (tqdm.write while a progress bar is shown).
    tensorboard: also write TensorBoard event files.
  """

  def __init__(self, workdir: str, start_step: int = 0, console=print, tensorboard: bool = True):
    os.makedirs(workdir, exist_ok=True)
    self.path = os.path.join(workdir, METRICS_FILE)
    self.console = console
    self.started = time.time()
    # Everything up to the restored step was logged before that checkpoint was written; the test
    # record only ever comes after the last step, so it is rewritten by whoever finishes the run.
    kept = [r for r in read_metrics(self.path)
            if r.get("step", 0) <= start_step and r.get("split") != "test"]
    with open(self.path, "w", encoding="utf-8") as f:
      for record in kept:
        f.write(json.dumps(record) + "\n")
    self._file = open(self.path, "a", encoding="utf-8")
    self._writer = None
    if tensorboard:
      self._writer = _summary_writer_class()(os.path.join(workdir, TENSORBOARD_DIR),
                                             purge_step=start_step + 1 if start_step else None)

  def write(self, step: int, split: str, metrics: Mapping[str, float], epoch: float | None = None,
            echo: bool = True) -> dict[str, Any]:
    """Records one set of metrics of `split` at `step` and returns the JSONL record."""
    record: dict[str, Any] = {"step": int(step), "split": split}
    if epoch is not None:
      record["epoch"] = round(float(epoch), 4)
    record.update({name: float(value) for name, value in metrics.items()})
    record["time"] = round(time.time() - self.started, 3)
    self._file.write(json.dumps(record) + "\n")
    self._file.flush()
    if self._writer is not None:
      for name, value in metrics.items():
        self._writer.add_scalar(f"{split}/{name}", float(value), int(step))
    if echo:
      shown = "  ".join(f"{name} {_format(float(v))}" for name, v in sorted(metrics.items()))
      epoch_text = f" epoch {epoch:.2f}" if epoch is not None else ""
      self.console(f"[{split:5s}] step {step}{epoch_text}  {shown}")
    return record

  def close(self) -> None:
    self._file.close()
    if self._writer is not None:
      self._writer.close()


class NullLogger:
  """The logger of processes other than 0 in a multi-process run: process 0 writes the metrics
  (the values are the same in every process), the others record nothing."""

  path = None

  def write(self, step: int, split: str, metrics: Mapping[str, float], epoch: float | None = None,
            echo: bool = True) -> None:
    del step, split, metrics, epoch, echo

  def close(self) -> None:
    pass


def _cpu_model() -> str:
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.lower().startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
  """What ran the job: CPU model, accelerator kind and count, jax version, Python, OS."""
  devices = jax.devices()
  return {
      "cpu": _cpu_model(),
      "cpu_count": os.cpu_count(),
      "platform": devices[0].platform,
      "device_kind": devices[0].device_kind,
      "device_count": len(devices),
      "local_device_count": jax.local_device_count(),
      "process_count": jax.process_count(),
      "jax": jax.__version__,
      "python": sys.version.split()[0],
      "os": platform.platform(),
  }


def write_results(workdir: str, results: Mapping[str, Any]) -> str:
  """Writes `<workdir>/results.json` (atomically) and returns its path."""
  path = os.path.join(workdir, RESULTS_FILE)
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(results, f, indent=2, sort_keys=True, default=str)
    f.write("\n")
  os.replace(tmp, path)
  return path
