"""Position encodings: fixed sinusoids (Vaswani et al., d2l's PositionalEncoding) and a learned table.

Both modules add the encoding of each step's absolute position to x (B, L, D) and apply dropout, and
both take the position of the first step (`offset`) or explicit `positions`, so an incremental
decoder can encode step t alone. They are interchangeable in a model.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from zoo import checks

Dtype = Any


def sinusoidal_encoding_at(positions: jax.Array, dim: int) -> jax.Array:
  """The sinusoidal encodings of arbitrary positions.

  Column 2i holds sin(p / 10000^(2i/dim)) and column 2i+1 holds cos(p / 10000^(2i/dim)). For an odd
  dim the last column, 2i = dim - 1, is a sine with exponent (dim - 1) / dim and has no cosine
  partner (the formula applied as written; no column is dropped or padded).

  Args:
    positions: int or float array (...,), e.g. (L,) or (B, L), possibly traced.
    dim: D, the width of the encoding.

  Returns:
    float32 (..., D).
  """
  checks.positive_int(dim, "dim")
  column = np.arange(dim)
  frequency = np.power(10000.0, -(column - column % 2) / dim).astype(np.float32)  # (D,)
  angles = jnp.asarray(positions, jnp.float32)[..., None] * frequency  # (..., D)
  return jnp.where(column % 2 == 0, jnp.sin(angles), jnp.cos(angles))


def sinusoidal_encoding(length: int, dim: int, *, offset: int | jax.Array = 0) -> jax.Array:
  """The sinusoidal encodings of positions offset, ..., offset + length - 1.

  Args:
    length: L, the number of positions.
    dim: D, the width (see sinusoidal_encoding_at for odd D).
    offset: the first position (an int or a traced int scalar, e.g. a decoder's step).

  Returns:
    float32 (L, D): PE[p, 2i] = sin((offset + p) / 10000^(2i/D)), PE[p, 2i+1] = cos(same).
  """
  checks.positive_int(length, "length", minimum=0)  # an empty encoding (0, D) is fine
  return sinusoidal_encoding_at(jnp.arange(length) + offset, dim)


def _positions(x: jax.Array, offset, positions, max_len: int) -> jax.Array:
  """Absolute positions (L,) or (B, L) of the steps of x (B, L, D); checks concrete ones."""
  checks.rank(x, 3, "x")
  checks.floating(x, "x")
  batch, length, _ = x.shape
  if positions is None:
    checks.integer(offset, "offset")
    positions = jnp.arange(length) + offset  # (L,)
  else:
    checks.integer(positions, "positions")
    checks.rank(positions, {1, 2}, "positions")
    checks.broadcastable(positions, "positions", (batch, length), "the steps of x (B, L) =")
  if checks.is_concrete(positions):
    values = np.asarray(positions)
    if values.size and (values.min() < 0 or values.max() >= max_len):
      raise ValueError(f"positions must lie in [0, {max_len}) (max_len = {max_len}), got "
                       f"{values.min()} to {values.max()} for x of shape {x.shape}")
  return jnp.asarray(positions)


class _PositionEncoding(nn.Module):
  """Adds `_encodings(positions, x)` to x and applies dropout; subclasses define the fields
  max_len, dropout_rate and dtype."""
  learned: ClassVar[bool] = False  # whether the encodings are parameters

  @nn.compact
  def __call__(self, x: jax.Array, *, offset: int | jax.Array = 0,
               positions: jax.Array | None = None, deterministic: bool = True) -> jax.Array:
    """Adds the encodings of the steps' absolute positions to x.

    Args:
      x: float (B, L, D), e.g. scaled token embeddings.
      offset: the position of step 0 (int or traced int scalar, e.g. the step of an incremental
        decoder); ignored if `positions` is given.
      positions: optional int (L,) or (B, L), the absolute position of every step.
      deterministic: if False, apply dropout.

    Returns:
      (B, L, D) in `dtype`: x + encoding[positions], after dropout.
    """
    positions = _positions(x, offset, positions, self.max_len)  # (L,) or (B, L)
    encodings = self._encodings(positions, x)  # (L, D) or (B, L, D)
    # dtype=None (flax's rule): a learned table promotes with x; the fixed encoding is a constant
    # and takes x's dtype.
    dtype = nn.dtypes.canonicalize_dtype(x, *((encodings,) if self.learned else ()),
                                         dtype=self.dtype)
    encoded = jnp.asarray(x, dtype) + encodings.astype(dtype)
    return nn.Dropout(rate=self.dropout_rate)(encoded, deterministic=deterministic)

  def _encodings(self, positions: jax.Array, x: jax.Array) -> jax.Array:
    raise NotImplementedError


class SinusoidalPositionEncoding(_PositionEncoding):
  """Adds the fixed sinusoidal encoding to x and applies dropout (d2l's PositionalEncoding).

  `__call__(x (B, L, D), *, offset=0, positions=None, deterministic=True) -> (B, L, D)`.

  Attributes:
    dropout_rate: dropout on the sum, applied when `deterministic=False`.
    max_len: positions must lie in [0, max_len) (checked when they are known at trace time; traced
      positions beyond it still get the formula's values). The default 1000 follows d2l.
    dtype: the dtype of the result; None (the default): the dtype of x.
  """
  dropout_rate: float = 0.0
  max_len: int = 1000
  dtype: Dtype | None = None

  def _encodings(self, positions, x):
    return sinusoidal_encoding_at(positions, x.shape[-1])


class LearnedPositionEmbedding(_PositionEncoding):
  """Adds a learned embedding of each position (a (max_len, features) table) to x.

  `__call__(x (B, L, D), *, offset=0, positions=None, deterministic=True) -> (B, L, D)`, D must
  equal `features`.

  Attributes:
    max_len: the number of positions the table holds; concrete positions >= max_len (for example an
      input longer than max_len) raise a ValueError. Traced positions outside the table give NaN,
      so the error cannot pass silently under jit.
    features: D, the width of x and of the table.
    dropout_rate: dropout on the sum, applied when `deterministic=False`.
    dtype: the dtype of the computation; None (the default): the promoted type of x and the table.
    param_dtype: the dtype of the table ('embedding', (max_len, features)).
    embedding_init: initializer of the table; normal with standard deviation 0.02 by default.
  """
  max_len: int
  features: int
  dropout_rate: float = 0.0
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32
  embedding_init: Callable[..., jax.Array] = nn.initializers.normal(stddev=0.02)
  learned: ClassVar[bool] = True

  def _encodings(self, positions, x):
    if x.shape[-1] != self.features:
      raise ValueError(f"x: expected width features = {self.features} in the last axis, got "
                       f"shape {x.shape}")
    table = self.param("embedding", self.embedding_init, (self.max_len, self.features),
                       self.param_dtype)
    return jnp.take(table, positions, axis=0, mode="fill",
                    fill_value=jnp.nan)
