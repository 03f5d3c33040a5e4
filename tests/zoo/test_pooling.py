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

B, L, D, A = 3, 7, 5, 4


def _np_pool(scores, x, valid_lens):
  """Reference: softmax of scores (B, L) over the valid steps, then the weighted sum of x."""
  weights = np_masked_softmax(scores, np_lengths_mask(valid_lens, L))
  return np.einsum("bl,bld->bd", weights, x), weights


def test_additive_pooling_is_nndl_formula():
  x, lens = rand(0, B, L, D), np.array([7, 2, 4], np.int32)
  pool = zoo.AttentionPooling(features=A)
  variables = random_variables(pool, x, valid_lens=lens, seed=0)
  p = jax.tree.map(np.asarray, variables["params"])
  q, u, w, v = p["query"][0], p["scorer"]["w_q"], p["scorer"]["w_k"], p["scorer"]["v"]
  scores = np.tanh(x @ w + q @ u) @ v  # s = v^T tanh(X W + q^T U), (B, L)
  expected_context, expected_weights = _np_pool(scores, x, lens)
  context, weights = pool.apply(variables, x, valid_lens=lens)
  np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(context, expected_context, rtol=1e-5, atol=1e-6)


def test_dot_pooling_is_x_times_query_and_ignores_padding():
  x, lens = rand(1, B, L, D), np.array([1, 6, 0], np.int32)
  pool = zoo.AttentionPooling(score="dot")
  variables = random_variables(pool, x, valid_lens=lens, seed=1)
  query = np.asarray(variables["params"]["query"][0])
  assert query.shape == (D,)
  expected_context, expected_weights = _np_pool(x @ query, x, lens)
  context, weights = pool.apply(variables, x, valid_lens=lens)
  np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(context, expected_context, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(context[2], 0.0)
  # Changing padded steps changes nothing.
  padded = x.copy()
  padded[0, 1:] = 1e4
  chex.assert_trees_all_close(pool.apply(variables, padded, valid_lens=lens), (context, weights))


@pytest.mark.parametrize("score", ["scaled_dot", "bilinear", "concat"])
def test_other_scores_pool_with_valid_weights(score):
  x, lens = rand(2, B, L, D), jnp.array([3, 7, 5])
  pool = zoo.AttentionPooling(score=score)
  variables = random_variables(pool, x, valid_lens=lens, seed=2)
  context, weights = pool.apply(variables, x, valid_lens=lens)
  assert context.shape == (B, D) and weights.shape == (B, L)
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
  np.testing.assert_array_equal(weights[0, 3:], 0.0)
  np.testing.assert_allclose(context, jnp.einsum("bl,bld->bd", weights, x), rtol=1e-5, atol=1e-6)
  # No lengths means all steps are valid.
  chex.assert_trees_all_close(pool.apply(variables, x), pool.apply(variables, x, valid_lens=jnp.full(B, L)))


def test_pooling_jit_grad_bfloat16_and_vmap():
  x, lens = rand(3, B, L, D), jnp.array([3, 7, 0])  # example 2 has no valid step
  pool, pool16 = zoo.AttentionPooling(), zoo.AttentionPooling(dtype=jnp.bfloat16)
  variables = random_variables(pool16, x, valid_lens=lens, seed=3)
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))
  loss = lambda module, v: (module.apply(v, x, valid_lens=lens)[0].astype(jnp.float32) ** 2).sum()

  @jax.jit
  def run(variables):  # one compilation
    mapped, _ = jax.vmap(lambda xi: pool.apply(variables, xi, valid_lens=lens))(
        jnp.stack([x, x[::-1]]))
    return (pool16.apply(variables, x, valid_lens=lens), pool.apply(variables, x, valid_lens=lens),
            mapped,
            [jax.grad(loss, argnums=1)(module, variables) for module in (pool, pool16)])

  (context16, weights16), (context32, _), mapped, grads = run(variables)
  assert context16.dtype == weights16.dtype == jnp.bfloat16
  np.testing.assert_allclose(context16.astype(np.float32), context32, atol=0.05, rtol=0.05)
  # Gradients are finite in both dtypes although example 2 has no valid step.
  for leaf in jax.tree.leaves(grads):
    assert np.all(np.isfinite(leaf)) and np.abs(leaf).sum() > 0
  np.testing.assert_allclose(mapped[0], context32, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(mapped[1], pool.apply(variables, x[::-1], valid_lens=lens)[0], rtol=1e-5,
                             atol=1e-6)


def test_masked_mean_pool_exact():
  x = np.arange(B * L * D, dtype=np.float32).reshape(B, L, D)
  x[0, 2:] = np.nan  # padding never reaches the result
  lens = jnp.array([2, 7, 0])
  pooled = zoo.masked_mean_pool(x, lens)
  np.testing.assert_array_equal(pooled[0], (x[0, 0] + x[0, 1]) / 2)
  np.testing.assert_allclose(pooled[1], x[1].mean(0), rtol=1e-6)
  np.testing.assert_array_equal(pooled[2], 0.0)
  np.testing.assert_allclose(zoo.masked_mean_pool(x[1:2]), x[1:2].mean(1), rtol=1e-6)
  grad = jax.grad(lambda x: zoo.masked_mean_pool(x, lens).sum())(jnp.asarray(x))
  np.testing.assert_array_equal(grad[0, :2], 0.5)
  np.testing.assert_array_equal(grad[0, 2:], 0.0)
  np.testing.assert_array_equal(grad[2], 0.0)
  pooled16 = jax.jit(zoo.masked_mean_pool)(jnp.asarray(x[1:], jnp.bfloat16), lens[1:])
  assert pooled16.dtype == jnp.bfloat16
  np.testing.assert_allclose(pooled16.astype(np.float32), pooled[1:], rtol=1e-2)


def test_pooling_bad_arguments():
  x = jnp.zeros((B, L, D))
  with pytest.raises(ValueError, match=r"x: expected an array of rank 3, got shape \(7, 5\)"):
    zoo.masked_mean_pool(x[0], jnp.array([1]))
  with pytest.raises(ValueError, match=r"valid_lens and x disagree: valid_lens.shape\[0\] = 2"):
    zoo.masked_mean_pool(x, jnp.array([1, 2]))
  with pytest.raises(ValueError, match=r"valid_lens must lie in \[0, 7\]"):
    zoo.masked_mean_pool(x, jnp.array([1, 2, 8]))
  with pytest.raises(ValueError, match="x: expected a floating-point array"):
    zoo.AttentionPooling().init(jax.random.key(0), x.astype(jnp.int32))
  with pytest.raises(ValueError, match=r"valid_lens with shape \(2,\) does not match"):
    zoo.AttentionPooling().init(jax.random.key(0), x, valid_lens=jnp.array([1, 2]))
  with pytest.raises(ValueError, match="features: the 'dot' score has no hidden layer"):
    zoo.AttentionPooling(score="dot", features=3).init(jax.random.key(0), x)


def test_cls_pool_takes_one_position():
  x = rand(2, 3, 5, 4)
  np.testing.assert_array_equal(zoo.cls_pool(x), x[:, 0])
  np.testing.assert_array_equal(zoo.cls_pool(x, 4), x[:, 4])
  with pytest.raises(ValueError, match="position must lie in \\[0, 5\\)"):
    zoo.cls_pool(x, 5)


def test_masked_max_pool_ignores_padding_and_gives_zeros_for_empty_sequences():
  x = rand(3, 3, 5, 4)
  lens = np.array([5, 2, 0], np.int32)
  padded = x.copy()
  padded[1, 2:] = 1e4
  pooled = zoo.masked_max_pool(padded, lens)
  np.testing.assert_array_equal(pooled[0], x[0].max(0))
  np.testing.assert_array_equal(pooled[1], x[1, :2].max(0))
  np.testing.assert_array_equal(pooled[2], 0.0)
  with pytest.raises(ValueError, match="valid_lens must lie in \\[0, 5\\]"):
    zoo.masked_max_pool(x, np.array([6, 1, 1], np.int32))
