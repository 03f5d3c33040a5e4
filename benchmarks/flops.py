"""Floating-point operation counts behind the TFLOP/s figures.

Conventions (the usual ones of attention benchmarks, so figures compare with published ones):
  * A matmul (M, K) x (K, N) is 2 M K N operations; elementwise work (softmax, bias, scaling,
    activations) is not counted.
  * The attention core of one head is two matmuls, scores = q k^T and out = p v: 2 Q K Dh + 2 Q K Dv.
    With a causal mask only the half below the diagonal is needed, and counted.
  * The backward pass of the core is 2.5 times its forward (five matmuls instead of two: dV, dP,
    dQ, dK and the recomputed or stored scores are not counted again); a dense layer's backward is
    twice its forward (the gradients of its input and of its kernel).
"""

from __future__ import annotations


def matmul(m: int, k: int, n: int) -> int:
  """Operations of a (m, k) x (k, n) matrix product."""
  return 2 * m * k * n


def attention_core(batch: int, heads: int, q_len: int, k_len: int, head_dim: int,
                   value_dim: int | None = None, causal: bool = False) -> float:
  """Forward operations of softmax(q k^T) v over B x H heads (no projections)."""
  value_dim = head_dim if value_dim is None else value_dim
  per_head = matmul(q_len, head_dim, k_len) + matmul(q_len, k_len, value_dim)
  total = batch * heads * per_head
  return total / 2 if causal else float(total)


def mha_projections(batch: int, q_len: int, k_len: int, width: int, heads: int,
                    head_dim: int) -> int:
  """Forward operations of the four projections of multi-head attention (query, key, value, out),
  with model width D on the inputs and output and H x Dh features inside."""
  inner = heads * head_dim
  queries = matmul(batch * q_len, width, inner)
  keys_values = 2 * matmul(batch * k_len, width, inner)
  out = matmul(batch * q_len, inner, width)
  return queries + keys_values + out


def mha(batch: int, q_len: int, k_len: int, width: int, heads: int, head_dim: int, *,
        backward: bool = False, causal: bool = False) -> float:
  """Operations of a multi-head attention layer, forward or forward + backward.

  forward = projections + core; forward + backward = 3 x projections + 3.5 x core.
  """
  projections = mha_projections(batch, q_len, k_len, width, heads, head_dim)
  core = attention_core(batch, heads, q_len, k_len, head_dim, causal=causal)
  if backward:
    return 3.0 * projections + 3.5 * core
  return float(projections + core)


def tflops(operations: float, seconds: float | str | None) -> float | None:
  """Operations per second in units of 10^12, or None when the time is missing or a failure."""
  if not isinstance(seconds, (int, float)) or seconds <= 0:
    return None
  return operations / seconds / 1e12
