"""zoo.search's constraints: forced and banned tokens, tied and distinct positions, with exact
lengths and the length penalty, in greedy and beam search (zoo.search_constraints has the
rules)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from _search_reference import B
from _search_reference import BOS
from _search_reference import EOS
from _search_reference import MAX_LEN
from _search_reference import MODEL
from _search_reference import V
from _search_reference import Trigram
from _search_reference import allowed
from _search_reference import assert_beams_equal
from _search_reference import beam_reference
from _search_reference import enumerate_hypotheses
from _search_reference import greedy_reference
from _search_reference import row_tokens
from _search_reference import run_beam
from _search_reference import run_greedy
from zoo import search_constraints
from zoo.search_constraints import Constraints


def test_allowed_tokens_follow_the_precedence_table():
  # B = 3 rows, T = 5 positions, V = 7 ids, eos = 3; checked at every position against the table.
  vocab, eos, max_len = 7, 3, 5
  exact_lens = np.array([5, 2, 4], np.int32)
  forced = np.full((3, max_len), -1, np.int32)
  forced[0, 1] = 6  # forced over the ban of 6 at the same position
  forced[1, 3] = 4  # after the end: the length wins
  forced[2, 0] = 9  # outside the vocabulary: nothing allowed
  banned = np.full((3, max_len, 2), -1, np.int32)
  banned[0, 1] = [6, 5]
  banned[0, 2] = [0, 8]  # 8 is outside the vocabulary: bans nothing
  banned[1, 0] = [1, 1]
  banned[2, 2] = [eos, 2]  # eos is forbidden before the end anyway
  expected = {
      (0, 0): {0, 1, 2, 4, 5, 6}, (0, 1): {6}, (0, 2): {1, 2, 4, 5, 6},
      (1, 0): {0, 2, 4, 5, 6}, (1, 2): {eos}, (1, 3): {eos}, (1, 4): {eos},
      (2, 0): set(), (2, 2): {0, 1, 4, 5, 6}, (2, 4): {eos},
  }
  prepared = search_constraints.prepare(Constraints(exact_lens, forced, banned))
  for t in range(max_len):
    got = np.asarray(search_constraints.allowed_tokens(prepared, jnp.int32(t), vocab, eos))
    assert got.shape == (3, vocab)
    for b in range(3):
      want = expected.get((b, t), set(range(vocab)) - {eos})
      assert set(np.flatnonzero(got[b]).tolist()) == want, (b, t)
  # Without a length, eos may be forced or banned like any id; (B, T) bans are K = 1.
  free = search_constraints.prepare(Constraints(None, forced[:, :2], banned[:, :2, 0]))
  got = np.asarray(search_constraints.allowed_tokens(free, jnp.int32(0), vocab, eos))
  assert set(np.flatnonzero(got[1]).tolist()) == {0, 2, 3, 4, 5, 6}
  assert search_constraints.allowed_tokens(Constraints(), jnp.int32(0), vocab, eos) is None


# A model whose next token depends on the position only: p(token | position t) = POSITION_PROBS[t].
POSITION_PROBS = np.array([
    # pad   1    bos   eos   4
    [0.10, 0.40, 0.05, 0.15, 0.30],  # t = 0
    [0.10, 0.15, 0.05, 0.20, 0.50],  # t = 1
    [0.05, 0.40, 0.10, 0.30, 0.15],  # t = 2
    [0.10, 0.10, 0.10, 0.60, 0.10],  # t = 3
])


def _position_step(state, tokens):
  log_probs = jnp.log(jnp.asarray(POSITION_PROBS, jnp.float32))
  return log_probs[state["pos"]], {"pos": state["pos"] + 1}


def test_hand_computed_constrained_searches():
  # Row 0: 1 banned at t0, pad forced at t1. Row 1: 1 banned at t0, 1 both forced and banned at t1
  # (forced wins), 4 forced at t2. Row 2: free.
  max_len, p = 4, POSITION_PROBS
  state = {"pos": jnp.zeros((B,), jnp.int32)}
  forced = np.array([[-1, 0, -1, -1], [-1, 1, 4, -1], [-1, -1, -1, -1]], np.int32)
  banned = np.full((B, max_len, 2), -1, np.int32)
  banned[0, 0] = [1, 9]  # 9 is outside the vocabulary: bans nothing
  banned[1, 0, 0] = banned[1, 1, 0] = 1
  greedy = run_greedy(_position_step, state, max_len, forced=forced, banned=banned)
  one = run_beam(_position_step, state, 1, max_len, forced=forced, banned=banned)
  beams = run_beam(_position_step, state, 2, max_len, forced=forced, banned=banned)
  # Row 0: 4 (1 banned), pad (forced), 1, eos. Row 1: 4, 1, 4, eos. Row 2: 1, 4, 1, eos.
  assert [row_tokens(greedy.tokens[b], greedy.lengths[b]) for b in range(B)] == [
      (4, 0, 1), (4, 1, 4), (1, 4, 1)]
  np.testing.assert_allclose(greedy.scores, np.log([
      p[0, 4] * p[1, 0] * p[2, 1] * p[3, EOS], p[0, 4] * p[1, 1] * p[2, 4] * p[3, EOS],
      p[0, 1] * p[1, 4] * p[2, 1] * p[3, EOS]]), rtol=1e-6)
  for field in range(3):
    np.testing.assert_array_equal(one[field][:, 0], greedy[field])
  # Beam 2, row 0: the forced pad makes greedy's first 4 a poor start. Ending at once (0.15)
  # beats every longer line; the runner-up is 4, pad, eos (0.3 * 0.1 * 0.3 = 0.009).
  assert_beams_equal(beams, 0, [(np.log(p[0, EOS]), ()),
                                (np.log(p[0, 4] * p[1, 0] * p[2, EOS]), (4, 0))])
  position_log_probs = lambda prefix: np.log(p[len(prefix)])
  for b in (1, 2):
    assert_beams_equal(beams, b, beam_reference(position_log_probs, 2, max_len, 0.0, None,
                                                forced[b], banned[b]))

  # With exactly 4, 2 and 4 tokens. Row 1: 4, 1 (forced over its ban), eos (over the forced 4).
  # Rows 0 and 2 cannot end: their last token is eos's best rival at t3, where pad, 1, bos and
  # 4 tie at 0.10 (the lowest id, pad, wins the argmax).
  exact_lens = np.array([max_len, 2, max_len], np.int32)
  greedy = run_greedy(_position_step, state, max_len, exact_lens, forced, banned)
  one = run_beam(_position_step, state, 1, max_len, exact_lens=exact_lens, forced=forced,
                 banned=banned)
  beams = run_beam(_position_step, state, 2, max_len, exact_lens=exact_lens, forced=forced,
                   banned=banned)
  assert [row_tokens(greedy.tokens[b], greedy.lengths[b]) for b in range(B)] == [
      (4, 0, 1, 0), (4, 1), (1, 4, 1, 0)]
  np.testing.assert_allclose(greedy.scores, np.log([
      p[0, 4] * p[1, 0] * p[2, 1] * p[3, 0], p[0, 4] * p[1, 1] * p[2, EOS],
      p[0, 1] * p[1, 4] * p[2, 1] * p[3, 0]]), rtol=1e-6)
  for field in range(3):
    np.testing.assert_array_equal(one[field][:, 0], greedy[field])
  # Row 1, beam 2: the two best first tokens that are allowed (not 1, not eos), then 1 and eos.
  assert_beams_equal(beams, 1, [(np.log(p[0, 4] * p[1, 1] * p[2, EOS]), (4, 1)),
                                (np.log(p[0, 0] * p[1, 1] * p[2, EOS]), (0, 1))])


def _random_constraints(seed, max_len, with_eos):
  """forced int32 (B, T) with about a third of the positions forced, banned int32 (B, T, 2)."""
  rng = np.random.default_rng(seed)
  ids = [v for v in range(V) if with_eos or v != EOS]
  forced = np.where(rng.random((B, max_len)) < 0.35, rng.choice(ids, (B, max_len)), -1)
  banned = np.where(rng.random((B, max_len, 2)) < 0.6, rng.integers(0, V, (B, max_len, 2)), -1)
  banned[0, 1] = forced[0, 1] = 4  # a forced id that is also banned
  return forced.astype(np.int32), banned.astype(np.int32)


@pytest.mark.parametrize("exact_lens", [None, [2, 5, 4]])
def test_constrained_searches_match_the_reference_algorithms(exact_lens):
  width, alpha, max_len = 3, 0.6, MAX_LEN
  row_bias = Trigram.row_bias(23, eos_bias=1.0)
  state = Trigram.init_state(row_bias)
  forced, banned = _random_constraints(29, max_len, with_eos=exact_lens is None)
  greedy = run_greedy(MODEL.step, state, max_len, exact_lens, forced, banned)
  one = run_beam(MODEL.step, state, 1, max_len, exact_lens=exact_lens, forced=forced,
                 banned=banned)
  beams = run_beam(MODEL.step, state, width, max_len, alpha, exact_lens, forced, banned)
  for field in range(3):
    np.testing.assert_array_equal(one[field][:, 0], greedy[field])
  full_rows = 0  # rows with at least `width` allowed lines, so that the beam pruned something
  for b in range(B):
    rule = (None if exact_lens is None else exact_lens[b], forced[b], banned[b])
    log_probs_fn = MODEL.log_probs_fn(row_bias, b)
    seq, total = greedy_reference(log_probs_fn, max_len, *rule)
    assert row_tokens(greedy.tokens[b], greedy.lengths[b]) == seq
    np.testing.assert_allclose(greedy.scores[b], total, rtol=1e-5)
    expected = beam_reference(log_probs_fn, width, max_len, alpha, *rule)
    full_rows += len(expected) == width
    assert_beams_equal(beams, b, expected)
    # Every hypothesis obeys the constraints and scores the unconstrained model's log-probability.
    everything = dict(enumerate_hypotheses(log_probs_fn, max_len, *rule))
    for score, seq in expected:
      assert all(token in allowed(t, *rule) for t, token in enumerate(seq))
      np.testing.assert_allclose(everything[seq] / ((5 + len(seq)) / 6) ** alpha, score,
                                 rtol=1e-12)
  assert full_rows >= 2


def test_forced_steps_keep_every_beam_and_rank_by_the_whole_line():
  # Every position forced but t = 1, where one id is banned and eos is excluded by the length:
  # exactly three lines exist, and beam 3 returns all three, ranked by their whole log-probability.
  # The forced tokens after t = 1 have different probabilities after each choice (a trigram), and
  # here they reorder the lines: the choice likeliest at t = 1 is not the best line.
  max_len, width, seed = 4, 3, 3
  row_bias = Trigram.row_bias(seed)
  state = Trigram.init_state(row_bias)
  exact_lens = np.full((B,), max_len, np.int32)
  forced = np.tile(np.array([[4, -1, 0, 1]], np.int32), (B, 1))
  banned = np.full((B, max_len), -1, np.int32)
  banned[:, 1] = 2
  beams = run_beam(MODEL.step, state, width, max_len, exact_lens=exact_lens, forced=forced,
                   banned=banned)
  reordered = 0
  for b in range(B):
    log_probs_fn = MODEL.log_probs_fn(row_bias, b)
    everything = enumerate_hypotheses(log_probs_fn, max_len, max_len, forced[b], banned[b])
    assert sorted(seq[1] for seq, _ in everything) == [0, 1, 4]
    ranked = sorted(((total, seq) for seq, total in everything), reverse=True)
    assert_beams_equal(beams, b, ranked)
    at_choice = max([0, 1, 4], key=lambda v: log_probs_fn((4,))[v])
    reordered += ranked[0][1][1] != at_choice
  assert reordered >= 1


def test_constraints_are_traced_arguments_of_a_jitted_search():
  traces = []

  @jax.jit
  def decode(state, exact_lens, forced, banned):
    traces.append(None)
    search = dict(bos_id=BOS, eos_id=EOS, max_len=MAX_LEN, exact_lens=exact_lens,
                  forced_tokens=forced, banned_tokens=banned)
    return (zoo.greedy_search(MODEL.step, state, **search),
            zoo.beam_search(MODEL.step, state, beam_size=3, length_penalty=0.6, **search))

  exact_lens = np.array([3, 5, 2], np.int32)
  for seed in (31, 37):
    row_bias = Trigram.row_bias(seed)
    state = Trigram.init_state(row_bias)
    forced, banned = _random_constraints(seed, MAX_LEN, with_eos=False)
    greedy, beams = jax.device_get(decode(state, exact_lens, forced, banned))
    for got, want in zip(greedy, run_greedy(MODEL.step, state, MAX_LEN, exact_lens, forced,
                                            banned)):
      np.testing.assert_array_equal(got, want)
    for b in range(B):
      assert_beams_equal(beams, b, beam_reference(MODEL.log_probs_fn(row_bias, b), 3, MAX_LEN,
                                                  0.6, exact_lens[b], forced[b], banned[b]))
  assert len(traces) == 1

  # Under jit the values are unknown, so an impossible row is not an error: it scores -inf.
  forced = np.full((B, MAX_LEN), -1, np.int32)
  forced[1, 0] = V + 2  # no such id
  forced[2, 1] = EOS  # before exact_lens[2] = 2
  greedy, beams = jax.device_get(decode(Trigram.init_state(Trigram.row_bias(41)), exact_lens,
                                        forced, np.full((B, MAX_LEN, 2), -1, np.int32)))
  assert np.isfinite(greedy.scores[0]) and np.all(np.isfinite(beams.scores[0]))
  assert np.all(greedy.scores[1:] == -np.inf) and np.all(beams.scores[1:] == -np.inf)


def test_allowed_tokens_read_each_hypothesis_prefix_for_ties_and_distinct_positions():
  # B = 2 rows, W = 2 hypotheses each, T = 5 positions, V = 7 ids, eos = 3.
  vocab, eos, max_len = 7, 3, 5
  tied = np.array([[-1, -1, 0, -1, -1], [-1, 0, -1, -1, 4]], np.int32)  # [1, 4]: not earlier
  distinct = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 1]], bool)
  forced = np.full((2, max_len), -1, np.int32)
  forced[1, 1] = 4  # forced over the tie to position 0
  banned = np.full((2, max_len), -1, np.int32)
  banned[1, 2] = 0
  prefix = jnp.asarray([[[5, 6, 5, 0, 0], [1, 2, 1, 0, 0]],
                        [[2, 4, 5, 6, 0], [6, 4, 1, 2, 0]]], jnp.int32)  # (B, W, T)
  everything = set(range(vocab))
  expected = {
      (0, 1, 0): everything - {5}, (0, 1, 1): everything - {1},  # distinct from position 0
      (0, 2, 0): {5}, (0, 2, 1): {1},  # tied to position 0
      (0, 3, 0): everything - {5, 6}, (0, 3, 1): everything - {1, 2},  # distinct from 0..2
      (1, 1, 0): {4}, (1, 1, 1): {4},  # forced over the tie
      (1, 2, 0): everything - {2, 4, 0}, (1, 2, 1): everything - {6, 4, 0},  # and the ban
      (1, 4, 0): everything - {2, 4, 5}, (1, 4, 1): everything - {6, 4, 1},  # 3 not distinct
  }
  prepared = search_constraints.prepare(Constraints(None, forced, banned, tied, distinct))
  assert prepared.reads_prefix and not Constraints(None, forced, banned).reads_prefix
  for t in range(max_len):
    got = np.asarray(search_constraints.allowed_tokens(prepared, jnp.int32(t), vocab, eos,
                                                       prefix))
    assert got.shape == (2, 2, vocab)
    for b in range(2):
      for w in range(2):
        want = expected.get((b, t, w), everything)
        assert set(np.flatnonzero(got[b, w]).tolist()) == want, (b, t, w)
  # The length overrides the tie (row 0 ends at 2) and removes eos before the end.
  exact = search_constraints.prepare(Constraints(np.array([2, 5], np.int32), forced, banned,
                                                 tied, distinct))
  got = np.asarray(search_constraints.allowed_tokens(exact, jnp.int32(2), vocab, eos, prefix))
  assert set(np.flatnonzero(got[0, 0]).tolist()) == {eos}
  assert set(np.flatnonzero(got[1, 0]).tolist()) == everything - {2, 4, 0, eos}
  with pytest.raises(ValueError, match="need the hypotheses' tokens"):
    search_constraints.allowed_tokens(prepared, jnp.int32(0), vocab, eos)


def _random_pattern(seed, max_len):
  """tied int32 (B, T) (about a third of the positions tied to a random earlier one) and distinct
  bool (B, T) (three positions a row, so that a row of V = 5 ids always has a choice)."""
  rng = np.random.default_rng(seed)
  tied = np.full((B, max_len), -1, np.int32)
  for b in range(B):
    for t in range(1, max_len):
      if rng.random() < 0.35:
        tied[b, t] = rng.integers(0, t)
  distinct = np.zeros((B, max_len), bool)
  for b in range(B):
    distinct[b, rng.choice(max_len, 3, replace=False)] = True
  return tied, distinct


@pytest.mark.parametrize("exact_lens", [None, [4, 5, 3]])
def test_ties_and_distinct_positions_match_the_reference_algorithms(exact_lens):
  width, alpha, max_len = 3, 0.6, MAX_LEN
  row_bias = Trigram.row_bias(43, eos_bias=0.5)
  state = Trigram.init_state(row_bias)
  forced, banned = _random_constraints(47, max_len, with_eos=exact_lens is None)
  tied, distinct = _random_pattern(53, max_len)
  search = dict(exact_lens=exact_lens, forced=forced, banned=banned, tied=tied,
                distinct=distinct)
  greedy = run_greedy(MODEL.step, state, max_len, **search)
  one = run_beam(MODEL.step, state, 1, max_len, **search)
  beams = run_beam(MODEL.step, state, width, max_len, alpha, **search)
  for field in range(3):
    np.testing.assert_array_equal(one[field][:, 0], greedy[field])
  tied_lines = 0  # lines whose tie picked a token the model did not prefer
  for b in range(B):
    rule = (None if exact_lens is None else exact_lens[b], forced[b], banned[b], tied[b],
            distinct[b])
    log_probs_fn = MODEL.log_probs_fn(row_bias, b)
    seq, total = greedy_reference(log_probs_fn, max_len, *rule)
    assert row_tokens(greedy.tokens[b], greedy.lengths[b]) == seq
    np.testing.assert_allclose(greedy.scores[b], total, rtol=1e-5)
    expected = beam_reference(log_probs_fn, width, max_len, alpha, *rule)
    assert_beams_equal(beams, b, expected)
    everything = dict(enumerate_hypotheses(log_probs_fn, max_len, *rule))
    for score, seq in expected:
      for t, token in enumerate(seq):
        assert token in allowed(t, *rule, prefix=seq[:t])
        if 0 <= tied[b, t] < t and forced[b, t] < 0:
          assert token == seq[tied[b, t]]
          tied_lines += token != int(np.argmax(log_probs_fn(seq[:t])))
      marked = [token for t, token in enumerate(seq) if distinct[b, t]
                and not (0 <= tied[b, t] < t) and forced[b, t] < 0]
      assert len(set(marked)) == len(marked)
      np.testing.assert_allclose(everything[seq] / ((5 + len(seq)) / 6) ** alpha, score,
                                 rtol=1e-12)
  assert tied_lines >= 1


def _forced(*shape, dtype=np.int32, value=-1):
  return np.full(shape, value, dtype)


def _eos_before_the_end():
  forced = _forced(B, 5)
  forced[2, 1] = EOS
  return forced


def _tied_to_itself():
  tied = _forced(B, 5)
  tied[1, 1] = 0
  tied[1, 2] = 2
  return tied


def _banned_below_minus_one():
  banned = _forced(B, 5, 2)
  banned[1, 2, 0] = -2
  return banned


@pytest.mark.parametrize("kwargs, message", [
    ({"forced_tokens": _forced(B, 5, dtype=np.float32)}, "forced_tokens: expected an integer"),
    ({"forced_tokens": _forced(B, 5, dtype=bool)}, "forced_tokens: expected an integer"),
    ({"forced_tokens": _forced(B)}, "forced_tokens: expected an array of rank 2"),
    ({"forced_tokens": _forced(B, 4)},
     r"forced_tokens: expected shape \(B, max_len\) = \(3, 5\), got shape \(3, 4\)"),
    ({"forced_tokens": _forced(B + 1, 5)},
     r"forced_tokens with shape \(4, 5\) does not match the batch size B = 3"),
    ({"forced_tokens": _forced(B, 5, value=-3)},
     r"forced_tokens: token ids must be >= -1 \(-1 = none\), got -3"),
    ({"banned_tokens": _forced(B, 5, 2, 1)}, "banned_tokens: expected an array of rank 2 or 3"),
    ({"banned_tokens": _forced(B, 5, dtype=np.float64)}, "banned_tokens: expected an integer"),
    ({"banned_tokens": _forced(B, 6, 2)},
     r"banned_tokens: expected shape \(B, max_len\) = \(3, 5\) or \(B, max_len, K\), got shape "
     r"\(3, 6, 2\)"),
    ({"banned_tokens": _banned_below_minus_one()},
     r"banned_tokens: token ids must be >= -1 \(-1 = none\), got -2 \(the first below -1 at "
     r"index \(1, 2, 0\)\)"),
    ({"tied_positions": _forced(B, 5, dtype=np.float32)}, "tied_positions: expected an integer"),
    ({"tied_positions": _forced(B, 5, 2)}, "tied_positions: expected an array of rank 2"),
    ({"tied_positions": _forced(B, 4)},
     r"tied_positions: expected shape \(B, max_len\) = \(3, 5\), got shape \(3, 4\)"),
    ({"tied_positions": _forced(B, 5, value=-2)},
     r"tied_positions: positions must be >= -1 \(-1 = none\), got -2"),
    ({"tied_positions": _tied_to_itself()},
     r"tied_positions\[1, 2\] = 2: a position can only repeat an earlier one \(a value in "
     r"\[0, 2\), or -1\)"),
    ({"distinct_positions": _forced(B, 5, value=1)},
     "distinct_positions must be a bool array, got dtype int32"),
    ({"distinct_positions": _forced(B, 6, dtype=bool, value=True)},
     r"distinct_positions: expected shape \(B, max_len\) = \(3, 5\), got shape \(3, 6\)"),
    ({"forced_tokens": _eos_before_the_end(), "exact_lens": np.array([1, 2, 4], np.int32)},
     r"forced_tokens forces eos \(id 3\) at position 1 of row 2, before exact_lens\[2\] = 4"),
])
def test_bad_constraints_raise_value_errors_naming_them(kwargs, message):
  def step(state, tokens):
    return jnp.zeros(tokens.shape + (V,)), state

  args = dict(step_fn=step, init_state={"h": jnp.zeros((B, 2))}, bos_id=BOS, eos_id=EOS,
              max_len=5, **kwargs)
  with pytest.raises(ValueError, match=message):
    zoo.greedy_search(**args)
  with pytest.raises(ValueError, match=message):
    zoo.beam_search(**args, beam_size=2)


def test_a_constraint_alone_gives_the_batch_size():
  # A state of scalars only: the batch size comes from forced_tokens.
  def step(state, tokens):
    return jnp.log(jnp.asarray(POSITION_PROBS, jnp.float32))[state["pos"]] + 0 * tokens[:, None], {
        "pos": state["pos"] + 1}

  forced = np.array([[4, 1, -1, -1], [-1, -1, 0, -1]], np.int32)
  out = zoo.greedy_search(step, {"pos": jnp.int32(0)}, bos_id=BOS, eos_id=EOS, max_len=4,
                          forced_tokens=forced)
  assert [row_tokens(out.tokens[b], out.lengths[b]) for b in range(2)] == [(4, 1, 1), (1, 4, 0)]
