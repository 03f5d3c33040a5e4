"""Greedy and beam search over any decoder that exposes a step function.

The step interface, which zoo's decoders (zoo.Transformer, zoo.Seq2Seq, zoo.BahdanauDecoder,
zoo.LuongDecoder) implement as their `decode_step` method, with `init_decode_state` building the
first state:

  step_fn(state, tokens) -> (logits, new_state)
    tokens: int32 (N,), the previous output token of each of N rows (N = B for greedy search,
      B * beam for beam search; bos_id on the first step).
    logits: float (N, V), unnormalized scores of the next token.
    state: any pytree. A leaf with a leading axis N belongs to the rows (it is tiled for the beams
      and reordered to follow the surviving beams); a leaf of rank 0 (e.g. a key/value-cache
      position) is shared by all rows and passed along untouched. `new_state` must have the same
      structure, shapes and dtypes as `state`.

A decoder built with Flax provides it by closing over its variables, e.g.
`lambda s, t: model.apply(variables, s, t, method=Model.decode_step)`.

Conventions shared by both searches:
  * Output tokens exclude bos. A sequence ends at the first eos, which is written at position
    `length` (when `length < max_len`); every position after it holds pad (0). `length` counts the
    tokens before eos. A sequence that never emits eos stops after `max_len` tokens with
    `length == max_len`.
  * Scores are sums of log-probabilities (log_softmax of the logits, in float32) of the emitted
    tokens, eos included when it was emitted.
  * Optional constraints (zoo.search_constraints has their exact rules) restrict which tokens may
    be chosen; the scores stay those of the unconstrained model:
      exact_lens (B,) int: eos is forbidden before position exact_lens[b] and forced at it, so
        every output has exactly exact_lens[b] tokens before eos (exact_lens[b] == max_len means
        max_len tokens and no eos);
      forced_tokens (B, max_len) int: the id to take at each position, -1 = free (couplets: the
        upper line's punctuation at its positions);
      banned_tokens (B, max_len) or (B, max_len, K) int: ids forbidden at each position, -1 =
        none (couplets: the upper line's character at the same position);
      tied_positions (B, max_len) int: the earlier position whose token each hypothesis repeats
        at each position, -1 = free, and distinct_positions (B, max_len) bool: positions whose
        tokens differ from those a hypothesis took at earlier distinct positions (couplets: the
        upper line's repetition pattern, 风风雨雨 answered by 年年岁岁).
    A forced id wins over a tie, a tie over the bans, the length over everything.

Both functions compile with `jax.jit` (step_fn, bos_id, eos_id, max_len and beam_size are static)
and run the time steps in a `lax.while_loop` that stops as soon as every row is finished. Repeated
calls with the same `step_fn` object and equal shapes reuse the compiled program. To decode batches
with new parameters without recompiling, call the search inside your own jitted function that
takes the parameters as an argument and builds `step_fn` there:

  @jax.jit
  def translate(variables, src):
    state = model.apply(variables, src, method=Model.init_decode_state)
    step = lambda s, t: model.apply(variables, s, t, method=Model.decode_step)
    return zoo.beam_search(step, state, beam_size=4, bos_id=2, eos_id=3, max_len=20)
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from zoo import checks
from zoo import search_constraints
from zoo.search_constraints import Constraints

State = Any
StepFn = Callable[[State, jax.Array], tuple[jax.Array, State]]

# The score of an impossible hypothesis. These are ranking scores, never fed to a softmax: -inf
# plus any log-probability stays -inf, so an impossible hypothesis can never outrank a real one
# (a finite fill such as finfo.min would overflow to -inf anyway once a log-probability is added,
# and then rank below the unextended fill).
_IMPOSSIBLE = -jnp.inf


class Decoded(NamedTuple):
  """Result of `greedy_search`.

  Attributes:
    tokens: int32 (B, max_len), the generated tokens (bos excluded); eos at position `lengths[b]`
      when it was emitted, pad (0) after it.
    lengths: int32 (B,), the number of tokens before eos (max_len if no eos was emitted).
    scores: float32 (B,), the sum of the log-probabilities of the emitted tokens, eos included.
  """
  tokens: jax.Array
  lengths: jax.Array
  scores: jax.Array


class Beams(NamedTuple):
  """Result of `beam_search`, hypotheses sorted best first along the beam axis.

  Attributes:
    tokens: int32 (B, beam, max_len), as in `Decoded.tokens`, for each hypothesis.
    lengths: int32 (B, beam), the number of tokens before eos.
    scores: float32 (B, beam), the ranking score: log_prob / ((5 + length) / 6) ** length_penalty,
      where log_prob is the sum of the log-probabilities of the emitted tokens (eos included).
      With length_penalty=0 this is log_prob itself. A score of -inf marks an empty slot (only
      possible when fewer than `beam` hypotheses exist, e.g. with a tiny vocabulary).
  """
  tokens: jax.Array
  lengths: jax.Array
  scores: jax.Array


def _length_normalizer(lengths: jax.Array, alpha: jax.Array) -> jax.Array:
  """GNMT's length penalty lp(L) = ((5 + L) / 6) ** alpha (Wu et al., 2016), float32."""
  return ((5.0 + jnp.asarray(lengths, jnp.float32)) / 6.0) ** alpha


# ---------------------------------------------------------------------------------------------
# Argument checks (run in Python on shapes and, when concrete, on values).


def _batch_size(init_state, constraints: Constraints) -> int:
  """B, the leading axis shared by every non-scalar leaf of init_state and the constraints."""
  batched = [(f"init_state{jax.tree_util.keystr(path)}", np.shape(leaf))
             for path, leaf in jax.tree_util.tree_leaves_with_path(init_state)
             if np.ndim(leaf) >= 1]
  if batched:
    first_path, first_shape = batched[0]
    batch = first_shape[0]
    for path, shape in batched[1:]:
      if shape[0] != batch:
        raise ValueError(
            f"init_state: every leaf must have the batch axis first or be a scalar (rank 0); "
            f"leaf {first_path} has shape {first_shape} (B = {batch}) but leaf {path} has shape "
            f"{shape}")
  given = [(name, np.shape(x)) for name, x in zip(Constraints._fields, constraints)
           if x is not None and np.ndim(x) >= 1]
  if not batched:
    if not given:
      raise ValueError("init_state: no leaf has a leading batch axis (all leaves are scalars or "
                       "the state is empty), so the batch size is unknown; give a per-row "
                       "constraint (exact_lens ...) or add a per-row leaf")
    batch = given[0][1][0]
  for name, shape in given:
    if shape[0] != batch:
      raise ValueError(f"{name} with shape {shape} does not match the batch size B = {batch} of "
                       f"init_state")
  return batch


def _check_common(step_fn, init_state, bos_id, eos_id, max_len, constraints: Constraints) -> int:
  if not callable(step_fn):
    raise ValueError(f"step_fn must be callable as step_fn(state, tokens), got {step_fn!r}")
  checks.positive_int(bos_id, "bos_id", minimum=0)  # token ids start at 0
  checks.positive_int(eos_id, "eos_id", minimum=0)
  checks.positive_int(max_len, "max_len")
  search_constraints.check_types(constraints)
  batch = _batch_size(init_state, constraints)
  search_constraints.check(constraints, batch, max_len, eos_id)
  return batch


def _check_step_output(logits, rows: int, state, new_state, eos_id: int) -> None:
  """Checks what step_fn returned for `rows` rows; runs while the search traces its loop body."""
  if len(logits.shape) != 2 or logits.shape[0] != rows:
    raise ValueError(f"step_fn must return logits of shape (N, V) with N = {rows} rows, got shape "
                     f"{logits.shape}")
  if not jnp.issubdtype(logits.dtype, jnp.floating):
    raise ValueError(f"step_fn must return floating-point logits, got dtype {logits.dtype}")
  vocab = logits.shape[1]
  if eos_id >= vocab:
    raise ValueError(f"eos_id = {eos_id} is not a token of the vocabulary of size V = {vocab}")
  old_def, new_def = jax.tree.structure(state), jax.tree.structure(new_state)
  if old_def != new_def:  # type: ignore[operator]  # PyTreeDef's != has no type information
    raise ValueError(f"step_fn must return a state with the structure of its input state; got "
                     f"{new_def}, expected {old_def}")
  old_leaves = jax.tree_util.tree_leaves_with_path(state)
  for (path, old), new in zip(old_leaves, jax.tree.leaves(new_state)):
    if old.shape != new.shape or old.dtype != new.dtype:
      raise ValueError(
          f"step_fn changed the state leaf state{jax.tree_util.keystr(path)} from shape "
          f"{old.shape} and dtype {old.dtype} to shape {new.shape} and dtype {new.dtype}; the "
          f"state must keep its shapes and dtypes from step to step")


# ---------------------------------------------------------------------------------------------
# Shared pieces of the two searches.


def _as_state(init_state) -> State:
  """Turns every leaf into a committed (not weakly typed) jax array, as while_loop carries want."""
  return jax.tree.map(lambda x: jnp.asarray(x, dtype=jnp.result_type(x)), init_state)


def _step_log_probs(step_fn, state, tokens, eos_id: int):
  """One decoder step: float32 log-probabilities (N, V) and the new state (dtypes kept)."""
  logits, new_state = step_fn(state, tokens)
  _check_step_output(logits, tokens.shape[0], state, new_state, eos_id)
  new_state = jax.tree.map(lambda new, old: new.astype(old.dtype), new_state, state)
  return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1), new_state


def _constrain(log_probs, t, eos_id: int, constraints: Constraints, prefix):
  """Sets the log-probabilities of the tokens the constraints forbid at position t to -inf.

  Args:
    log_probs: float32 (B, V) or (B, W, V) (the W beams of each row share its constraints).
    t: int32 scalar, the position of the token being chosen.
    eos_id: the end-of-sequence id.
    constraints: prepared Constraints of the B rows.
    prefix: int32 (B, T) or (B, W, T), the tokens chosen so far (tied and distinct positions read
      them).

  Returns:
    float32, the shape of log_probs (unchanged when nothing is constrained).
  """
  batch, vocab = log_probs.shape[0], log_probs.shape[-1]
  prefix = prefix.reshape(batch, -1, prefix.shape[-1])  # (B, W, T), W = 1 for greedy
  allowed = search_constraints.allowed_tokens(constraints, t, vocab, eos_id, prefix)
  if allowed is None:
    return log_probs
  if allowed.ndim == 2:  # (B, V), shared by the beams of a row
    allowed = allowed.reshape((batch,) + (1,) * (log_probs.ndim - 2) + (vocab,))
  else:  # (B, W, V), one row per hypothesis (W = 1 for greedy)
    allowed = allowed.reshape(log_probs.shape)
  return jnp.where(allowed, log_probs, _IMPOSSIBLE)


def _write_column(tokens, t, column):
  """tokens (..., T) with position t replaced by column (...,)."""
  return jnp.where(jnp.arange(tokens.shape[-1]) == t, column[..., None], tokens)


# ---------------------------------------------------------------------------------------------
# Greedy search.


@functools.partial(jax.jit, static_argnames=("step_fn", "bos_id", "eos_id", "max_len"))
def _greedy(init_state, constraints: Constraints, *, step_fn, bos_id, eos_id,
            max_len) -> Decoded:
  state = _as_state(init_state)
  batch = _batch_size(state, constraints)
  constraints = search_constraints.prepare(constraints)

  def body(carry):
    t, state, prev, tokens, lengths, scores, finished = carry
    log_probs, state = _step_log_probs(step_fn, state, prev, eos_id)  # (B, V)
    log_probs = _constrain(log_probs, t, eos_id, constraints, tokens)
    choice = jnp.argmax(log_probs, axis=-1)  # (B,)
    # The model's log-probability of an allowed choice; -inf where nothing was allowed.
    choice_log_prob = jnp.take_along_axis(log_probs, choice[:, None], axis=-1)[:, 0]
    token = jnp.where(finished, 0, choice).astype(jnp.int32)
    tokens = _write_column(tokens, t, token)
    scores = scores + jnp.where(finished, 0.0, choice_log_prob)
    ends_now = ~finished & (choice == eos_id)
    lengths = jnp.where(ends_now, t, lengths)
    return t + 1, state, token, tokens, lengths, scores, finished | ends_now

  def cond(carry):
    t, finished = carry[0], carry[-1]
    return (t < max_len) & ~jnp.all(finished)

  carry = (jnp.int32(0), state, jnp.full((batch,), bos_id, jnp.int32),
           jnp.zeros((batch, max_len), jnp.int32), jnp.full((batch,), max_len, jnp.int32),
           jnp.zeros((batch,), jnp.float32), jnp.zeros((batch,), bool))
  _, _, _, tokens, lengths, scores, _ = jax.lax.while_loop(cond, body, carry)
  return Decoded(tokens, lengths, scores)


def greedy_search(step_fn: StepFn, init_state: State, *, bos_id: int, eos_id: int, max_len: int,
                  exact_lens: jax.Array | None = None, forced_tokens: jax.Array | None = None,
                  banned_tokens: jax.Array | None = None, tied_positions: jax.Array | None = None,
                  distinct_positions: jax.Array | None = None) -> Decoded:
  """Picks the most probable next token at every step, for a batch of B rows at once.

  Args:
    step_fn: `step_fn(state, tokens (B,)) -> (logits (B, V), state)`, see the module docstring.
      Static: pass the same object to reuse the compiled search.
    init_state: pytree whose leaves have leading axis B, or rank 0 (shared by all rows).
    bos_id: the token fed on the first step.
    eos_id: the end-of-sequence token.
    max_len: T, the most tokens generated per row (eos included).
    exact_lens: optional int (B,) in [0, max_len]: row b gets exactly exact_lens[b] tokens before
      eos (eos forbidden before that position and forced at it).
    forced_tokens: optional int (B, T): the id row b must take at position t, -1 = free.
    banned_tokens: optional int (B, T) or (B, T, K): ids row b may not take at position t, -1 =
      none.
    tied_positions: optional int (B, T): s in [0, t) makes row b repeat at position t its token
      of position s; -1 = free.
    distinct_positions: optional bool (B, T): at a marked position row b may not take a token it
      took at an earlier marked position. Forced ids win over ties, ties over bans, the length
      over everything (zoo.search_constraints). A row with a position where nothing is allowed
      scores -inf.

  Returns:
    Decoded(tokens int32 (B, T), lengths int32 (B,), scores float32 (B,)); see `Decoded`.

  Raises:
    ValueError: on a bad id, max_len < 1, constraints of the wrong dtype, shape or range (a forced
      eos before exact_lens included), state leaves that disagree on the batch axis, or a step_fn
      whose logits are not (B, V) or which changes the state's shapes.
  """
  constraints = Constraints(exact_lens, forced_tokens, banned_tokens, tied_positions,
                            distinct_positions)
  _check_common(step_fn, init_state, bos_id, eos_id, max_len, constraints)
  return _greedy(init_state, constraints, step_fn=step_fn, bos_id=bos_id, eos_id=eos_id,
                 max_len=max_len)


# ---------------------------------------------------------------------------------------------
# Beam search.


class _BeamCarry(NamedTuple):
  t: jax.Array  # int32 (), the position being filled.
  state: State  # leaves (B * W, ...) or rank 0.
  last: jax.Array  # int32 (B * W,), the last token of each alive hypothesis.
  alive_tokens: jax.Array  # int32 (B, W, T).
  alive_scores: jax.Array  # float32 (B, W), summed log-probabilities (no length penalty).
  fin_tokens: jax.Array  # int32 (B, W, T).
  fin_lengths: jax.Array  # int32 (B, W).
  fin_scores: jax.Array  # float32 (B, W), length-penalized, sorted best first.
  done: jax.Array  # bool (B,), no alive hypothesis can still enter the finished list.


def _gather_beams(x, beams):
  """x (B, W, ...) reordered along the beam axis by beams int (B, W') -> (B, W', ...)."""
  index = beams.reshape(beams.shape + (1,) * (x.ndim - 2))
  return jnp.take_along_axis(x, index, axis=1)


def _top_k_over_beams(candidates, k: int):
  """The k largest of candidates (B, W, V) over W * V: (values (B, k), flat indices (B, k)).

  Exactly jax.lax.top_k(candidates.reshape(B, W * V), k), ties included (lower beam, then lower
  token first), computed as the k best of each beam followed by the k best of those W * k. XLA on
  CPU turns a top_k over the long W * V rows inside the search loop into a full sort, which is
  orders of magnitude slower; per-beam rows keep its fast TopK kernel.
  """
  batch, width, vocab = candidates.shape
  per_beam = min(k, vocab)
  values, tokens = jax.lax.top_k(candidates, per_beam)  # (B, W, per_beam) each
  best, pick = jax.lax.top_k(values.reshape(batch, width * per_beam), k)  # (B, k)
  token = jnp.take_along_axis(tokens.reshape(batch, width * per_beam), pick, axis=1)
  return best, (pick // per_beam) * vocab + token


@functools.partial(jax.jit,
                   static_argnames=("step_fn", "beam_size", "bos_id", "eos_id", "max_len"))
def _beam(init_state, constraints: Constraints, length_penalty, *, step_fn, beam_size, bos_id,
          eos_id, max_len) -> Beams:
  width, total = beam_size, max_len
  batch = _batch_size(init_state, constraints)
  rows = batch * width
  # Row b * W + w of the tiled state is beam w of example b.
  state = jax.tree.map(lambda x: x if x.ndim == 0 else jnp.repeat(x, width, axis=0),
                       _as_state(init_state))
  constraints = search_constraints.prepare(constraints)  # per row, shared by its beams
  alpha = jnp.asarray(length_penalty, jnp.float32)
  row_offsets = (jnp.arange(batch) * width)[:, None]  # (B, 1)

  def body(c: _BeamCarry) -> _BeamCarry:
    log_probs, new_state = _step_log_probs(step_fn, c.state, c.last, eos_id)  # (B * W, V)
    vocab = log_probs.shape[-1]
    is_eos = jnp.arange(vocab) == eos_id  # (V,)
    log_probs = _constrain(log_probs.reshape(batch, width, vocab), c.t, eos_id, constraints,
                           c.alive_tokens)
    candidates = c.alive_scores[..., None] + log_probs  # (B, W, V)

    # The beam proper: the W best extensions of any kind. Those that end (eos, or the last
    # position) compete for the finished list; with W = 1 this is exactly greedy search.
    top_scores, top_index = _top_k_over_beams(candidates, width)
    top_beam, top_token = top_index // vocab, top_index % vocab  # (B, W) each
    top_tokens = _write_column(_gather_beams(c.alive_tokens, top_beam), c.t, top_token)
    top_ends_eos = top_token == eos_id
    ends = top_ends_eos | (c.t == total - 1)
    top_lengths = jnp.where(top_ends_eos, c.t, c.t + 1)
    top_final = jnp.where(ends, top_scores / _length_normalizer(top_lengths, alpha), _IMPOSSIBLE)

    # Merge with the finished list; the old entries come first so that ties keep them.
    merged_scores = jnp.concatenate([c.fin_scores, top_final], axis=1)  # (B, 2W)
    fin_scores, pick = jax.lax.top_k(merged_scores, width)  # (B, W)
    fin_tokens = _gather_beams(jnp.concatenate([c.fin_tokens, top_tokens], axis=1), pick)
    fin_lengths = _gather_beams(jnp.concatenate([c.fin_lengths, top_lengths], axis=1), pick)
    keep = c.done[:, None]  # A finished row is frozen.
    fin_scores = jnp.where(keep, c.fin_scores, fin_scores)
    fin_tokens = jnp.where(keep[..., None], c.fin_tokens, fin_tokens)
    fin_lengths = jnp.where(keep, c.fin_lengths, fin_lengths)

    # The W best extensions that do not end with eos stay alive.
    open_candidates = jnp.where(is_eos, _IMPOSSIBLE, candidates)  # (B, W, V)
    alive_scores, alive_index = _top_k_over_beams(open_candidates, width)  # (B, W)
    alive_beam, alive_token = alive_index // vocab, alive_index % vocab
    alive_tokens = _write_column(_gather_beams(c.alive_tokens, alive_beam), c.t, alive_token)
    source_rows = (row_offsets + alive_beam).reshape(rows)
    state = jax.tree.map(lambda x: x if x.ndim == 0 else x[source_rows], new_state)

    # Alive hypotheses only lose log-probability; they end with a length in [t + 1, T], so the
    # largest length normalizer over that range bounds what they can still score.
    normalizer = jnp.maximum(_length_normalizer(c.t + 1, alpha), _length_normalizer(total, alpha))
    best_possible = alive_scores[:, 0] / normalizer  # (B,)
    done = c.done | (fin_scores[:, -1] >= best_possible) | (c.t == total - 1)
    return _BeamCarry(c.t + 1, state, alive_token.reshape(rows).astype(jnp.int32),
                      alive_tokens, alive_scores, fin_tokens, fin_lengths, fin_scores, done)

  def cond(c: _BeamCarry):
    return (c.t < total) & ~jnp.all(c.done)

  # Only beam 0 is alive at first, so the W copies of each example do not produce W duplicates.
  first_alive = jnp.where(jnp.arange(width) == 0, 0.0, _IMPOSSIBLE)
  carry = _BeamCarry(
      t=jnp.int32(0), state=state, last=jnp.full((rows,), bos_id, jnp.int32),
      alive_tokens=jnp.zeros((batch, width, total), jnp.int32),
      alive_scores=jnp.broadcast_to(first_alive, (batch, width)).astype(jnp.float32),
      fin_tokens=jnp.zeros((batch, width, total), jnp.int32),
      fin_lengths=jnp.zeros((batch, width), jnp.int32),
      fin_scores=jnp.full((batch, width), _IMPOSSIBLE, jnp.float32),
      done=jnp.zeros((batch,), bool))
  out = jax.lax.while_loop(cond, body, carry)
  return Beams(out.fin_tokens, out.fin_lengths, out.fin_scores)


def beam_search(step_fn: StepFn, init_state: State, *, beam_size: int, bos_id: int, eos_id: int,
                max_len: int, length_penalty: float | jax.Array = 0.0,
                exact_lens: jax.Array | None = None, forced_tokens: jax.Array | None = None,
                banned_tokens: jax.Array | None = None, tied_positions: jax.Array | None = None,
                distinct_positions: jax.Array | None = None) -> Beams:
  """Beam search for a batch of B rows at once, returning the `beam_size` best hypotheses.

  At each step every alive hypothesis is extended by every token. The W = beam_size best
  extensions by summed log-probability form the beam: those among them that end (with eos, or by
  reaching max_len) enter the list of finished hypotheses, kept apart from the alive ones and
  ranked by the length-penalized score

    score = log_prob / ((5 + length) / 6) ** length_penalty      (GNMT, Wu et al. 2016)

  where `length` counts the tokens before eos. The W best extensions that do not end with eos stay
  alive (alive ones never displace finished ones). A row stops once no alive hypothesis can beat
  its worst finished one; the loop stops when every row has. With beam_size = 1 and
  length_penalty = 0 the result equals `greedy_search`.

  Args:
    step_fn: `step_fn(state, tokens (B * W,)) -> (logits (B * W, V), state)`, see the module
      docstring. Static: pass the same object to reuse the compiled search.
    init_state: pytree whose leaves have leading axis B (tiled here to B * W: row b * W + w is
      beam w of example b) or rank 0 (shared by all rows).
    beam_size: W >= 1.
    bos_id: the token fed on the first step.
    eos_id: the end-of-sequence token.
    max_len: T, the most tokens generated per hypothesis (eos included).
    length_penalty: alpha; 0 ranks by log-probability alone, alpha > 0 favours longer outputs.
      May be a traced scalar (changing it does not recompile).
    exact_lens: optional int (B,) in [0, max_len]: every hypothesis of row b gets exactly
      exact_lens[b] tokens before eos.
    forced_tokens: optional int (B, T): the id every hypothesis of row b takes at position t, -1 =
      free. At a forced position each alive hypothesis has one extension, so all W survive and
      keep comparable scores (each adds its own log-probability of the forced id).
    banned_tokens: optional int (B, T) or (B, T, K): ids no hypothesis of row b may take at
      position t, -1 = none.
    tied_positions: optional int (B, T): s in [0, t) makes every hypothesis of row b repeat at
      position t its own token of position s; -1 = free.
    distinct_positions: optional bool (B, T): at a marked position no hypothesis of row b may
      take a token it took at an earlier marked position. Forced ids win over ties, ties over
      bans, the length over everything.

  Returns:
    Beams(tokens int32 (B, W, T), lengths int32 (B, W), scores float32 (B, W)), best first; see
    `Beams`.

  Raises:
    ValueError: as `greedy_search`, and for beam_size < 1 or a non-finite length_penalty.
  """
  checks.positive_int(beam_size, "beam_size")
  constraints = Constraints(exact_lens, forced_tokens, banned_tokens, tied_positions,
                            distinct_positions)
  _check_common(step_fn, init_state, bos_id, eos_id, max_len, constraints)
  if checks.is_concrete(length_penalty) and not np.all(np.isfinite(length_penalty)):
    raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
  checks.rank(length_penalty, 0, "length_penalty")
  return _beam(init_state, constraints, length_penalty, step_fn=step_fn, beam_size=beam_size,
               bos_id=bos_id, eos_id=eos_id, max_len=max_len)
