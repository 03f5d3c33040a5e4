"""experiments/seq2seq/fused_loss.py against loss.sequence_loss on the whole logits."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.seq2seq import fused_loss
from experiments.seq2seq.configs import BahdanauConfig
from experiments.seq2seq.configs import LuongConfig
from experiments.seq2seq.configs import PlainConfig
from experiments.seq2seq.configs import TransformerConfig
from experiments.seq2seq.loss import sequence_loss

B, T, D, V = 3, 7, 5, 11  # odd, all different; 21 rows


def _inputs(seed=0, bias=True):
  keys = jax.random.split(jax.random.key(seed), 5)
  hidden = jax.random.normal(keys[0], (B, T, D))
  kernel = jax.random.normal(keys[1], (D, V))
  bias_ = jax.random.normal(keys[2], (V,)) if bias else None
  targets = jax.random.randint(keys[3], (B, T), 0, V)
  lengths = jnp.array([7, 4, 1])
  weight = jnp.array([1.0, 1.0, 0.0])  # the last row is filler
  return hidden, kernel, bias_, targets, lengths, weight


def _reference(hidden, kernel, bias, targets, lengths, weight, eps, reduction):
  logits = hidden @ kernel + (0.0 if bias is None else bias)
  return sequence_loss(logits, targets, lengths, weight, eps, reduction)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["token_mean", "sequence_sum"])
@pytest.mark.parametrize("chunk_rows", [1, 4, 21, None])  # 4: a partial last chunk; None: 512
@pytest.mark.parametrize("bias", [True, False])
def test_loss_metrics_and_gradients_match_sequence_loss(eps, reduction, chunk_rows, bias):
  hidden, kernel, bias_, targets, lengths, weight = _inputs(bias=bias)

  def fused(h, k, b):
    return fused_loss.fused_sequence_loss(h, k, b, targets, lengths, weight, eps, reduction,
                                          chunk_rows=chunk_rows)

  def reference(h, k, b):
    return _reference(h, k, b, targets, lengths, weight, eps, reduction)

  (loss, metrics), grads = jax.jit(jax.value_and_grad(fused, argnums=(0, 1, 2), has_aux=True))(
      hidden, kernel, bias_)
  (ref_loss, ref_metrics), ref_grads = jax.value_and_grad(
      reference, argnums=(0, 1, 2), has_aux=True)(hidden, kernel, bias_)
  np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
  chex.assert_trees_all_close(metrics, ref_metrics, rtol=1e-5)
  chex.assert_trees_all_close(grads, ref_grads, rtol=1e-5, atol=1e-6)
  # Without differentiation (evaluation) the scan computes the loss alone: the same values.
  eval_loss, eval_metrics = jax.jit(fused)(hidden, kernel, bias_)
  np.testing.assert_allclose(eval_loss, ref_loss, rtol=1e-5)
  chex.assert_trees_all_close(eval_metrics, ref_metrics, rtol=1e-5)


def test_padding_rows_get_no_gradient():
  hidden, kernel, bias, targets, lengths, weight = _inputs()
  grad = jax.grad(lambda h: fused_loss.fused_sequence_loss(
      h, kernel, bias, targets, lengths, weight, 0.1, chunk_rows=4)[0])(hidden)
  np.testing.assert_array_equal(grad[1, 4:], 0.0)  # past row 1's length
  np.testing.assert_array_equal(grad[2], 0.0)  # the filler row
  assert np.all(np.abs(np.asarray(grad[0])) > 0)


def test_the_per_row_outputs_carry_no_gradient():
  hidden, kernel, bias, targets, _, _ = _inputs()
  rows = hidden.reshape(-1, D)
  grad = jax.grad(lambda h: jnp.sum(fused_loss.output_cross_entropy(
      h, kernel, bias, targets.reshape(-1), jnp.ones(B * T))[2]))(rows)
  np.testing.assert_array_equal(grad, 0.0)


def test_the_gradient_scales_with_the_cotangent():
  hidden, kernel, bias, targets, lengths, weight = _inputs()
  loss = lambda h: fused_loss.fused_sequence_loss(  # noqa: E731
      h, kernel, bias, targets, lengths, weight, 0.1, chunk_rows=4)[0]
  chex.assert_trees_all_close(jax.grad(lambda h: -2.5 * loss(h))(hidden),
                              -2.5 * jax.grad(loss)(hidden), rtol=1e-6)


def test_bfloat16_output_layer_is_close():
  hidden, kernel, bias, targets, lengths, weight = _inputs()
  loss, metrics = fused_loss.fused_sequence_loss(hidden, kernel, bias, targets, lengths, weight,
                                                 0.1, dtype=jnp.bfloat16)
  ref_logits = (hidden.astype(jnp.bfloat16) @ kernel.astype(jnp.bfloat16)
                + bias.astype(jnp.bfloat16))
  ref_loss, _ = sequence_loss(ref_logits, targets, lengths, weight, 0.1)
  np.testing.assert_allclose(loss, ref_loss, rtol=2e-3)
  assert metrics["nll"][0].dtype == jnp.float32


@pytest.mark.parametrize("bad, message", [
    (dict(hidden=jnp.zeros((4, 3, 5))), r"hidden \(N, D\) and kernel \(D, V\)"),
    (dict(kernel=jnp.zeros((6, 11))), r"hidden \(N, D\) and kernel \(D, V\)"),
    (dict(bias=jnp.zeros((10,))), r"bias: expected shape \(11,\)"),
    (dict(targets=jnp.zeros((20,), jnp.int32)), r"targets and weights: expected shape \(21,\)"),
    (dict(chunk_rows=0), "chunk_rows: expected a positive int, got 0"),
])
def test_bad_arguments_are_named(bad, message):
  hidden, kernel, bias, targets, _, _ = _inputs()
  args = dict(hidden=hidden.reshape(-1, D), kernel=kernel, bias=bias,
              targets=targets.reshape(-1), weights=jnp.ones(B * T))
  chunk_rows = bad.pop("chunk_rows", 8)
  args.update(bad)
  with pytest.raises(ValueError, match=message):
    fused_loss.output_cross_entropy(**args, chunk_rows=chunk_rows)


TRANSLATORS = {
    "transformer": TransformerConfig(model_dim=8, num_heads=2, ffn_hidden=12,
                                     num_encoder_layers=1, num_decoder_layers=2,
                                     dropout_rate=0.1),
    "transformer_tied": TransformerConfig(model_dim=8, num_heads=2, ffn_hidden=12,
                                          num_encoder_layers=1, num_decoder_layers=2,
                                          share_embeddings=True, dropout_rate=0.1),
    "bahdanau": BahdanauConfig(embed_dim=6, hidden_size=9, num_layers=2, dropout_rate=0.1),
    "luong": LuongConfig(embed_dim=6, hidden_size=9, num_layers=2, dropout_rate=0.1,
                         output_activation="tanh"),
    "plain": PlainConfig(embed_dim=6, hidden_size=9, num_layers=2, dropout_rate=0.1),
}


@pytest.mark.parametrize("name", list(TRANSLATORS))
def test_translator_loss_is_the_same_fused_or_not(name):
  """Each translator's hidden states and output layer give its logits, and the fused training
  loss equals the whole-logits one (loss, metrics, gradients), with dropout."""
  config = TRANSLATORS[name]
  vocab = 13
  translator = config.build(vocab, vocab, jnp.float32, jnp.float32)
  keys = jax.random.split(jax.random.key(3), 3)
  src = jax.random.randint(keys[0], (B, 5), 0, vocab)
  tgt_in = jax.random.randint(keys[1], (B, T), 0, vocab)
  src_len = jnp.array([5, 2, 3])
  params = translator.init(keys[2], src, src_len, tgt_in)
  hidden, kernel, bias = translator.hidden_and_output_layer(params, src, src_len, tgt_in)
  tied = name == "transformer_tied"
  assert (bias is None) == tied and kernel.shape == (hidden.shape[-1], vocab)
  np.testing.assert_allclose(hidden @ kernel + (0.0 if tied else bias),
                             translator.logits(params, src, src_len, tgt_in), atol=1e-5)
  targets = jnp.roll(tgt_in, -1, axis=1)
  lengths, weight = jnp.array([7, 6, 2]), jnp.array([1.0, 1.0, 1.0])
  rng = jax.random.key(9)

  def fused(p):
    h, k, b = translator.hidden_and_output_layer(p, src, src_len, tgt_in, rng)
    return fused_loss.fused_sequence_loss(h, k, b, targets, lengths, weight, 0.1, chunk_rows=8)

  def whole(p):
    logits = translator.logits(p, src, src_len, tgt_in, rng)
    return sequence_loss(logits, targets, lengths, weight, 0.1)

  (loss, metrics), grads = jax.value_and_grad(fused, has_aux=True)(params)
  (ref_loss, ref_metrics), ref_grads = jax.value_and_grad(whole, has_aux=True)(params)
  np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
  chex.assert_trees_all_close(metrics, ref_metrics, rtol=1e-5)
  chex.assert_trees_all_close(grads, ref_grads, rtol=1e-4, atol=1e-6)


def test_default_chunk_on_a_cpu():
  assert jax.default_backend() == "cpu"
  assert fused_loss.default_chunk_rows(3072) == fused_loss.CHUNK_ROWS == 512
