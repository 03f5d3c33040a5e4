"""Pooling a sequence (B, L, D) into one vector per example (B, D).

`AttentionPooling` scores every step against a learned query vector (nndl 8.1: the additive form is
s = v^T tanh(X W + q^T U), the dot form s = X q) and averages the steps with the softmax of those
scores over the valid steps. `masked_mean_pool` is the plain average over the valid steps, the
baseline the attention is compared against, and `masked_max_pool` its element-wise maximum (ESIM
pools with both); `cls_pool` takes one position's vector, the [CLS]
token that a Transformer reading [CLS] a [SEP] b [SEP] classifies from (BERT).
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoo import batching
from zoo import checks
from zoo import masking
from zoo import scoring

Dtype = Any


def masked_mean_pool(x: jax.Array, valid_lens: jax.Array | None = None) -> jax.Array:
  """The mean of the first valid_lens[b] steps of each sequence.

  Args:
    x: float (B, L, D).
    valid_lens: int (B,), the number of valid steps of each example; None averages all L steps.

  Returns:
    (B, D) in the dtype of `x`, summed in float32. A sequence of length 0 gives zeros (not NaN), and
    padded steps never reach the result, even if they hold inf or NaN.
  """
  checks.rank(x, 3, "x")
  checks.floating(x, "x")
  if valid_lens is None:
    return jnp.mean(x.astype(jnp.float32), axis=1).astype(x.dtype)
  checks.integer(valid_lens, "valid_lens")
  checks.rank(valid_lens, 1, "valid_lens")
  checks.equal_dim(valid_lens, "valid_lens", 0, x, "x", 0)
  checks.lengths_in_range(valid_lens, "valid_lens", x.shape[1])
  mask = masking.sequence_mask(valid_lens, x.shape[1])  # (B, L)
  total = jnp.sum(jnp.where(mask[..., None], x.astype(jnp.float32), 0.0), axis=1)  # (B, D)
  count = jnp.maximum(jnp.asarray(valid_lens), 1).astype(jnp.float32)[:, None]  # (B, 1)
  return (total / count).astype(x.dtype)


def masked_max_pool(x: jax.Array, valid_lens: jax.Array) -> jax.Array:
  """The element-wise maximum over the first valid_lens[b] steps of each sequence.

  Args:
    x: float (B, L, D).
    valid_lens: int (B,), the number of valid steps of each example.

  Returns:
    (B, D) in the dtype of `x`. A sequence of length 0 gives zeros (not -inf), and padded steps
    never reach the result.
  """
  checks.rank(x, 3, "x")
  checks.floating(x, "x")
  checks.sequence_lengths(valid_lens, "valid_lens", x, "x")
  mask = masking.sequence_mask(valid_lens, x.shape[1])[..., None]  # (B, L, 1)
  lowest = jnp.finfo(x.dtype).min
  peak = jnp.max(jnp.where(mask, x, lowest), axis=1)  # (B, D)
  return jnp.where(jnp.asarray(valid_lens)[:, None] > 0, peak, jnp.zeros_like(peak))


def cls_pool(x: jax.Array, position: int = 0) -> jax.Array:
  """The vector at one position of every sequence: x[:, position] (the [CLS] token at 0).

  Args:
    x: (B, L, D), e.g. a Transformer encoder's outputs.
    position: the step to take, in [0, L).

  Returns:
    (B, D) in the dtype of `x`.
  """
  checks.rank(x, 3, "x")
  checks.positive_int(position, "position", minimum=0)
  if position >= x.shape[1]:
    raise ValueError(f"position must lie in [0, {x.shape[1]}) (the steps of x, shape {x.shape}), "
                     f"got {position}")
  return x[:, position]


class AttentionPooling(nn.Module):
  """Attention pooling with a learned query vector q of width D.

  The query is scored against every step by a zoo.scoring module: with 'additive' (the default)
  s_t = v^T tanh(W x_t + U q), with 'dot' s_t = x_t . q; 'scaled_dot', 'bilinear' and 'concat'
  work too.

  Attributes:
    score: one of zoo.SCORE_NAMES.
    features: the hidden size A of the 'additive' and 'concat' scores; None uses D. Must be None
      for the other scores.
    dtype: the dtype of the computation; None (the default) computes in the promoted type of the
      inputs and parameters (flax's rule). The softmax runs in float32 whatever the dtype.
    param_dtype: the dtype parameters are stored in.
    query_init: initializer of the query, stored as 'query' with shape (1, D); None (the default)
      draws it from a normal distribution with standard deviation 1 / sqrt(D), so x . q starts with
      about the scale of one input feature.
    kernel_init: initializer of the score's kernels (W, U and v of 'additive'); None (the default)
      keeps the score's own (zoo.scoring: LeCun normal).
  """
  score: str = "additive"
  features: int | None = None
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32
  query_init: Callable[..., jax.Array] | None = None
  kernel_init: Callable[..., jax.Array] | None = None

  @nn.compact
  def __call__(self, x: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """Pools each sequence into the attention-weighted average of its valid steps.

    Any leading batch shape (*batch), none included (zoo.batching).

    Args:
      x: float (*batch, L, D).
      valid_lens: int (*batch,), the number of valid steps; None uses all L steps.
      mask: bool broadcastable to (*batch, L), True = may attend; given with valid_lens, a step is
        pooled iff both allow it (zoo.masking.key_mask).

    Returns:
      context: (*batch, D), zeros for an example with no valid step.
      weights: (*batch, L), zero beyond each valid length and where the mask is False.
    """
    lead = batching.leading_shape(x, 2, "x")
    checks.floating(x, "x")
    width = x.shape[-1]
    valid_lens = batching.fold_lengths(valid_lens, lead, (), "valid_lens",
                                         batching.BATCH_AXES)
    mask = batching.fold_mask(mask, lead, x.shape[-2:-1], "mask", "the scores (*batch, L) =")
    x = batching.fold(x, lead)  # (B, L, D)
    mask = masking.key_mask(valid_lens, mask, x.shape[:2])  # (B, L)
    init = self.query_init or nn.initializers.normal(stddev=width ** -0.5)
    query = self.param("query", init, (1, width), self.param_dtype)  # one query row, Q = 1
    kernel_init = {} if self.kernel_init is None else {"kernel_init": self.kernel_init}
    scorer = scoring.make_score(self.score, features=self.features, dtype=self.dtype,
                                param_dtype=self.param_dtype, name="scorer", **kernel_init)
    query, x = nn.dtypes.promote_dtype(query, x, dtype=self.dtype)
    scores = scorer(query, x)[:, 0, :]  # query broadcasts: (B, 1, L)
    weights = masking.softmax_where(scores, mask)  # (B, L), float32 softmax in the scores' dtype
    pooling, x = nn.dtypes.promote_dtype(weights, x, dtype=self.dtype)
    return batching.unfold((jnp.einsum("bl,bld->bd", pooling, x), weights), lead)
