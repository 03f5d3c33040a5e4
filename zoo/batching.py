"""Any leading batch shape: fold the leading axes of a module's inputs into one, and back.

Every zoo module whose flax counterpart takes any number of leading batch axes does too (as
flax.linen.MultiHeadDotProductAttention does): `x` of shape (*batch, L, D), `*batch` being any
number of axes, none included. The module folds `*batch` into one axis B (a reshape, no copy),
runs its (B, L, D) code and unfolds its outputs to (*batch, ...). So `module.apply(v, x[0])`
(one example, no batch axis) equals `module.apply(v, x)[0]`, and two batch axes (N, B, L, D) equal
the batched call on (N * B, L, D).

A per-example argument (lengths, masks) is folded with the same leading axes: lengths of shape
(*batch,) (or (*batch, Q)) become (B,) (or (B, Q)); a mask broadcastable to (*batch, *core) becomes
(B or 1, *core): one row per example when it differs between examples, else a single shared row
(a causal mask (Q, K) is not copied per example).
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from zoo import checks

Shape = tuple[int, ...]
BATCH_AXES = "the batch axes (*batch,) ="  # how errors name the batch axes of lengths (*batch,)


def leading_shape(x, core_rank: int, name: str) -> Shape:
  """The batch axes of `x`: its shape without the last `core_rank` axes (the per-example axes).

  Raises a ValueError naming `name` if `x` has fewer than `core_rank` axes.
  """
  checks.min_rank(x, core_rank, name)
  return tuple(np.shape(x))[:np.ndim(x) - core_rank]


def same_leading(x, name: str, core_rank: int, lead: Shape, lead_name: str) -> None:
  """Raises a ValueError unless `x` (rank len(lead) + core_rank) has the batch axes `lead`."""
  if np.ndim(x) != len(lead) + core_rank or tuple(np.shape(x))[:len(lead)] != tuple(lead):
    raise ValueError(f"{name}: expected the batch axes {tuple(lead)} of {lead_name} followed by "
                     f"{core_rank} per-example axes, got shape {tuple(np.shape(x))}")


def fold(x: jax.Array, lead: Shape) -> jax.Array:
  """(*lead, *core) -> (B, *core) with B = prod(lead) (1 when lead is ())."""
  x = jnp.asarray(x)
  return x.reshape((math.prod(lead),) + x.shape[len(lead):])  # not -1: an axis may be empty


def unfold(tree, lead: Shape):
  """(B, *rest) -> (*lead, *rest) for every array of a pytree (outputs, states, NamedTuples)."""
  return jax.tree.map(lambda y: y.reshape(tuple(lead) + y.shape[1:]), tree)


def fold_lengths(lengths: jax.Array | None, lead: Shape, rows: Sequence[int], name: str,
                 rows_desc: str = "the score rows (*batch, Q) =") -> jax.Array | None:
  """Folds per-row lengths whose shape is a prefix of (*lead, *rows).

  Args:
    lengths: int, shape a prefix of lead + rows: (*lead,) (one per example), (*lead, Q) (one per
      query row), or a shorter prefix (broadcast over the remaining batch axes); or None.
    lead: the batch axes.
    rows: the per-example row axes the lengths may also index, e.g. (Q,).
    name: the argument's name, for errors.
    rows_desc: how errors name the axes (*lead, *rows).

  Returns:
    int (B, *rest) where rest is what `lengths` indexes of `rows`; None for None.
  """
  if lengths is None:
    return None
  checks.integer(lengths, name)
  full = tuple(lead) + tuple(rows)
  checks.shape_prefix(lengths, name, full, rows_desc)
  lengths = jnp.asarray(lengths)
  if lengths.ndim < len(lead):
    short = lengths.reshape(lengths.shape + (1,) * (len(lead) - lengths.ndim))
    lengths = jnp.broadcast_to(short, tuple(lead))
  return fold(lengths, lead)


def fold_mask(mask: jax.Array | None, lead: Shape, core: Sequence[int], name: str,
              core_desc: str) -> jax.Array | None:
  """Folds a boolean mask broadcastable to (*lead, *core) into one broadcastable to (B, *core).

  Args:
    mask: bool, True = may attend; None passes through.
    lead: the batch axes.
    core: the per-example axes of what it masks, e.g. (Q, K) or (H, Q, K).
    name: the argument's name, for errors.
    core_desc: how errors name the masked array, e.g. "the scores (..., Q, K) =".

  Returns:
    bool (B, *c) where every c broadcasts to core: (1, *c) when the mask is the same for every
    example (no copy), else one row per example.
  """
  if mask is None:
    return None
  full = tuple(lead) + tuple(core)
  checks.boolean(mask, name)
  checks.broadcastable(mask, name, full, core_desc)
  mask = jnp.asarray(mask)
  mask = mask.reshape((1,) * (len(full) - mask.ndim) + mask.shape)  # rank of full
  batch_part = mask.shape[:len(lead)]
  if all(size == 1 for size in batch_part):
    return mask.reshape((1,) + mask.shape[len(lead):])
  return fold(jnp.broadcast_to(mask, tuple(lead) + mask.shape[len(lead):]), lead)
