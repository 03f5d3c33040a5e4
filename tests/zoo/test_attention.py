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

B, Q, K, DQ, DK, DV = 3, 5, 7, 6, 4, 9


def _np_masked_attention(scores, values, mask):
  """Reference in float64: softmax over the allowed keys, zero rows where nothing is allowed."""
  weights = np_masked_softmax(scores, mask)
  return weights @ values, weights


def _np_lengths_mask(valid_lens, num_queries, num_keys):
  lens = np.asarray(valid_lens)
  lens = lens[:, None] if lens.ndim == 1 else lens  # (B, 1) or (B, Q)
  return np.broadcast_to(np_lengths_mask(lens, num_keys), (lens.shape[0], num_queries, num_keys))


@pytest.mark.parametrize("score", zoo.SCORE_NAMES)
def test_d2l_worked_example_for_every_score(score):
  keys = jnp.ones((2, 10, 2))
  values = jnp.tile(jnp.arange(40, dtype=jnp.float32).reshape(1, 10, 4), (2, 1, 1))
  queries = jnp.ones((2, 1, 2))
  valid_lens = jnp.array([2, 6])
  attention = zoo.Attention(score=score)
  variables = random_variables(attention, queries, keys, values, valid_lens=valid_lens, seed=0)
  context, weights = attention.apply(variables, queries, keys, values, valid_lens=valid_lens)
  np.testing.assert_allclose(context, [[[2, 3, 4, 5]], [[10, 11, 12, 13]]], rtol=1e-6)
  np.testing.assert_allclose(weights[0, 0], [0.5] * 2 + [0] * 8, rtol=1e-6)
  np.testing.assert_allclose(weights[1, 0], [1 / 6] * 6 + [0] * 4, rtol=1e-6)


def test_scaled_dot_matches_numpy_with_per_row_lengths_and_mask():
  queries, keys, values = rand(0, B, Q, DK), rand(1, B, K, DK), rand(2, B, K, DV)
  valid_lens = np.array([[7, 1, 3, 0, 5], [2, 2, 2, 2, 2], [4, 6, 7, 7, 1]], np.int32)
  mask = rand(3, 1, Q, K) > -0.8  # broadcast over the batch
  attention = zoo.Attention()
  context, weights = attention.apply({}, queries, keys, values, valid_lens=valid_lens, mask=mask)
  scores = np.einsum("bqd,bkd->bqk", queries, keys) / np.sqrt(DK)
  expected_context, expected_weights = _np_masked_attention(
      scores, values, _np_lengths_mask(valid_lens, Q, K) & mask)
  np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(context, expected_context, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(context[0, 3], 0.0)  # valid_len 0: zeros, not NaN


def test_additive_matches_numpy_with_per_example_lengths():
  queries, keys, values = rand(4, B, Q, DQ), rand(5, B, K, DK), rand(6, B, K, DV)
  valid_lens = np.array([3, 7, 1], np.int32)
  attention = zoo.Attention(score="additive", score_features=8)
  variables = random_variables(attention, queries, keys, values, valid_lens=valid_lens, seed=1)
  p = jax.tree.map(np.asarray, variables["params"]["scorer"])
  assert p["w_q"].shape == (DQ, 8)
  hidden = np.tanh((queries @ p["w_q"])[:, :, None, :] + (keys @ p["w_k"])[:, None, :, :])
  expected_context, expected_weights = _np_masked_attention(
      hidden @ p["v"], values, _np_lengths_mask(valid_lens, Q, K))
  context, weights = attention.apply(variables, queries, keys, values, valid_lens=valid_lens)
  np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(context, expected_context, rtol=1e-5, atol=1e-6)


def test_lengths_shapes_and_mask_agree():
  queries, keys, values = rand(7, B, Q, DK), rand(8, B, K, DK), rand(9, B, K, DV)
  lens = jnp.array([2, 7, 4])
  attention = zoo.Attention(score="dot")
  per_example = attention.apply({}, queries, keys, values, valid_lens=lens)
  per_row = attention.apply({}, queries, keys, values, valid_lens=jnp.tile(lens[:, None], (1, Q)))
  as_mask = attention.apply({}, queries, keys, values,
                            mask=zoo.sequence_mask(lens, K)[:, None, :])
  chex.assert_trees_all_close(per_example, per_row, as_mask, rtol=1e-6)


def test_jit_grad_and_no_retrace():
  attention = zoo.Attention(score="bilinear")
  queries, keys, values = rand(10, B, Q, DQ), rand(11, B, K, DK), rand(12, B, K, DV)
  variables = random_variables(attention, queries, keys, values, seed=2)

  @jax.jit
  @chex.assert_max_traces(n=1)
  def loss(variables, queries, keys, values, lens):
    context, _ = attention.apply(variables, queries, keys, values, valid_lens=lens)
    return (context ** 2).sum()

  for seed in range(3):
    lens = jnp.array([seed + 1, 7, 3])
    value = loss(variables, queries + seed, keys, values, lens)
    eager = attention.apply(variables, queries + seed, keys, values, valid_lens=lens)[0]
    eager = (eager ** 2).sum()
    np.testing.assert_allclose(value, eager, rtol=1e-5)
  grads = jax.grad(loss, argnums=(0, 1, 2, 3))(variables, queries, keys, values, jnp.array([1, 7, 3]))
  for leaf in jax.tree.leaves(grads):
    assert np.all(np.isfinite(leaf)) and np.abs(leaf).sum() > 0


def test_bfloat16_and_fully_masked_rows_give_zeros_and_finite_gradients():
  queries, keys, values = rand(13, B, Q, DQ), rand(14, B, K, DK), rand(15, B, K, DV)
  lens = jnp.array([0, 7, 3])  # example 0 has no key to attend to
  attention16 = zoo.Attention(score="concat", dtype=jnp.bfloat16)
  attention32 = zoo.Attention(score="concat")
  variables = random_variables(attention16, queries, keys, values, valid_lens=lens, seed=3)
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))

  def loss(variables, queries, keys, values):
    context, _ = attention16.apply(variables, queries, keys, values, valid_lens=lens)
    return (context.astype(jnp.float32) ** 2).sum()

  @jax.jit
  def run(variables, queries, keys, values):  # one compilation
    return (attention16.apply(variables, queries, keys, values, valid_lens=lens),
            attention32.apply(variables, queries, keys, values, valid_lens=lens)[0],
            jax.grad(loss, argnums=(0, 1, 2, 3))(variables, queries, keys, values))

  (context16, weights16), context32, grads = run(variables, queries, keys, values)
  assert context16.dtype == weights16.dtype == jnp.bfloat16
  np.testing.assert_allclose(context16.astype(np.float32), context32, atol=0.1, rtol=0.05)
  np.testing.assert_array_equal(context16[0].astype(np.float32), 0.0)
  np.testing.assert_array_equal(weights16[0].astype(np.float32), 0.0)
  chex.assert_tree_all_finite(grads)
  for grad in grads[1:]:  # nothing flows into the example that attends to nothing
    np.testing.assert_array_equal(np.asarray(grad[0], np.float32), 0.0)
  assert all(np.abs(leaf).sum() > 0 for leaf in jax.tree.leaves(grads[0]))


def test_dropout_only_when_not_deterministic():
  # With one-hot values the context IS the weights after dropout, so dropout can be read off.
  queries, keys = rand(16, B, Q, DK), rand(17, B, K, DK)
  values = jnp.tile(jnp.eye(K), (B, 1, 1))
  attention = zoo.Attention(dropout_rate=0.5)
  plain_context, plain_weights = zoo.Attention().apply({}, queries, keys, values)
  chex.assert_trees_all_close(attention.apply({}, queries, keys, values),
                              (plain_context, plain_weights))
  rngs = {"dropout": jax.random.key(4)}
  context, weights = attention.apply({}, queries, keys, values, deterministic=False, rngs=rngs)
  np.testing.assert_allclose(weights, plain_weights, rtol=1e-6)  # returned before dropout
  kept = context != 0
  assert 0.2 < kept.mean() < 0.8
  np.testing.assert_allclose(context, np.where(kept, plain_weights / 0.5, 0.0), rtol=1e-6)
  again, _ = attention.apply({}, queries, keys, values, deterministic=False, rngs=rngs)
  np.testing.assert_array_equal(context, again)


def test_jax_vmap_over_apply():
  attention = zoo.Attention(score="additive")
  queries, keys, values = rand(19, 2, B, Q, DQ), rand(20, 2, B, K, DK), rand(21, 2, B, K, DV)
  variables = random_variables(attention, queries[0], keys[0], values[0], seed=5)
  mapped, _ = jax.vmap(attention.apply, in_axes=(None, 0, 0, 0))(variables, queries, keys, values)
  np.testing.assert_allclose(mapped[1], attention.apply(variables, queries[1], keys[1], values[1])[0],
                             rtol=1e-5, atol=1e-6)


def test_bad_arguments_are_named():
  q, k, v = jnp.zeros((B, Q, DK)), jnp.zeros((B, K, DK)), jnp.zeros((B, K, DV))
  apply = lambda *args, **kw: zoo.Attention().apply({}, *args, **kw)  # noqa: E731
  with pytest.raises(ValueError, match=r"queries: expected an array of rank >= 2, got shape \(4,\)"):
    apply(q[0, 0], k, v)
  with pytest.raises(ValueError, match=r"keys: expected the batch axes \(2,\) of queries followed "
                                       r"by 2 per-example axes, got shape \(3, 7, 4\)"):
    apply(q[:2], k, v)
  with pytest.raises(ValueError, match=r"keys and values disagree: keys.shape\[1\] = 7 but "
                                       r"values.shape\[1\] = 6"):
    apply(q, k, v[:, :6])
  with pytest.raises(ValueError, match=r"queries and keys disagree: queries.shape\[2\] = 6"):
    apply(jnp.zeros((B, Q, DQ)), k, v)
  with pytest.raises(ValueError, match="values: expected a floating-point array"):
    apply(q, k, v.astype(jnp.int32))
  with pytest.raises(ValueError, match=r"valid_lens with shape \(3, 4\) does not match the score "
                                       r"rows \(\*batch, Q\) = \(3, 5\)"):
    apply(q, k, v, valid_lens=jnp.ones((B, 4), jnp.int32))
  with pytest.raises(ValueError, match=r"valid_lens must lie in \[0, 7\]"):
    apply(q, k, v, valid_lens=jnp.array([1, 8, 2]))
  with pytest.raises(ValueError, match="mask: expected a boolean array"):
    apply(q, k, v, mask=jnp.ones((B, Q, K)))
  with pytest.raises(ValueError, match=r"mask with shape \(3, 5, 6\) does not broadcast"):
    apply(q, k, v, mask=jnp.ones((B, Q, 6), bool))
  with pytest.raises(ValueError, match=r"mask with shape \(2, 3, 5, 7\) does not broadcast"):
    apply(q, k, v, mask=jnp.ones((2, B, Q, K), bool))  # would widen the scores
  with pytest.raises(ValueError, match="score: unknown name 'cosine'"):
    zoo.Attention(score="cosine").apply({}, q, k, v)


def test_projected_keys_give_the_same_attention_and_are_additive_only():
  """project_keys once + keys_projected=True equals the plain call, with the same parameters;
  other scores have no key projection; projected keys need this module's W_k."""
  rng = np.random.default_rng(3)
  b, q, k, dq, dk, dv, a = 3, 5, 7, 4, 6, 2, 9
  queries, keys = jnp.asarray(rng.normal(size=(b, q, dq))), jnp.asarray(rng.normal(size=(b, k, dk)))
  values, lens = jnp.asarray(rng.normal(size=(b, k, dv))), jnp.array([7, 3, 0])
  queries, keys, values = (x.astype(jnp.float32) for x in (queries, keys, values))
  attention = zoo.Attention("additive", score_features=a)
  variables = attention.init(jax.random.key(1), queries, keys, values)
  want = attention.apply(variables, queries, keys, values, valid_lens=lens)
  projected = attention.apply(variables, keys, method=attention.project_keys)
  chex.assert_shape(projected, (b, k, a))
  np.testing.assert_allclose(projected, keys @ variables["params"]["scorer"]["w_k"], rtol=1e-6)
  got = attention.apply(variables, queries, projected, values, valid_lens=lens, keys_projected=True)
  chex.assert_trees_all_close(got, want, atol=1e-6)
  # Initialized through the two-step path: the same parameters by name and shape (drawn in
  # another order, so other values for the same seed), and the plain call works with them.
  def two_step(module, queries, keys, values, lens=None):
    return module(queries, module.project_keys(keys), values, valid_lens=lens,
                  keys_projected=True)
  staged = attention.init(jax.random.key(1), queries, keys, values, method=two_step)
  chex.assert_trees_all_equal_shapes_and_dtypes(staged, variables)
  chex.assert_trees_all_close(attention.apply(staged, queries, keys, values, valid_lens=lens),
                              attention.apply(staged, queries, keys, values, lens, method=two_step),
                              atol=1e-6)
  with pytest.raises(ValueError, match="only the 'additive' score projects its keys"):
    zoo.Attention("dot").init(jax.random.key(0), keys, method="project_keys")
  with pytest.raises(ValueError, match="only the 'additive' score projects its keys"):
    zoo.Attention("bilinear").init(jax.random.key(0), queries, keys, values, keys_projected=True)
  with pytest.raises(ValueError, match="needs the keys projected by this module's project_keys"):
    attention.init(jax.random.key(0), queries, projected, values, keys_projected=True)
  with pytest.raises(ValueError, match=r"projected keys must have width A = 9"):
    attention.apply(variables, queries, keys, values, keys_projected=True)
