"""The output layer and its cross-entropy in one pass, a chunk of positions at a time.

`loss.sequence_loss` takes the logits (B, T, V) whole: the output layer writes them, its bias is
added in a pass of its own, the softmax reads them, and the backward pass writes their gradient,
scatters the targets into it and transposes it for the kernel's gradient. At translation sizes
(3,072 positions x 8,000 tokens, 98 MB a pass) those passes over memory cost more than the
matmuls on a CPU (docs/BENCHMARKS.md, "Where a training step's time goes").

Here the logits of `chunk_rows` positions at a time are made, reduced to the loss and turned into
their gradient at once, while they are in cache; the gradients of the hidden states, kernel and
bias are accumulated in the same scan, in the forward pass (`jax.custom_vjp`: the loss is a
scalar, so its gradient is known there), and the backward pass only scales them. Without
differentiation (evaluation) the scan computes the loss alone. The loss, metrics and gradients
are those of `loss.sequence_loss` on `hidden @ kernel + bias`, up to float rounding (tested to
1e-5 in tests/experiments/test_fused_loss.py).

Shapes: N rows (positions), D hidden width, V vocabulary, C chunk_rows; B batch, T target length.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from experiments.seq2seq.loss import REDUCTIONS, sequence_metrics, target_weights
from experiments.task import Metrics

CHUNK_ROWS = 512  # rows per chunk on a CPU: (512, 8,000) float32 logits are 16 MB


def default_chunk_rows(rows: int) -> int:
  """CHUNK_ROWS on a CPU, where the passes over memory are what the chunks save; every row in one
  chunk on an accelerator, where a scan of small matmuls would leave it idle (not measured on a
  GPU yet: docs/BENCHMARKS.md)."""
  return CHUNK_ROWS if jax.default_backend() == "cpu" else max(rows, 1)


def _chunk(x: jax.Array, kernel: jax.Array, bias: jax.Array | None, targets: jax.Array,
           weights: jax.Array, label_smoothing: float, dtype: Any, with_grads: bool):
  """One chunk: x (C, D), targets int (C,), weights (C,) -> objective, nll, correct (C,) and,
  with_grads, dz (C, V): d(sum weights * objective) / d logits, in the logits' dtype."""
  logits = jnp.dot(x.astype(dtype), kernel.astype(dtype))  # (C, V)
  if bias is not None:
    logits = logits + bias.astype(dtype)
  z = logits.astype(jnp.float32)  # (C, V), as token_losses computes
  top = jnp.max(z, axis=-1, keepdims=True)  # (C, 1)
  exp = jnp.exp(z - top)  # (C, V)
  total = jnp.sum(exp, axis=-1, keepdims=True)  # (C, 1)
  lse = (top + jnp.log(total))[:, 0]  # (C,)
  target_logit = jnp.take_along_axis(z, targets[:, None], axis=-1)[:, 0]  # (C,)
  nll = lse - target_logit
  objective = nll
  if label_smoothing:
    uniform = lse - jnp.mean(z, axis=-1)  # (C,): cross-entropy against the uniform target
    objective = (1.0 - label_smoothing) * nll + label_smoothing * uniform
  correct = (jnp.argmax(z, axis=-1) == targets).astype(jnp.float32)
  if not with_grads:
    return objective, nll, correct, None
  vocab = z.shape[-1]
  target = jax.nn.one_hot(targets, vocab, dtype=jnp.float32) * (1.0 - label_smoothing)
  dz = (exp / total - target - label_smoothing / vocab) * weights[:, None]  # (C, V)
  return objective, nll, correct, dz.astype(logits.dtype)


def _chunked(hidden, kernel, bias, targets, weights, label_smoothing, chunk_rows, dtype,
             with_grads):
  """The scan over chunks of rows (N padded to a multiple of chunk_rows with weight-0 rows)."""
  rows, width = hidden.shape
  chunks = -(-rows // chunk_rows)
  pad = chunks * chunk_rows - rows
  xs = (jnp.pad(hidden, ((0, pad), (0, 0))).reshape(chunks, chunk_rows, width),
        jnp.pad(targets, (0, pad)).reshape(chunks, chunk_rows),
        jnp.pad(weights.astype(jnp.float32), (0, pad)).reshape(chunks, chunk_rows))

  def body(carry, chunk):
    x, tgt, w = chunk
    objective, nll, correct, dz = _chunk(x, kernel, bias, tgt, w, label_smoothing, dtype,
                                         with_grads)
    loss = carry[0] + jnp.sum(objective * w)
    if not with_grads:
      return (loss,), (objective, nll, correct)
    d_kernel = carry[1] + jnp.dot(x.astype(dz.dtype).T, dz,
                                  preferred_element_type=jnp.float32)  # (D, V)
    d_bias = carry[2] + jnp.sum(dz, axis=0, dtype=jnp.float32)  # (V,)
    d_x = jnp.dot(dz, kernel.astype(dz.dtype).T)  # (C, D)
    return (loss, d_kernel, d_bias), (objective, nll, correct, d_x)

  carry = (jnp.zeros((), jnp.float32),)
  if with_grads:
    carry += (jnp.zeros(kernel.shape, jnp.float32), jnp.zeros(kernel.shape[-1:], jnp.float32))
  carry, per_row = jax.lax.scan(body, carry, xs)
  per_row = [r.reshape((chunks * chunk_rows,) + r.shape[2:])[:rows] for r in per_row]
  return carry, per_row


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7))
def _output_cross_entropy(hidden, kernel, bias, targets, weights, label_smoothing, chunk_rows,
                          dtype):
  (loss,), (objective, nll, correct) = _chunked(hidden, kernel, bias, targets, weights,
                                                label_smoothing, chunk_rows, dtype, False)
  return loss, objective, nll, correct


def _forward(hidden, kernel, bias, targets, weights, label_smoothing, chunk_rows, dtype):
  (loss, d_kernel, d_bias), (objective, nll, correct, d_hidden) = _chunked(
      hidden, kernel, bias, targets, weights, label_smoothing, chunk_rows, dtype, True)
  grads = (d_hidden.astype(hidden.dtype), d_kernel.astype(kernel.dtype),
           None if bias is None else d_bias.astype(bias.dtype))
  return (loss, objective, nll, correct), grads


def _backward(label_smoothing, chunk_rows, dtype, grads, cotangents):
  """Only the loss carries a gradient (the per-row outputs are stop_gradient'ed by the caller);
  targets and weights are data."""
  del label_smoothing, chunk_rows, dtype
  scale = cotangents[0]
  d_hidden, d_kernel, d_bias = grads
  return (d_hidden * scale.astype(d_hidden.dtype), d_kernel * scale.astype(d_kernel.dtype),
          None if d_bias is None else d_bias * scale.astype(d_bias.dtype), None, None)


_output_cross_entropy.defvjp(_forward, _backward)


def output_cross_entropy(hidden: jax.Array, kernel: jax.Array, bias: jax.Array | None,
                         targets: jax.Array, weights: jax.Array, label_smoothing: float = 0.0, *,
                         chunk_rows: int | None = None, dtype: Any = None
                         ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """The weighted cross-entropy of the logits hidden @ kernel + bias, a chunk of rows at a time.

  Args:
    hidden: float (N, D), the states the output layer reads.
    kernel: float (D, V), the output layer's kernel (a tied embedding table transposed).
    bias: float (V,), or None for an output layer without one.
    targets: int (N,) target ids.
    weights: float (N,), each row's weight in the loss (0 for padding rows); not differentiated.
    label_smoothing: eps as in loss.token_losses.
    chunk_rows: C, the rows whose logits are made at once; None: default_chunk_rows.
    dtype: the output layer's computation dtype (flax's Dense `dtype`); None: that of
      hidden and kernel together.

  Returns:
    (loss, objective (N,), nll (N,), correct (N,)): loss = sum(weights * objective), with
    gradients for hidden, kernel and bias; per row the (label-smoothed) objective, the plain
    negative log-likelihood, and whether the argmax is the target (float32 0/1), all three
    without gradients. Padding rows get values too (their weight is what excludes them).
  """
  if hidden.ndim != 2 or kernel.ndim != 2 or hidden.shape[1] != kernel.shape[0]:
    raise ValueError(f"hidden (N, D) and kernel (D, V) expected, got hidden {hidden.shape} and "
                     f"kernel {kernel.shape}")
  if bias is not None and bias.shape != kernel.shape[1:]:
    raise ValueError(f"bias: expected shape ({kernel.shape[1]},), got {bias.shape}")
  if targets.shape != hidden.shape[:1] or weights.shape != hidden.shape[:1]:
    raise ValueError(f"targets and weights: expected shape ({hidden.shape[0]},) each, got "
                     f"{targets.shape} and {weights.shape}")
  if chunk_rows is None:
    chunk_rows = default_chunk_rows(hidden.shape[0])
  if not isinstance(chunk_rows, int) or chunk_rows < 1:
    raise ValueError(f"chunk_rows: expected a positive int, got {chunk_rows!r}")
  dtype = jnp.result_type(hidden, kernel) if dtype is None else jnp.dtype(dtype)
  chunk_rows = min(chunk_rows, hidden.shape[0]) or 1
  loss, objective, nll, correct = _output_cross_entropy(
      hidden, kernel, bias, targets, weights, float(label_smoothing), chunk_rows, dtype)
  return (loss, *(jax.lax.stop_gradient(x) for x in (objective, nll, correct)))


def fused_sequence_loss(hidden: jax.Array, kernel: jax.Array, bias: jax.Array | None,
                        targets: jax.Array, lengths: jax.Array, weight: jax.Array,
                        label_smoothing: float = 0.0, reduction: str = "token_mean", *,
                        chunk_rows: int | None = None, dtype: Any = None
                        ) -> tuple[jax.Array, Metrics]:
  """`loss.sequence_loss` of the logits hidden @ kernel + bias, through output_cross_entropy.

  Args:
    hidden: float (B, T, D), the decoder's states before the output layer.
    kernel, bias: the output layer's (D, V) and (V,) or None.
    targets, lengths, weight, label_smoothing, reduction: as loss.sequence_loss.
    chunk_rows, dtype: as output_cross_entropy.

  Returns:
    (loss, metrics), as loss.sequence_loss.
  """
  if reduction not in REDUCTIONS:
    raise ValueError(f"reduction: expected one of {list(REDUCTIONS)}, got {reduction!r}")
  batch, length, width = hidden.shape
  weights = target_weights(lengths, length, weight)  # (B, T)
  count = (jnp.sum(weight.astype(jnp.float32)) if reduction == "sequence_sum"
           else jnp.sum(weights))
  scale = 1.0 / jnp.maximum(count, 1.0)
  loss, objective, nll, correct = output_cross_entropy(
      hidden.reshape(batch * length, width), kernel, bias, targets.reshape(-1),
      (weights * scale).reshape(-1), label_smoothing, chunk_rows=chunk_rows, dtype=dtype)
  shaped = lambda x: x.reshape(batch, length)  # noqa: E731
  return loss, sequence_metrics(shaped(objective), shaped(nll), shaped(correct), weights, weight,
                                reduction)
