import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo


def test_sequence_mask_exact():
  mask = zoo.sequence_mask(jnp.array([0, 2, 5]), 5)
  np.testing.assert_array_equal(
      mask,
      [[0, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])
  assert mask.dtype == jnp.bool_


def test_sequence_mask_rejects_bad_lengths():
  with pytest.raises(ValueError, match="lengths"):
    zoo.sequence_mask(jnp.array([1.0, 2.0]), 4)
  with pytest.raises(ValueError, match=r"lengths must lie in \[0, 4\]"):
    zoo.sequence_mask(jnp.array([1, 5]), 4)
  with pytest.raises(ValueError, match=r"lengths must lie in \[0, 4\]"):
    zoo.sequence_mask(jnp.array([-1, 2]), 4)


def test_masked_softmax_d2l_example_per_batch_lengths():
  # d2l 11.3.2.1 (10.3.1 in d2l 0.17): masked_softmax(rand(2, 2, 4), [2, 3]); masked entries are
  # exactly zero.
  scores = jax.random.uniform(jax.random.key(0), (2, 2, 4))
  weights = zoo.masked_softmax(scores, jnp.array([2, 3]))
  np.testing.assert_array_equal(weights[0, :, 2:], 0.0)
  np.testing.assert_array_equal(weights[1, :, 3:], 0.0)
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
  expected = jax.nn.softmax(scores[0, :, :2])
  np.testing.assert_allclose(weights[0, :, :2], expected, rtol=1e-6)


def test_masked_softmax_per_row_lengths_exact():
  scores = jnp.zeros((2, 2, 4))
  weights = zoo.masked_softmax(scores, jnp.array([[1, 3], [2, 4]]))
  np.testing.assert_allclose(
      weights,
      [[[1, 0, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0]], [[0.5, 0.5, 0, 0], [0.25] * 4]], rtol=1e-6)


def test_masked_softmax_no_lengths_is_softmax():
  scores = jax.random.normal(jax.random.key(1), (3, 5, 7))
  np.testing.assert_allclose(zoo.masked_softmax(scores), jax.nn.softmax(scores), rtol=1e-6)


def test_masked_softmax_2d_scores():
  scores = jnp.log(jnp.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]]))
  weights = zoo.masked_softmax(scores, jnp.array([2, 1]))
  np.testing.assert_allclose(weights, [[1 / 3, 2 / 3, 0], [1, 0, 0]], rtol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
def test_fully_masked_rows_are_zero_not_nan_with_finite_grad(dtype):
  scores = jax.random.normal(jax.random.key(2), (3, 5, 7)).astype(dtype) * 100
  lens = jnp.array([0, 7, 3])
  weights = zoo.masked_softmax(scores, lens)
  assert weights.dtype == dtype
  chex.assert_tree_all_finite(weights)
  np.testing.assert_array_equal(np.asarray(weights[0], np.float32), 0.0)
  grad = jax.grad(lambda s: (zoo.masked_softmax(s, lens).astype(jnp.float32) ** 2).sum())(scores)
  chex.assert_tree_all_finite(grad)
  np.testing.assert_array_equal(np.asarray(grad[0], np.float32), 0.0)


def test_masked_softmax_bad_inputs():
  scores = jnp.zeros((3, 5, 7))
  with pytest.raises(ValueError, match="valid_lens with shape"):
    zoo.masked_softmax(scores, jnp.array([1, 2]))
  with pytest.raises(ValueError, match="valid_lens: expected an integer array"):
    zoo.masked_softmax(scores, jnp.array([1.0, 2.0, 3.0]))
  with pytest.raises(ValueError, match=r"valid_lens must lie in \[0, 7\]"):
    zoo.masked_softmax(scores, jnp.array([1, 8, 3]))
  with pytest.raises(ValueError, match="scores: expected a floating-point array"):
    zoo.masked_softmax(jnp.zeros((3, 7), jnp.int32), jnp.array([1, 2, 3]))
  with pytest.raises(ValueError, match=r"mask with shape \(2, 3, 5, 7\) does not broadcast to the "
                                       r"scores \(3, 5, 7\)"):
    zoo.softmax_where(scores, jnp.ones((2, 3, 5, 7), bool))
  with pytest.raises(ValueError, match="mask: expected a boolean array"):
    zoo.softmax_where(scores, jnp.ones((3, 5, 7)))


def test_masked_softmax_traces_once_and_maps_over_examples():
  @jax.jit
  @chex.assert_max_traces(n=1)
  def f(s, lens):
    return zoo.masked_softmax(s, lens)

  for seed in range(3):
    s = jax.random.normal(jax.random.key(seed), (3, 5, 7))
    f(s, jnp.array([seed, 7, 3]))
  per_example = jax.vmap(lambda s, n: zoo.masked_softmax(s[None], n[None])[0])
  s = jax.random.normal(jax.random.key(9), (3, 5, 7))
  lens = jnp.array([1, 7, 3])
  np.testing.assert_allclose(per_example(s, lens), zoo.masked_softmax(s, lens), rtol=1e-6)


def test_causal_and_padding_masks():
  np.testing.assert_array_equal(zoo.causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
  np.testing.assert_array_equal(zoo.causal_mask(2, 5, offset=2), [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
  mask = zoo.key_padding_mask(jnp.array([1, 3]), 4)
  assert mask.shape == (2, 1, 1, 4)
  combined = zoo.combine_masks(mask, zoo.causal_mask(4)[None, None])
  assert combined.shape == (2, 1, 4, 4)
  np.testing.assert_array_equal(combined[1, 0, 3], [1, 1, 1, 0])
  assert zoo.combine_masks(None, None) is None
