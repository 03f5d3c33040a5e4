"""What zoo.search may choose at each position: exact lengths, forced, banned, tied and distinct
tokens.

Five optional per-row constraints, all given for the B rows of a search over T = max_len steps:

  exact_lens     int (B,) in [0, T]: row b gets exactly exact_lens[b] tokens before eos (eos is
                 forbidden before that position and the only choice at it).
  forced_tokens  int (B, T): forced_tokens[b, t] >= 0 is the only id row b may take at position t;
                 -1 leaves the position free.
  banned_tokens  int (B, T) or (B, T, K): ids row b may not take at position t (K of them per
                 position; (B, T) is K = 1); -1 fills the unused slots.
  tied_positions int (B, T): tied_positions[b, t] = s in [0, t) makes every hypothesis of row b
                 repeat at position t its own token of position s; -1 leaves t free.
  distinct_positions
                 bool (B, T): at a position t with distinct_positions[b, t], a hypothesis may not
                 take any token it took at an earlier position s with distinct_positions[b, s].

The last two read each hypothesis's own earlier tokens; together they give a line a repetition
pattern: a couplet's lower line repeats a character exactly where the upper line does (tie each
repeat to its first occurrence, mark every character position distinct), so 风风雨雨 is answered
by 年年岁岁 and a line without repeats gets none.

At position t of row b the allowed ids are, with L = exact_lens[b] (L = infinity without it) and
y_s the hypothesis's token at position s < t:

  t >= L                              {eos}
  t < L and forced_tokens[b, t] >= 0  {forced_tokens[b, t]}
  t < L and tied_positions[b, t] = s  {y_s}
  t < L otherwise                     every id but the banned ones, and, when
                                      distinct_positions[b, t], but {y_s: s < t and
                                      distinct_positions[b, s]}
  without eos in the last three rows when L is given.

So a forced id overrides a tie, a tie overrides the bans, and the length overrides everything. A
position where nothing is allowed (a forced eos before exact_lens[b], a forced id outside the
vocabulary, or a distinct position after every id was used) makes the hypothesis impossible: its
score is -inf. A banned id outside the vocabulary bans nothing. The forced-eos conflict, ids below
-1 and ties to positions at or after their own are errors when the arrays are concrete; under jit
the values are not known, the rules above apply as stated, and a tie to a position s >= t leaves
t free.

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
    tied_positions: None or int32 (B, T).
    distinct_positions: None or bool (B, T).
  """
  exact_lens: jax.Array | None = None
  forced_tokens: jax.Array | None = None
  banned_tokens: jax.Array | None = None
  tied_positions: jax.Array | None = None
  distinct_positions: jax.Array | None = None

  @property
  def reads_prefix(self) -> bool:
    """Whether the allowed ids depend on each hypothesis's earlier tokens."""
    return self.tied_positions is not None or self.distinct_positions is not None


_RANKS: dict[str, int | tuple[int, ...]] = {
    "exact_lens": 1, "forced_tokens": 2, "banned_tokens": (2, 3), "tied_positions": 2,
    "distinct_positions": 2}


def check_types(constraints: Constraints) -> None:
  """Checks that each given constraint is an array of its dtype (bool for distinct_positions,
  integers for the others) and rank.

  Raises:
    ValueError: naming the argument.
  """
  for name, x in zip(Constraints._fields, constraints):
    if x is None:
      continue
    if name == "distinct_positions":
      if jnp.result_type(x) != jnp.bool_:
        raise ValueError(f"distinct_positions must be a bool array, got dtype "
                         f"{jnp.result_type(x)}")
    else:
      checks.integer(x, name)
    checks.rank(x, _RANKS[name], name)


def check(constraints: Constraints, batch: int, max_len: int, eos_id: int) -> None:
  """Checks shapes (B = batch, T = max_len) and, when concrete, values (after `check_types`).

  Raises:
    ValueError: naming the argument, for a wrong shape, exact_lens outside [0, T], token ids or
      positions below -1, a tie to a position at or after its own, or a forced eos before
      exact_lens.
  """
  exact_lens, forced, banned, tied, distinct = constraints
  if exact_lens is not None:
    checks.lengths_in_range(exact_lens, "exact_lens", max_len)
  for name, ids in (("forced_tokens", forced), ("banned_tokens", banned),
                    ("tied_positions", tied), ("distinct_positions", distinct)):
    if ids is None:
      continue
    if tuple(np.shape(ids)[:2]) != (batch, max_len) or (
        name != "banned_tokens" and np.ndim(ids) != 2):
      raise ValueError(f"{name}: expected shape (B, max_len) = ({batch}, {max_len})"
                       f"{' or (B, max_len, K)' if name == 'banned_tokens' else ''}, got shape "
                       f"{tuple(np.shape(ids))}")
    if name == "distinct_positions":
      continue
    what = "positions" if name == "tied_positions" else "token ids"
    if checks.is_concrete(ids) and np.size(ids) and np.min(ids) < -1:
      first = tuple(int(i) for i in np.argwhere(np.asarray(ids) < -1)[0])
      raise ValueError(f"{name}: {what} must be >= -1 (-1 = none), got {np.min(ids)} (the "
                       f"first below -1 at index {first})")
  if tied is not None and checks.is_concrete(tied):
    late = np.argwhere(np.asarray(tied) >= np.arange(max_len)[None, :])
    if late.size:
      b, t = (int(i) for i in late[0])
      raise ValueError(f"tied_positions[{b}, {t}] = {int(np.asarray(tied)[b, t])}: a position "
                       f"can only repeat an earlier one (a value in [0, {t}), or -1)")
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
  """int32 arrays (distinct_positions bool), banned_tokens with its K axis ((B, T) becomes
  (B, T, 1))."""
  exact_lens, forced, banned, tied, distinct = (
      None if x is None else jnp.asarray(x, jnp.int32) for x in constraints)
  if banned is not None and banned.ndim == 2:
    banned = banned[:, :, None]
  if distinct is not None:
    distinct = distinct.astype(bool)
  return Constraints(exact_lens, forced, banned, tied, distinct)


def _ban(allowed: jax.Array, ids: jax.Array) -> jax.Array:
  """allowed bool (B, W, V) with ids int (B, W, K) set to False; ids < 0 or >= V ban nothing."""
  rows, width, vocab = allowed.shape
  # Ids outside [0, V) are sent past the end of the row, where mode="drop" discards them.
  ids = jnp.where((ids >= 0) & (ids < vocab), ids, vocab)
  row_index = jnp.broadcast_to(jnp.arange(rows)[:, None, None], ids.shape)
  beam_index = jnp.broadcast_to(jnp.arange(width)[None, :, None], ids.shape)
  return allowed.at[row_index, beam_index, ids].set(False, mode="drop")


def allowed_tokens(constraints: Constraints, t: jax.Array, vocab: int, eos_id: int,
                   prefix: jax.Array | None = None) -> jax.Array | None:
  """bool (B, V), or (B, W, V) with tied or distinct positions: the ids each row (each
  hypothesis) may take at position t; None when nothing is constrained.

  Args:
    constraints: prepared Constraints (see `prepare`).
    t: int32 scalar, the position being filled (may be traced).
    vocab: V, the number of ids.
    eos_id: the end-of-sequence id.
    prefix: int (B, W, T), the tokens of the W hypotheses of each row (positions < t are read);
      needed when constraints.reads_prefix.
  """
  exact_lens, forced, banned, tied, distinct = constraints
  if all(x is None for x in constraints):
    return None
  if constraints.reads_prefix and prefix is None:
    raise ValueError("tied_positions and distinct_positions need the hypotheses' tokens (prefix)")
  ids = jnp.arange(vocab)  # (V,)
  rows = next(x.shape[0] for x in constraints if x is not None)
  width = prefix.shape[1] if prefix is not None and constraints.reads_prefix else 1
  at = lambda x: jax.lax.dynamic_index_in_dim(x, t, axis=1, keepdims=False)
  allowed = jnp.ones((rows, width, vocab), bool)
  if banned is not None:
    allowed = _ban(allowed, jnp.broadcast_to(at(banned)[:, None, :], (rows, width,
                                                                       banned.shape[-1])))
  if distinct is not None and prefix is not None:  # a prefix is there: checked above
    earlier = distinct & (jnp.arange(prefix.shape[-1]) < t) & at(distinct)[:, None]  # (B, T)
    allowed = _ban(allowed, jnp.where(earlier[:, None, :], prefix, -1))
  if tied is not None and prefix is not None:
    source = at(tied)  # (B,)
    repeated = jnp.take_along_axis(prefix, jnp.clip(source, 0)[:, None, None], axis=2)  # (B, W, 1)
    allowed = jnp.where(((source >= 0) & (source < t))[:, None, None], ids == repeated, allowed)
  if forced is not None:
    forced_now = at(forced)[:, None, None]  # (B, 1, 1)
    allowed = jnp.where(forced_now >= 0, ids == forced_now, allowed)
  if exact_lens is not None:
    at_end = (t >= exact_lens)[:, None, None]  # (B, 1, 1)
    allowed = jnp.where(at_end, ids == eos_id, allowed & (ids != eos_id))
  return allowed if constraints.reads_prefix else allowed[:, 0]
