"""Memory of multi-head attention at long sequences: what the (B, H, L, L) scores cost.

For each attention variant of benchmarks/attention.py and each length, the forward and the
forward + backward programs are compiled (not run) and XLA's memory analysis gives the scratch
memory it plans beyond arguments and outputs ("temp"). That is measurable on any backend, the CPU
included, and it is what grows as L^2 for the variants that materialise the scores. On a GPU each
program is also run once in a fresh process and the device's peak allocation is read from
`memory_stats()['peak_bytes_in_use']` (a fresh process per figure because the peak only grows).
The ratio is the reference's (flax's) memory over the variant's: above 1, the variant needs less.

Probe mode (used by the GPU figures):
  python -m benchmarks.memory VARIANT MODE DTYPE HEAD_DIM WIDTH LENGTH   -> one JSON line
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks import attention
from benchmarks import common
from benchmarks import report

MODES = {"forward": attention._forward,  # pylint: disable=protected-access
         "forward+backward": attention._forward_backward}  # pylint: disable=protected-access


def grid(settings: common.Settings, gpu: bool) -> dict[str, Any]:
  if settings.quick:
    return dict(width=64, head_dim=32, dtype="float32", lengths=(256, 512))
  if gpu:
    return dict(width=2048, head_dim=128, dtype="bfloat16", lengths=(4096, 8192, 16384, 32768))
  return dict(width=256, head_dim=64, dtype="float32", lengths=(1024, 2048, 4096, 8192))


def _program(variant: str, mode: str, dtype_name: str, head_dim: int, width: int, length: int,
             gpu: bool):
  dtype = jnp.dtype(dtype_name)
  modules = attention.variants(width // head_dim, head_dim, dtype, gpu)
  x = jax.ShapeDtypeStruct((1, length, width), dtype)
  params = jax.eval_shape(modules["flax"].init, jax.random.key(0), x)["params"]
  return modules[variant], MODES[mode](modules[variant]), params, x


def probe(variant: str, mode: str, dtype_name: str, head_dim: int, width: int,
          length: int) -> dict[str, Any]:
  """Runs one program once on real inputs and reads the device's peak allocation."""
  _, fn, shapes, x_shape = _program(variant, mode, dtype_name, head_dim, width, length,
                                    common.on_gpu())
  params = jax.tree.map(lambda s: jnp.full(s.shape, 0.01, s.dtype), shapes)
  x = jax.random.normal(jax.random.key(0), x_shape.shape, x_shape.dtype)
  try:
    jax.block_until_ready(jax.jit(fn)(params, x))
  except Exception as error:  # pylint: disable=broad-except
    return dict(peak_bytes=None, error=common.failure_message(error))
  stats = jax.devices()[0].memory_stats() or {}
  return dict(peak_bytes=stats.get("peak_bytes_in_use"), error=None)


def _measured_peak(variant, mode, dtype_name, head_dim, width, length) -> dict[str, Any]:
  command = [sys.executable, "-m", "benchmarks.memory", variant, mode, dtype_name, str(head_dim),
             str(width), str(length)]
  done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
  lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
  if done.returncode or not lines:
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    return dict(peak_bytes=None, error=f"probe failed: {tail[0][:200]}")
  return json.loads(lines[-1])


def run(settings: common.Settings) -> dict[str, Any]:
  gpu = common.on_gpu()
  g = grid(settings, gpu)
  names = list(attention.variants(g["width"] // g["head_dim"], g["head_dim"],
                                  jnp.dtype(g["dtype"]), gpu))
  rows = []
  for mode in MODES:
    for length in g["lengths"]:
      common.log(f"memory {mode} L={length}")
      row = dict(mode=mode, length=length, batch=1, width=g["width"], head_dim=g["head_dim"],
                 dtype=g["dtype"], reference="flax", results={})
      for name in names:
        _, fn, params, x = _program(name, mode, g["dtype"], g["head_dim"], g["width"], length,
                                    gpu)
        try:
          temp = attention.temp_bytes(jax.jit(fn).lower(params, x).compile())
          error = None
        except Exception as failure:  # pylint: disable=broad-except
          temp, error = None, common.failure_message(failure)
        entry = dict(temp_bytes=temp, error=error)
        if gpu and not settings.quick and mode == "forward+backward":
          entry.update({f"measured_{k}": v for k, v in _measured_peak(
              name, mode, g["dtype"], g["head_dim"], g["width"], length).items()})
        row["results"][name] = entry
      reference = row["results"]["flax"]["temp_bytes"]
      for entry in row["results"].values():
        entry["saving"] = common.ratio(reference, entry["temp_bytes"])
      rows.append(row)
  return dict(rows=rows, **g)


def markdown(suite: dict[str, Any]) -> str:
  names = list(suite["rows"][0]["results"]) if suite["rows"] else []
  measured = any("measured_peak_bytes" in e for row in suite["rows"]
                 for e in row["results"].values())
  rows = []
  for row in suite["rows"]:
    cells = [row["mode"], row["length"]]
    for name in names:
      e = row["results"][name]
      if e["error"]:
        cell = "failed"
      else:
        cell = report.megabytes(e["temp_bytes"])
        if name != "flax":
          cell += f" ({report.speedup(e['saving'])})"
      if "measured_peak_bytes" in e:
        peak = e["measured_peak_bytes"]
        cell += f"; peak {report.megabytes(peak)}" if peak else "; peak: failed (OOM?)"
      cells.append(cell)
    rows.append(cells)
  lines = [
      "### Memory of attention at long sequences", "",
      f"One sequence (B = 1), width {suite['width']}, head width {suite['head_dim']}, "
      f"{suite['dtype']}. Each cell: XLA's planned scratch memory (MiB) of the compiled program "
      "(arguments and outputs excluded) and, in brackets, flax's over the variant's (above 1: "
      "less memory)."
      + (" 'peak' (forward+backward): the device's peak allocation (MiB) when the program ran "
         "alone in a fresh process." if measured
         else " Measured device peaks are taken on GPUs only."), "",
      report.table(["pass", "L"] + [f"`{n}`" for n in names], rows,
                   ["l", "r"] + ["r"] * len(names))]
  return "\n".join(lines)


if __name__ == "__main__":
  variant_, mode_, dtype_, head_dim_, width_, length_ = sys.argv[1:7]
  print(json.dumps(probe(variant_, mode_, dtype_, int(head_dim_), int(width_), int(length_))),
        flush=True)
