"""Self-attention: a sequence attends to itself.

`SimpleSelfAttention` is the parameter-free form softmax(X X^T) X (nndl 8.2 before the projections);
`SelfAttention` first projects X to queries, keys and values, then applies zoo.Attention with any
score. Both return the attention weights with the outputs.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoo import checks
from zoo.attention import Attention

Dtype = Any


class SimpleSelfAttention(nn.Module):
  """Parameter-free self-attention: outputs = softmax(X X^T / s) X, masked.

  Attributes:
    scale: if True, divide the scores by s = sqrt(D) (the scaled dot product, which keeps the
      softmax from saturating for wide inputs); False (the default) uses s = 1, the plain formula.
    dtype: the dtype of the computation; None (the default): the promoted type of the inputs and
      parameters (flax's rule); the softmax runs in float32.
  """
  scale: bool = False
  dtype: Dtype | None = None

  @nn.compact
  def __call__(self, x: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """Each step attends to every valid step of its own sequence.

    Args:
      x: float (*batch, L, D), any leading batch shape, none included.
      valid_lens: None, int (*batch,) (the first valid_lens[b] steps are keys) or (*batch, L) (a
        length per query step), as in zoo.Attention.
      mask: optional bool broadcastable to (*batch, L, L), True = may attend (e.g.
        zoo.causal_mask(L)); given with valid_lens, the AND of both (zoo.masking.key_mask).

    Returns:
      outputs: (*batch, L, D).
      weights: (*batch, L, L).
    """
    checks.min_rank(x, 2, "x")
    checks.floating(x, "x")
    attention = Attention(score="scaled_dot" if self.scale else "dot", dtype=self.dtype,
                          name="attention")
    return attention(x, x, x, valid_lens=valid_lens, mask=mask)


class SelfAttention(nn.Module):
  """Self-attention with learned query, key and value projections.

  queries = X W_q, keys = X W_k, values = X W_v (each (B, L, F), Dense layers named 'query', 'key'
  and 'value'), then zoo.Attention with the chosen score. There is no output projection (that is
  multi-head attention's job).

  Attributes:
    features: F, the width of the projections; None (the default) keeps the input width D.
    score: one of zoo.SCORE_NAMES; 'scaled_dot' by default.
    score_features: hidden size of the 'additive' and 'concat' scores; None uses F.
    dropout_rate: dropout on the attention weights when `deterministic=False`.
    use_bias: whether the projections have biases (False by default, as in nndl's formulas).
    dtype: the dtype of the computation; None (the default): the promoted type of the inputs and
      parameters (flax's rule); the softmax runs in float32.
    param_dtype: the dtype parameters are stored in.
    kernel_init: initializer of the projection kernels.
  """
  features: int | None = None
  score: str = "scaled_dot"
  score_features: int | None = None
  dropout_rate: float = 0.0
  use_bias: bool = False
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32
  kernel_init: Callable[..., jax.Array] = nn.initializers.lecun_normal()

  @nn.compact
  def __call__(self, x: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None, deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    """Projects x to queries, keys and values and attends.

    Args:
      x: float (*batch, L, D), any leading batch shape, none included.
      valid_lens: None, int (*batch,) or (*batch, L), as in zoo.Attention.
      mask: optional bool broadcastable to (*batch, L, L), True = may attend; given with
        valid_lens, the AND of both (zoo.masking.key_mask).
      deterministic: if False, apply dropout to the attention weights.

    Returns:
      outputs: (*batch, L, F).
      weights: (*batch, L, L), before dropout.
    """
    checks.min_rank(x, 2, "x")
    checks.floating(x, "x")
    features = x.shape[-1] if self.features is None else self.features
    queries, keys, values = (
        nn.Dense(features, use_bias=self.use_bias, dtype=self.dtype, param_dtype=self.param_dtype,
                 kernel_init=self.kernel_init, name=name)(x)
        for name in ("query", "key", "value"))  # each (B, L, F)
    attention = Attention(score=self.score, score_features=self.score_features,
                          dropout_rate=self.dropout_rate, dtype=self.dtype,
                          param_dtype=self.param_dtype, name="attention")
    return attention(queries, keys, values, valid_lens=valid_lens, mask=mask,
                     deterministic=deterministic)
