"""Multi-head self-attention, forward and forward + backward, against flax.linen's MHA.

Every variant is a whole multi-head attention layer with the same parameters (flax's layout, which
zoo.MultiHeadAttention shares): query/key/value projections D -> H x Dh, the attention core, the
output projection back to D. They differ only in how the core is computed:

  flax          flax.linen.MultiHeadDotProductAttention (the reference of every ratio)
  zoo_vmap      zoo.MultiHeadAttention(implementation='vmap'): one head as a function, vmapped
  zoo_fused     zoo.MultiHeadAttention(implementation='fused')
  jax_xla       jax.nn.dot_product_attention(implementation='xla') between the same projections
  jax_cudnn     jax.nn.dot_product_attention(implementation='cudnn') (GPU, bfloat16 only)
  zoo_auto      zoo.fast_paths.dot_product_attention: cuDNN where it applies, else XLA

Inputs: self-attention without a mask (the plain kernel), B x L = a fixed number of tokens, so
every length does about the same projection work. Forward + backward differentiates the sum of the
outputs with respect to the parameters and the inputs.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import zoo
from benchmarks import common
from benchmarks import flops
from benchmarks import report
from zoo import fast_paths


class DotProductAttentionMHA(nn.Module):
  """Multi-head attention with flax's parameter layout whose core is jax.nn.dot_product_attention.

  Attributes:
    num_heads: H.
    head_dim: Dh.
    implementation: 'xla', 'cudnn' (passed to jax.nn.dot_product_attention) or 'auto'
      (zoo.fast_paths.dot_product_attention chooses).
    dtype: computation dtype.
    param_dtype: storage dtype of the parameters.
  """
  num_heads: int
  head_dim: int
  implementation: str = "xla"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    """x (B, L, D) -> (B, L, D)."""
    dense = functools.partial(nn.DenseGeneral, features=(self.num_heads, self.head_dim),
                              dtype=self.dtype, param_dtype=self.param_dtype)
    query = dense(name="query")(x)  # (B, L, H, Dh)
    key = dense(name="key")(x)  # (B, L, H, Dh)
    value = dense(name="value")(x)  # (B, L, H, Dh)
    if self.implementation == "auto":
      out = fast_paths.dot_product_attention(query, key, value)
    else:
      out = jax.nn.dot_product_attention(query, key, value, implementation=self.implementation)
    return nn.DenseGeneral(features=x.shape[-1], axis=(-2, -1), dtype=self.dtype,
                           param_dtype=self.param_dtype, name="out")(out)  # (B, L, D)


def variants(heads: int, head_dim: int, dtype: Any, gpu: bool) -> dict[str, nn.Module]:
  """name -> module; all take the same parameter tree."""
  common_args = dict(dtype=dtype, param_dtype=dtype)
  width = heads * head_dim
  modules: dict[str, nn.Module] = {
      "flax": nn.MultiHeadDotProductAttention(num_heads=heads, qkv_features=width,
                                              **common_args),
      "zoo_vmap": zoo.MultiHeadAttention(num_heads=heads, implementation="vmap", **common_args),
      "zoo_fused": zoo.MultiHeadAttention(num_heads=heads, implementation="fused", **common_args),
      "jax_xla": DotProductAttentionMHA(heads, head_dim, "xla", **common_args),
  }
  if gpu:
    modules["jax_cudnn"] = DotProductAttentionMHA(heads, head_dim, "cudnn", **common_args)
  modules["zoo_auto"] = DotProductAttentionMHA(heads, head_dim, "auto", **common_args)
  return modules


def _forward(module: nn.Module) -> Callable:
  return lambda params, x: module.apply({"params": params}, x)


def _forward_backward(module: nn.Module) -> Callable:
  def loss(params, x):
    return jnp.sum(module.apply({"params": params}, x).astype(jnp.float32))
  return jax.grad(loss, argnums=(0, 1))


def sizes(settings: common.Settings, gpu: bool) -> dict[str, Any]:
  """The grid: model width, tokens per batch, lengths, head widths, dtypes."""
  if settings.quick:
    return dict(width=64, tokens=256, lengths=(64, 128), head_dims=(32,), dtypes=("float32",))
  if gpu:  # bfloat16 by default; float32 with --dtypes float32 (a separate device call)
    return dict(width=2048, tokens=16384, lengths=(512, 1024, 2048, 4096, 8192),
                head_dims=(64, 128), dtypes=("bfloat16",))
  return dict(width=256, tokens=2048, lengths=(128, 256, 512, 1024), head_dims=(64, 128),
              dtypes=("float32",))


def compiled(fn: Callable, *args) -> Any:
  """Compiles fn for these arguments (the call that follows does not compile again)."""
  return jax.jit(fn).lower(*args).compile()


def temp_bytes(executable: Any) -> int | None:
  """XLA's planned scratch memory of a compiled program (beyond its arguments and outputs)."""
  try:
    return int(executable.memory_analysis().temp_size_in_bytes)
  except Exception:  # pylint: disable=broad-except
    return None


def _max_relative_error(reference: jax.Array, other: jax.Array) -> float:
  reference = np.asarray(reference, np.float32)
  other = np.asarray(other, np.float32)
  return float(np.max(np.abs(reference - other)) / max(np.max(np.abs(reference)), 1e-30))


def run(settings: common.Settings) -> dict[str, Any]:
  """Times every variant on the grid; returns the rows for the JSON and the table."""
  gpu = common.on_gpu()
  grid = sizes(settings, gpu)
  for name in ("dtypes", "lengths", "head_dims"):
    if getattr(settings, name):
      grid[name] = getattr(settings, name)
  width, device = grid["width"], jax.devices()[0].device_kind
  uneven = [d for d in grid["head_dims"] if width % d]
  if uneven:
    raise ValueError(f"head widths {uneven} do not divide the model width {width}")
  rows = []
  for dtype_name in grid["dtypes"]:
    dtype = jnp.dtype(dtype_name)
    peak = common.device_peak_tflops(device, dtype_name) if gpu else None
    for head_dim in grid["head_dims"]:
      heads = width // head_dim
      modules = variants(heads, head_dim, dtype, gpu)
      for length in grid["lengths"]:
        batch = max(1, grid["tokens"] // length)
        x = jax.random.normal(jax.random.key(length), (batch, length, width), dtype)
        params = modules["flax"].init(jax.random.key(0), x)["params"]
        for mode, make in (("forward", _forward), ("forward+backward", _forward_backward)):
          common.log(f"attention {mode} {dtype_name} Dh={head_dim} L={length} B={batch}")
          runs, memory, outputs = {}, {}, {}
          for name, module in modules.items():
            try:
              executable = compiled(make(module), params, x)
            except Exception as error:  # pylint: disable=broad-except
              runs[name] = _failing(error)
              continue
            memory[name] = temp_bytes(executable)
            runs[name] = common.blocking(executable, params, x)
            if mode == "forward":
              try:
                outputs[name] = executable(params, x)
              except Exception as error:  # pylint: disable=broad-except
                runs[name] = _failing(error)
          times = common.time_side_by_side(runs, settings)
          operations = flops.mha(batch, length, length, width, heads, head_dim,
                                 backward=mode != "forward")
          row = dict(mode=mode, dtype=dtype_name, head_dim=head_dim, heads=heads, length=length,
                     batch=batch, width=width, flops=operations, reference="flax", results={})
          for name, seconds in times.items():
            rate = flops.tflops(operations, seconds)
            row["results"][name] = dict(
                seconds=seconds if isinstance(seconds, float) else None,
                error=seconds if isinstance(seconds, str) else None,
                speedup=common.ratio(times["flax"], seconds),
                tflops=rate,
                peak_fraction=(rate / peak) if (rate is not None and peak) else None,
                temp_bytes=memory.get(name),
                max_relative_error=(_max_relative_error(outputs["flax"], outputs[name])
                                    if name in outputs and "flax" in outputs else None))
          rows.append(row)
  return dict(width=width, tokens=grid["tokens"], rows=rows)


def _failing(error: BaseException) -> Callable[[], None]:
  """A run that re-raises the compile error, so the timing table records it as a failure."""
  message = common.failure_message(error)

  def fail():
    raise RuntimeError(message)
  return fail


CUDNN_DTYPES = ("bfloat16", "float16")  # cuDNN's flash attention takes nothing else


def _cell(result: dict[str, Any], reference: bool, applies: bool = True) -> str:
  """A table cell: the time (reference) or speed-up and rate, 'n/a' where the variant does not
  apply, 'failed' for any other error."""
  if result["error"]:
    return "n/a" if not applies or "cudnn" in result["error"].lower() else "failed"
  rate = report.number(result["tflops"], 3)
  if result["peak_fraction"] is not None:
    rate += f" ({100 * result['peak_fraction']:.0f}%)"
  if reference:
    return f"{report.number(result['seconds'] * 1e3)} ms · {rate}"
  return f"{report.speedup(result['speedup'])} · {rate}"


def markdown(suite: dict[str, Any]) -> str:
  """The attention section: one table, a row per (pass, dtype, Dh, L)."""
  rows = suite["rows"]
  # The columns in `variants`' order (results read back from JSON come with sorted keys).
  order = ["flax", "zoo_vmap", "zoo_fused", "jax_xla", "jax_cudnn", "zoo_auto"]
  names = sorted(rows[0]["results"] if rows else [],
                 key=lambda n: (order.index(n) if n in order else len(order), n))
  devices = sorted({str(r.get("device")) for r in rows if r.get("device")})
  by_device = len(devices) > 1  # rows merged from several GPUs: a column says which
  table_rows, worst = [], {name: 0.0 for name in names}
  for row in rows:
    cells = ([row.get("device", "")] if by_device else []) + [
        row["mode"], row["dtype"], row["head_dim"], row["length"], row["batch"]]
    for name in names:
      result = row["results"][name]
      applies = name != "jax_cudnn" or row["dtype"] in CUDNN_DTYPES
      cells.append(_cell(result, name == row["reference"], applies))
      if result["max_relative_error"] is not None:
        worst[name] = max(worst[name], result["max_relative_error"])
    table_rows.append(cells)
  errors = ", ".join(f"`{n}` {worst[n]:.1e}" for n in names if n != "flax")
  return "\n".join([
      "### Multi-head self-attention layer (projections + attention core)", "",
      f"Width D = {suite['width']} = H x Dh, {suite['tokens']} tokens per batch (B = tokens / L), "
      "no mask. Each cell: the speed-up over `flax` (flax.linen.MultiHeadDotProductAttention, its "
      "own cell shows its time) and the TFLOP/s reached, with the FLOPs of "
      "benchmarks/flops.py (forward: 4 projections + 4 B H L^2 Dh; forward+backward: 3x the "
      "projections + 3.5x the core)" + (", and the fraction of the device's peak" if any(
          r["results"][n]["peak_fraction"] for r in rows for n in names) else "") + ". "
      "'n/a': the variant does not apply (cuDNN needs bfloat16/float16). Largest relative "
      f"difference of each variant's forward output from flax's: {errors}.", "",
      report.table((["device"] if by_device else []) + ["pass", "dtype", "Dh", "L", "B"]
                   + [f"`{n}`" for n in names], table_rows,
                   (["l"] if by_device else []) + ["l", "l", "r", "r", "r"] + ["r"] * len(names))])
