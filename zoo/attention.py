"""Single-head attention: score queries against keys, mask, softmax, and average the values.

This is d2l's DotProductAttention and MLPAttention in one module whose score is chosen by name
(see zoo.scoring): `Attention(score='additive')` is Bahdanau/MLP attention,
`Attention(score='scaled_dot')` (the default) is Transformer attention.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoo import batching
from zoo import checks
from zoo import masking
from zoo import scoring

Dtype = Any


class Attention(nn.Module):
  """Attention of a batch of query sets over key/value sets, with a selectable score.

  Attributes:
    score: the scoring function, one of zoo.SCORE_NAMES ('dot', 'scaled_dot', 'additive',
      'bilinear', 'concat').
    score_features: the hidden size A of the 'additive' and 'concat' scores; None (the default)
      uses the key width Dk. Must be None for the other scores.
    dropout_rate: dropout on the attention weights (applied only when `deterministic=False`, which
      then needs a 'dropout' rng).
    dtype: the dtype of the computation; None (the default) computes in the promoted type of the
      inputs and parameters (flax's rule). The softmax runs in float32 whatever the dtype.
    param_dtype: the dtype the score parameters are stored in.
  """
  score: str = "scaled_dot"
  score_features: int | None = None
  dropout_rate: float = 0.0
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32

  def setup(self):
    self.scorer = scoring.make_score(self.score, features=self.score_features, dtype=self.dtype,
                                     param_dtype=self.param_dtype)

  def project_keys(self, keys: jax.Array) -> jax.Array:
    """The additive score's W_k keys, (*batch, K, Dk) -> (*batch, K, A), for keys_projected=True.

    A decoder that attends to the same keys at every step projects them once, before its loop
    (zoo.BahdanauDecoder); only the 'additive' score has a key projection.
    """
    self._check_projectable()
    checks.min_rank(keys, 2, "keys")
    return self.scorer.project_keys(keys)

  def _check_projectable(self) -> None:
    if self.score != "additive":
      raise ValueError(f"only the 'additive' score projects its keys; this Attention's score is "
                       f"{self.score!r}")

  @nn.compact
  def __call__(self, queries: jax.Array, keys: jax.Array, values: jax.Array, *,
               valid_lens: jax.Array | None = None, mask: jax.Array | None = None,
               deterministic: bool = True, keys_projected: bool = False
               ) -> tuple[jax.Array, jax.Array]:
    """Attends every query to the keys and averages the values with the attention weights.

    Any leading batch shape (*batch), none included (zoo.batching).

    Args:
      queries: float (*batch, Q, Dq).
      keys: float (*batch, K, Dk); Dk == Dq for the 'dot' and 'scaled_dot' scores. With
        keys_projected=True, the output of `project_keys` (*batch, K, A) instead.
      values: float (*batch, K, Dv).
      valid_lens: None (attend to all keys), int (*batch,) (the first valid_lens[b] keys of example
        b are valid) or int (*batch, Q) (a length per query row), as in d2l's masked_softmax.
      mask: optional bool broadcastable to (*batch, Q, K), True = may attend. Given both, a key may
        be attended iff both allow it (zoo.masking.key_mask).
      deterministic: if False, apply dropout to the weights.
      keys_projected: whether `keys` come from `project_keys` ('additive' score only).

    Returns:
      context: (*batch, Q, Dv), the weighted averages of the values; all zeros for a query row with
        nothing to attend to.
      weights: (*batch, Q, K), the attention weights before dropout (rows sum to 1, or 0 when fully
        masked).
    """
    scorer_cls = scoring.score_class(self.score)
    if keys_projected:
      self._check_projectable()
    lead = batching.leading_shape(queries, 2, "queries")
    for array, name in [(queries, "queries"), (keys, "keys"), (values, "values")]:
      batching.same_leading(array, name, 2, lead, "queries")
      checks.floating(array, name)
    queries, keys, values = (batching.fold(a, lead) for a in (queries, keys, values))  # (B, ., .)
    checks.equal_dim(keys, "keys", 1, values, "values", 1)
    if scorer_cls.requires_equal_widths:
      checks.equal_dim(queries, "queries", 2, keys, "keys", 2)
    num_queries, num_keys = queries.shape[1], keys.shape[1]
    valid_lens = batching.fold_lengths(valid_lens, lead, (num_queries,), "valid_lens")
    mask = batching.fold_mask(mask, lead, (num_queries, num_keys), "mask",
                              "the scores (*batch, Q, K) =")
    mask = masking.key_mask(valid_lens, mask, (queries.shape[0], num_queries, num_keys))

    if keys_projected:
      scores = self.scorer(queries, keys, keys_projected=True)  # (B, Q, K)
    else:
      scores = self.scorer(queries, keys)  # (B, Q, K)
    weights = masking.softmax_where(scores, mask)  # (B, Q, K), float32 softmax, cast to dtype
    dropped = nn.Dropout(rate=self.dropout_rate)(weights, deterministic=deterministic)
    dropped, values = nn.dtypes.promote_dtype(dropped, values, dtype=self.dtype)
    context = jnp.einsum("bqk,bkv->bqv", dropped, values)  # (B, Q, Dv)
    return batching.unfold((context, weights), lead)
