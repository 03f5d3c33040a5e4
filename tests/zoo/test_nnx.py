"""zoo.nnx: every public module of the zoo inside an NNX model, with its linen parameter tree, its
linen outputs under nnx.jit, and linen's gradients under nnx.grad and nnx.Optimizer."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import zoo
import zoo.nnx
from _helpers import rand
from _helpers import random_variables

B, L, S, D = 2, 5, 7, 12  # batch, length, a second (source) length, width
_TOKENS = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 0, 0]], np.int32)  # (B, L) ids < 11
_SRC = np.array([[2, 7, 1, 8, 2, 8, 1], [8, 2, 8, 4, 0, 0, 0]], np.int32)  # (B, S)
_LENS, _SRC_LENS = np.array([5, 3], np.int32), np.array([7, 4], np.int32)


def _seq2seq(decoder: type[nn.Module]) -> nn.Module:
  encoder = zoo.RecurrentEncoder(vocab_size=11, embed_dim=6, hidden_size=8)
  return zoo.Seq2Seq(encoder=encoder, decoder=decoder(vocab_size=11, embed_dim=6, hidden_size=8))


def _samples() -> dict[str, tuple[nn.Module, tuple, dict]]:
  """name -> (module, call arguments, keyword arguments): one call of each public linen module."""
  x, y, enc = rand(0, B, L, D), rand(1, B, S, D), rand(2, B, S, 8)
  decoder = dict(vocab_size=11, embed_dim=6, hidden_size=8)
  block = dict(num_heads=3, ffn_hidden=9)
  scores = {name: (getattr(zoo, name)(), (x, y), {}) for name in (
      "AdditiveScore", "BilinearScore", "ConcatLinearScore", "ConcatScore", "DotScore",
      "ScaledDotScore")}
  return {
      **scores,
      "Attention": (zoo.Attention(score="additive"), (x, y, y), {"valid_lens": _SRC_LENS}),
      "AttentionPooling": (zoo.AttentionPooling(), (x,), {"valid_lens": _LENS}),
      "SoftAlignment": (zoo.SoftAlignment(), (x, y), {"valid_lens": (_LENS, _SRC_LENS)}),
      "SegmentEmbedding": (zoo.SegmentEmbedding(), (x, (_TOKENS > 2).astype(np.int32)), {}),
      "SelfAttention": (zoo.SelfAttention(), (x,), {}),
      "SimpleSelfAttention": (zoo.SimpleSelfAttention(), (x,), {}),
      "SinusoidalPositionEncoding": (zoo.SinusoidalPositionEncoding(), (x,), {}),
      "LearnedPositionEmbedding": (zoo.LearnedPositionEmbedding(max_len=9, features=D), (x,), {}),
      "MultiHeadAttention": (zoo.MultiHeadAttention(num_heads=3), (x, y),
                             {"valid_lens": _SRC_LENS}),
      "PositionwiseFFN": (zoo.PositionwiseFFN(hidden=9), (x,), {}),
      "EncoderBlock": (zoo.EncoderBlock(**block), (x,), {}),
      "DecoderBlock": (zoo.DecoderBlock(**block), (x, y), {"valid_lens": _SRC_LENS}),
      "TransformerEncoder": (zoo.TransformerEncoder(**block, num_layers=2), (x,), {}),
      "TransformerDecoder": (zoo.TransformerDecoder(**block, num_layers=2), (x, y),
                             {"valid_lens": _SRC_LENS}),
      "Transformer": (zoo.Transformer(**block, src_vocab_size=11, tgt_vocab_size=13, model_dim=D,
                                      num_encoder_layers=1, num_decoder_layers=1),
                      (_SRC, _TOKENS, _SRC_LENS), {}),
      "LSTMLayer": (zoo.LSTMLayer(hidden_size=8), (x,), {"valid_lens": _LENS}),
      "LSTM": (zoo.LSTM(hidden_size=8, num_layers=2), (x,), {"valid_lens": _LENS}),
      "BiLSTM": (zoo.BiLSTM(hidden_size=8), (x,), {"valid_lens": _LENS}),
      "RecurrentEncoder": (zoo.RecurrentEncoder(**decoder), (_SRC,), {"valid_lens": _SRC_LENS}),
      "BahdanauDecoder": (zoo.BahdanauDecoder(**decoder), (_TOKENS, enc, _SRC_LENS), {}),
      "LuongDecoder": (zoo.LuongDecoder(**decoder), (_TOKENS, enc, _SRC_LENS), {}),
      "PlainDecoder": (zoo.PlainDecoder(**decoder), (_TOKENS, enc, _SRC_LENS),
                       {"init_state": (zoo.LSTMState(rand(3, B, 8), rand(4, B, 8)),)}),
      "Seq2Seq": (_seq2seq(zoo.BahdanauDecoder), (_SRC, _SRC_LENS, _TOKENS), {}),
  }


SAMPLES = _samples()


def _public_modules() -> set[str]:
  return {name for name in zoo.__all__
          if isinstance(getattr(zoo, name), type) and issubclass(getattr(zoo, name), nn.Module)}


def test_every_public_module_has_a_sample_here():
  assert set(SAMPLES) == _public_modules()


def _layout(tree) -> dict[str, tuple]:
  """path -> (shape, dtype) of every leaf."""
  return {jax.tree_util.keystr(path): (leaf.shape, leaf.dtype)
          for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_wrapped_module_has_the_linen_parameter_tree(name):
  module, args, kwargs = SAMPLES[name]
  linen = jax.eval_shape(lambda: module.init(jax.random.key(0), *args, **kwargs))
  wrapped = nnx.eval_shape(lambda: zoo.nnx.wrap(module, *args, rngs=nnx.Rngs(0), **kwargs))
  params = nnx.state(wrapped, nnx.Param)
  assert _layout(nnx.to_pure_dict(params)) == _layout(linen.get("params", {}))
  assert _layout(zoo.nnx.linen_variables(wrapped)) == _layout(linen)


# One module of each kind (the tree test above covers them all; compiling each costs seconds).
@pytest.mark.parametrize("name", ["DotScore", "AttentionPooling", "MultiHeadAttention",
                                  "SoftAlignment", "BiLSTM", "LuongDecoder"])
def test_from_linen_computes_what_linen_apply_computes_under_nnx_jit(name):
  module, args, kwargs = SAMPLES[name]
  variables = random_variables(module, *args, **kwargs)
  wrapped = zoo.nnx.from_linen(module, variables)

  @nnx.jit
  def both(wrapped, variables):
    return wrapped(*args, **kwargs), module.apply(variables, *args, **kwargs)

  out, expected = both(wrapped, variables)
  assert jax.tree.structure(out) == jax.tree.structure(expected)
  for got, want in zip(jax.tree.leaves(out), jax.tree.leaves(expected)):
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
  assert _layout(zoo.nnx.linen_variables(wrapped)) == _layout(variables)


class _Classifier(nnx.Module):
  """An NNX model around two zoo modules: a position-wise feed-forward layer (dropout 0.25),
  attention pooling, and an nnx.Linear to 3 classes."""

  def __init__(self, x: jax.Array, lens: jax.Array, rngs: nnx.Rngs):
    ffn = zoo.PositionwiseFFN(hidden=9, dropout_rate=0.25)
    self.ffn = zoo.nnx.wrap(ffn, x, rngs=rngs)
    self.pool = zoo.nnx.wrap(zoo.AttentionPooling(), x, valid_lens=lens, rngs=rngs)
    self.out = nnx.Linear(x.shape[-1], 3, rngs=rngs)

  def __call__(self, x, lens, *, deterministic: bool = True):  # (B, L, D), (B,) -> (B, 3)
    h = self.ffn(x, deterministic=deterministic)
    context, _ = self.pool(h, valid_lens=lens)
    return self.out(context)


def _linen_loss(model: _Classifier, x, lens, labels):
  """The classifier's loss as a function of the linen variables of its zoo parts."""
  ffn, pool = model.ffn.to_nnx__module, model.pool.to_nnx__module
  w, b = model.out.kernel[...], model.out.bias[...]

  def loss(ffn_vars, pool_vars):
    h = ffn.apply(ffn_vars, x)
    context, _ = pool.apply(pool_vars, h, valid_lens=lens)
    return optax.softmax_cross_entropy_with_integer_labels(context @ w + b, labels).mean()
  return loss


def test_nnx_grad_and_optimizer_update_the_zoo_parameters_as_linen_would():
  x, lens, labels = jnp.asarray(rand(3, B, L, D)), jnp.asarray(_LENS), jnp.array([2, 0])
  model = _Classifier(x, lens, nnx.Rngs(0, dropout=1))

  def loss_fn(model):
    return optax.softmax_cross_entropy_with_integer_labels(model(x, lens), labels).mean()

  @nnx.jit
  def grads_both_ways(model):
    linen_vars = [zoo.nnx.linen_variables(m) for m in (model.ffn, model.pool)]
    linen_grads = jax.grad(_linen_loss(model, x, lens, labels), argnums=(0, 1))(*linen_vars)
    return nnx.grad(loss_fn)(model), linen_grads

  grads, want = grads_both_ways(model)
  for part, expected in zip(("ffn", "pool"), want):
    got = nnx.to_pure_dict(grads[part])
    assert _layout(got) == _layout(expected["params"])
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected["params"])):
      np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)

  optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
  before = zoo.nnx.linen_variables(model.pool)

  @nnx.jit
  def train_step(model, optimizer):
    def dropout_loss(model):
      logits = model(x, lens, deterministic=False)
      return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    loss, grads = nnx.value_and_grad(dropout_loss)(model)
    optimizer.update(model, grads)
    return loss

  losses = [float(train_step(model, optimizer)) for _ in range(12)]
  assert losses[-1] < losses[0]
  after = zoo.nnx.linen_variables(model.pool)  # the optimizer moved the zoo module's parameters
  assert all(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(after),
                                                        jax.tree.leaves(before)))


def test_dropout_draws_from_the_dropout_stream():
  x = jnp.asarray(rand(5, B, L, D))
  ffn = zoo.PositionwiseFFN(hidden=9, dropout_rate=0.5)
  runs = [zoo.nnx.wrap(ffn, x, rngs=nnx.Rngs(0, dropout=seed)) for seed in (1, 1, 2)]
  outs = [m(x, deterministic=False) for m in runs]
  np.testing.assert_array_equal(outs[0], outs[1])  # same streams, same masks
  assert not np.array_equal(outs[0], outs[2])
  np.testing.assert_array_equal(runs[0](x), ffn.apply(zoo.nnx.linen_variables(runs[0]), x))


def test_bad_arguments_are_named():
  with pytest.raises(TypeError, match="module: expected a flax.linen Module"):
    zoo.nnx.wrap(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), jnp.ones((1, 2)), rngs=nnx.Rngs(0))
  with pytest.raises(TypeError, match="rngs: expected flax.nnx.Rngs"):
    zoo.nnx.wrap(zoo.DotScore(), jnp.ones((1, 2, 3)), jnp.ones((1, 2, 3)), rngs=0)
  with pytest.raises(ValueError, match="variables: expected linen's variables"):
    zoo.nnx.from_linen(zoo.AttentionPooling(), {"kernel": jnp.ones(3)})
  with pytest.raises(TypeError, match="wrapped: expected a module made by zoo.nnx.wrap"):
    zoo.nnx.linen_variables(nnx.Linear(2, 3, rngs=nnx.Rngs(0)))
