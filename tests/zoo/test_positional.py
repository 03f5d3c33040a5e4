import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo

B, L, D = 3, 7, 12


def _np_sinusoids(length, dim, offset=0):
  """The formula as written: PE[p, 2i] = sin(p / 10000^(2i/dim)), PE[p, 2i+1] = cos(same)."""
  table = np.zeros((length, dim))
  for p in range(length):
    for j in range(dim):
      two_i = j - j % 2
      angle = (p + offset) / 10000 ** (two_i / dim)
      table[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
  return table


@pytest.mark.parametrize("length,dim,offset", [(9, 12, 0), (5, 7, 3), (1, 1, 40)])
def test_sinusoidal_encoding_matches_the_formula(length, dim, offset):
  table = zoo.sinusoidal_encoding(length, dim, offset=offset)
  assert table.shape == (length, dim) and table.dtype == jnp.float32
  np.testing.assert_allclose(table, _np_sinusoids(length, dim, offset), atol=2e-6)


def test_sinusoidal_encoding_hand_computed_values():
  table = np.asarray(zoo.sinusoidal_encoding(6, 4))
  np.testing.assert_array_equal(table[0], [0, 1, 0, 1])  # sin 0, cos 0
  np.testing.assert_allclose(table[1, :2], [0.8414709848, 0.5403023059], rtol=1e-6)  # sin 1, cos 1
  np.testing.assert_allclose(table[5, 2:], [0.0499791693, 0.9987502604], rtol=1e-6)  # 5 / 100
  odd = np.asarray(zoo.sinusoidal_encoding(3, 3))  # last column: sin(p / 10000^(2/3))
  np.testing.assert_allclose(odd[2], [math.sin(2), math.cos(2), math.sin(2 / 10000 ** (2 / 3))],
                             rtol=1e-6)


def test_sinusoidal_encoding_traced_offset_and_bad_arguments():
  @jax.jit
  @chex.assert_max_traces(n=1)
  def step(t):
    return zoo.sinusoidal_encoding(1, D, offset=t)

  full = zoo.sinusoidal_encoding(L, D)
  for t in range(3):
    np.testing.assert_allclose(step(jnp.int32(t))[0], full[t], atol=1e-6)
  mapped = jax.vmap(lambda t: zoo.sinusoidal_encoding(2, D, offset=t))(jnp.arange(3))  # (3, 2, D)
  np.testing.assert_allclose(mapped[:, 1], full[1:4], atol=1e-6)
  with pytest.raises(ValueError, match="dim must be an integer >= 1, got 0"):
    zoo.sinusoidal_encoding(3, 0)
  with pytest.raises(ValueError, match="length must be an integer >= 0, got 2.5"):
    zoo.sinusoidal_encoding(2.5, 4)


def test_sinusoidal_module_adds_encoding_and_decodes_incrementally():
  x = np.random.default_rng(0).standard_normal((B, L, D)).astype(np.float32)
  module = zoo.SinusoidalPositionEncoding(max_len=20)
  assert module.init(jax.random.key(0), x) == {}
  out = module.apply({}, x)
  np.testing.assert_allclose(out, x + _np_sinusoids(L, D), atol=1e-5)
  shifted = module.apply({}, x, offset=4)
  np.testing.assert_allclose(shifted, x + _np_sinusoids(L, D, offset=4), atol=1e-5)
  # Per-example positions (B, L), e.g. different starting points.
  positions = np.stack([np.arange(L) + s for s in (0, 4, 9)]).astype(np.int32)
  per_example = module.apply({}, x, positions=positions)
  np.testing.assert_allclose(per_example[1], shifted[1], atol=1e-6)
  # One step at a time with a traced offset gives the full encoding.
  step = jax.jit(lambda x_t, t: module.apply({}, x_t, offset=t))
  steps = [step(x[:, t:t + 1], jnp.int32(t)) for t in range(L)]
  np.testing.assert_allclose(jnp.concatenate(steps, axis=1), out, atol=1e-6)


def test_sinusoidal_module_dropout_bfloat16_and_max_len():
  x = jnp.ones((B, L, D))
  module = zoo.SinusoidalPositionEncoding(dropout_rate=0.5, dtype=jnp.bfloat16)
  plain = module.apply({}, x)
  assert plain.dtype == jnp.bfloat16
  np.testing.assert_allclose(plain[1].astype(np.float32), 1 + _np_sinusoids(L, D), atol=1e-2)
  dropped = module.apply({}, x, deterministic=False, rngs={"dropout": jax.random.key(1)})
  kept = np.asarray(dropped != 0)
  assert 0.2 < kept.mean() < 0.8
  np.testing.assert_allclose(np.where(kept, dropped, 0).astype(np.float32),
                             np.where(kept, plain * 2, 0).astype(np.float32), rtol=1e-2)
  with pytest.raises(ValueError, match=r"positions must lie in \[0, 5\) \(max_len = 5\), got 0 to 6"):
    zoo.SinusoidalPositionEncoding(max_len=5).apply({}, x)
  with pytest.raises(ValueError, match="offset: expected an integer array"):
    zoo.SinusoidalPositionEncoding().apply({}, x, offset=1.5)


def test_learned_embedding_adds_table_rows():
  x = np.random.default_rng(1).standard_normal((B, L, D)).astype(np.float32)
  module = zoo.LearnedPositionEmbedding(max_len=10, features=D)
  variables = module.init(jax.random.key(2), x)
  table = np.asarray(variables["params"]["embedding"])
  assert table.shape == (10, D)
  np.testing.assert_allclose(module.apply(variables, x), x + table[:L], rtol=1e-6)
  np.testing.assert_allclose(module.apply(variables, x, offset=3), x + table[3:3 + L], rtol=1e-6)
  positions = np.array([[9, 0, 1, 2, 3, 4, 5]] * B, np.int32)
  np.testing.assert_allclose(module.apply(variables, x, positions=positions),
                             x + table[positions], rtol=1e-6)
  # Only the rows that were used get a gradient.
  grads = jax.jit(jax.grad(lambda v: module.apply(v, x).sum()))(variables)
  grad_table = np.asarray(grads["params"]["embedding"])
  np.testing.assert_allclose(grad_table[:L], B, rtol=1e-6)
  np.testing.assert_array_equal(grad_table[L:], 0.0)
  # A traced position outside the table cannot pass silently.
  out = jax.jit(lambda v, t: module.apply(v, x[:, :2], offset=t))(variables, jnp.int32(9))
  assert np.isfinite(out[:, 0]).all() and np.isnan(out[:, 1]).all()


def test_learned_embedding_errors_and_bfloat16():
  module = zoo.LearnedPositionEmbedding(max_len=5, features=D)
  with pytest.raises(ValueError, match=r"positions must lie in \[0, 5\) \(max_len = 5\), got 0 to 6 "
                                       r"for x of shape \(3, 7, 12\)"):
    module.init(jax.random.key(0), jnp.zeros((B, L, D)))
  with pytest.raises(ValueError, match=r"x: expected width features = 12 in the last axis, got "
                                       r"shape \(3, 4, 6\)"):
    module.init(jax.random.key(0), jnp.zeros((B, 4, 6)))
  with pytest.raises(ValueError, match=r"positions with shape \(2, 4\) does not broadcast"):
    module.init(jax.random.key(0), jnp.zeros((B, 4, D)), positions=jnp.zeros((2, 4), jnp.int32))
  module16 = zoo.LearnedPositionEmbedding(max_len=5, features=D, dtype=jnp.bfloat16)
  variables = module16.init(jax.random.key(0), jnp.zeros((B, 4, D)))
  assert variables["params"]["embedding"].dtype == jnp.float32
  out = module16.apply(variables, jnp.zeros((B, 4, D)))
  assert out.dtype == jnp.bfloat16
  np.testing.assert_allclose(out[0].astype(np.float32), variables["params"]["embedding"][:4],
                             rtol=1e-2)
