"""Segment (token-type) embeddings for two sequences packed into one: [CLS] a [SEP] b [SEP].

A Transformer that reads a sentence pair as one sequence (BERT's layout) tells the two sentences
apart by adding, to every token's embedding, the embedding of the segment it belongs to:

    position   0      1 .. La   La+1    La+2 .. La+Lb+1   La+Lb+2   beyond
    token      [CLS]  a_1..a_La [SEP]   b_1 .. b_Lb       [SEP]     padding
    segment    0      0         0       1                 1         0

`pair_segments` builds those ids from the two lengths (a pure function, jit-able); the module
`SegmentEmbedding` holds the (num_segments, D) table and adds its rows to x, as the position
encodings of zoo.positional do.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from zoo import checks

Dtype = Any


def pair_segments(a_len: jax.Array, b_len: jax.Array, length: int) -> jax.Array:
  """The segment ids of packed pairs [CLS] a [SEP] b [SEP], padded to `length`.

  Args:
    a_len: int (B,), the number of tokens of the first sentence (without [CLS] and [SEP]).
    b_len: int (B,), the number of tokens of the second sentence (without its [SEP]).
    length: L, the padded length of the packed sequences (>= a_len + b_len + 3 for every pair).

  Returns:
    int32 (B, L): 0 on [CLS], a and its [SEP]; 1 on b and its [SEP]; 0 on padding.
  """
  checks.positive_int(length, "length")
  for lens, name in [(a_len, "a_len"), (b_len, "b_len")]:
    checks.rank(lens, 1, name)
    checks.integer(lens, name)
  checks.equal_dim(a_len, "a_len", 0, b_len, "b_len", 0)
  if checks.is_concrete(a_len) and checks.is_concrete(b_len):
    packed = np.asarray(a_len) + np.asarray(b_len) + 3
    if packed.size and (np.min(np.asarray(a_len)) < 0 or np.min(np.asarray(b_len)) < 0
                        or packed.max() > length):
      raise ValueError(f"a_len + b_len + 3 must lie in [3, {length}] (the packed length), got "
                       f"values up to {packed.max()}")
  steps = jnp.arange(length)  # (L,)
  first_b = jnp.asarray(a_len)[:, None] + 2  # (B, 1): where b starts
  past_b = first_b + jnp.asarray(b_len)[:, None] + 1  # (B, 1): one past b's [SEP]
  return ((steps >= first_b) & (steps < past_b)).astype(jnp.int32)  # (B, L)


class SegmentEmbedding(nn.Module):
  """Adds a learned embedding of each token's segment to x.

  `SegmentEmbedding(num_segments=2)(x (B, L, D), segments int (B, L)) -> (B, L, D)`.

  Attributes:
    num_segments: how many segment ids there are (2 for a sentence pair); concrete ids outside
      [0, num_segments) raise a ValueError.
    dtype: the dtype of the result; None (the default): the promoted type of x and the table.
    param_dtype: the dtype of the table ('embedding', (num_segments, D)).
    embedding_init: initializer of the table; normal with standard deviation 0.02 by default
      (BERT's token-type table).
  """
  num_segments: int = 2
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32
  embedding_init: Callable[..., jax.Array] = nn.initializers.normal(stddev=0.02)

  @nn.compact
  def __call__(self, x: jax.Array, segments: jax.Array) -> jax.Array:
    """Returns x + table[segments] in `dtype`.

    Args:
      x: float (B, L, D), e.g. token embeddings with positions.
      segments: int (B, L), the segment of every step.
    """
    checks.positive_int(self.num_segments, "num_segments")
    checks.rank(x, 3, "x")
    checks.floating(x, "x")
    checks.rank(segments, 2, "segments")
    checks.integer(segments, "segments")
    if segments.shape != x.shape[:2]:
      raise ValueError(f"segments: expected shape {x.shape[:2]} (the steps of x (B, L, D) = "
                       f"{x.shape}), got {segments.shape}")
    if checks.is_concrete(segments):
      values = np.asarray(segments)
      if values.size and (values.min() < 0 or values.max() >= self.num_segments):
        raise ValueError(f"segments must lie in [0, {self.num_segments}) (num_segments = "
                         f"{self.num_segments}), got {values.min()} to {values.max()}")
    table = self.param("embedding", self.embedding_init, (self.num_segments, x.shape[-1]),
                       self.param_dtype)
    x, table = nn.dtypes.promote_dtype(x, table, dtype=self.dtype)
    return x + jnp.take(table, segments, axis=0)
