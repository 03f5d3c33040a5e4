import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from _helpers import rand
from _helpers import random_variables
from zoo import scoring

Q, K, DQ, DK, A = 5, 7, 6, 4, 3


def _np_additive(q, k, w_q, w_k, v):
  out = np.zeros((q.shape[0], k.shape[0]))
  for i in range(q.shape[0]):
    for j in range(k.shape[0]):
      out[i, j] = v @ np.tanh(w_q.T @ q[i] + w_k.T @ k[j])
  return out


def test_pure_scores_match_numpy():
  q, k, q_same = rand(0, Q, DQ), rand(1, K, DK), rand(2, Q, DK)
  w_q, w_k, v, w = rand(3, DQ, A), rand(4, DK, A), rand(5, A), rand(6, DQ, DK)
  dot = np.einsum("qd,kd->qk", q_same.astype(np.float64), k)
  np.testing.assert_allclose(zoo.dot_score(q_same, k), dot, rtol=1e-5)
  np.testing.assert_allclose(zoo.scaled_dot_score(q_same, k), dot / 2.0, rtol=1e-5)  # sqrt(4)
  np.testing.assert_allclose(zoo.additive_score(q, k, w_q, w_k, v),
                             _np_additive(q, k, w_q, w_k, v), rtol=1e-5, atol=1e-6)
  bilinear = [[q[i] @ w @ k[j] for j in range(K)] for i in range(Q)]
  np.testing.assert_allclose(zoo.bilinear_score(q, k, w), bilinear, rtol=1e-5, atol=1e-5)
  w_cat = rand(7, DQ + DK, A)
  concat = [[v @ np.tanh(w_cat.T @ np.concatenate([q[i], k[j]])) for j in range(K)]
            for i in range(Q)]
  np.testing.assert_allclose(zoo.concat_score(q, k, w_cat, v), concat, rtol=1e-5, atol=1e-6)


def test_concat_linear_score_matches_the_formula_with_odd_sizes():
  q, k, w = rand(50, Q, DQ), rand(51, K, DK), rand(52, DQ + DK)
  expected = [[w @ np.concatenate([q[i], k[j]]) for j in range(K)] for i in range(Q)]
  np.testing.assert_allclose(zoo.concat_linear_score(q, k, w), expected, rtol=1e-5, atol=1e-5)
  module = zoo.make_score("concat_linear")
  variables = random_variables(module, q, k, seed=5)
  assert jax.tree.map(jnp.shape, variables["params"]) == {"w": (DQ + DK,)}
  scores = module.apply(variables, q, k)
  np.testing.assert_allclose(scores, zoo.concat_linear_score(q, k, variables["params"]["w"]),
                             rtol=1e-6)
  # The query term is constant along each row, so the softmax over keys ignores the query.
  weights = jax.nn.softmax(scores, axis=-1)
  np.testing.assert_allclose(weights, np.broadcast_to(weights[:1], (Q, K)), rtol=1e-5)
  with pytest.raises(ValueError, match=r"w: expected 10 entries \(Dq \+ Dk\)"):
    zoo.concat_linear_score(q, k, jnp.zeros(9))
  with pytest.raises(ValueError, match="w: expected an array of rank 1"):
    zoo.concat_linear_score(q, k, jnp.zeros((DQ + DK, 1)))
  with pytest.raises(ValueError, match="features: the 'concat_linear' score has no hidden layer"):
    zoo.make_score("concat_linear", features=3)


def test_pure_scores_reject_bad_shapes():
  with pytest.raises(ValueError, match=r"q and k disagree: q.shape\[-1\] = 6 but k.shape\[-1\] = 4"):
    zoo.dot_score(jnp.zeros((Q, DQ)), jnp.zeros((K, DK)))
  with pytest.raises(ValueError, match="q: expected an array of rank 2"):
    zoo.scaled_dot_score(jnp.zeros((2, Q, DK)), jnp.zeros((K, DK)))
  with pytest.raises(ValueError, match=r"w: expected 10 rows \(Dq \+ Dk\)"):
    zoo.concat_score(jnp.zeros((Q, DQ)), jnp.zeros((K, DK)), jnp.zeros((9, A)), jnp.zeros(A))


@pytest.mark.parametrize("name", zoo.SCORE_NAMES)
def test_modules_map_leading_axes_with_shared_parameters(name):
  dq = DK if name in ("dot", "scaled_dot") else DQ
  q, k = rand(10, 2, 3, Q, dq), rand(11, 2, 3, K, DK)
  module = zoo.make_score(name)
  variables = random_variables(module, q, k, seed=0)
  scores = module.apply(variables, q, k)
  assert scores.shape == (2, 3, Q, K)
  # Each example alone gives the same scores with the same parameters.
  for i, j in [(0, 0), (1, 2)]:
    np.testing.assert_allclose(scores[i, j], module.apply(variables, q[i, j], k[i, j]),
                               rtol=1e-5, atol=1e-6)
  # An unbatched query set broadcasts against batched keys (as a learned pooling query does).
  broadcast = module.apply(variables, q[0, 0], k[1])
  assert broadcast.shape == (3, Q, K)
  np.testing.assert_allclose(broadcast[2], module.apply(variables, q[0, 0], k[1, 2]),
                             rtol=1e-5, atol=1e-6)


def test_module_parameters_shapes_and_names():
  q, k = jnp.ones((Q, DQ)), jnp.ones((K, DK))
  shapes = lambda module: jax.tree.map(  # traced, not compiled
      jnp.shape, jax.eval_shape(module.init, jax.random.key(0), q, k)["params"])
  assert shapes(zoo.make_score("additive", features=A)) == {
      "w_q": (DQ, A), "w_k": (DK, A), "v": (A,)}
  assert shapes(zoo.make_score("concat", features=A)) == {"w": (DQ + DK, A), "v": (A,)}
  assert shapes(zoo.BilinearScore()) == {"w": (DQ, DK)}
  # Default hidden size is the key width.
  assert shapes(zoo.AdditiveScore())["v"] == (DK,)


def test_module_uses_the_pure_function_with_its_parameters():
  q, k = rand(12, Q, DQ), rand(13, K, DK)
  module = zoo.ConcatScore(features=A)
  variables = random_variables(module, q, k, seed=1)
  p = variables["params"]
  np.testing.assert_allclose(module.apply(variables, q, k), zoo.concat_score(q, k, p["w"], p["v"]),
                             rtol=1e-6)


@pytest.mark.parametrize("name", ["additive", "bilinear", "concat"])
def test_nn_vmap_over_heads_gives_each_head_its_own_parameters(name):
  heads = 4
  multi = nn.vmap(scoring.score_class(name), in_axes=0, out_axes=0,
                  variable_axes={"params": 0}, split_rngs={"params": True})()
  q, k = rand(20, heads, Q, DQ), rand(21, heads, K, DK)
  variables = multi.init(jax.random.key(2), q, k)
  leaves = jax.tree.leaves(variables)
  assert all(leaf.shape[0] == heads for leaf in leaves)
  first = leaves[0]
  assert not np.allclose(first[0], first[1])  # heads are initialized differently
  scores = multi.apply(variables, q, k)
  assert scores.shape == (heads, Q, K)
  single = zoo.make_score(name)
  for h in range(heads):
    head_vars = jax.tree.map(lambda x: x[h], variables)
    np.testing.assert_allclose(scores[h], single.apply(head_vars, q[h], k[h]),
                               rtol=1e-5, atol=1e-6)


def test_make_score_names_and_errors():
  assert zoo.SCORE_NAMES == ("dot", "scaled_dot", "additive", "bilinear", "concat",
                             "concat_linear")
  assert isinstance(zoo.make_score("dot", features=None), zoo.DotScore)
  with pytest.raises(ValueError, match="unknown name 'cosine'; known names are dot, scaled_dot"):
    zoo.make_score("cosine")
  with pytest.raises(ValueError, match="features: the 'bilinear' score has no hidden layer"):
    zoo.make_score("bilinear", features=8)


def test_modules_reject_bad_inputs():
  with pytest.raises(ValueError, match=r"q and k disagree: q.shape\[-1\] = 6"):
    zoo.ScaledDotScore().init(jax.random.key(0), jnp.zeros((Q, DQ)), jnp.zeros((K, DK)))
  with pytest.raises(ValueError, match="k: expected a floating-point array"):
    zoo.AdditiveScore().init(jax.random.key(0), jnp.zeros((Q, DQ)), jnp.zeros((K, DK), jnp.int32))
  with pytest.raises(ValueError, match=r"k: expected an array of rank >= 2, got shape \(7,\)"):
    zoo.BilinearScore().init(jax.random.key(0), jnp.zeros((Q, DQ)), jnp.zeros((K,)))
  with pytest.raises(ValueError, match=r"leading \(batch\) axes of q \(2, 5, 6\) and k \(3, 7, 4\)"):
    zoo.BilinearScore().init(jax.random.key(0), jnp.zeros((2, Q, DQ)), jnp.zeros((3, K, DK)))


@pytest.mark.parametrize("name", ["additive", "concat"])
def test_bfloat16_computation_float32_storage_and_grad_under_jit(name):
  q, k = rand(30, 3, Q, DQ), rand(31, 3, K, DK)
  module32 = zoo.make_score(name, features=A)
  module16 = zoo.make_score(name, features=A, dtype=jnp.bfloat16)
  variables = random_variables(module16, q, k, seed=3)
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))
  scores16 = jax.jit(module16.apply)(variables, q, k)
  assert scores16.dtype == jnp.bfloat16
  np.testing.assert_allclose(scores16.astype(np.float32), module32.apply(variables, q, k),
                             atol=0.05, rtol=0.05)

  grads = jax.jit(jax.grad(lambda v: (module32.apply(v, q, k) ** 2).sum()))(variables)
  for leaf in jax.tree.leaves(grads):
    assert np.all(np.isfinite(leaf)) and np.abs(leaf).sum() > 0


def test_jax_vmap_over_module_apply():
  q, k = rand(40, 2, 3, Q, DQ), rand(41, 2, 3, K, DK)
  module = zoo.BilinearScore()
  variables = random_variables(module, q, k, seed=4)
  mapped = jax.vmap(module.apply, in_axes=(None, 0, 0))(variables, q, k)
  np.testing.assert_allclose(mapped, module.apply(variables, q, k), rtol=1e-6)


def test_additive_score_from_projections_and_the_module_s_two_step_path():
  rng = np.random.default_rng(7)
  q, k = rng.normal(size=(2, 5, 3)).astype(np.float32), rng.normal(size=(2, 7, 4)).astype(np.float32)
  w_q, w_k, v = (rng.normal(size=s).astype(np.float32) for s in ((3, 6), (4, 6), (6,)))
  np.testing.assert_array_equal(zoo.additive_score(q[0], k[0], w_q, w_k, v),
                                zoo.additive_score_projected(q[0] @ w_q, k[0] @ w_k, v))
  score = zoo.AdditiveScore(features=6)
  variables = score.init(jax.random.key(0), q, k)
  projected = score.apply(variables, k, method=score.project_keys)  # (2, 7, 6)
  chex.assert_shape(projected, (2, 7, 6))
  np.testing.assert_allclose(score.apply(variables, q, projected, keys_projected=True),
                             score.apply(variables, q, k), rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match=r"q_hidden.shape\[-1\] = 3 but k_hidden.shape\[-1\] = 4"):
    zoo.additive_score_projected(q[0], k[0], v)


def test_projected_additive_score_recomputes_its_features_with_the_same_gradients():
  q_hidden, k_hidden, v = rand(31, 3, 11), rand(32, 7, 11), rand(33, 11)
  cotangent = rand(34, 3, 7)
  plain = lambda q, k, w: jnp.tanh(q[:, None, :] + k[None, :, :]) @ w  # kept features
  loss = lambda f: lambda q, k, w: jnp.sum(f(q, k, w) * cotangent)
  want = jax.jit(jax.grad(loss(plain), argnums=(0, 1, 2)))(q_hidden, k_hidden, v)
  got = jax.jit(jax.grad(loss(scoring.additive_score_projected), argnums=(0, 1, 2)))(
      q_hidden, k_hidden, v)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
  # The backward pass keeps no (Q, K, A) array: it recomputes tanh from the projections.
  jaxpr = jax.make_jaxpr(jax.grad(loss(scoring.additive_score_projected)))(q_hidden, k_hidden, v)
  assert "remat" in str(jaxpr) or "checkpoint" in str(jaxpr)
  assert str(jaxpr).count("tanh") == 2  # forward, and again in the backward
