"""Timing and machine description shared by the benchmark suites.

Every suite compares several implementations of the same computation. `time_side_by_side` runs them
round-robin (one timed repeat of each in turn, the order rotating), so a change in the load of the
shared machine hits all of them alike and their ratio stays meaningful; each figure is the median of
the repeats after warm-up calls (which also compile). A callable passed in must wait for its own
result (`jax.block_until_ready`, `torch.cuda.synchronize`) before returning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import os
import platform
import statistics
import subprocess
import time
import traceback
from typing import Any, Callable, Mapping

import jax


@dataclasses.dataclass(frozen=True)
class Settings:
  """How hard to measure.

  Attributes:
    warmup: untimed calls of each implementation before timing (the first one compiles).
    repeats: timed repeats of each implementation; the figure is their median.
    min_repeat_s: a repeat runs the callable as often as needed to last about this long, so short
      calls are not dominated by the clock's resolution.
    max_calls: at most this many calls in one repeat.
    quick: the small sizes that check the harness end to end in a minute or two.
    dtypes: the attention suite's dtypes, if not its defaults (a GPU run split over calls).
    lengths: the attention suite's sequence lengths, if not its defaults (a shorter grid).
    head_dims: the attention suite's head widths, if not its defaults.
    budget_s: about the most seconds one implementation's timing may take; a very slow one (e.g.
      PyTorch's threads fighting over a loaded CPU) gets fewer repeats (at least 3).
  """
  warmup: int = 2
  repeats: int = 7
  min_repeat_s: float = 0.05
  max_calls: int = 50
  quick: bool = False
  dtypes: tuple[str, ...] | None = None
  lengths: tuple[int, ...] | None = None
  head_dims: tuple[int, ...] | None = None
  budget_s: float = 120.0


QUICK = Settings(warmup=1, repeats=3, min_repeat_s=0.0, max_calls=1, quick=True)


def on_gpu() -> bool:
  """Whether JAX's default backend is a GPU."""
  return jax.default_backend() == "gpu"


def exact_matmuls(gpu: bool | None = None):
  """A context in which JAX's float32 matmuls run at full precision, for the agreement checks (not
  the timings): on a GPU JAX's default lets them run in TF32 (10-bit mantissas), which likely
  moved a 6-layer Transformer's logits by 5e-3 (H100, 2026-11-27) and can flip near-tied argmaxes.
  Elsewhere (`gpu` False; None: the default backend decides) the default is already full float32,
  and the context changes nothing: switching the setting there would only recompile."""
  gpu = on_gpu() if gpu is None else gpu
  return jax.default_matmul_precision("highest") if gpu else contextlib.nullcontext()


def blocking(fn: Callable[..., Any], *args) -> Callable[[], Any]:
  """A callable that runs fn(*args) and waits for every output array."""
  return lambda: jax.block_until_ready(fn(*args))


def _calls_per_repeat(seconds: float, settings: Settings) -> int:
  if seconds <= 0.0 or settings.min_repeat_s <= 0.0:
    return 1
  return max(1, min(settings.max_calls, math.ceil(settings.min_repeat_s / seconds)))


def time_side_by_side(runs: Mapping[str, Callable[[], Any]],
                      settings: Settings) -> dict[str, float | str]:
  """Median seconds per call of each callable, measured round-robin.

  Args:
    runs: name -> a callable that does the work once and waits for it.
    settings: warm-up calls, repeats and the minimum duration of a repeat.

  Returns:
    name -> median seconds per call, or the error message (a string) of an implementation that
    failed (an unsupported shape, out of memory); the others are still timed.
  """
  results: dict[str, float | str] = {}
  calls: dict[str, int] = {}
  wanted: dict[str, int] = {}
  for name, run in runs.items():
    try:
      last, warm = 0.0, 0.0
      for index in range(max(1, settings.warmup)):
        if index and warm > settings.budget_s / 4:
          break
        start = time.perf_counter()
        run()
        last = time.perf_counter() - start
        warm += last
      calls[name] = _calls_per_repeat(last, settings)
      affordable = int(settings.budget_s / max(last * calls[name], 1e-9))
      wanted[name] = max(min(3, settings.repeats), min(settings.repeats, affordable))
    except Exception as error:  # pylint: disable=broad-except
      results[name] = failure_message(error)
  names = list(calls)
  samples: dict[str, list[float]] = {name: [] for name in names}
  for repeat in range(settings.repeats):
    shift = repeat % max(1, len(names))
    for name in names[shift:] + names[:shift]:
      if len(samples[name]) >= wanted[name]:
        continue
      start = time.perf_counter()
      for _ in range(calls[name]):
        runs[name]()
      samples[name].append((time.perf_counter() - start) / calls[name])
  for name in names:
    results[name] = statistics.median(samples[name])
  return {name: results[name] for name in runs}


def failure_message(error: BaseException) -> str:
  """One line naming an exception, e.g. for a variant that does not apply to a shape."""
  text = str(error).strip().splitlines()
  first = text[0] if text else ""
  return f"{type(error).__name__}: {first[:200]}"


def ratio(reference: float | str | None, other: float | str | None) -> float | None:
  """reference / other (a speed-up over the reference), or None if either failed."""
  if isinstance(reference, (int, float)) and isinstance(other, (int, float)) and other > 0:
    return float(reference) / float(other)
  return None


def _cpu_model() -> str:
  try:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
  except (OSError, subprocess.CalledProcessError):
    return platform.processor() or "unknown CPU"
  for line in out.splitlines():
    if line.startswith("Model name:"):
      return line.split(":", 1)[1].strip()
  return platform.processor() or "unknown CPU"


def _version(module_name: str) -> str | None:
  try:
    module = __import__(module_name)
  except ImportError:
    return None
  return getattr(module, "__version__", "unknown")


def machine() -> dict[str, Any]:
  """What the figures were measured on: processor, cores, accelerator, library versions, date."""
  devices = jax.devices()
  info = {
      "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
      "cpu": _cpu_model(),
      "cores": os.cpu_count(),
      "load_average_1min": round(os.getloadavg()[0], 2),
      "backend": jax.default_backend(),
      "device": devices[0].device_kind,
      "device_count": len(devices),
      "python": platform.python_version(),
      "jax": jax.__version__,
      "flax": _version("flax"),
      "optax": _version("optax"),
      "torch": _version("torch"),
  }
  return info


def device_peak_tflops(device_kind: str, dtype_name: str) -> float | None:
  """The datasheet's dense tensor-core peak (TFLOP/s) of a GPU, None when unknown (and on CPU).

  float32 matmuls on these GPUs run as TF32 under JAX's default precision, so that is their peak.
  """
  kind = device_kind.lower()
  tables = {  # (bfloat16/float16, tf32), dense, no sparsity
      "h100 pcie": (756.0, 378.0),
      "h100": (989.4, 494.7),  # SXM (HBM3)
      "h200": (989.4, 494.7),
      "a100": (312.0, 156.0),
  }
  for name, (half, tf32) in tables.items():
    if name in kind:
      return half if dtype_name in ("bfloat16", "float16") else tf32
  return None


def log(message: str) -> None:
  """Progress on stderr-like stdout, flushed (the GPU machine returns only the output's tail)."""
  print(message, flush=True)


def guarded(name: str, fn: Callable[[], Any]) -> Any:
  """Runs one suite; on an error logs the traceback and returns {'error': message}."""
  try:
    return fn()
  except Exception as error:  # pylint: disable=broad-except
    traceback.print_exc()
    return {"error": f"{name}: {failure_message(error)}"}
