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

from zoo import batching
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
               a_len: jax.Array | int, b_len: jax.Array | int, *,
               mask: jax.Array | None = None) -> Alignment:
  """Aligns two sequences of one example from their pairwise scores.

  Args:
    scores: float (La, Lb), e[i, j] = score(a_i, b_j).
    a_values: float (La, Dv), what b's positions average over a (usually a itself).
    b_values: float (Lb, Dv), what a's positions average over b.
    a_len: int scalar, the number of valid positions of a (0 <= a_len <= La).
    b_len: int scalar, the number of valid positions of b.
    mask: optional bool broadcastable to (La, Lb), True where a_i and b_j may be aligned; ANDed
      with the pairs of valid positions.

  Returns:
    An Alignment: b_for_a (La, Dv), a_for_b (Lb, Dv), a_to_b (La, Lb), b_to_a (Lb, La), in the
    dtype of the scores (the softmax itself runs in float32).
  """
  num_a, num_b = scores.shape
  a_valid = jnp.arange(num_a) < a_len  # (La,)
  b_valid = jnp.arange(num_b) < b_len  # (Lb,)
  pair_valid = a_valid[:, None] & b_valid[None, :]  # (La, Lb)
  if mask is not None:
    pair_valid = pair_valid & mask
  a_to_b = masking.softmax_where(scores, pair_valid)  # (La, Lb), over b
  b_to_a = masking.softmax_where(scores.T, pair_valid.T)  # (Lb, La), over a
  b_for_a = a_to_b @ jnp.asarray(b_values, a_to_b.dtype)  # (La, Dv)
  a_for_b = b_to_a @ jnp.asarray(a_values, b_to_a.dtype)  # (Lb, Dv)
  return Alignment(b_for_a, a_for_b, a_to_b, b_to_a)


class SoftAlignment(nn.Module):
  """Soft alignment of a batch of sequence pairs, with a selectable score.

  `SoftAlignment(score='dot')(a (*batch, La, D), b (*batch, Lb, D), valid_lens=(a_len, b_len))`
  returns an Alignment with the leading batch axes: b_for_a (*batch, La, D), a_for_b
  (*batch, Lb, D), a_to_b (*batch, La, Lb), b_to_a (*batch, Lb, La); any leading batch shape,
  none included. The values averaged are a and b themselves, unless `a_values` / `b_values` are
  given (decomposable attention scores F(a), F(b) and averages the embeddings a, b).

  Attributes:
    score: one of zoo.SCORE_NAMES; 'dot' (the default) is e_ij = a_i . b_j, as in both papers.
    score_features: the hidden size of the 'additive' and 'concat' scores (None: D).
    dtype: the dtype of the computation; None (the default) computes in the promoted type of the
      inputs and parameters (flax's rule). The softmax runs in float32 whatever the dtype.
    param_dtype: the dtype the score parameters are stored in.
  """
  score: str = "dot"
  score_features: int | None = None
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, a: jax.Array, b: jax.Array, *,
               valid_lens: tuple[jax.Array | None, jax.Array | None] | None = None,
               mask: jax.Array | None = None, a_values: jax.Array | None = None,
               b_values: jax.Array | None = None) -> Alignment:
    """Scores a against b and aligns both ways (see the module docstring for the shapes).

    Args:
      a: float (*batch, La, D).
      b: float (*batch, Lb, Db) (Db = D for the 'dot' and 'scaled_dot' scores).
      valid_lens: None (all positions valid) or the pair (a_len, b_len), each int (*batch,) or
        None: the valid positions of a and of b.
      mask: optional bool broadcastable to (*batch, La, Lb), True where a_i and b_j may be
        aligned. Given both, a pair is aligned iff both allow it (zoo.masking.key_mask's rule).
      a_values: float (*batch, La, Dv), what b's positions average over a (default a).
      b_values: float (*batch, Lb, Dv), what a's positions average over b (default b).

    Returns:
      An Alignment (see the class docstring).
    """
    lead = batching.leading_shape(a, 2, "a")
    a_values = a if a_values is None else a_values
    b_values = b if b_values is None else b_values
    for array, name in [(a, "a"), (b, "b"), (a_values, "a_values"), (b_values, "b_values")]:
      batching.same_leading(array, name, 2, lead, "a")
      checks.floating(array, name)
    checks.equal_dim(a_values, "a_values", -2, a, "a", -2)
    checks.equal_dim(b_values, "b_values", -2, b, "b", -2)
    checks.equal_dim(a_values, "a_values", -1, b_values, "b_values", -1)
    num_a, num_b = a.shape[-2], b.shape[-2]
    a_len, b_len = _length_pair(valid_lens)
    a_len = batching.fold_lengths(a_len, lead, (), "valid_lens[0] (a_len)", batching.BATCH_AXES)
    b_len = batching.fold_lengths(b_len, lead, (), "valid_lens[1] (b_len)", batching.BATCH_AXES)
    mask = batching.fold_mask(mask, lead, (num_a, num_b), "mask",
                              "the scores (*batch, La, Lb) =")
    a, b, a_values, b_values = (batching.fold(x, lead) for x in (a, b, a_values, b_values))
    batch = a.shape[0]
    for lens, name, steps in [(a_len, "valid_lens[0] (a_len)", num_a),
                              (b_len, "valid_lens[1] (b_len)", num_b)]:
      checks.lengths_in_range(lens, name, steps)
    a_len = jnp.full((batch,), num_a, jnp.int32) if a_len is None else a_len
    b_len = jnp.full((batch,), num_b, jnp.int32) if b_len is None else b_len
    scorer = scoring.make_score(self.score, features=self.score_features, dtype=self.dtype,
                                param_dtype=self.param_dtype, name="scorer")
    if scoring.score_class(self.score).requires_equal_widths:
      checks.equal_dim(a, "a", 2, b, "b", 2)
    scores = scorer(*nn.dtypes.promote_dtype(a, b, dtype=self.dtype))  # (B, La, Lb)
    a_values, b_values, _ = nn.dtypes.promote_dtype(a_values, b_values, scores,
                                                    dtype=self.dtype)
    align = lambda s, av, bv, al, bl, m: soft_align(s, av, bv, al, bl, mask=m)
    mask_axis = None if mask is None or mask.shape[0] == 1 else 0
    mask = None if mask is None else (mask[0] if mask_axis is None else mask)
    aligned = jax.vmap(align, in_axes=(0, 0, 0, 0, 0, mask_axis))(
        scores, a_values, b_values, a_len,
        b_len, mask)
    return batching.unfold(aligned, lead)


def _length_pair(valid_lens) -> tuple[jax.Array | None, jax.Array | None]:
  """valid_lens of SoftAlignment: None or a pair (a_len, b_len) -> the pair."""
  if valid_lens is None:
    return None, None
  if not isinstance(valid_lens, (tuple, list)) or len(valid_lens) != 2:
    raise ValueError(f"valid_lens: expected the pair (a_len, b_len) of the two sequences' "
                     f"lengths, got {type(valid_lens).__name__}")
  return valid_lens[0], valid_lens[1]
