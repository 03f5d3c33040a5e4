"""zoo.alignment: soft alignment of two sequences both ways, against a float64 numpy reference."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from _helpers import rand
from _helpers import random_variables

B, LA, LB, D, A = 3, 5, 7, 6, 4


def _np_align(scores, a_values, b_values, a_len, b_len):
  """Reference of one example: e (La, Lb) softmaxed over b's valid columns for a's valid rows, and
  over a's valid rows for b's valid columns; padding rows all zero."""
  scores = np.asarray(scores, np.float64)
  a_to_b = np.zeros_like(scores)
  b_to_a = np.zeros_like(scores.T)
  for i in range(a_len if b_len else 0):
    row = np.exp(scores[i, :b_len] - scores[i, :b_len].max())
    a_to_b[i, :b_len] = row / row.sum()
  for j in range(b_len if a_len else 0):
    col = np.exp(scores[:a_len, j] - scores[:a_len, j].max())
    b_to_a[j, :a_len] = col / col.sum()
  return a_to_b @ b_values, b_to_a @ a_values, a_to_b, b_to_a


def test_soft_align_matches_reference_on_a_hand_made_example():
  # a has 2 valid of 3 positions, b 2 valid of 4: exact values by hand.
  scores = np.array([[0.0, np.log(3.0), 9.0, 9.0],
                     [np.log(2.0), np.log(2.0), 9.0, 9.0],
                     [5.0, 5.0, 5.0, 5.0]], np.float32)
  a_values = np.array([[1.0, 0.0], [0.0, 1.0], [7.0, 7.0]], np.float32)
  b_values = np.array([[2.0, 0.0], [0.0, 4.0], [9.0, 9.0], [9.0, 9.0]], np.float32)
  out = zoo.soft_align(scores, a_values, b_values, 2, 2)
  np.testing.assert_allclose(out.a_to_b, [[0.25, 0.75, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 0, 0]],
                             rtol=1e-6)
  # column 0: softmax(0, log 2) = (1/3, 2/3); column 1: softmax(log 3, log 2) = (3/5, 2/5)
  np.testing.assert_allclose(out.b_to_a, [[1 / 3, 2 / 3, 0], [0.6, 0.4, 0], [0, 0, 0],
                                          [0, 0, 0]], rtol=1e-6)
  np.testing.assert_allclose(out.b_for_a, [[0.5, 3.0], [1.0, 2.0], [0.0, 0.0]], rtol=1e-6)
  np.testing.assert_allclose(out.a_for_b, [[1 / 3, 2 / 3], [0.6, 0.4], [0, 0], [0, 0]],
                             rtol=1e-6)


@pytest.mark.parametrize("score", ["dot", "scaled_dot", "bilinear", "additive"])
def test_module_matches_reference_for_every_example(score):
  a, b = rand(0, B, LA, D), rand(1, B, LB, D)
  a_len, b_len = np.array([5, 2, 0], np.int32), np.array([7, 3, 4], np.int32)
  features = A if score == "additive" else None
  module = zoo.SoftAlignment(score=score, score_features=features)
  variables = random_variables(module, a, b, valid_lens=(a_len, b_len), seed=2)
  p = jax.tree.map(lambda x: np.asarray(x, np.float64), variables.get("params", {}))
  if score == "dot":
    scores = np.einsum("bid,bjd->bij", a, b)
  elif score == "scaled_dot":
    scores = np.einsum("bid,bjd->bij", a, b) / np.sqrt(D)
  elif score == "bilinear":
    scores = np.einsum("bid,de,bje->bij", a, p["scorer"]["w"], b)
  else:
    s = p["scorer"]
    hidden = np.tanh((a @ s["w_q"])[:, :, None, :] + (b @ s["w_k"])[:, None, :, :])
    scores = hidden @ s["v"]
  out = module.apply(variables, a, b, valid_lens=(a_len, b_len))
  chex.assert_shape([out.b_for_a, out.a_for_b, out.a_to_b, out.b_to_a],
                    [(B, LA, D), (B, LB, D), (B, LA, LB), (B, LB, LA)])
  for n in range(B):
    expected = _np_align(scores[n], a[n], b[n], a_len[n], b_len[n])
    for got, want in zip(out, expected):
      np.testing.assert_allclose(got[n], want, rtol=2e-5, atol=2e-6)


def test_padding_never_changes_the_valid_outputs_and_empty_sides_give_zeros():
  a, b = rand(3, B, LA, D), rand(4, B, LB, D)
  a_len, b_len = np.array([3, 5, 0], np.int32), np.array([2, 7, 6], np.int32)
  module = zoo.SoftAlignment()
  variables = module.init(jax.random.key(0), a, b, valid_lens=(a_len, b_len))
  out = module.apply(variables, a, b, valid_lens=(a_len, b_len))
  noisy_a, noisy_b = a.copy(), b.copy()
  noisy_a[0, 3:], noisy_b[0, 2:] = 1e4, -1e4
  noisy = module.apply(variables, noisy_a, noisy_b, valid_lens=(a_len, b_len))
  np.testing.assert_allclose(noisy.b_for_a[0, :3], out.b_for_a[0, :3], rtol=1e-6)
  np.testing.assert_allclose(noisy.a_for_b[0, :2], out.a_for_b[0, :2], rtol=1e-6)
  np.testing.assert_array_equal(out.a_to_b[0, 3:], 0.0)
  np.testing.assert_array_equal(out.b_to_a[0, 2:], 0.0)
  # example 2: a is empty, so nothing aligns in either direction, and nothing is NaN.
  for array in out:
    assert np.all(np.isfinite(array[2]))
  np.testing.assert_array_equal(out.a_for_b[2], 0.0)
  np.testing.assert_array_equal(out.b_to_a[2], 0.0)


def test_values_are_averaged_instead_of_the_scored_vectors_when_given():
  a, b = rand(5, B, LA, D), rand(6, B, LB, D)
  a_val, b_val = rand(7, B, LA, 3), rand(8, B, LB, 3)
  a_len, b_len = np.array([5, 4, 1], np.int32), np.array([1, 7, 2], np.int32)
  module = zoo.SoftAlignment()
  out = module.apply({}, a, b, valid_lens=(a_len, b_len), a_values=a_val, b_values=b_val)
  np.testing.assert_allclose(out.b_for_a, np.einsum("bij,bjv->biv", out.a_to_b, b_val),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out.a_for_b, np.einsum("bji,biv->bjv", out.b_to_a, a_val),
                             rtol=1e-5, atol=1e-6)


def test_jit_and_grad_are_finite_with_an_empty_side():
  a, b = rand(9, B, LA, D), rand(10, B, LB, D)
  a_len, b_len = np.array([0, 5, 2], np.int32), np.array([7, 0, 1], np.int32)
  module = zoo.SoftAlignment()

  @jax.jit
  @chex.assert_max_traces(n=1)
  def loss(a, b):
    out = module.apply({}, a, b, valid_lens=(a_len, b_len))
    return sum(jnp.sum(x ** 2) for x in out)

  grads = jax.grad(loss, argnums=(0, 1))(jnp.asarray(a), jnp.asarray(b))
  for g in grads:
    assert np.all(np.isfinite(g))
  loss(jnp.asarray(a), jnp.asarray(b))  # the second call is not traced again


@pytest.mark.parametrize("bad, message", [
    (dict(a_len=np.array([5, 6, 1], np.int32)), "valid_lens\\[0\\] \\(a_len\\) must lie in "
     "\\[0, 5\\]"),
    (dict(b_len=np.array([1.0, 2.0, 3.0], np.float32)),
     "valid_lens\\[1\\] \\(b_len\\): expected an integer array"),
    (dict(b=rand(0, B, LB, D + 1)), "b"),
    (dict(a=rand(0, B + 1, LA, D)), "a"),
    (dict(a_values=rand(0, B, LA + 1, D)), "a_values"),
])
def test_bad_arguments_name_the_argument(bad, message):
  args = dict(a=rand(0, B, LA, D), b=rand(1, B, LB, D), a_len=np.array([5, 2, 0], np.int32),
              b_len=np.array([7, 3, 4], np.int32))
  values = {k: bad.pop(k) for k in list(bad) if k.endswith("_values")}
  args.update(bad)
  lens = (args.pop("a_len"), args.pop("b_len"))
  with pytest.raises(ValueError, match=message):
    zoo.SoftAlignment().apply({}, args["a"], args["b"], valid_lens=lens, **values)
