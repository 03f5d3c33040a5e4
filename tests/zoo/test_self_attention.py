import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from _helpers import np_lengths_mask
from _helpers import np_masked_softmax
from _helpers import rand
from _helpers import random_variables

B, L, D, F = 3, 7, 5, 6


def _np_self_attention(queries, keys, values, valid_lens, scale):
  """Reference: per example, softmax over the first valid_lens[b] keys of q k^T / scale."""
  scores = np.einsum("bqd,bkd->bqk", queries.astype(np.float64), keys) / scale  # (B, L, L)
  weights = np_masked_softmax(scores, np_lengths_mask(valid_lens, keys.shape[1])[:, None, :])
  return weights @ values, weights


@pytest.mark.parametrize("scale", [False, True])
def test_simple_self_attention_is_softmax_x_xt_x(scale):
  x, lens = rand(0, B, L, D) / 2, np.array([7, 3, 1], np.int32)
  module = zoo.SimpleSelfAttention(scale=scale)
  assert module.init(jax.random.key(0), x, valid_lens=lens) == {}  # parameter-free
  outputs, weights = module.apply({}, x, valid_lens=lens)
  expected_outputs, expected_weights = _np_self_attention(x, x, x, lens, np.sqrt(D) if scale else 1)
  np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(outputs, expected_outputs, rtol=1e-5, atol=1e-6)


def test_simple_self_attention_with_causal_mask_in_bfloat16_under_jit():
  x = rand(1, B, L, D)
  outputs, weights = zoo.SimpleSelfAttention().apply({}, x, mask=zoo.causal_mask(L))
  np.testing.assert_array_equal(np.triu(weights[1], k=1), 0.0)
  np.testing.assert_allclose(outputs[:, 0], x[:, 0], rtol=1e-6)  # step 0 sees only itself
  half = jax.jit(lambda x: zoo.SimpleSelfAttention(dtype=jnp.bfloat16).apply(
      {}, x, mask=zoo.causal_mask(L))[0])
  outputs16 = half(x)
  assert outputs16.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(outputs16, np.float32), outputs, atol=0.05, rtol=0.05)


def test_self_attention_projects_then_attends():
  x, lens = rand(2, B, L, D), np.array([4, 7, 2], np.int32)
  module = zoo.SelfAttention(features=F, use_bias=True)
  variables = random_variables(module, x, valid_lens=lens, seed=1)
  p = jax.tree.map(np.asarray, variables["params"])
  assert set(p) == {"query", "key", "value"}  # the scaled dot score has no parameters
  assert p["query"]["kernel"].shape == (D, F)
  project = lambda name: x @ p[name]["kernel"] + p[name]["bias"]  # noqa: E731
  expected_outputs, expected_weights = _np_self_attention(
      project("query"), project("key"), project("value"), lens, np.sqrt(F))
  outputs, weights = module.apply(variables, x, valid_lens=lens)
  assert outputs.shape == (B, L, F)
  np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(outputs, expected_outputs, rtol=1e-5, atol=1e-6)


def test_self_attention_other_score_dropout_jit_grad_bfloat16():
  x, lens = rand(3, B, L, D), jnp.array([4, 7, 0])
  module = zoo.SelfAttention(score="additive", score_features=3, dropout_rate=0.4)
  variables = random_variables(module, x, valid_lens=lens, seed=2)
  assert variables["params"]["attention"]["scorer"]["v"].shape == (3,)
  outputs, weights = module.apply(variables, x, valid_lens=lens)
  np.testing.assert_array_equal(outputs[2], 0.0)
  np.testing.assert_allclose(weights[:2].sum(-1), 1.0, rtol=1e-6)
  dropped, _ = module.apply(variables, x, valid_lens=lens, deterministic=False,
                            rngs={"dropout": jax.random.key(3)})
  assert not np.allclose(dropped, outputs)

  grads = jax.jit(jax.grad(lambda v: (module.apply(v, x, valid_lens=lens)[0] ** 2).sum()))(variables)
  for leaf in jax.tree.leaves(grads):
    assert np.all(np.isfinite(leaf)) and np.abs(leaf).sum() > 0

  module16 = zoo.SelfAttention(score="additive", score_features=3, dtype=jnp.bfloat16)
  outputs16, weights16 = jax.jit(module16.apply)(variables, x, valid_lens=lens)
  assert outputs16.dtype == weights16.dtype == jnp.bfloat16
  np.testing.assert_allclose(outputs16.astype(np.float32), outputs, atol=0.05, rtol=0.05)


def test_self_attention_maps_under_jax_vmap():
  x, lens = rand(4, 2, B, L, D), jnp.array([4, 7, 1])
  module = zoo.SelfAttention()
  variables = random_variables(module, x[0], valid_lens=lens, seed=4)
  mapped = jax.vmap(lambda xi: module.apply(variables, xi, valid_lens=lens))(x)
  chex.assert_trees_all_close(jax.tree.map(lambda a: a[1], mapped),
                              module.apply(variables, x[1], valid_lens=lens), rtol=1e-5, atol=1e-6)


def test_self_attention_bad_arguments():
  with pytest.raises(ValueError, match=r"x: expected an array of rank >= 2, got shape \(5,\)"):
    zoo.SimpleSelfAttention().apply({}, jnp.zeros((D,)))
  with pytest.raises(ValueError, match="x: expected a floating-point array"):
    zoo.SelfAttention().init(jax.random.key(0), jnp.zeros((B, L, D), jnp.int32))
  with pytest.raises(ValueError, match=r"valid_lens must lie in \[0, 7\]"):
    zoo.SimpleSelfAttention().apply({}, jnp.zeros((B, L, D)), valid_lens=jnp.array([1, 9, 2]))
