"""What zoo.search may choose at each position: exact lengths, forced tokens and banned tokens.

Three optional per-row constraints, all given for the B rows of a search over T = max_len steps:

  exact_lens     int (B,) in [0, T]: row b gets exactly exact_lens[b] tokens before eos (eos is
                 forbidden before that position and the only choice at it).
  forced_tokens  int (B, T): forced_tokens[b, t] >= 0 is the only id row b may take at position t;
                 -1 leaves the position free.
  banned_tokens  int (B, T) or (B, T, K): ids row b may not take at position t (K of them per
                 position; (B, T) is K = 1); -1 fills the unused slots.

At position t of row b the allowed ids are, with L = exact_lens[b] (L = infinity without it):

  t >= L                            {eos}
  t < L and forced_tokens[b, t] >= 0  {forced_tokens[b, t]}, without eos if L is given
  t < L otherwise                     every id but the banned ones, without eos if L is given

So a forced id overrides a ban at its position, and the length overrides both. A position where
nothing is allowed (a forced eos before exact_lens[b], or a forced id outside the vocabulary) makes
the hypothesis impossible: its score is -inf. A banned id outside the vocabulary bans nothing.
The forced-eos conflict and ids below -1 are errors when the arrays are concrete; under jit the
values are not known and the rules above apply as stated.

The constraints only restrict the choice: the log-probabilities added to a hypothesis stay those
of the unconstrained model, so every hypothesis of a row is scored on the same scale (all beams
take the forced token at a forced position, each with its own log-probability of it).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from zoo import checks


class Constraints(NamedTuple):
  """The constraints of one search (see the module docstring); None = not given.

  Attributes:
    exact_lens: None or int32 (B,).
    forced_tokens: None or int32 (B, T).
    banned_tokens: None or int32 (B, T, K).
  """
  exact_lens: jax.Array | None = None
  forced_tokens: jax.Array | None = None
  banned_tokens: jax.Array | None = None


_RANKS = {"exact_lens": 1, "forced_tokens": 2, "banned_tokens": (2, 3)}


def check_types(constraints: Constraints) -> None:
  """Checks that each given constraint is an integer array of its rank.

  Raises:
    ValueError: naming the argument.
  """
  for name, x in zip(Constraints._fields, constraints):
    if x is not None:
      checks.integer(x, name)
      checks.rank(x, _RANKS[name], name)


def check(constraints: Constraints, batch: int, max_len: int, eos_id: int) -> None:
  """Checks shapes (B = batch, T = max_len) and, when concrete, values (after `check_types`).

  Raises:
    ValueError: naming the argument, for a wrong shape, exact_lens outside [0, T], token ids below
      -1, or a forced eos before exact_lens.
  """
  exact_lens, forced, banned = constraints
  if exact_lens is not None:
    checks.lengths_in_range(exact_lens, "exact_lens", max_len)
  for name, ids in (("forced_tokens", forced), ("banned_tokens", banned)):
    if ids is None:
      continue
    if tuple(np.shape(ids)[:2]) != (batch, max_len):
      raise ValueError(f"{name}: expected shape (B, max_len) = ({batch}, {max_len})"
                       f"{' or (B, max_len, K)' if name == 'banned_tokens' else ''}, got shape "
                       f"{tuple(np.shape(ids))}")
    if checks.is_concrete(ids) and np.size(ids) and np.min(ids) < -1:
      first = tuple(int(i) for i in np.argwhere(np.asarray(ids) < -1)[0])
      raise ValueError(f"{name}: token ids must be >= -1 (-1 = none), got {np.min(ids)} (the "
                       f"first below -1 at index {first})")
  if (forced is not None and exact_lens is not None and checks.is_concrete(forced)
      and checks.is_concrete(exact_lens)):
    before_end = np.arange(max_len)[None, :] < np.asarray(exact_lens)[:, None]  # (B, T)
    conflicts = np.argwhere((np.asarray(forced) == eos_id) & before_end)
    if conflicts.size:
      b, t = (int(i) for i in conflicts[0])
      raise ValueError(f"forced_tokens forces eos (id {eos_id}) at position {t} of row {b}, "
                       f"before exact_lens[{b}] = {int(np.asarray(exact_lens)[b])}: no token "
                       f"could be chosen there")


def prepare(constraints: Constraints) -> Constraints:
  """int32 arrays, banned_tokens with its K axis ((B, T) becomes (B, T, 1))."""
  exact_lens, forced, banned = (None if x is None else jnp.asarray(x, jnp.int32)
                                for x in constraints)
  if banned is not None and banned.ndim == 2:
    banned = banned[:, :, None]
  return Constraints(exact_lens, forced, banned)


def allowed_tokens(constraints: Constraints, t: jax.Array, vocab: int,
                   eos_id: int) -> jax.Array | None:
  """bool (B, V): the ids each row may take at position t; None when nothing is constrained.

  Args:
    constraints: prepared Constraints (see `prepare`).
    t: int32 scalar, the position being filled (may be traced).
    vocab: V, the number of ids.
    eos_id: the end-of-sequence id.
  """
  exact_lens, forced, banned = constraints
  if exact_lens is None and forced is None and banned is None:
    return None
  ids = jnp.arange(vocab)  # (V,)
  rows = next(x.shape[0] for x in constraints if x is not None)
  allowed = jnp.ones((rows, vocab), bool)
  if banned is not None:
    banned_now = jax.lax.dynamic_index_in_dim(banned, t, axis=1, keepdims=False)  # (B, K)
    # -1 and ids >= V are sent past the end of the row, where mode="drop" discards them.
    banned_now = jnp.where((banned_now >= 0) & (banned_now < vocab), banned_now, vocab)
    row_index = jnp.broadcast_to(jnp.arange(rows)[:, None], banned_now.shape)
    allowed = allowed.at[row_index, banned_now].set(False, mode="drop")
  if forced is not None:
    forced_now = jax.lax.dynamic_index_in_dim(forced, t, axis=1, keepdims=False)  # (B,)
    allowed = jnp.where((forced_now >= 0)[:, None], ids == forced_now[:, None], allowed)
  if exact_lens is not None:
    at_end = (t >= exact_lens)[:, None]  # (B, 1)
    allowed = jnp.where(at_end, ids == eos_id, allowed & (ids != eos_id))
  return allowed
