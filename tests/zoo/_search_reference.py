"""Shared by the search tests: small n-gram models whose every sequence can be enumerated, the
searches compiled inside an outer jit, and a plain-Python reference of each documented algorithm
(greedy, beam and their constraints), one hypothesis at a time.

Imported as `import _search_reference` (pytest puts this folder on sys.path).
"""

from __future__ import annotations

import functools
import itertools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

import zoo

PAD, BOS, EOS = 0, 2, 3
V = 5  # tokens 0..4; the models may emit any of them, pad and bos included
B = 3
MAX_LEN = 5  # max_len of most searches with the trigram model (each max_len compiles anew)


def log_softmax(x):
  x = np.asarray(x, np.float64)
  x = x - x.max()
  return x - np.log(np.exp(x).sum())


class Trigram:
  """A trigram model with a position bias and a per-example bias, in JAX and in numpy.

  The state holds the token before the previous one (per row: beam search must reorder it), the
  position (rank 0, shared by all rows) and the bias of each example (per row: it must be tiled).
  """

  def __init__(self, seed=2, scale=1.5):
    rng = np.random.default_rng(seed)
    self.table = (scale * rng.standard_normal((V, V, V))).astype(np.float32)
    self.pos_bias = rng.standard_normal((MAX_LEN, V)).astype(np.float32)
    table, pos_bias = jnp.asarray(self.table), jnp.asarray(self.pos_bias)

    def step(state, tokens):
      logits = table[state["prev"], tokens] + pos_bias[state["pos"]] + state["row_bias"]
      return logits, {"prev": tokens, "pos": state["pos"] + 1, "row_bias": state["row_bias"]}

    self.step = step

  @staticmethod
  def row_bias(seed, eos_bias=0.0):
    bias = np.random.default_rng(seed).standard_normal((B, V)).astype(np.float32)
    bias[:, EOS] += eos_bias
    return bias

  @staticmethod
  def init_state(row_bias):
    return {"prev": jnp.full((B,), BOS, jnp.int32), "pos": jnp.int32(0),
            "row_bias": jnp.asarray(row_bias)}

  def log_probs_fn(self, row_bias, b):
    """prefix -> float64 (V,), log p(next token | prefix) for example b."""

    def log_probs(prefix):
      history = (BOS, BOS) + tuple(prefix)
      return log_softmax(self.table[history[-2], history[-1]] + self.pos_bias[len(prefix)]
                          + row_bias[b])

    return log_probs


MODEL = Trigram()


# The searches run inside an outer jit (as users call them), compiled at XLA's cheapest
# optimization level to keep the many small programs of the search tests quick to build. One
# program per step function and static arguments, reused across calls like the search's own cache.
FAST_COMPILE = {"xla_backend_optimization_level": 0}


@functools.lru_cache(maxsize=None)
def compiled(search, step, **static):
  run = lambda state, exact_lens, **traced: search(step, state, exact_lens=exact_lens,
                                                   **static, **traced)
  return jax.jit(run, compiler_options=FAST_COMPILE)


def _optional(x):
  return None if x is None else jnp.asarray(x)


def run_greedy(step, state, max_len, exact_lens=None, forced=None, banned=None, tied=None,
               distinct=None):
  """zoo.greedy_search in an outer jit; forced / banned / tied / distinct are its forced_tokens /
  banned_tokens / tied_positions / distinct_positions."""
  run = compiled(zoo.greedy_search, step, bos_id=BOS, eos_id=EOS, max_len=max_len)
  return jax.device_get(run(state, _optional(exact_lens), forced_tokens=_optional(forced),
                            banned_tokens=_optional(banned), tied_positions=_optional(tied),
                            distinct_positions=_optional(distinct)))


def run_beam(step, state, width, max_len, alpha=0.0, exact_lens=None, forced=None, banned=None,
             tied=None, distinct=None):
  """zoo.beam_search in an outer jit (length_penalty traced)."""
  run = compiled(zoo.beam_search, step, beam_size=width, bos_id=BOS, eos_id=EOS,
                 max_len=max_len)
  return jax.device_get(run(state, _optional(exact_lens), length_penalty=alpha,
                            forced_tokens=_optional(forced), banned_tokens=_optional(banned),
                            tied_positions=_optional(tied),
                            distinct_positions=_optional(distinct)))


def allowed(position: int, exact_len: int | None = None, forced: Sequence[int] | None = None,
            banned: Sequence | None = None, tied: Sequence[int] | None = None,
            distinct: Sequence[bool] | None = None, prefix: Sequence[int] = ()) -> set[int]:
  """The ids one hypothesis may take at `position` after `prefix` (its tokens so far), straight
  from zoo.search_constraints' table.

  forced: the row's forced id per position (-1 free); banned: per position an id or a sequence of
  ids (-1 none); tied: per position the earlier position to repeat (-1 free); distinct: per
  position whether it must differ from the earlier distinct positions' tokens.
  """
  if exact_len is not None and position >= exact_len:
    return {EOS}
  if forced is not None and forced[position] >= 0:
    ok = {int(forced[position])} & set(range(V))
  elif tied is not None and 0 <= tied[position] < position:
    ok = {int(prefix[tied[position]])}
  else:
    ok = set(range(V))
    if banned is not None:
      ok -= set(np.ravel(banned[position]).tolist())
    if distinct is not None and distinct[position]:
      ok -= {int(prefix[s]) for s in range(position) if distinct[s]}
  if exact_len is not None:
    ok.discard(EOS)
  return ok


def constrained(log_probs, position, *rule, prefix=()):
  """log_probs (V,) with the ids not `allowed` at `position` after `prefix` set to -inf; rule:
  allowed's exact_len, forced, banned, tied, distinct."""
  out = np.full_like(log_probs, -np.inf)
  ok = sorted(allowed(position, *rule, prefix=prefix))
  out[ok] = log_probs[ok]
  return out


def penalty(length, alpha):
  return ((5.0 + length) / 6.0) ** alpha


def enumerate_hypotheses(log_probs_fn, max_len, *rule):
  """Every hypothesis the constraints allow as (tokens before eos, log-probability); eos adds its
  log-probability. rule: allowed's exact_len, forced, banned, tied, distinct."""
  out = []

  def extend(seq, total):
    t = len(seq)
    if t == max_len:
      out.append((seq, total))
      return
    ok = allowed(t, *rule, prefix=seq)
    log_probs = log_probs_fn(seq)
    if EOS in ok:
      out.append((seq, total + log_probs[EOS]))
    for v in sorted(ok - {EOS}):
      extend(seq + (v,), total + log_probs[v])

  extend((), 0.0)
  return out


def greedy_reference(log_probs_fn, max_len, *rule):
  """rule: allowed's exact_len, forced, banned, tied, distinct."""
  seq, total = (), 0.0
  for t in range(max_len):
    log_probs = constrained(log_probs_fn(seq), t, *rule, prefix=seq)
    token = int(np.argmax(log_probs))
    total += log_probs[token]
    if token == EOS:
      break
    seq += (token,)
  return seq, total


def beam_reference(log_probs_fn, width, max_len, alpha, *rule):
  """The documented algorithm, one hypothesis at a time, without early stopping; rule: allowed's
  exact_len, forced, banned, tied, distinct.

  Returns [(penalized score, tokens before eos)], best first (fewer than `width` when fewer
  hypotheses exist).
  """
  alive, finished = [((), 0.0)], []
  for t in range(max_len):
    candidates = []
    for seq, total in alive:
      log_probs = constrained(log_probs_fn(seq), t, *rule, prefix=seq)
      candidates += [(total + log_probs[v], seq, v) for v in range(V) if log_probs[v] > -np.inf]
    candidates.sort(key=lambda c: -c[0])
    for total, seq, v in candidates[:width]:
      if v == EOS or t == max_len - 1:
        ended = seq if v == EOS else seq + (v,)
        finished.append((total / penalty(len(ended), alpha), ended))
    finished = sorted(finished, key=lambda f: -f[0])[:width]
    alive = [(seq + (v,), total) for total, seq, v in candidates if v != EOS][:width]
  return finished


def row_tokens(tokens, length):
  """The tokens of one output before eos, after checking the eos/pad layout."""
  tokens = np.asarray(tokens)
  assert EOS not in tokens[:length]
  if length < len(tokens):
    assert tokens[length] == EOS
    np.testing.assert_array_equal(tokens[length + 1:], PAD)
  return tuple(int(x) for x in tokens[:length])


def assert_beams_equal(beams, b, expected):
  """Row b of `beams` holds the hypotheses `expected` [(score, tokens)] best first, then -inf."""
  count = len(expected)
  got = [row_tokens(beams.tokens[b, i], beams.lengths[b, i]) for i in range(count)]
  assert got == [seq for _, seq in expected]
  np.testing.assert_array_equal(beams.lengths[b, :count], [len(seq) for _, seq in expected])
  np.testing.assert_allclose(beams.scores[b, :count], [score for score, _ in expected], rtol=1e-5)
  assert np.all(beams.scores[b, count:] == -np.inf)
