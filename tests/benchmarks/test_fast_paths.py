"""zoo.fast_paths: the cuDNN LSTM weight packing, the cuDNN LSTM wrapper (with jax's reference LSTM
standing in for the GPU kernel), the attention backend choice, and the hoisted LSTM input projection.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import rnn

import zoo
from zoo import fast_paths

B, L, D, H, LAYERS = 3, 7, 4, 5, 2
LENGTHS = np.array([7, 3, 0], np.int32)


def _lstm(bidirectional: bool):
  """A zoo.LSTM, random parameters of its shapes (non-zero biases too) and inputs (B, L, D)."""
  model = zoo.LSTM(H, num_layers=LAYERS, bidirectional=bidirectional)
  rng = np.random.default_rng(3)
  x = jnp.asarray(rng.normal(size=(B, L, D)), jnp.float32)
  shapes = jax.eval_shape(model.init, jax.random.key(2), x)["params"]  # no compilation
  params = jax.tree.map(lambda s: jnp.asarray(0.4 * rng.normal(size=s.shape), s.dtype), shapes)
  return model, params, x


def _reference_lstm(x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers,
                    dropout, bidirectional, precision=None):
  """jax.experimental.rnn.lstm's signature, computed by jax's own reference from the flat weights."""
  del precision
  w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(weights, input_size, hidden_size, num_layers,
                                                   bidirectional)
  return rnn.lstm_ref(x, h_0, c_0, w_ih, w_hh, b_ih, b_hh, seq_lengths, input_size, hidden_size,
                      num_layers, dropout, bidirectional)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_packing_round_trip_is_exact_and_sized_like_cudnn(bidirectional):
  _, params, _ = _lstm(bidirectional)
  weights = jax.jit(fast_paths.lstm_to_cudnn_weights)(params)
  assert weights.shape == (rnn.get_num_params_in_lstm(D, H, LAYERS, bidirectional),)
  assert weights.shape[0] == fast_paths.lstm_parameter_count(D, H, LAYERS, bidirectional)
  back = jax.jit(fast_paths.cudnn_weights_to_lstm, static_argnums=(1, 2, 3, 4))(
      weights, D, H, LAYERS, bidirectional)
  assert jax.tree.structure(back) == jax.tree.structure(params)
  for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(params)):
    np.testing.assert_array_equal(got, want)


def test_unpacking_places_every_cudnn_block_where_jax_reads_it():
  # A flat vector of distinct values: jax's own unpacking says where each block lives.
  count = rnn.get_num_params_in_lstm(D, H, LAYERS, True)
  weights = jnp.arange(count, dtype=jnp.float32)
  w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(weights, D, H, LAYERS, True)
  params = fast_paths.cudnn_weights_to_lstm(weights, D, H, LAYERS, True)
  for layer in range(LAYERS):
    p = params[f"layers_{layer}"]
    for direction in range(2):
      pseudo = 2 * layer + direction
      np.testing.assert_array_equal(p["input"]["kernel"][:, direction].T, w_ih[pseudo])
      np.testing.assert_array_equal(p["hidden_kernel"][direction].T, w_hh[pseudo])
      np.testing.assert_array_equal(p["input"]["bias"][direction], b_ih[pseudo] + b_hh[pseudo])
  # Packing again keeps the matrices and merges each bias pair into b_ih (b_hh = 0).
  repacked = rnn.unpack_lstm_weights(fast_paths.lstm_to_cudnn_weights(params), D, H, LAYERS, True)
  for pseudo in range(2 * LAYERS):
    np.testing.assert_array_equal(repacked[0][pseudo], w_ih[pseudo])
    np.testing.assert_array_equal(repacked[1][pseudo], w_hh[pseudo])
    np.testing.assert_array_equal(repacked[2][pseudo], b_ih[pseudo] + b_hh[pseudo])
    np.testing.assert_array_equal(repacked[3][pseudo], np.zeros(4 * H))


def test_unpacking_rejects_a_vector_of_the_wrong_size():
  with pytest.raises(ValueError, match="weights: expected 1120 values"):
    fast_paths.cudnn_weights_to_lstm(jnp.zeros(1119), D, H, LAYERS, True)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_cudnn_wrapper_equals_the_scan_lstm(monkeypatch, bidirectional):
  """FastLSTM(implementation='cudnn'), with jax's reference LSTM in place of the GPU kernel, gives
  zoo.LSTM's outputs, final states and parameter gradients (an empty sequence included)."""
  monkeypatch.setattr(rnn, "lstm", _reference_lstm)
  model, params, x = _lstm(bidirectional)
  fast = fast_paths.FastLSTM(H, num_layers=LAYERS, bidirectional=bidirectional,
                             implementation="cudnn")
  width = model.state_width
  initial = tuple(zoo.LSTMState(jax.random.normal(jax.random.key(10 + i), (B, width)),
                                jax.random.normal(jax.random.key(20 + i), (B, width)))
                  for i in range(LAYERS))

  def loss(module, p):
    outputs, finals = module.apply({"params": p}, x, valid_lens=LENGTHS, initial_state=initial)
    return jnp.sum(outputs ** 2) + sum(jnp.sum(s.h * s.c) for s in finals), (outputs, finals)

  (want_loss, (want_out, want_finals)), want_grads = jax.jit(jax.value_and_grad(
      lambda p: loss(model, p), has_aux=True))(params)
  (got_loss, (got_out, got_finals)), got_grads = jax.jit(jax.value_and_grad(
      lambda p: loss(fast, p), has_aux=True))(params)
  np.testing.assert_allclose(got_out, want_out, atol=1e-5)
  assert np.all(np.asarray(got_out)[2] == 0.0)  # the empty sequence has no outputs
  for got, want in zip(got_finals, want_finals):
    np.testing.assert_allclose(got.h, want.h, atol=1e-5)
    np.testing.assert_allclose(got.c, want.c, atol=1e-5)
  np.testing.assert_allclose(got_finals[0].h[2], initial[0].h[2])  # empty: the initial state
  np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
  for got, want in zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads)):
    np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_cudnn_wrapper_never_asks_the_kernel_for_both_directions(monkeypatch, bidirectional):
  """The bidirectional cuDNN kernel's final states were wrong on an H200 (docs/BENCHMARKS.md): a
  bidirectional LSTM is run as one-layer forward-only calls, one per direction and layer."""
  calls = []

  def spy(*args, **kwargs):
    calls.append((kwargs["num_layers"], kwargs["bidirectional"], kwargs["input_size"]))
    return _reference_lstm(*args, **kwargs)

  monkeypatch.setattr(rnn, "lstm", spy)
  model, params, x = _lstm(bidirectional)
  fast_paths.cudnn_lstm(params, x, LENGTHS)
  if bidirectional:
    width = 2 * H
    assert calls == [(1, False, x.shape[-1])] * 2 + [(1, False, width)] * 2 * (LAYERS - 1)
  else:
    assert calls == [(LAYERS, False, x.shape[-1])]


def test_fast_lstm_has_zoo_parameters_and_runs_the_scan_on_cpu():
  model, params, x = _lstm(True)
  fast = fast_paths.FastLSTM(H, num_layers=LAYERS, bidirectional=True)
  fast_params = jax.eval_shape(fast.init, jax.random.key(2), x)["params"]
  assert jax.tree.map(jnp.shape, fast_params) == jax.tree.map(jnp.shape, params)
  got, _ = jax.jit(fast.apply)({"params": params}, x, valid_lens=LENGTHS)
  want, _ = jax.jit(model.apply)({"params": params}, x, valid_lens=LENGTHS)
  np.testing.assert_array_equal(got, want)
  with pytest.raises(ValueError, match="implementation: unknown 'fused'"):
    jax.eval_shape(fast_paths.FastLSTM(H, implementation="fused").init, jax.random.key(0), x)


def test_lstm_implementation_choice():
  # The scan everywhere: cuDNN measured slower on the GPU (zoo/fast_paths.py), but it applies there.
  assert fast_paths.lstm_implementation(backend="gpu") == "scan"
  assert fast_paths.lstm_implementation(backend="cpu") == "scan"
  assert fast_paths.cudnn_applies(backend="gpu")
  assert not fast_paths.cudnn_applies(backend="cpu")
  assert not fast_paths.cudnn_applies(dtype=jnp.bfloat16, backend="gpu")
  assert not fast_paths.cudnn_applies(dropout=True, backend="gpu")


def _dot_generals(jaxpr) -> tuple[int, list[int]]:
  """(dot_generals outside any scan, [dot_generals inside each scan body]) of a jaxpr, recursively."""
  outside, scans = 0, []
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "dot_general":
      outside += 1
    for value in eqn.params.values():
      inner = getattr(value, "jaxpr", value)
      if not hasattr(inner, "eqns"):
        continue
      if eqn.primitive.name == "scan":
        body_outside, body_scans = _dot_generals(inner)
        scans.append(body_outside)
        scans.extend(body_scans)
      else:
        more_outside, more_scans = _dot_generals(inner)
        outside += more_outside
        scans.extend(more_scans)
  return outside, scans


def test_lstm_input_projection_is_hoisted_out_of_the_scan():
  model, params, x = _lstm(True)
  run = lambda p: model.apply({"params": p}, x, valid_lens=LENGTHS)
  jaxpr = jax.make_jaxpr(run)(params).jaxpr
  outside, scans = _dot_generals(jaxpr)
  # One input projection per layer (both directions, all steps) before its scan; inside each scan
  # only the recurrent product h W_hh (both directions in one batched dot).
  assert outside == LAYERS
  assert scans == [1] * LAYERS


def _spec(shape, dtype):
  return jax.ShapeDtypeStruct(shape, jnp.dtype(dtype))


@pytest.mark.parametrize("dtype, head_dim, backend, masked, expected", [
    ("bfloat16", 64, "gpu", False, "cudnn"),
    ("float16", 128, "gpu", False, "cudnn"),
    ("bfloat16", 64, "cpu", False, "xla"),
    ("float32", 64, "gpu", False, "xla"),
    ("bfloat16", 256, "gpu", False, "xla"),
    ("bfloat16", 36, "gpu", False, "xla"),
    ("bfloat16", 64, "gpu", True, "xla"),
])
def test_attention_backend_choice(dtype, head_dim, backend, masked, expected):
  q = _spec((3, 5, 4, head_dim), dtype)
  kv = _spec((3, 7, 4, head_dim), dtype)
  mask = jnp.ones((1, 1, 5, 7), bool) if masked else None
  assert fast_paths.attention_backend(q, kv, kv, mask=mask, backend=backend) == expected


def test_attention_backend_needs_matching_dtypes():
  q = _spec((3, 5, 4, 64), "bfloat16")
  kv = _spec((3, 7, 4, 64), "float16")
  assert fast_paths.attention_backend(q, kv, kv, backend="gpu") == "xla"


def test_dot_product_attention_auto_equals_xla_on_cpu():
  rng = np.random.default_rng(4)
  q = jnp.asarray(rng.normal(size=(3, 5, 4, 8)), jnp.float32)
  k = jnp.asarray(rng.normal(size=(3, 7, 2, 8)), jnp.float32)
  v = jnp.asarray(rng.normal(size=(3, 7, 2, 8)), jnp.float32)
  lens = jnp.array([7, 2, 5], jnp.int32)
  got = jax.jit(fast_paths.dot_product_attention)(q, k, v, key_lens=lens)
  want = jax.jit(jax.nn.dot_product_attention, static_argnames="implementation")(
      q, k, v, key_value_seq_lengths=lens, implementation="xla")
  np.testing.assert_array_equal(got, want)
  with pytest.raises(ValueError, match="implementation: unknown 'flash'"):
    fast_paths.dot_product_attention(q, k, v, implementation="flash")


def test_multihead_implementation_choice():
  assert fast_paths.multihead_implementation(backend="gpu") == "fused"
  assert fast_paths.multihead_implementation(backend="cpu") == "vmap"
  assert fast_paths.multihead_implementation(score="additive", backend="gpu") == "vmap"
  assert fast_paths.multihead_implementation(dropout=True, backend="gpu") == "vmap"
  assert fast_paths.multihead_implementation(return_weights=True, backend="gpu") == "vmap"
