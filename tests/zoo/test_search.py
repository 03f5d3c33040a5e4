"""Greedy and beam search on small n-gram models whose every sequence can be enumerated exactly
(the models and references: _search_reference.py; the constraints: test_search_constraints.py).

The models are compiled into few programs: one trigram step function is shared by most tests, and
the examples differ through a per-example bias that lives in the decoder state (not a recompile).
"""

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from _helpers import random_variables
from _search_reference import B
from _search_reference import BOS
from _search_reference import EOS
from _search_reference import FAST_COMPILE
from _search_reference import MAX_LEN
from _search_reference import MODEL
from _search_reference import Trigram
from _search_reference import V
from _search_reference import assert_beams_equal
from _search_reference import beam_reference
from _search_reference import enumerate_hypotheses
from _search_reference import greedy_reference
from _search_reference import log_softmax
from _search_reference import penalty
from _search_reference import row_tokens
from _search_reference import run_beam
from _search_reference import run_greedy


def test_greedy_follows_argmax_and_pads_after_eos():
  row_bias = Trigram.row_bias(0, eos_bias=1.5)
  out = run_greedy(MODEL.step, Trigram.init_state(row_bias), MAX_LEN)
  assert out.tokens.shape == (B, MAX_LEN) and out.tokens.dtype == np.int32
  assert out.lengths.shape == (B,) and out.lengths.dtype == np.int32
  assert out.scores.shape == (B,) and out.scores.dtype == np.float32
  for b in range(B):
    seq, total = greedy_reference(MODEL.log_probs_fn(row_bias, b), MAX_LEN)
    assert row_tokens(out.tokens[b], out.lengths[b]) == seq
    np.testing.assert_allclose(out.scores[b], total, rtol=1e-5)
  assert (out.lengths < MAX_LEN).sum() >= 2  # the eos layout was exercised


# A Markov chain (the next token depends on the previous one only) where greedy search takes the
# likelier first token but the best sequence starts with the other one.
CHAIN_PROBS = np.array([
    # to: pad   1    bos   eos   4
    [0.10, 0.30, 0.10, 0.40, 0.10],  # from pad
    [0.05, 0.25, 0.05, 0.35, 0.30],  # from 1: nothing is likely next, eos a little more
    [0.02, 0.48, 0.02, 0.08, 0.40],  # from bos: 1 is likelier than 4 ...
    [0.20, 0.20, 0.20, 0.20, 0.20],  # from eos (never used)
    [0.02, 0.03, 0.02, 0.90, 0.03],  # from 4: ... but 4 is almost surely followed by eos
])


def _chain_step(state, tokens):
  return jnp.log(jnp.asarray(CHAIN_PROBS, jnp.float32))[tokens], state


def test_beam_finds_the_best_sequence_that_greedy_misses():
  max_len, state = 4, {"unused": jnp.zeros((B, 2))}
  log_probs_fn = lambda prefix: np.log(CHAIN_PROBS[((BOS,) + tuple(prefix))[-1]])
  everything = dict(enumerate_hypotheses(log_probs_fn, max_len))
  best_seq = max(everything, key=everything.get)
  assert best_seq == (4,)
  np.testing.assert_allclose(everything[best_seq], np.log(0.40 * 0.90))

  greedy = run_greedy(_chain_step, state, max_len)
  assert row_tokens(greedy.tokens[0], greedy.lengths[0]) == (1,)
  np.testing.assert_allclose(greedy.scores, np.log(0.48 * 0.35), rtol=1e-6)

  beams = run_beam(_chain_step, state, 2, max_len)
  assert beams.tokens.shape == (B, 2, max_len) and beams.lengths.shape == (B, 2)
  for b in range(B):
    assert row_tokens(beams.tokens[b, 0], beams.lengths[b, 0]) == best_seq
    second = row_tokens(beams.tokens[b, 1], beams.lengths[b, 1])
    np.testing.assert_allclose(beams.scores[b], [everything[best_seq], everything[second]],
                               rtol=1e-6)


def test_exhaustive_beam_is_the_exact_ranking_and_length_penalty_reorders_it():
  # At most 5 * 4**2 = 80 candidates per step, so beam 80 prunes nothing: it must return the top
  # 80 of all 1 + 4 + 16 + 64 = 85 hypotheses, exactly ranked.
  max_len, width, row_bias = 3, 80, Trigram.row_bias(3, eos_bias=1.0)
  winners = {}
  for alpha in (0.0, 1.5):  # a traced argument: one compilation
    beams = run_beam(MODEL.step, Trigram.init_state(row_bias), width, max_len, alpha)
    for b in range(B):
      hypotheses = enumerate_hypotheses(MODEL.log_probs_fn(row_bias, b), max_len)
      ranked = sorted(((total / penalty(len(seq), alpha), seq) for seq, total in hypotheses),
                      reverse=True)[:width]
      assert -np.diff([score for score, _ in ranked]).min() > 1e-5  # no near-ties
      assert_beams_equal(beams, b, ranked)
      winners[alpha, b] = ranked[0][1]
  # The penalty favours longer hypotheses: it changes the winner of some example to a longer one.
  changed = [b for b in range(B) if winners[0.0, b] != winners[1.5, b]]
  assert changed and all(len(winners[1.5, b]) > len(winners[0.0, b]) for b in changed)


@pytest.mark.parametrize("exact_lens", [None, [2, 5, 1]])
def test_pruned_beam_matches_the_reference_algorithm(exact_lens):
  max_len, width, alpha, row_bias = MAX_LEN, 3, 0.6, Trigram.row_bias(5, eos_bias=1.0)
  beams = run_beam(MODEL.step, Trigram.init_state(row_bias), width, max_len, alpha, exact_lens)
  for b in range(B):
    expected = beam_reference(MODEL.log_probs_fn(row_bias, b), width, max_len, alpha,
                               None if exact_lens is None else exact_lens[b])
    assert len(expected) == width
    assert_beams_equal(beams, b, expected)


@pytest.mark.parametrize("eos_bias", [-3.0, 0.0, 3.0])
def test_beam_size_one_equals_greedy(eos_bias):
  state = Trigram.init_state(Trigram.row_bias(11, eos_bias))
  for exact_lens in (None, [3, 5, 1]):
    greedy = run_greedy(MODEL.step, state, MAX_LEN, exact_lens)
    beams = run_beam(MODEL.step, state, 1, MAX_LEN, exact_lens=exact_lens)
    np.testing.assert_array_equal(beams.tokens[:, 0], greedy.tokens)
    np.testing.assert_array_equal(beams.lengths[:, 0], greedy.lengths)
    np.testing.assert_array_equal(beams.scores[:, 0], greedy.scores)


@pytest.mark.parametrize("eos_bias", [-6.0, 6.0])  # the free model ends too late / too early
def test_exact_lens_gives_exactly_those_lengths(eos_bias):
  max_len, width, row_bias = MAX_LEN, 3, Trigram.row_bias(7, eos_bias)
  state = Trigram.init_state(row_bias)
  exact_lens = np.array([3, 0, 5], np.int32)
  free = run_greedy(MODEL.step, state, max_len)
  assert (free.lengths != exact_lens).sum() >= 2  # the constraint has work to do

  greedy = run_greedy(MODEL.step, state, max_len, exact_lens)
  beams = run_beam(MODEL.step, state, width, max_len, exact_lens=exact_lens)
  np.testing.assert_array_equal(greedy.lengths, exact_lens)
  for b in range(B):
    log_probs_fn = MODEL.log_probs_fn(row_bias, b)
    seq, total = greedy_reference(log_probs_fn, max_len, exact_lens[b])
    assert row_tokens(greedy.tokens[b], exact_lens[b]) == seq
    np.testing.assert_allclose(greedy.scores[b], total, rtol=1e-5)
    # Length 0 has a single hypothesis; the other slots of that example stay empty (-inf).
    expected = beam_reference(log_probs_fn, width, max_len, 0.0, exact_lens[b])
    assert len(expected) == (1 if exact_lens[b] == 0 else width)
    assert all(len(seq) == exact_lens[b] for _, seq in expected)
    assert_beams_equal(beams, b, expected)
    # The scores are those of the unconstrained model, checked against brute force.
    everything = dict(enumerate_hypotheses(log_probs_fn, max_len, exact_lens[b]))
    np.testing.assert_allclose([everything[seq] for _, seq in expected],
                               [score for score, _ in expected], rtol=1e-12)


def test_state_reordering_follows_the_beams():
  # The logits depend only on a hash of the whole history of each row, kept in the state: if the
  # state of one beam were handed to another (or to another example) the results would change.
  max_len, width, alpha, modulus = 6, 3, 0.3, 97
  table = (2.0 * np.random.default_rng(17).standard_normal((modulus, V))).astype(np.float32)
  start = np.array([0, 1, 2], np.int32)

  def step(state, tokens):
    history = (7 * state["history"] + tokens) % modulus
    return jnp.asarray(table)[history], {"history": history}

  def log_probs_fn(b):
    def log_probs(prefix):
      history = start[b]
      for token in (BOS,) + tuple(prefix):
        history = (7 * history + token) % modulus
      return log_softmax(table[history])
    return log_probs

  beams = run_beam(step, {"history": jnp.asarray(start)}, width, max_len, alpha)
  for b in range(B):
    assert_beams_equal(beams, b, beam_reference(log_probs_fn(b), width, max_len, alpha))


def _chain(probs, dtype=jnp.float32):
  """A Markov chain step whose state is untouched: logits = log probs[previous token]."""
  log_probs = jnp.log(jnp.asarray(probs, jnp.float32)).astype(dtype)
  return lambda state, tokens: (log_probs[tokens], state)


def test_length_penalty_lets_a_longer_hypothesis_replace_a_finished_one():
  # Step 0 finishes [] (p = 0.6) and keeps [1] (p = 0.38) alive; 1 -> 4 -> 0 -> eos is almost sure.
  # Without a penalty [] wins and the search stops at once. With alpha = 2, [1, 4, 0] wins, although
  # [] already beats [1] divided by lp(1): only lp(max_len) bounds what [1] can still become.
  probs = np.full((V, V), 0.01)
  probs[BOS, [EOS, 1]] = 0.6, 0.38
  probs[1, 4] = probs[4, 0] = probs[0, EOS] = 0.97
  probs /= probs.sum(axis=1, keepdims=True)
  step, state, max_len, alpha = _chain(probs), {"unused": jnp.zeros((B,))}, 6, 2.0
  plain = run_beam(step, state, 1, max_len, alpha=0.0)
  penalized = run_beam(step, state, 1, max_len, alpha=alpha)
  empty = np.log(probs[BOS, EOS]) / penalty(0, alpha)
  longer = np.log(probs[BOS, 1] * probs[1, 4] * probs[4, 0] * probs[0, EOS]) / penalty(3, alpha)
  assert longer > empty > np.log(probs[BOS, 1]) / penalty(1, alpha)
  for b in range(B):
    assert row_tokens(plain.tokens[b, 0], plain.lengths[b, 0]) == ()
    np.testing.assert_allclose(plain.scores[b, 0], np.log(probs[BOS, EOS]), rtol=1e-6)
    assert row_tokens(penalized.tokens[b, 0], penalized.lengths[b, 0]) == (1, 4, 0)
    np.testing.assert_allclose(penalized.scores[b, 0], longer, rtol=1e-6)


def test_low_precision_logits_are_scored_in_float32():
  step, max_len = _chain(CHAIN_PROBS, jnp.bfloat16), 4
  out = run_greedy(step, {"unused": jnp.zeros((B,))}, max_len)
  rounded = np.log(CHAIN_PROBS).astype(jnp.bfloat16).astype(np.float64)
  expected = log_softmax(rounded[BOS])[1] + log_softmax(rounded[1])[EOS]
  assert out.scores.dtype == np.float32
  np.testing.assert_allclose(out.scores, expected, rtol=1e-6)


def test_no_retrace_for_repeated_calls_with_equal_shapes():
  # Called directly (the search's own jit), not through this file's helpers.
  traces = []

  def step(state, tokens):
    traces.append(None)  # runs only while tracing
    return MODEL.step(state, tokens)

  for seed in range(3):
    state = Trigram.init_state(Trigram.row_bias(seed))
    exact_lens = jnp.array([seed, 1, 4], jnp.int32)
    greedy = zoo.greedy_search(step, state, bos_id=BOS, eos_id=EOS, max_len=MAX_LEN)
    beams = zoo.beam_search(step, state, beam_size=3, bos_id=BOS, eos_id=EOS, max_len=MAX_LEN,
                            length_penalty=0.25 * seed, exact_lens=exact_lens)
    if seed == 0:
      traces_after_first_calls = len(traces)
    for got, want in [(greedy, run_greedy(MODEL.step, state, MAX_LEN)),
                      (beams, run_beam(MODEL.step, state, 3, MAX_LEN, 0.25 * seed, exact_lens))]:
      np.testing.assert_array_equal(got.tokens, want.tokens)
      np.testing.assert_array_equal(got.lengths, want.lengths)
      np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)
  assert len(traces) == traces_after_first_calls


def test_search_inside_jit_with_step_closing_over_parameters():
  traces = []

  @jax.jit
  def decode(table, pos_bias, state, exact_lens):
    traces.append(None)

    def step(state, tokens):
      logits = table[state["prev"], tokens] + pos_bias[state["pos"]] + state["row_bias"]
      return logits, {"prev": tokens, "pos": state["pos"] + 1, "row_bias": state["row_bias"]}

    greedy = zoo.greedy_search(step, state, bos_id=BOS, eos_id=EOS, max_len=5)
    beams = zoo.beam_search(step, state, beam_size=3, bos_id=BOS, eos_id=EOS, max_len=5,
                            length_penalty=0.6, exact_lens=exact_lens)
    return greedy, beams

  for seed in (5, 6):
    row_bias = Trigram.row_bias(seed, eos_bias=1.0)
    state = Trigram.init_state(row_bias)
    greedy, beams = jax.device_get(decode(MODEL.table, MODEL.pos_bias, state,
                                          jnp.array([2, 5, 1], jnp.int32)))
    expected_greedy = run_greedy(MODEL.step, state, 5)
    for got, want in zip(greedy, expected_greedy):
      np.testing.assert_array_equal(got, want)
    for b, exact_len in enumerate([2, 5, 1]):
      expected = beam_reference(MODEL.log_probs_fn(row_bias, b), 3, 5, 0.6, exact_len)
      assert_beams_equal(beams, b, expected)
  assert len(traces) == 1


def _bad_logits_step(state, tokens):
  return jnp.zeros(tokens.shape), state


def _growing_step(state, tokens):
  return jnp.zeros(tokens.shape + (V,)), {"h": jnp.concatenate([state["h"], state["h"]], axis=1)}


@pytest.mark.parametrize("kwargs, message", [
    ({"beam_size": 0}, "beam_size must be an integer >= 1, got 0"),
    ({"beam_size": 2.0}, "beam_size must be an integer >= 1, got 2.0"),
    ({"beam_size": True}, "beam_size must be an integer >= 1, got True"),
    ({"max_len": 0}, "max_len must be an integer >= 1, got 0"),
    ({"bos_id": -1}, "bos_id must be an integer >= 0, got -1"),
    ({"eos_id": V}, r"eos_id = 5 is not a token of the vocabulary of size V = 5"),
    ({"exact_lens": jnp.array([1, 6, 2])}, r"exact_lens must lie in \[0, 5\]"),
    ({"exact_lens": jnp.array([1.0, 2.0, 3.0])}, "exact_lens: expected an integer array"),
    ({"exact_lens": jnp.ones((B, 1), jnp.int32)}, "exact_lens: expected an array of rank 1"),
    ({"exact_lens": jnp.ones((4,), jnp.int32)},
     r"exact_lens with shape \(4,\) does not match the batch size B = 3"),
    ({"init_state": {"h": jnp.zeros((B, 2)), "c": jnp.zeros((B + 1, 2))}},
     r"init_state: every leaf must have the batch axis first.*\['c'\] has shape \(4, 2\)"),
    ({"init_state": {"pos": jnp.int32(0)}}, "init_state: no leaf has a leading batch axis"),
    ({"step_fn": "not a function"}, "step_fn must be callable"),
    ({"step_fn": _bad_logits_step}, r"logits of shape \(N, V\) with N = 6 rows, got shape \(6,\)"),
    ({"step_fn": _growing_step},
     r"step_fn changed the state leaf state\['h'\] from shape \(6, 2\)"),
    ({"length_penalty": float("inf")}, "length_penalty must be a finite number"),
])
def test_bad_arguments_raise_value_errors_naming_them(kwargs, message):
  args = dict(step_fn=_chain(CHAIN_PROBS), init_state={"h": jnp.zeros((B, 2))}, beam_size=2,
              bos_id=BOS, eos_id=EOS, max_len=5, exact_lens=None)
  args.update(kwargs)
  with pytest.raises(ValueError, match=message):
    zoo.beam_search(**args)
  if "beam_size" not in kwargs and "length_penalty" not in kwargs:
    del args["beam_size"]
    with pytest.raises(ValueError, match=message.replace("N = 6", "N = 3").replace(
        r"\(6", r"\(3")):
      zoo.greedy_search(**args)


def test_the_loop_stops_when_every_row_is_finished():
  calls = []

  def step(state, tokens):
    jax.debug.callback(lambda: calls.append(None))  # runs once per executed step
    return _chain_step(state, tokens)

  state, max_len = {"unused": jnp.zeros((B,))}, 9
  greedy = run_greedy(step, state, max_len)
  np.testing.assert_array_equal(greedy.lengths, 1)  # every row: 1, eos
  assert len(calls) == 2
  calls.clear()
  # Beam 2 after step 2: finished [4] (0.36) and [1] (0.168) beat the best alive [1, 4] (0.144).
  beams = run_beam(step, state, 2, max_len)
  np.testing.assert_array_equal(beams.lengths, 1)
  assert len(calls) == 2


SRC_VOCAB, TGT_VOCAB, DECODE_LEN = 11, 13, 6


class RealDecoder(NamedTuple):
  """How the test drives one of the zoo's decoders (all with the sizes above)."""
  model: Any
  init_args: tuple  # model.init(key, *init_args) creates every parameter
  init_state: Callable  # (variables, src, src_lens) -> decoding state with leading axis B
  teacher_forced: Callable  # (variables, src, src_lens, inputs (N, T)) -> logits (N, T, V)


def _seq2seq_decoder(builder, num_layers, src, src_lens):
  from zoo import seq2seq  # pylint: disable=g-import-not-at-top

  model = getattr(seq2seq, builder)(SRC_VOCAB, TGT_VOCAB, embed_dim=6, hidden_size=10,
                                    num_layers=num_layers)
  return RealDecoder(
      model, (src, src_lens, jnp.zeros((B, DECODE_LEN), jnp.int32)),
      lambda v, s, lens: model.apply(v, s, lens, method=seq2seq.Seq2Seq.init_decode_state),
      lambda v, s, lens, inputs: model.apply(v, s, lens, inputs)[0])


def _transformer_decoder(src, src_lens):
  from zoo import transformer  # pylint: disable=g-import-not-at-top

  model = transformer.Transformer(SRC_VOCAB, TGT_VOCAB, model_dim=12, num_heads=4, ffn_hidden=10,
                                  num_encoder_layers=1, num_decoder_layers=1, dropout_rate=0.0,
                                  normalize_before=True)
  return RealDecoder(
      model, (src, jnp.zeros((B, DECODE_LEN), jnp.int32), src_lens),
      lambda v, s, lens: model.apply(v, s, lens, max_len=DECODE_LEN,
                                     method=transformer.Transformer.init_decode_state),
      lambda v, s, lens, inputs: model.apply(v, s, inputs, lens))


def _rescore(decoder, variables, src, src_lens, tokens, lengths):
  """Teacher-forced log-probabilities of N hypotheses, float64 (N,), and of every next token at
  every position, float64 (N, T, V).

  src (N, S) and src_lens (N,) are the source of each hypothesis; tokens int (N, T) and lengths
  (N,) are laid out as search outputs (eos at `length` when shorter than T).
  """
  count, max_len = tokens.shape
  inputs = np.concatenate([np.full((count, 1), BOS), tokens[:, :-1]], axis=1)  # bos, y_1, ...
  logits = jax.jit(decoder.teacher_forced, compiler_options=FAST_COMPILE)(variables, src, src_lens,
                                           jnp.asarray(inputs, jnp.int32))
  log_probs = np.asarray(jax.nn.log_softmax(jnp.asarray(logits, jnp.float32)), np.float64)
  out = np.zeros(count)
  for row, length in enumerate(lengths):
    targets = list(tokens[row, :length]) + ([EOS] if length < max_len else [])
    out[row] = sum(log_probs[row, i, token] for i, token in enumerate(targets))
  return out, log_probs


@pytest.mark.parametrize("name", ["bahdanau", "luong", "transformer"])
def test_search_drives_the_zoo_decoders(name):
  width, alpha = 4, 0.7
  rng = np.random.default_rng(1)
  src = rng.integers(4, SRC_VOCAB, (B, 7)).astype(np.int32)
  src_lens = np.array([7, 4, 2], np.int32)
  decoder = {
      "bahdanau": lambda: _seq2seq_decoder("bahdanau_seq2seq", 1, src, src_lens),
      "luong": lambda: _seq2seq_decoder("luong_seq2seq", 1, src, src_lens),
      "transformer": lambda: _transformer_decoder(src, src_lens),
  }[name]()
  variables = random_variables(decoder.model, *decoder.init_args, seed=2)
  exact_lens = np.array([3, DECODE_LEN, 1], np.int32)

  @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
  def decode(variables, src, src_lens, exact_lens):
    state = decoder.init_state(variables, src, src_lens)
    step = lambda s, t: decoder.model.apply(variables, s, t, method="decode_step")
    search = dict(bos_id=BOS, eos_id=EOS, max_len=DECODE_LEN)
    return (zoo.greedy_search(step, state, **search),
            zoo.beam_search(step, state, beam_size=1, **search),
            zoo.beam_search(step, state, beam_size=width, length_penalty=alpha,
                            exact_lens=exact_lens, **search))

  greedy, beam_one, beams = jax.device_get(decode(variables, src, src_lens, exact_lens))
  np.testing.assert_array_equal(beam_one.tokens[:, 0], greedy.tokens)
  np.testing.assert_array_equal(beam_one.lengths[:, 0], greedy.lengths)
  np.testing.assert_allclose(beam_one.scores[:, 0], greedy.scores, rtol=1e-6)
  assert beams.tokens.shape == (B, width, DECODE_LEN) and beams.scores.shape == (B, width)
  assert np.all(beams.tokens < TGT_VOCAB) and np.all(np.isfinite(beams.scores))
  assert np.all(np.diff(beams.scores, axis=1) <= 0)  # best first
  np.testing.assert_array_equal(beams.lengths, np.repeat(exact_lens[:, None], width, axis=1))
  for b in range(B):
    for i in range(width):
      row_tokens(beams.tokens[b, i], beams.lengths[b, i])
  # Every hypothesis scores what the teacher-forced model gives it, so the state followed its
  # beam. The beams (row b * W + i) and the greedy outputs are rescored in one batch.
  tokens = np.concatenate([beams.tokens.reshape(B * width, DECODE_LEN), greedy.tokens])
  lengths = np.concatenate([beams.lengths.reshape(-1), greedy.lengths])
  sources = np.concatenate([np.repeat(np.arange(B), width), np.arange(B)])
  rescored, log_probs = _rescore(decoder, variables, src[sources], src_lens[sources], tokens,
                                 lengths)
  np.testing.assert_allclose(beams.scores * penalty(beams.lengths, alpha),
                             rescored[:B * width].reshape(B, width), rtol=1e-4)
  np.testing.assert_allclose(greedy.scores, rescored[B * width:], rtol=1e-4)
  # Greedy means: each output token (eos included) is the argmax of the teacher-forced decoder fed
  # with the outputs before it.
  for b in range(B):
    n = min(int(greedy.lengths[b]) + 1, DECODE_LEN)
    np.testing.assert_array_equal(greedy.tokens[b, :n],
                                  np.argmax(log_probs[B * width + b, :n], axis=-1))
