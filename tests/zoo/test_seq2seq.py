import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoo
from _helpers import np_lengths_mask
from _helpers import np_lstm_cell
from _helpers import np_masked_softmax
from _helpers import random_variables

B, S, T, E, H, V, EMBED, LAYERS = 3, 7, 5, 6, 4, 11, 9, 2
SRC_LENS = np.array([7, 3, 1], np.int32)
RNG = np.random.default_rng(0)  # numpy test data: no compilation per random array
DECODERS = {"bahdanau": zoo.BahdanauDecoder, "luong": zoo.LuongDecoder}


def _normal(*shape, scale=1.0):
  return jnp.asarray(RNG.normal(size=shape) * scale, jnp.float32)


# ------------------------------------------------------------------------------------------------
# numpy references of one decoding step, written from the equations in zoo/seq2seq.py


def _np(tree):
  return jax.tree.map(lambda a: np.asarray(a, np.float64), tree)


def _np_lstm_stack(p, bottom_gates, state):
  """Multi-layer LSTM step of one example; bottom_gates (4H,) already holds x W_ih + b."""
  new, gates = [], bottom_gates
  for layer, (h, c) in enumerate(state):
    lp = p[f"layers_{layer}"]
    if layer > 0:
      gates = new[-1][0] @ lp["input"]["kernel"][:, 0] + lp["input"]["bias"][0]
    new.append(np_lstm_cell(gates + h @ lp["hidden_kernel"][0], c))
  return new


def _np_masked_softmax(scores, n):
  """Softmax over the first n of the source positions (S,)."""
  return np_masked_softmax(scores, np_lengths_mask(n, len(scores)))


def _np_embed_gates(p, token):
  lp = p["lstm"]["layers_0"]["input"]
  return p["embedding"]["embedding"][token] @ lp["kernel"][:, 0] + lp["bias"][0]


def _np_bahdanau(p, tokens, enc, n, state):
  logits, weights = [], []
  for token in tokens:
    a = p["attention"]["scorer"]
    scores = np.tanh(state[-1][0] @ a["w_q"] + enc @ a["w_k"]) @ a["v"]  # (S,)
    w = _np_masked_softmax(scores, n)
    gates = _np_embed_gates(p, token) + (w @ enc) @ p["context_gates"]["kernel"]
    state = _np_lstm_stack(p["lstm"], gates, state)
    logits.append(state[-1][0] @ p["output"]["kernel"] + p["output"]["bias"])
    weights.append(w)
  return np.stack(logits), np.stack(weights)


def _np_luong(p, tokens, enc, n, state, activation=np.tanh):
  memory = enc @ p["input_proj"]["kernel"] + p["input_proj"]["bias"]  # (S, H)
  feed, logits, weights = np.zeros(H), [], []
  for token in tokens:
    gates = _np_embed_gates(p, token) + feed @ p["feed_gates"]["kernel"]
    state = _np_lstm_stack(p["lstm"], gates, state)
    top = state[-1][0]
    w = _np_masked_softmax(memory @ top, n)
    feed = activation(np.concatenate([w @ memory, top]) @ p["output_proj"]["kernel"]
                      + p["output_proj"]["bias"])
    logits.append(feed @ p["output"]["kernel"] + p["output"]["bias"])
    weights.append(w)
  return np.stack(logits), np.stack(weights)


NUMPY_DECODERS = {"bahdanau": _np_bahdanau, "luong": _np_luong}


# ------------------------------------------------------------------------------------------------
# decoders on random encoder outputs


@functools.lru_cache(maxsize=None)
def _make_decoder(kind):
  """(kind, module, variables, jitted teacher-forced apply, inputs) for one decoder kind."""
  model = DECODERS[kind](V, EMBED, H, num_layers=LAYERS, dropout_rate=0.4)
  tokens = jnp.asarray(RNG.integers(0, V, (B, T)), jnp.int32)
  enc_outputs = _normal(B, S, E)
  init_state = tuple(zoo.LSTMState(_normal(B, H), _normal(B, H)) for _ in range(LAYERS))
  inputs = (tokens, enc_outputs, SRC_LENS, init_state)
  variables = random_variables(model, *inputs, seed=5, scale=0.6)  # no init compiled
  apply = jax.jit(model.apply, static_argnames="deterministic")
  return kind, model, variables, apply, inputs


@pytest.fixture(scope="module", params=sorted(DECODERS))
def decoder(request):
  return _make_decoder(request.param)


def test_shapes_and_numpy_reference(decoder):
  kind, _, variables, apply, (tokens, enc_outputs, src_lens, init_state) = decoder
  logits, weights = apply(variables, tokens, enc_outputs, src_lens, init_state)
  chex.assert_shape(logits, (B, T, V))
  chex.assert_shape(weights, (B, T, S))
  p = _np(variables["params"])
  for b in range(B):
    state = [(np.asarray(s.h[b], np.float64), np.asarray(s.c[b], np.float64)) for s in init_state]
    want_logits, want_weights = NUMPY_DECODERS[kind](
        p, np.asarray(tokens[b]), np.asarray(enc_outputs[b], np.float64), src_lens[b], state)
    np.testing.assert_allclose(logits[b], want_logits, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(weights[b], want_weights, atol=1e-6)


def test_luong_without_output_activation_as_in_the_paddle_chapter():
  _, model, variables, _, (tokens, enc_outputs, src_lens, init_state) = _make_decoder("luong")
  linear = model.clone(output_activation=None)
  logits, _ = jax.jit(linear.apply)(variables, tokens, enc_outputs, src_lens, init_state)
  state = [(np.asarray(s.h[1], np.float64), np.asarray(s.c[1], np.float64)) for s in init_state]
  want, _ = _np_luong(_np(variables["params"]), np.asarray(tokens[1]),
                      np.asarray(enc_outputs[1], np.float64), src_lens[1], state,
                      activation=lambda x: x)
  np.testing.assert_allclose(logits[1], want, atol=2e-5, rtol=1e-5)


def test_weights_mask_padded_sources_which_do_not_matter(decoder):
  _, _, variables, apply, (tokens, enc_outputs, src_lens, init_state) = decoder
  logits, weights = apply(variables, tokens, enc_outputs, src_lens, init_state)
  for b, n in enumerate(src_lens):
    np.testing.assert_array_equal(weights[b, :, n:], 0.0)
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
  garbage = enc_outputs.at[1, 3:].set(1e3).at[2, 1:].set(-1e3)
  chex.assert_trees_all_close(apply(variables, tokens, garbage, src_lens, init_state),
                              (logits, weights), atol=1e-6)


def test_step_path_equals_teacher_forcing(decoder):
  _, model, variables, apply, (tokens, enc_outputs, src_lens, init_state) = decoder
  logits, _ = apply(variables, tokens, enc_outputs, src_lens, init_state)
  state = model.apply(variables, enc_outputs, src_lens, init_state,
                      method=type(model).init_decode_state)
  chex.clear_trace_counter()  # the same function is traced once per decoder kind

  @jax.jit
  @chex.assert_max_traces(n=1)
  def step(state, tokens):
    return model.apply(variables, state, tokens, method=type(model).decode_step)

  for t in range(T):
    chex.assert_tree_shape_prefix(state, (B,))
    step_logits, new_state = step(state, tokens[:, t])
    chex.assert_trees_all_equal_shapes_and_dtypes(new_state, state)
    np.testing.assert_allclose(step_logits, logits[:, t], atol=1e-5)
    state = new_state


def test_luong_input_feeding_feeds():
  _, model, variables, _, (tokens, enc_outputs, src_lens, init_state) = _make_decoder("luong")
  state = model.apply(variables, enc_outputs, src_lens, init_state,
                      method=zoo.LuongDecoder.init_decode_state)
  step = jax.jit(lambda s, t: model.apply(variables, s, t, method=zoo.LuongDecoder.decode_step))
  _, state = step(state, tokens[:, 0])
  assert np.abs(state.feed).max() > 0  # the attentional vector of step 1 is in the state
  logits, _ = step(state, tokens[:, 1])
  changed, _ = step(state._replace(feed=state.feed.at[0].add(0.5)), tokens[:, 1])
  assert np.abs(changed[0] - logits[0]).max() > 1e-3
  np.testing.assert_array_equal(changed[1:], logits[1:])


def test_bfloat16_decoding_keeps_state_dtypes_and_maps_under_vmap(decoder):
  _, model, variables, apply, (tokens, enc_outputs, src_lens, init_state) = decoder
  half = model.clone(dtype=jnp.bfloat16)
  forced = lambda enc: half.apply(variables, tokens, enc, src_lens, init_state)

  @jax.jit
  def run(variables):
    logits, weights = forced(enc_outputs)
    state = half.apply(variables, enc_outputs, src_lens, init_state,
                       method=type(half).init_decode_state)
    step_logits, new_state = half.apply(variables, state, tokens[:, 0],
                                        method=type(half).decode_step)
    mapped, _ = jax.vmap(forced)(jnp.stack([-enc_outputs, enc_outputs]))  # (2, B, T, V)
    return logits, weights, state, step_logits, new_state, mapped

  logits, weights, state, step_logits, new_state, mapped = run(variables)
  assert logits.dtype == jnp.bfloat16 and step_logits.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(mapped[1], np.float32), np.asarray(logits, np.float32),
                             atol=2e-2)
  chex.assert_tree_all_finite((logits, weights, new_state))
  chex.assert_trees_all_equal_shapes_and_dtypes(new_state, state)
  full, _ = apply(variables, tokens, enc_outputs, src_lens, init_state)
  np.testing.assert_allclose(np.asarray(logits, np.float32), full, atol=0.15)


def test_bad_arguments_raise_naming_them(decoder):
  _, model, variables, _, (tokens, enc_outputs, src_lens, init_state) = decoder
  with pytest.raises(ValueError, match="tokens: expected an integer array"):
    model.apply(variables, tokens * 1.0, enc_outputs, src_lens, init_state)
  with pytest.raises(ValueError, match="src_lens and enc_outputs disagree"):
    model.apply(variables, tokens, enc_outputs, src_lens[:2], init_state)
  with pytest.raises(ValueError, match=r"src_lens must lie in \[0, 7\]"):
    model.apply(variables, tokens, enc_outputs, np.array([8, 1, 1]), init_state)
  with pytest.raises(ValueError, match="enc_final_state: expected a tuple of 2"):
    model.apply(variables, tokens, enc_outputs, src_lens, init_state[:1])
  with pytest.raises(ValueError, match="tokens and enc_outputs disagree"):
    model.apply(variables, tokens[:2], enc_outputs, src_lens, init_state)
  state = model.apply(variables, enc_outputs, src_lens, init_state,
                      method=type(model).init_decode_state)
  with pytest.raises(ValueError, match="tokens: expected an array of rank 1"):
    model.apply(variables, state, tokens, method=type(model).decode_step)


# ------------------------------------------------------------------------------------------------
# whole models: a tiny copy task


BOS, EOS = 2, 3
MODELS = {"bahdanau": zoo.bahdanau_seq2seq, "luong": zoo.luong_seq2seq}


def _copy_batch():
  """Sources of lengths 6, 4, 3 over tokens 4..V-1; the target is the source followed by eos."""
  lens = np.array([6, 4, 3], np.int32)
  src = RNG.integers(4, V, (B, 6)) * (np.arange(6) < lens[:, None])
  tgt = np.zeros((B, 7), np.int64)
  for b, n in enumerate(lens):
    tgt[b, :n], tgt[b, n] = src[b, :n], EOS
  dec_in = np.concatenate([np.full((B, 1), BOS), tgt[:, :-1]], axis=1)
  return (jnp.asarray(src, jnp.int32), jnp.asarray(lens), jnp.asarray(dec_in, jnp.int32),
          jnp.asarray(tgt, jnp.int32), jnp.asarray(np.arange(7) <= lens[:, None]))


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_copy_task_training_lowers_the_loss(kind):
  chex.clear_trace_counter()  # train_step is traced once per decoder kind
  model = MODELS[kind](V, V, 8, 16, num_layers=1, dropout_rate=0.1)
  src, lens, dec_in, tgt, tgt_mask = _copy_batch()
  params = random_variables(model, src, lens, dec_in, seed=3, scale=0.3)["params"]
  optimizer = optax.adam(1e-2)

  def loss_fn(params, rng):
    logits, _ = model.apply({"params": params}, src, lens, dec_in, deterministic=False,
                            rngs={"dropout": rng})
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, tgt)
    return (losses * tgt_mask).sum() / tgt_mask.sum()

  @jax.jit
  @chex.assert_max_traces(n=1)
  def train_step(params, opt_state, rng):
    loss, grads = jax.value_and_grad(loss_fn)(params, rng)
    updates, opt_state = optimizer.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss, grads

  opt_state = optimizer.init(params)
  losses = []
  for i in range(25):
    params, opt_state, loss, grads = train_step(params, opt_state, jax.random.key(i))
    if i == 0:  # every parameter takes part
      chex.assert_tree_all_finite(grads)
      assert all(np.abs(g).max() > 0 for g in jax.tree.leaves(grads)), kind
    losses.append(float(loss))
  assert losses[-1] < 0.7 * losses[0], losses
  # The search methods are wired to the encoder and the decoder (traced only, not compiled).
  variables = {"params": params}
  state = jax.eval_shape(lambda: model.apply(variables, src, lens,
                                             method=zoo.Seq2Seq.init_decode_state))
  chex.assert_tree_shape_prefix(state, (B,))
  logits, new_state = jax.eval_shape(
      lambda s: model.apply(variables, s, dec_in[:, 0], method=zoo.Seq2Seq.decode_step), state)
  assert logits.shape == (B, V) and new_state == state


def _dot_shapes(jaxpr, in_scan=False):
  """(in a scan body?, operand and output shapes) of every dot_general of a jaxpr, recursively."""
  found = []
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "dot_general":
      shapes = [tuple(v.aval.shape) for v in (*eqn.invars, *eqn.outvars)]
      found.append((in_scan, shapes))
    for value in eqn.params.values():
      inner = getattr(value, "jaxpr", value)
      if hasattr(inner, "eqns"):
        found += _dot_shapes(inner, in_scan or eqn.primitive.name == "scan")
  return found


def test_bahdanau_projects_the_keys_once_outside_the_scan():
  """W_k (E, H) touches no matmul inside the teacher-forcing scan, forward or backward: the keys
  are projected before it and W_k's gradient is taken once after it, not at every step."""
  _, model, variables, _, (tokens, enc_outputs, src_lens, init_state) = _make_decoder("bahdanau")
  assert variables["params"]["attention"]["scorer"]["w_k"].shape == (E, H)

  def loss(params, enc):
    logits, _ = model.apply({"params": params}, tokens, enc, src_lens, init_state)
    return jnp.sum(logits ** 2)

  jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1)))(variables["params"], enc_outputs).jaxpr
  dots = _dot_shapes(jaxpr)
  with_w_k = [(in_scan, shapes) for in_scan, shapes in dots if (E, H) in shapes]
  assert with_w_k and not any(in_scan for in_scan, _ in with_w_k), with_w_k
  assert any(in_scan for in_scan, _ in dots)  # the decoder's own step is still a scan
