"""Shared by the zoo tests: random test data, random variables without compiling initializers, and
numpy references (float64) of the pieces several modules build on.

Imported as `import _helpers` (pytest puts this folder on sys.path, as for tests/experiments).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def rand(seed: int, *shape: int) -> np.ndarray:
  """Standard normal float32 numpy data (numpy draws compile nothing, unlike jax.random)."""
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def rbg_key(seed: int) -> jax.Array:
  """A dropout/init key whose bit generator compiles much faster than threefry on CPU."""
  return jax.random.key(seed, impl="rbg")


def random_variables(module, *args, seed: int = 0, scale: float = 0.5, **kwargs):
  """The variables `module.init(key, *args, **kwargs)` creates, drawn at random without running its
  initializers (compiling them, the orthogonal and truncated normal ones above all, costs seconds
  on CPU).

  Parameters are normal(0, scale), except LayerNorm scales, 1 + normal(0, scale); any other state
  (e.g. a key/value cache) is zeros; 'intermediates' (what init sowed) are left out.
  """
  rng = np.random.default_rng(seed)
  shapes = jax.eval_shape(lambda: module.init(jax.random.key(0), *args, **kwargs))

  def draw(path, leaf):
    base = 1.0 if jax.tree_util.keystr(path).endswith("'scale']") else 0.0
    return jnp.asarray(base + scale * rng.standard_normal(leaf.shape), leaf.dtype)

  return {name: jax.tree_util.tree_map_with_path(draw, tree) if name == "params"
          else jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), tree)
          for name, tree in shapes.items() if name != "intermediates"}


def np_masked_softmax(scores, mask) -> np.ndarray:
  """float64 softmax over the last axis of the entries where `mask` is True; 0 elsewhere, and a
  row with no True entry is all zeros."""
  scores = np.where(mask, np.asarray(scores, np.float64), -np.inf)
  row_max = np.max(scores, axis=-1, keepdims=True)
  exp = np.where(mask, np.exp(scores - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
  total = exp.sum(-1, keepdims=True)
  return np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)


def np_lengths_mask(lengths, num_keys: int) -> np.ndarray:
  """bool lengths.shape + (K,): True for the first lengths[...] keys."""
  return np.arange(num_keys) < np.asarray(lengths)[..., None]


def np_sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def np_lstm_cell(gates, c):
  """The LSTM update from pre-activations gates (..., 4H) in the order i, f, g, o and the old
  cell c (..., H): returns (h, c)."""
  i, f, g, o = np.split(gates, 4, axis=-1)
  c = np_sigmoid(f) * c + np_sigmoid(i) * np.tanh(g)
  return np_sigmoid(o) * np.tanh(c), c
