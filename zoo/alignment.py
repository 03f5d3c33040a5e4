"""Soft alignment: attention between two sequences in both directions (decomposable attention, ESIM).

Two sentences a (La, D) and b (Lb, D) are scored pairwise, e (La, Lb) = score(a, b), and every
position of each is summarised by the other sentence's positions that it aligns with:

    w_ab = softmax over j of e[i, j]     (La, Lb)  row i: where a_i looks in b
    w_ba = softmax over i of e[i, j]^T   (Lb, La)  row j: where b_j looks in a
    b_for_a = w_ab @ b_values            (La, Dv)  ESIM's a~, Parikh et al.'s beta
    a_for_b = w_ba @ a_values            (Lb, Dv)  ESIM's b~, Parikh et al.'s alpha

Both softmaxes see only the valid positions of the other side (the first a_len / b_len steps), and
a padded position's row is all zeros, as is its summary, so padding never reaches a model's
pooling or a plotted heatmap. The two weight matrices come from the one score matrix: w_ab
normalises e over b's positions, w_ba normalises the same e over a's positions (Parikh et al.,
2016, eq. 2; Chen et al., 2017, eq. 12-13).

`soft_align` is the pure function of one example; `SoftAlignment` is the module that owns the
score's parameters (any of zoo.SCORE_NAMES; 'dot' is the papers' choice) and maps the function over
the batch.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoo import checks
from zoo import masking
from zoo import scoring

Dtype = Any


class Alignment(NamedTuple):
  """Both directions of a soft alignment (shapes of one example; a batch adds a leading B).

  Attributes:
    b_for_a: (La, Dv), for each position of a the weighted average of b's values.
    a_for_b: (Lb, Dv), for each position of b the weighted average of a's values.
    a_to_b: (La, Lb), the weights of b_for_a (rows of valid a positions sum to 1, others 0).
    b_to_a: (Lb, La), the weights of a_for_b.
  """
  b_for_a: jax.Array
  a_for_b: jax.Array
  a_to_b: jax.Array
  b_to_a: jax.Array


def soft_align(scores: jax.Array, a_values: jax.Array, b_values: jax.Array,
               a_len: jax.Array | int, b_len: jax.Array | int) -> Alignment:
  """Aligns two sequences of one example from their pairwise scores.

  Args:
    scores: float (La, Lb), e[i, j] = score(a_i, b_j).
    a_values: float (La, Dv), what b's positions average over a (usually a itself).
    b_values: float (Lb, Dv), what a's positions average over b.
    a_len: int scalar, the number of valid positions of a (0 <= a_len <= La).
    b_len: int scalar, the number of valid positions of b.

  Returns:
    An Alignment: b_for_a (La, Dv), a_for_b (Lb, Dv), a_to_b (La, Lb), b_to_a (Lb, La), in the
    dtype of the scores (the softmax itself runs in float32).
  """
  num_a, num_b = scores.shape
  a_valid = jnp.arange(num_a) < a_len  # (La,)
  b_valid = jnp.arange(num_b) < b_len  # (Lb,)
  pair_valid = a_valid[:, None] & b_valid[None, :]  # (La, Lb)
  a_to_b = masking.softmax_where(scores, pair_valid)  # (La, Lb), over b
  b_to_a = masking.softmax_where(scores.T, pair_valid.T)  # (Lb, La), over a
  b_for_a = a_to_b @ jnp.asarray(b_values, a_to_b.dtype)  # (La, Dv)
  a_for_b = b_to_a @ jnp.asarray(a_values, b_to_a.dtype)  # (Lb, Dv)
  return Alignment(b_for_a, a_for_b, a_to_b, b_to_a)


class SoftAlignment(nn.Module):
  """Soft alignment of a batch of sequence pairs, with a selectable score.

  `SoftAlignment(score='dot')(a (B, La, D), b (B, Lb, D), a_len (B,), b_len (B,))` returns an
  Alignment with a leading batch axis: b_for_a (B, La, D), a_for_b (B, Lb, D), a_to_b
  (B, La, Lb), b_to_a (B, Lb, La). The values averaged are a and b themselves, unless
  `a_values` / `b_values` are given (decomposable attention scores F(a), F(b) and averages the
  embeddings a, b).

  Attributes:
    score: one of zoo.SCORE_NAMES; 'dot' (the default) is e_ij = a_i . b_j, as in both papers.
    score_features: the hidden size of the 'additive' and 'concat' scores (None: D).
    dtype: the dtype of the computation.
    param_dtype: the dtype the score parameters are stored in.
  """
  score: str = "dot"
  score_features: int | None = None
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, a: jax.Array, b: jax.Array, a_len: jax.Array, b_len: jax.Array, *,
               a_values: jax.Array | None = None,
               b_values: jax.Array | None = None) -> Alignment:
    """Scores a against b and aligns both ways (see the module docstring for the shapes)."""
    for array, name in [(a, "a"), (b, "b")]:
      checks.rank(array, 3, name)
      checks.floating(array, name)
    checks.equal_dim(a, "a", 0, b, "b", 0)
    a_values = a if a_values is None else a_values
    b_values = b if b_values is None else b_values
    for array, name, like, like_name in [(a_values, "a_values", a, "a"),
                                         (b_values, "b_values", b, "b")]:
      checks.rank(array, 3, name)
      checks.equal_dim(array, name, 0, like, like_name, 0)
      checks.equal_dim(array, name, 1, like, like_name, 1)
    checks.equal_dim(a_values, "a_values", 2, b_values, "b_values", 2)
    for lens, name, seq in [(a_len, "a_len", a), (b_len, "b_len", b)]:
      checks.rank(lens, 1, name)
      checks.integer(lens, name)
      checks.equal_dim(lens, name, 0, a, "a", 0)
      checks.lengths_in_range(lens, name, seq.shape[1])
    scorer = scoring.make_score(self.score, features=self.score_features, dtype=self.dtype,
                                param_dtype=self.param_dtype, name="scorer")
    if scoring.score_class(self.score).requires_equal_widths:
      checks.equal_dim(a, "a", 2, b, "b", 2)
    scores = scorer(jnp.asarray(a, self.dtype), jnp.asarray(b, self.dtype))  # (B, La, Lb)
    return jax.vmap(soft_align)(scores, jnp.asarray(a_values, self.dtype),
                                jnp.asarray(b_values, self.dtype), a_len, b_len)
