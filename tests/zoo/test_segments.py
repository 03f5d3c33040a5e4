"""zoo.segments: pair_segments and SegmentEmbedding, exact values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from _helpers import rand


def test_pair_segments_marks_b_and_its_sep():
  # [CLS] a a [SEP] b [SEP] pad pad pad | [CLS] [SEP] b b b [SEP] pad pad pad
  segments = zoo.pair_segments(np.array([2, 0, 3], np.int32), np.array([1, 3, 0], np.int32), 9)
  np.testing.assert_array_equal(segments, [[0, 0, 0, 0, 1, 1, 0, 0, 0],
                                           [0, 0, 1, 1, 1, 1, 0, 0, 0],
                                           [0, 0, 0, 0, 0, 1, 0, 0, 0]])
  assert segments.dtype == jnp.int32
  jitted = jax.jit(zoo.pair_segments, static_argnums=2)(jnp.array([2, 0, 3]), jnp.array([1, 3, 0]),
                                                        9)
  np.testing.assert_array_equal(jitted, segments)


def test_pair_segments_refuses_pairs_longer_than_the_packed_length():
  with pytest.raises(ValueError, match="a_len \\+ b_len \\+ 3 must lie in \\[3, 6\\]"):
    zoo.pair_segments(np.array([2, 1], np.int32), np.array([2, 1], np.int32), 6)


def test_segment_embedding_adds_the_row_of_each_segment():
  x = rand(0, 3, 5, 4)
  segments = np.array([[0, 0, 1, 1, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], np.int32)
  module = zoo.SegmentEmbedding()
  variables = module.init(jax.random.key(0), x, segments)
  table = np.asarray(variables["params"]["embedding"])
  assert table.shape == (2, 4)
  np.testing.assert_allclose(module.apply(variables, x, segments), x + table[segments], rtol=1e-6)


@pytest.mark.parametrize("segments, message", [
    (np.array([[0, 2, 0]], np.int32), "segments must lie in \\[0, 2\\)"),
    (np.array([[0, 1]], np.int32), "segments: expected shape \\(1, 3\\)"),
    (np.array([[0.0, 1.0, 0.0]], np.float32), "segments: expected an integer array"),
])
def test_segment_embedding_names_bad_segments(segments, message):
  with pytest.raises(ValueError, match=message):
    zoo.SegmentEmbedding().init(jax.random.key(0), rand(1, 1, 3, 4), segments)
