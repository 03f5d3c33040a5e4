"""Argument checks for public entry points: every zoo module uses them, and so may callers.

Each function checks one property of one argument and returns None, or raises a `ValueError` that
names the argument and shows what arrived, e.g. `checks.rank(tokens, 2, "tokens")` on an int32
array of shape (3,) raises "tokens: expected an array of rank 2, got shape (3,) and dtype int32".
A chex `AssertionError` deep in a traceback would not tell a user which of their arrays was wrong.

The array checks read static shapes and dtypes only, so they cost nothing under `jax.jit` (they
run once, at trace time). Value checks (for example lengths that exceed the sequence) only run on
concrete arrays: inside jit the values are not known, and the documented clipping semantics apply
instead.
"""

from __future__ import annotations

from typing import AbstractSet, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np


def _describe(x) -> str:
  return f"shape {tuple(np.shape(x))} and dtype {jnp.result_type(x)}"


def rank(x, expected: int | Sequence[int] | AbstractSet[int], name: str) -> None:
  """Raises ValueError unless `x` has (one of) the `expected` rank(s)."""
  try:
    # chex reads a tuple as one rank per input; a set means "any of these ranks".
    chex.assert_rank(x, expected if isinstance(expected, int) else set(expected))
  except AssertionError:
    want = expected if isinstance(expected, int) else " or ".join(map(str, expected))
    raise ValueError(f"{name}: expected an array of rank {want}, got {_describe(x)}") from None


def min_rank(x, minimum: int, name: str) -> None:
  """Raises ValueError unless `x` has at least `minimum` axes."""
  if np.ndim(x) < minimum:
    raise ValueError(f"{name}: expected an array of rank >= {minimum}, got {_describe(x)}")


def floating(x, name: str) -> None:
  """Raises ValueError unless `x` has a floating dtype."""
  if not jnp.issubdtype(jnp.result_type(x), jnp.floating):
    raise ValueError(f"{name}: expected a floating-point array, got {_describe(x)}")


def integer(x, name: str) -> None:
  """Raises ValueError unless `x` has an integer dtype (lengths, token ids)."""
  if not jnp.issubdtype(jnp.result_type(x), jnp.integer):
    raise ValueError(f"{name}: expected an integer array, got {_describe(x)}")


def boolean(x, name: str) -> None:
  """Raises ValueError unless `x` is a boolean array (masks: True = may attend)."""
  if jnp.result_type(x) != jnp.bool_:
    raise ValueError(f"{name}: expected a boolean array (True = may attend), got {_describe(x)}")


def positive_int(value, name: str, minimum: int = 1) -> None:
  """Raises ValueError unless `value` is an integer >= `minimum` (sizes, lengths, counts).

  Accepted are a Python int and a numpy integer scalar. A bool is not a count and is rejected, and
  so is a float even when it is whole (2.0), because these values become static shapes.

  Args:
    value: the value to check.
    name: the argument's name, for the message.
    minimum: the smallest accepted value (1 for sizes, 0 for ids and lengths that may be empty).
  """
  is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
  if not is_int or value < minimum:
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def equal_dim(a, a_name: str, a_axis: int, b, b_name: str, b_axis: int) -> None:
  """Raises ValueError unless a.shape[a_axis] == b.shape[b_axis]."""
  da, db = np.shape(a)[a_axis], np.shape(b)[b_axis]
  if da != db:
    raise ValueError(
        f"{a_name} and {b_name} disagree: {a_name}.shape[{a_axis}] = {da} but "
        f"{b_name}.shape[{b_axis}] = {db} ({a_name} has shape {tuple(np.shape(a))}, "
        f"{b_name} has shape {tuple(np.shape(b))})")


def shape_prefix(x, x_name: str, of_shape: Sequence[int], of_desc: str) -> None:
  """Raises ValueError unless x.shape is a prefix of `of_shape` (e.g. valid_lens vs score rows)."""
  xs, os_ = tuple(np.shape(x)), tuple(of_shape)
  if xs != os_[:len(xs)]:
    raise ValueError(f"{x_name} with shape {xs} does not match {of_desc} {os_}: its shape must be "
                     f"a prefix of {os_}, e.g. {os_[:1]}")


def broadcastable(x, x_name: str, target: Sequence[int], target_desc: str) -> None:
  """Raises ValueError unless `x` broadcasts to exactly `target`: it may have fewer axes and axes of
  size 1, but must not add axes or widen the result (a mask must not change the scores' shape)."""
  shape, target = tuple(np.shape(x)), tuple(target)
  try:
    ok = len(shape) <= len(target) and jnp.broadcast_shapes(shape, target) == target
  except ValueError:
    ok = False
  if not ok:
    raise ValueError(f"{x_name} with shape {shape} does not broadcast to {target_desc} {target}")


def is_concrete(x) -> bool:
  """True when `x` holds values known now (not a tracer inside jit/grad/vmap)."""
  return not isinstance(x, jax.core.Tracer)


def lengths_in_range(lengths, name: str, max_len: int) -> None:
  """Raises ValueError for concrete lengths < 0 or > max_len; a no-op under tracing."""
  if lengths is None or not is_concrete(lengths):
    return
  values = np.asarray(lengths)
  if values.size and (values.min() < 0 or values.max() > max_len):
    raise ValueError(f"{name} must lie in [0, {max_len}] (the sequence length), got values from "
                     f"{values.min()} to {values.max()}")


def sequence_lengths(lengths, name: str, x, x_name: str) -> None:
  """Checks per-example lengths (B,) of the padded sequences x (B, L, ...): rank 1, integer, the
  batch size of `x`, and (when concrete) values in [0, L]."""
  rank(lengths, 1, name)
  integer(lengths, name)
  equal_dim(lengths, name, 0, x, x_name, 0)
  lengths_in_range(lengths, name, np.shape(x)[1])
