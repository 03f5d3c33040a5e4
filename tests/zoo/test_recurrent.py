import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from _helpers import np_lstm_cell
from _helpers import random_variables
from zoo import recurrent

B, L, D, H = 3, 7, 5, 4
LENGTHS = np.array([7, 4, 1], np.int32)
RNG = np.random.default_rng(0)  # numpy test data: no compilation per random array


def _numpy_lstm(x, w_ih, b, w_hh, h, c):
  """The LSTM equations on one unbatched sequence x (T, D); gate order i, f, g, o."""
  outputs = []
  for x_t in x:
    h, c = np_lstm_cell(x_t @ w_ih + b + h @ w_hh, c)
    outputs.append(h)
  return np.stack(outputs), h, c


def _numpy_bilstm_layer(params, x, h0, c0):
  """Reference bidirectional layer on one unpadded sequence x (T, D); returns (T, 2H), h, c (2H,)."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  kernel, bias, hidden = p["input"]["kernel"], p["input"]["bias"], p["hidden_kernel"]
  fwd, hf, cf = _numpy_lstm(x, kernel[:, 0], bias[0], hidden[0], h0[:H], c0[:H])
  bwd, hb, cb = _numpy_lstm(x[::-1], kernel[:, 1], bias[1], hidden[1], h0[H:], c0[H:])
  return np.concatenate([fwd, bwd[::-1]], -1), np.concatenate([hf, hb]), np.concatenate([cf, cb])


def _normal(*shape, scale=1.0):
  return jnp.asarray(RNG.normal(size=shape) * scale, jnp.float32)


@pytest.fixture(scope="module")
def bilstm():
  """A 2-layer BiLSTM, its variables from `init`, inputs, and a jitted apply."""
  model = zoo.BiLSTM(H, num_layers=2, dropout_rate=0.3)
  x = _normal(B, L, D)
  variables = jax.jit(model.init)(jax.random.key(1), x, valid_lens=LENGTHS)
  # A non-zero bias so that every term of the equations is exercised.
  variables["params"]["layers_0"]["input"]["bias"] = _normal(2, 4 * H, scale=0.5)
  apply = jax.jit(model.apply, static_argnames="deterministic")
  return model, variables, x, apply


@pytest.fixture(scope="module")
def bilstm_outputs(bilstm):
  model, variables, x, apply = bilstm
  return apply(variables, x, valid_lens=LENGTHS)


def test_bilstm_with_lengths_matches_numpy_on_each_unpadded_example(bilstm):
  model, variables, x, apply = bilstm
  # Non-zero initial states show that each direction starts from its own half.
  init = tuple(zoo.LSTMState(_normal(B, 2 * H), _normal(B, 2 * H, scale=2.0)) for _ in range(2))
  outputs, final = apply(variables, x, valid_lens=LENGTHS, initial_state=init)
  assert outputs.shape == (B, L, 2 * H) and len(final) == 2
  chex.assert_shape([s for layer in final for s in layer], (B, 2 * H))
  for b, n in enumerate(LENGTHS):
    seq = np.asarray(x[b, :n], np.float64)
    for layer in range(2):
      h0, c0 = (np.asarray(s[b], np.float64) for s in init[layer])
      seq, h, c = _numpy_bilstm_layer(variables["params"][f"layers_{layer}"], seq, h0, c0)
      np.testing.assert_allclose(final[layer].h[b], h, atol=1e-5)
      np.testing.assert_allclose(final[layer].c[b], c, atol=1e-5)
    np.testing.assert_allclose(outputs[b, :n], seq, atol=1e-5)
    np.testing.assert_array_equal(outputs[b, n:], 0.0)


def test_bilstm_with_lengths_equals_each_example_run_alone(bilstm, bilstm_outputs):
  model, variables, x, apply = bilstm
  # Garbage in the padding must not leak into anything.
  garbage = x.at[1, 4:].set(100.0).at[2, 1:].set(-50.0)
  outputs, final = apply(variables, garbage, valid_lens=LENGTHS)
  chex.assert_trees_all_close((outputs, final), bilstm_outputs, atol=1e-6)
  for b, n in enumerate(LENGTHS):
    alone, alone_final = apply(variables, x[b:b + 1, :n])  # lengths None: all real
    np.testing.assert_allclose(outputs[b:b + 1, :n], alone, atol=1e-6)
    np.testing.assert_array_equal(outputs[b, n:], 0.0)
    for got, want in zip(final, alone_final):
      np.testing.assert_allclose(got.h[b:b + 1], want.h, atol=1e-6)
      np.testing.assert_allclose(got.c[b:b + 1], want.c, atol=1e-6)


@pytest.fixture(scope="module")
def lstm():
  """A forward-only 2-layer LSTM with random variables (no initializer compiled)."""
  model = zoo.LSTM(H, num_layers=2)
  x = _normal(B, L, D)
  return model, random_variables(model, x, seed=1), x


def test_parameter_layout(lstm):
  _, variables, _ = lstm
  assert jax.tree.map(jnp.shape, variables["params"]) == {
      "layers_0": {"input": {"kernel": (D, 1, 4 * H), "bias": (1, 4 * H)},
                   "hidden_kernel": (1, H, 4 * H)},
      "layers_1": {"input": {"kernel": (H, 1, 4 * H), "bias": (1, 4 * H)},
                   "hidden_kernel": (1, H, 4 * H)}}


def test_one_step_matches_numpy_equations(lstm):
  _, variables, _ = lstm
  params = variables["params"]["layers_0"]
  x, state = _normal(B, D), zoo.LSTMState(_normal(B, H), _normal(B, H))
  layer = zoo.LSTMLayer(H)

  @jax.jit
  def one_step(params, state, x):
    gates = layer.apply({"params": params}, x, method=zoo.LSTMLayer.input_gates)[:, 0]
    return layer.apply({"params": params}, state, gates, method=zoo.LSTMLayer.step)

  new = one_step(params, state, x)
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  for b in range(B):
    _, h, c = _numpy_lstm(np.asarray(x[b:b + 1], np.float64), p["input"]["kernel"][:, 0],
                          p["input"]["bias"][0], p["hidden_kernel"][0],
                          np.asarray(state.h[b], np.float64), np.asarray(state.c[b], np.float64))
    np.testing.assert_allclose(new.h[b], h, atol=1e-6)
    np.testing.assert_allclose(new.c[b], c, atol=1e-6)


def test_forward_lstm_step_by_step_equals_sequence(lstm):
  model, variables, x = lstm
  outputs, final = jax.jit(model.apply)(variables, x)
  state = recurrent.zero_states(2, B, H)

  @jax.jit
  def step(state, x_t):
    return model.apply(variables, state, x_t, method=zoo.LSTM.step)

  for t in range(L):
    h, state = step(state, x[:, t])
    np.testing.assert_allclose(h, outputs[:, t], atol=1e-6)
  chex.assert_trees_all_close(state, final, atol=1e-6)


def test_dropout_between_layers_only_in_training(bilstm, bilstm_outputs):
  model, variables, x, apply = bilstm
  rngs = {"dropout": jax.random.key(10)}
  a, a_final = apply(variables, x, valid_lens=LENGTHS, deterministic=False, rngs=rngs)
  b, _ = apply(variables, x, valid_lens=LENGTHS, deterministic=False, rngs={"dropout": jax.random.key(11)})
  assert not np.allclose(a, b)
  assert not np.allclose(a, bilstm_outputs[0])
  np.testing.assert_array_equal(a[2, 1:], 0.0)  # padded outputs stay zero
  # Dropout sits between the layers only: the bottom layer's state is untouched, and no real
  # output of the top layer is dropped to zero.
  np.testing.assert_allclose(a_final[0].h, bilstm_outputs[1][0].h, atol=1e-6)
  assert np.all(a[0] != 0.0) and np.all(a[1, :4] != 0.0)


def test_jit_grad_no_retrace_and_padding_gets_no_gradient(bilstm):
  model, variables, x, _ = bilstm

  @chex.assert_max_traces(n=1)
  def loss(params, x, lengths):
    outputs, final = model.apply({"params": params}, x, valid_lens=lengths)
    return (outputs ** 2).sum() + sum((s.h ** 2).sum() for s in final)

  grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
  grad_params, grad_x = grad(variables["params"], x, LENGTHS)
  chex.assert_tree_all_finite(grad_params)
  assert all(np.abs(g).max() > 0 for g in jax.tree.leaves(grad_params))
  np.testing.assert_array_equal(grad_x[1, 4:], 0.0)
  np.testing.assert_array_equal(grad_x[2, 1:], 0.0)
  assert np.abs(grad_x[2, 0]).max() > 0
  grad(variables["params"], x + 1.0, jnp.array([3, 7, 2]))  # same shapes: no retrace


def test_vmap_over_an_extra_axis(bilstm, bilstm_outputs):
  model, variables, x, _ = bilstm
  xs = jnp.stack([-x, x])
  outputs, final = jax.jit(jax.vmap(lambda xi: model.apply(variables, xi, valid_lens=LENGTHS)))(xs)
  np.testing.assert_allclose(outputs[1], bilstm_outputs[0], atol=1e-6)
  assert final[1].c.shape == (2, B, 2 * H)


def test_bfloat16_runs_close_to_float32(bilstm, bilstm_outputs):
  _, variables, x, _ = bilstm
  half = zoo.BiLSTM(H, num_layers=2, dtype=jnp.bfloat16)

  def loss(params):
    outputs, final = half.apply({"params": params}, x, valid_lens=LENGTHS)
    return outputs.astype(jnp.float32).sum(), (outputs, final)

  grads, (outputs, final) = jax.jit(jax.grad(loss, has_aux=True))(variables["params"])
  assert outputs.dtype == jnp.bfloat16 and final[0].h.dtype == jnp.float32
  chex.assert_tree_all_finite((outputs, final, grads))
  np.testing.assert_allclose(np.asarray(outputs, np.float32), bilstm_outputs[0], atol=3e-2)


def test_reverse_valid_is_an_involution_within_lengths():
  x = np.arange(B * L).reshape(B, L)
  rev = recurrent.reverse_valid(x, LENGTHS)
  np.testing.assert_array_equal(rev[1], [10, 9, 8, 7, 11, 12, 13])
  np.testing.assert_array_equal(rev[2], x[2])
  np.testing.assert_array_equal(recurrent.reverse_valid(rev, LENGTHS), x)


def test_directions_first_splits_the_side_by_side_halves():
  state = np.arange(B * 2 * H, dtype=np.float32).reshape(B, 2 * H)  # forward | backward
  split = recurrent.directions_first(jnp.asarray(state), 2)
  chex.assert_shape(split, (2, B, H))
  np.testing.assert_array_equal(split[0], state[:, :H])
  np.testing.assert_array_equal(split[1], state[:, H:])
  np.testing.assert_array_equal(recurrent.directions_first(jnp.asarray(state), 1)[0], state)


def test_bad_arguments_raise_naming_them(bilstm):
  model, variables, x, _ = bilstm
  with pytest.raises(ValueError, match=r"valid_lens with shape \(2,\) does not match the batch axes"):
    model.apply(variables, x, valid_lens=jnp.array([1, 2]))
  with pytest.raises(ValueError, match="valid_lens: expected an integer array"):
    model.apply(variables, x, valid_lens=jnp.array([1.0, 2.0, 3.0]))
  with pytest.raises(ValueError, match=r"valid_lens must lie in \[0, 7\]"):
    model.apply(variables, x, valid_lens=jnp.array([1, 8, 3]))
  with pytest.raises(ValueError, match=r"x: expected an array of rank >= 2, got shape \(5,\)"):
    model.apply(variables, x[0, 0])
  with pytest.raises(ValueError, match="initial_state: expected a tuple of 2"):
    model.apply(variables, x, valid_lens=LENGTHS, initial_state=recurrent.zero_states(1, B, 2 * H))
  with pytest.raises(ValueError, match=r"initial_state\[1\].c: expected shape \(3, 8\)"):
    bad = recurrent.zero_states(2, B, 2 * H)
    bad = (bad[0], zoo.LSTMState(bad[1].h, jnp.zeros((B, H))))
    model.apply(variables, x, valid_lens=LENGTHS, initial_state=bad)
  layer = zoo.LSTMLayer(H, bidirectional=True)
  layer_params = {"params": variables["params"]["layers_0"]}
  with pytest.raises(ValueError, match=r"x: expected an array of rank >= 2, got shape \(5,\)"):
    layer.apply(layer_params, x[0, 0])
  with pytest.raises(ValueError, match=r"valid_lens must lie in \[0, 7\]"):
    layer.apply(layer_params, x, valid_lens=jnp.array([1, 9, 3]))
  with pytest.raises(ValueError, match=r"initial_state.h: expected shape \(3, 8\), got \(3, 4\)"):
    layer.apply(layer_params, x, valid_lens=LENGTHS,
                initial_state=zoo.LSTMState(jnp.zeros((B, H)), jnp.zeros((B, H))))
  with pytest.raises(ValueError, match=r"gates with shape \(3, 12\) must be 4 times as wide as the "
                                       r"cell c with shape \(3, 4\)"):
    zoo.lstm_update(jnp.zeros((B, 3 * H)), jnp.zeros((B, H)))
  with pytest.raises(ValueError, match=r"hidden_kernel \(4, 16\) \(H, 4H\), state.h \(3, 5\)"):
    zoo.lstm_step(jnp.zeros((H, 4 * H)), zoo.LSTMState(jnp.zeros((B, 5)), jnp.zeros((B, 5))),
                  jnp.zeros((B, 4 * H)))
  with pytest.raises(ValueError, match="step: a bidirectional layer"):
    model.apply(variables, recurrent.zero_states(2, B, 2 * H), x[:, 0], method=zoo.LSTM.step)
