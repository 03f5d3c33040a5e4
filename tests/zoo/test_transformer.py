import functools

import chex
import flax.linen as nn
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoo
from _helpers import random_variables
from _helpers import rbg_key
from zoo.transformer import DecoderBlock
from zoo.transformer import EncoderBlock
from zoo.transformer import PositionwiseFFN
from zoo.transformer import Transformer
from zoo.transformer import TransformerDecoder
from zoo.transformer import TransformerEncoder

B, S, T, D, H, FFN = 3, 7, 5, 12, 4, 20
SRC_VOCAB, TGT_VOCAB = 11, 13
BLOCK = dict(num_heads=H, ffn_hidden=FFN, dropout_rate=0.1)


# Random parameters (numpy draws: real initializers compile slowly); LayerNorm scales near 1.
_params = functools.partial(random_variables, scale=0.3)


def _floats(seed, *shape):
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def _tokens(seed, vocab, *shape):
  return jnp.asarray(np.random.default_rng(seed).integers(4, vocab, shape), jnp.int32)


def test_positionwise_ffn_exact():
  x = _floats(0, B, T, D)
  ffn = PositionwiseFFN(FFN, activation=nn.gelu)
  variables = _params(ffn, x)
  p = variables["params"]
  expected = nn.gelu(x @ p["dense_in"]["kernel"] + p["dense_in"]["bias"])
  expected = expected @ p["dense_out"]["kernel"] + p["dense_out"]["bias"]
  got = jax.jit(ffn.apply)(variables, x)
  assert got.shape == (B, T, D)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def _layer_norm(p, x):
  return nn.LayerNorm(epsilon=1e-5).apply({"params": p}, x)


@pytest.mark.parametrize("normalize_before", [False, True])
def test_encoder_block_wiring_exact(normalize_before):
  x = _floats(1, B, S, D)
  mask = zoo.key_padding_mask(jnp.array([7, 3, 5]), S)
  block = EncoderBlock(**BLOCK, normalize_before=normalize_before)
  variables = _params(block, x, mask=mask)
  p = variables["params"]
  attend = lambda h: zoo.MultiHeadAttention(num_heads=H).apply(
      {"params": p["self_attention"]}, h, mask=mask)
  ffn = lambda h: PositionwiseFFN(FFN).apply({"params": p["ffn"]}, h)
  other = EncoderBlock(**BLOCK, normalize_before=not normalize_before)

  @jax.jit
  def run(x):  # one compilation
    if normalize_before:
      h = x + attend(_layer_norm(p["self_attention_norm"], x))
      expected = h + ffn(_layer_norm(p["ffn_norm"], h))
    else:
      h = _layer_norm(p["self_attention_norm"], x + attend(x))
      expected = _layer_norm(p["ffn_norm"], h + ffn(h))
    return expected, block.apply(variables, x, mask=mask), other.apply(variables, x, mask=mask)

  expected, got, got_other = run(x)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
  # The other form with the same parameters computes something else.
  assert not np.allclose(got_other, got, atol=1e-2)


@pytest.mark.parametrize("normalize_before", [False, True])
def test_stacks_shapes_with_odd_sizes(normalize_before):
  width, heads = 9, 3
  x, enc = _floats(2, B, T, width), _floats(3, B, S, width)
  kwargs = dict(num_heads=heads, ffn_hidden=17, normalize_before=normalize_before)
  encoder, decoder = TransformerEncoder(2, **kwargs), TransformerDecoder(3, **kwargs)
  enc_params = _params(encoder, enc)
  dec_params = _params(decoder, x, enc)
  final = ["final_norm"] * normalize_before  # pre-norm stacks end with a LayerNorm
  assert sorted(enc_params["params"]) == final + ["layers_0", "layers_1"]
  assert len(dec_params["params"]) == 3 + normalize_before
  assert sorted(dec_params["params"]["layers_2"]) == [
      "cross_attention", "cross_attention_norm", "ffn", "ffn_norm", "self_attention",
      "self_attention_norm"]
  enc_out = jax.eval_shape(encoder.apply, enc_params, enc)
  dec_out = jax.eval_shape(decoder.apply, dec_params, x, enc_out)
  assert enc_out.shape == (B, S, width) and dec_out.shape == (B, T, width)
  single = DecoderBlock(**kwargs)
  assert jax.eval_shape(single.init, jax.random.key(0), x, enc)["params"]["ffn"]["dense_in"][
      "kernel"].shape == (width, 17)


def _model(**kwargs):
  # One layer each by default: XLA's CPU compile time grows with every layer.
  settings = dict(model_dim=D, num_heads=H, ffn_hidden=FFN, num_encoder_layers=1,
                  num_decoder_layers=1, dropout_rate=0.1)
  settings.update(kwargs)
  return Transformer(SRC_VOCAB, TGT_VOCAB, **settings)


def _batch(seed=4):
  src = _tokens(seed, SRC_VOCAB, B, S)
  tgt = _tokens(seed + 1, TGT_VOCAB, B, T)
  src_valid_lens = jnp.array([7, 3, 5])
  return src, tgt, src_valid_lens


def test_masks_padding_and_future_positions_do_not_leak():
  src, tgt, lens = _batch()
  model = _model(num_encoder_layers=2)
  variables = _params(model, src, tgt, lens)
  forward = jax.jit(model.apply)
  logits = forward(variables, src, tgt, lens)
  assert logits.shape == (B, T, TGT_VOCAB)
  # Other tokens in the source padding and in later target positions change nothing before them.
  padded_src = jnp.where(jnp.arange(S) < lens[:, None], src, 5)
  later_tgt = tgt.at[:, 3:].set(6)
  changed = forward(variables, padded_src, later_tgt, lens)
  np.testing.assert_allclose(changed[:, :3], logits[:, :3], rtol=1e-5, atol=1e-5)
  assert not np.allclose(changed[:, 3:], logits[:, 3:], atol=1e-3)


@pytest.mark.parametrize("normalize_before,implementation,num_kv_heads,layers",
                         [(False, "vmap", None, 2), (True, "fused", 2, 1)])
def test_cached_decoding_equals_full_forward(normalize_before, implementation, num_kv_heads,
                                             layers):
  src, tgt, lens = _batch(seed=6)
  model = _model(normalize_before=normalize_before, implementation=implementation,
                 num_kv_heads=num_kv_heads, num_decoder_layers=layers)
  variables = _params(model, src, tgt, lens)

  @jax.jit
  def both(variables):
    state = model.apply(variables, src, lens, max_len=T, method=Transformer.init_decode_state)
    full = model.apply(variables, tgt, state["enc_outputs"], lens,
                       method=Transformer.decode)  # (B, T, V)
    prefix, state = model.apply(variables, state, tgt[:, :3], method=Transformer.prefill)
    step = lambda state, tokens: model.apply(variables, state, tokens,
                                             method=Transformer.decode_step)[::-1]
    state, steps = jax.lax.scan(step, state, tgt[:, 3:].T)  # steps (T - 3, B, V)
    return full, jnp.concatenate([prefix, steps.transpose(1, 0, 2)], axis=1), state

  full, cached, state = both(variables)
  np.testing.assert_allclose(cached, full, rtol=1e-5, atol=1e-5)
  assert int(state["position"]) == T
  cache = state["cache"][f"layers_{layers - 1}"]["self_attention"]
  assert cache["cached_key"].shape == (B, T, num_kv_heads or H, D // H)
  assert int(cache["cache_index"]) == T


def _dot_count(jaxpr) -> int:
  """dot_general equations in a jaxpr and its sub-jaxprs."""
  count = 0
  for eqn in jaxpr.eqns:
    count += eqn.primitive.name == "dot_general"
    for sub in jax.extend.core.jaxprs_in_params(eqn.params):
      count += _dot_count(sub)
  return count


@pytest.mark.parametrize("normalize_before,num_kv_heads", [(False, None), (True, 2)])
def test_decode_state_projects_the_encoder_outputs_once(normalize_before, num_kv_heads):
  src, tgt, lens = _batch(seed=8)
  layers = 2
  model = _model(normalize_before=normalize_before, num_kv_heads=num_kv_heads,
                 num_decoder_layers=layers)
  variables = _params(model, src, tgt, lens)
  state = jax.jit(lambda v: model.apply(v, src, lens, max_len=T,
                                        method=Transformer.init_decode_state))(variables)
  kv_heads = num_kv_heads or H
  assert len(state["cross_key_values"]) == layers
  p = variables["params"]["decoder"]
  for i, (key, value) in enumerate(state["cross_key_values"]):
    assert key.shape == value.shape == (B, S, kv_heads, D // H)
    w = p[f"layers_{i}"]["cross_attention"]["value"]
    np.testing.assert_allclose(value, np.einsum("bsd,dhe->bshe", state["enc_outputs"], w["kernel"])
                               + w["bias"], rtol=1e-5, atol=1e-5)
  step = lambda v, s, t: model.apply(v, s, t, method=Transformer.decode_step)
  unprojected = {k: v for k, v in state.items() if k != "cross_key_values"}
  tokens = tgt[:, 0]
  logits, new_state = jax.jit(step)(variables, state, tokens)
  logits_again, _ = jax.jit(step)(variables, unprojected, tokens)
  np.testing.assert_array_equal(logits, logits_again)
  assert jax.tree.structure(new_state) == jax.tree.structure(state)
  # A step with the projections in the state runs two matmuls fewer per layer (W_k, W_v).
  with_state = _dot_count(jax.make_jaxpr(step)(variables, state, tokens).jaxpr)
  without = _dot_count(jax.make_jaxpr(step)(variables, unprojected, tokens).jaxpr)
  assert without - with_state == 2 * layers


def test_cross_attention_weights_are_sown():
  src, tgt, lens = _batch(seed=10)
  model = _model(num_decoder_layers=2)
  variables = _params(model, src, tgt, lens)
  _, state = jax.jit(functools.partial(model.apply, mutable=["intermediates"]))(
      variables, src, tgt, lens)
  layers = state["intermediates"]["decoder"]
  for name in ("layers_0", "layers_1"):
    (weights,) = layers[name]["cross_attention_weights"]
    assert weights.shape == (B, H, T, S)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    padding = np.arange(S)[None, None, None, :] >= np.asarray(lens)[:, None, None, None]
    np.testing.assert_array_equal(np.where(padding, weights, 0.0), 0.0)
    (self_weights,) = layers[name]["self_attention_weights"]
    np.testing.assert_array_equal(np.triu(self_weights, k=1), 0.0)  # causal
  assert state["intermediates"]["encoder"]["layers_0"]["self_attention_weights"][0].shape == (
      B, H, S, S)


def test_shared_embeddings_and_tied_output():
  src, tgt, lens = _batch(seed=12)
  with pytest.raises(ValueError, match="share_embeddings needs src_vocab_size == tgt_vocab_size"):
    _model(share_embeddings=True).init(jax.random.key(0), src, tgt, lens)
  model = Transformer(TGT_VOCAB, TGT_VOCAB, model_dim=D, num_heads=H, ffn_hidden=FFN,
                      num_encoder_layers=1, num_decoder_layers=1, share_embeddings=True,
                      tie_output=True)
  variables = _params(model, src, tgt, lens)
  assert sorted(variables["params"]) == ["decoder", "encoder", "src_embed"]
  logits, state = jax.jit(functools.partial(model.apply, capture_intermediates=True,
                                            mutable=["intermediates"]))(variables, src, tgt, lens)
  (hidden,) = state["intermediates"]["decoder"]["__call__"]
  table = variables["params"]["src_embed"]["embedding"]  # (V, D)
  np.testing.assert_allclose(logits, hidden @ table.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("normalize_before", [False, True])
def test_pre_and_post_norm_both_train(normalize_before):
  # A decoder stack (self-attention, cross-attention and FFN) fits a fixed random target; the
  # whole token-level model would only add compile time.
  x, enc_outputs, target = _floats(14, B, T, D), _floats(15, B, S, D), _floats(16, B, T, D)
  causal = zoo.causal_mask(T)[None, None]
  cross = zoo.key_padding_mask(jnp.array([7, 3, 5]), S)
  decoder = TransformerDecoder(1, **dict(BLOCK, dropout_rate=0.0),
                               normalize_before=normalize_before)
  params = _params(decoder, x, enc_outputs)["params"]
  optimizer = optax.adam(1e-2)

  @jax.jit
  def train_step(params, opt_state):
    def loss_fn(params):
      out = decoder.apply({"params": params}, x, enc_outputs, self_mask=causal, mask=cross)
      return jnp.mean((out - target) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss

  opt_state = optimizer.init(params)
  losses = []
  for step in range(4):
    new_params, opt_state, loss = train_step(params, opt_state)
    if step == 0:
      moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), params, new_params)
      assert all(jax.tree.leaves(moved))  # every parameter gets a gradient
    params = new_params
    losses.append(float(loss))
  assert losses[-1] < 0.9 * losses[0], losses


def test_dropout_in_blocks():
  x = _floats(17, B, S, D)
  block = EncoderBlock(**dict(BLOCK, dropout_rate=0.3))
  variables = _params(block, x)
  run = jax.jit(lambda seed, deterministic: block.apply(
      variables, x, deterministic=deterministic, rngs={"dropout": rbg_key(seed)}),
      static_argnums=1)
  quiet = run(0, True)
  noisy, again, other = run(0, False), run(0, False), run(1, False)
  np.testing.assert_array_equal(noisy, again)
  assert not np.allclose(noisy, quiet) and not np.allclose(noisy, other)


def test_activation_dropout_rate_sets_only_the_ffn_activation_dropout():
  x = _floats(19, B, S, D)
  variables = _params(EncoderBlock(**BLOCK), x)

  def run(deterministic=False, **rates):
    block = EncoderBlock(**dict(BLOCK, attention_dropout_rate=0.0, **rates))
    return block.apply(variables, x, deterministic=deterministic, rngs={"dropout": rbg_key(3)})

  quiet = run(True, dropout_rate=0.0)
  # Only the activation's dropout on: the output changes; None inherits dropout_rate 0.
  assert not np.allclose(run(dropout_rate=0.0, activation_dropout_rate=0.4), quiet, atol=1e-3)
  np.testing.assert_array_equal(run(dropout_rate=0.0, activation_dropout_rate=None), quiet)
  # dropout_rate on the residuals with the activation's dropout off differs from both on.
  residual_only = run(dropout_rate=0.3, activation_dropout_rate=0.0)
  assert not np.allclose(residual_only, quiet, atol=1e-3)
  assert not np.allclose(residual_only, run(dropout_rate=0.3), atol=1e-3)


def test_block_in_bfloat16_under_vmap_and_grad_with_an_empty_example():
  x = _floats(18, B, S, D)
  mask = zoo.key_padding_mask(jnp.array([7, 0, 5]), S)  # example 1 has no key to attend to
  block = EncoderBlock(**BLOCK, normalize_before=True, dtype=jnp.bfloat16)
  variables = _params(block, x)
  apply = lambda v, x: block.apply(v, x, mask=mask)

  @jax.jit
  def run(variables, x):  # one compilation
    loss = lambda v: jnp.sum(apply(v, x).astype(jnp.float32) ** 2)
    mapped = jax.vmap(apply, in_axes=(None, 0))(variables, jnp.stack([-x, x]))
    return apply(variables, x), mapped, jax.grad(loss)(variables)

  out, mapped, grads = run(variables, x)
  assert out.dtype == mapped.dtype == jnp.bfloat16 and mapped.shape == (2, B, S, D)
  np.testing.assert_allclose(np.asarray(mapped[1], np.float32), np.asarray(out, np.float32),
                             atol=1e-2)
  chex.assert_tree_all_finite((out, mapped, grads))
  # Both forms and both blocks compute in `dtype` all the way (float32 inputs are cast).
  enc_outputs = _floats(19, B, S, D)
  for normalize_before in (False, True):
    for module, args in [(EncoderBlock, (x,)), (DecoderBlock, (x, enc_outputs))]:
      one = module(**BLOCK, normalize_before=normalize_before, dtype=jnp.bfloat16)
      assert jax.eval_shape(lambda: one.init_with_output(jax.random.key(0), *args)[0]).dtype == \
          jnp.bfloat16


def test_bfloat16_and_no_retracing_of_decode_step():
  src, tgt, lens = _batch(seed=16)
  model = _model(dtype=jnp.bfloat16)
  variables = _params(model, src, tgt, lens)
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))
  chex.clear_trace_counter()

  @jax.jit
  @chex.assert_max_traces(n=1)
  def step(variables, state, tokens):
    return model.apply(variables, state, tokens, method=Transformer.decode_step)

  state = jax.jit(functools.partial(model.apply, max_len=T, method=Transformer.init_decode_state))(
      variables, src, lens)
  assert state["cache"]["layers_0"]["self_attention"]["cached_key"].dtype == jnp.bfloat16
  for t in range(3):  # equal shapes every step: one trace
    logits, state = step(variables, state, tgt[:, t])
  assert logits.shape == (B, TGT_VOCAB) and logits.dtype == jnp.bfloat16
  chex.assert_tree_all_finite(logits)


def test_argument_errors():
  src, tgt, lens = _batch()
  model = _model()
  variables = _params(model, src, tgt, lens)
  apply = functools.partial(jax.eval_shape, model.apply, variables)  # errors come at trace time
  with pytest.raises(ValueError, match="tokens: expected an integer array"):
    apply(src.astype(jnp.float32), tgt, lens)
  with pytest.raises(ValueError, match="tokens: expected an array of rank 2"):
    apply(src, tgt[0], lens)
  with pytest.raises(ValueError, match=r"src_valid_lens and src_tokens disagree"):
    apply(src, tgt, lens[:2])
  with pytest.raises(ValueError, match="tokens: expected an array of rank 1"):
    jax.eval_shape(functools.partial(model.apply, method=Transformer.decode_step), variables,
                   {"position": jnp.array(0)}, tgt)
  with pytest.raises(ValueError, match=r"x: expected an array of rank >= 2, got shape \(7,\)"):
    jax.eval_shape(EncoderBlock(**BLOCK).init, jax.random.key(0), _floats(0, S))
  x, enc_outputs = _floats(0, B, T, D), _floats(1, B, S, D)
  init = functools.partial(jax.eval_shape, DecoderBlock(**BLOCK).init, jax.random.key(0))
  with pytest.raises(ValueError, match=r"mask with shape \(3, 1, 1, 5\) does not broadcast "
                                       r"to the scores \(\*batch, H, Q, K\) = \(3, 4, 5, 7\)"):
    init(x, enc_outputs, mask=jnp.ones((B, 1, 1, T), bool))  # built for the wrong length
  with pytest.raises(ValueError, match="self_mask: expected a boolean array"):
    init(x, enc_outputs, self_mask=jnp.ones((T, T)))
  with pytest.raises(ValueError, match="enc_outputs: expected a floating-point array"):
    init(x, src[:, :, None])
