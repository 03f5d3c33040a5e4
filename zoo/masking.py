"""Masks and the masked softmax.

Conventions used throughout the zoo:
  * A mask is boolean and True means "may attend".
  * Masks are built once at the top of a model (from `valid_lens` or token ids) and passed down.
  * Every module whose inputs can be padded takes the same two keyword-only arguments, combined by
    one rule (`key_mask`): `valid_lens=` (int lengths: key j of a row may be attended iff
    j < its length) and `mask=` (bool, True = may attend); given both, a key may be attended iff
    both allow it (the AND of `mask` and the mask the lengths make). Neither: attend everywhere.
  * Masked scores are filled with the most negative finite float32 (`jnp.finfo(jnp.float32).min`),
    never a literal such as -1e6, the softmax runs in float32, and the weights are cast back to the
    dtype of the scores. A row with nothing to attend to gets all-zero weights, never NaN, in every
    dtype (float32, bfloat16, float16), and its gradient is finite (zero).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoo import checks


def sequence_mask(lengths: jax.Array, max_len: int) -> jax.Array:
  """Marks the valid positions of padded sequences.

  Args:
    lengths: int array (...,), e.g. (B,), the number of valid positions of each sequence.
    max_len: the padded length L.

  Returns:
    bool (..., L): `mask[..., i] = i < lengths[...]`. Lengths outside [0, L] behave as if clipped
    (a concrete out-of-range length raises a ValueError).
  """
  checks.integer(lengths, "lengths")
  checks.lengths_in_range(lengths, "lengths", max_len)
  return jnp.arange(max_len) < jnp.asarray(lengths)[..., None]


def causal_mask(q_len: int, k_len: int | None = None, offset: int | jax.Array = 0) -> jax.Array:
  """Lower-triangular mask for autoregressive attention.

  Args:
    q_len: Q, the number of queries.
    k_len: K, the number of keys (defaults to Q).
    offset: the absolute position of query 0 (for a decoder that has already cached `offset` keys).

  Returns:
    bool (Q, K): query i may attend to key j iff j <= i + offset.
  """
  k_len = q_len if k_len is None else k_len
  return jnp.arange(k_len)[None, :] <= (jnp.arange(q_len)[:, None] + offset)


def key_padding_mask(valid_lens: jax.Array, k_len: int) -> jax.Array:
  """Turns per-example key lengths into a mask for multi-head scores.

  Args:
    valid_lens: int (B,), the number of valid keys per example.
    k_len: K.

  Returns:
    bool (B, 1, 1, K), broadcastable against multi-head scores (B, H, Q, K).
  """
  checks.rank(valid_lens, 1, "valid_lens")
  return sequence_mask(valid_lens, k_len)[:, None, None, :]


def combine_masks(*masks: jax.Array | None) -> jax.Array | None:
  """Logical AND of the masks that are not None, or None if all are None.

  Args:
    *masks: bool arrays (True = may attend) that broadcast together, e.g. key padding (B, 1, 1, K)
      and causal (1, 1, Q, K), or None.

  Returns:
    bool of their broadcast shape, e.g. (B, 1, Q, K); None when every mask is None.
  """
  present = [m for m in masks if m is not None]
  if not present:
    return None
  out = present[0]
  for m in present[1:]:
    out = jnp.logical_and(out, m)
  return out


def softmax_where(scores: jax.Array, mask: jax.Array | None = None) -> jax.Array:
  """Softmax over the last axis that gives exactly zero weight where `mask` is False.

  Args:
    scores: float (..., K).
    mask: bool broadcastable to `scores`, True = may attend; None attends everywhere.

  Returns:
    weights with the shape and dtype of `scores`; fully masked rows are all zeros.
  """
  checks.floating(scores, "scores")
  if mask is not None:
    checks.boolean(mask, "mask")
    checks.broadcastable(mask, "mask", scores.shape, "the scores")
  dtype = scores.dtype
  scores32 = scores.astype(jnp.float32)
  if mask is None:
    return jax.nn.softmax(scores32, axis=-1).astype(dtype)
  filled = jnp.where(mask, scores32, jnp.finfo(jnp.float32).min)
  # A fully masked row becomes a uniform softmax over equal fill values; zeroing it afterwards keeps
  # the result (and its gradient) finite where a -inf fill would produce NaN.
  weights = jnp.where(mask, jax.nn.softmax(filled, axis=-1), 0.0)
  return weights.astype(dtype)


def valid_lens_mask(valid_lens: jax.Array, rows_shape: tuple[int, ...], num_keys: int, *,
                    rows_desc: str = "the score rows") -> jax.Array:
  """Marks the first valid_lens keys of every score row (d2l's valid_lens semantics).

  Args:
    valid_lens: int array whose shape is a prefix of `rows_shape`, e.g. (B,) (one length per
      example, shared by its query rows) or (B, Q) (one length per query row) for rows (B, Q).
    rows_shape: the shape of the score rows, scores.shape[:-1].
    num_keys: K.
    rows_desc: how error messages name the rows.

  Returns:
    bool valid_lens.shape + (1,) * (missing row axes) + (K,), broadcastable to rows_shape + (K,):
    True where the key position is < the row's length.
  """
  checks.integer(valid_lens, "valid_lens")
  checks.shape_prefix(valid_lens, "valid_lens", rows_shape, f"{rows_desc} =")
  checks.lengths_in_range(valid_lens, "valid_lens", num_keys)
  lens = jnp.asarray(valid_lens)
  lens = lens.reshape(lens.shape + (1,) * (len(rows_shape) - lens.ndim))  # (..., 1...) rows
  return jnp.arange(num_keys) < lens[..., None]


def lengths_to_mask(valid_lens: jax.Array, batch: int, num_queries: int,
                    num_keys: int) -> jax.Array:
  """Turns `valid_lens` (B,) or (B, Q) into a boolean mask broadcastable to scores (B, Q, K).

  Args:
    valid_lens: int (B,), the number of valid keys of each example, or (B, Q), one per query row.
    batch: B.
    num_queries: Q.
    num_keys: K.

  Returns:
    bool (B, 1, K) for lengths (B,), or (B, Q, K) for lengths (B, Q); True = may attend.
  """
  checks.rank(valid_lens, {1, 2}, "valid_lens")
  return valid_lens_mask(valid_lens, (batch, num_queries), num_keys,
                         rows_desc="the score rows (B, Q)")


def masked_softmax(scores: jax.Array, valid_lens: jax.Array | None = None) -> jax.Array:
  """Softmax over the last axis keeping only the first `valid_lens` keys (d2l's masked_softmax).

  Args:
    scores: float (B, K) or (B, Q, K); any number of leading axes (..., K) is accepted.
    valid_lens: None (attend to all K keys), int (B,) (one length per example, shared by all its
      query rows), or int (B, Q) (one length per query row). In general, its shape is a prefix of
      `scores.shape[:-1]` and it broadcasts over the remaining row axes.

  Returns:
    weights with the shape and dtype of `scores`; entries at key positions >= valid_len are exactly
    0, and a row with valid_len 0 is all zeros (d2l would give a uniform row there).
  """
  checks.floating(scores, "scores")
  checks.min_rank(scores, 1, "scores")
  if valid_lens is None:
    return softmax_where(scores)
  rows_desc = "the score rows scores.shape[:-1]"
  return softmax_where(scores, valid_lens_mask(valid_lens, scores.shape[:-1], scores.shape[-1],
                                               rows_desc=rows_desc))


def key_mask(valid_lens: jax.Array | None, mask: jax.Array | None,
             scores_shape: tuple[int, ...], *, heads: bool = False) -> jax.Array | None:
  """The zoo's one rule for `valid_lens=` and `mask=`: the AND of `mask` and the lengths' mask.

  Args:
    valid_lens: None, or int lengths whose shape is a prefix of the score rows (B,) or (B, Q)
      (without the head axis): key j of a row may be attended iff j < the row's length.
    mask: None, or bool broadcastable to `scores_shape`, True = may attend.
    scores_shape: the scores' shape, (B, ..., K), or (B, H, Q, K) with `heads`.
    heads: whether axis 1 of the scores is the head axis (the lengths are shared by the heads).

  Returns:
    bool broadcastable to `scores_shape`, True where both allow attending; `mask` when valid_lens
    is None; None when both are None (attend everywhere).
  """
  scores_shape = tuple(scores_shape)
  if mask is not None:
    checks.boolean(mask, "mask")
    checks.broadcastable(mask, "mask", scores_shape, "the scores")
  if valid_lens is None:
    return mask
  rows = scores_shape[:1] + scores_shape[2:-1] if heads else scores_shape[:-1]
  lens_mask = valid_lens_mask(valid_lens, rows, scores_shape[-1])  # (B, ..., K)
  if heads:
    lens_mask = lens_mask[:, None]  # (B, 1, ..., K), shared by the heads
  return combine_masks(lens_mask, mask)


def prefix_lengths(valid_lens: jax.Array | None, mask: jax.Array | None,
                   num_steps: int) -> jax.Array | None:
  """`key_mask`'s rule for a recurrent encoder, which reads a prefix of each sequence: lengths.

  Args:
    valid_lens: None or int (B,), the real steps of each sequence.
    mask: None or bool (B, L) (or broadcastable to it), True at real steps; each row must be True
      then False (a prefix; checked when concrete), since a recurrent state runs through the
      steps in order.
    num_steps: L.

  Returns:
    int32 (B,) (or (1,) for a mask shared by the batch), the steps both allow:
    min(valid_lens, the mask's count of True); None when both are None.
  """
  if mask is None:
    return None if valid_lens is None else jnp.asarray(valid_lens)
  checks.boolean(mask, "mask")
  mask = jnp.asarray(mask)
  if mask.ndim != 2 or mask.shape[-1] != num_steps:
    raise ValueError(f"mask: expected bool (B, L) with L = {num_steps} (True at real steps), got "
                     f"shape {mask.shape}")
  counts = jnp.sum(mask, axis=-1, dtype=jnp.int32)  # (B,)
  if checks.is_concrete(mask):
    prefix = jnp.arange(num_steps) < counts[:, None]
    if not bool(jnp.array_equal(mask, prefix)):
      raise ValueError("mask: a recurrent encoder reads a prefix of each sequence, so every row "
                       "of its mask must be True at the first steps and False after them")
  if valid_lens is None:
    return counts
  return jnp.minimum(jnp.asarray(valid_lens), counts)
