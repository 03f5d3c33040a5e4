"""experiments.seq2seq.decoding: per-source forced / banned ids stacked for a decoding batch."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.seq2seq import decoding

T = 5  # target positions


def _batch(index, weight):
  return {"index": np.asarray(index, np.int32), "weight": np.asarray(weight, np.float32)}


def test_constraint_shape_is_that_of_the_widest_source():
  assert decoding.constraint_shape(None, T) is None
  assert decoding.constraint_shape([np.array([4, -1, 7]), np.array([9])], T) == (T,)
  assert decoding.constraint_shape([np.array([[4, 5], [6, -1]]), np.array([9]),
                                    np.array([[1, 2, 3]])], T) == (T, 3)


def test_batch_constraints_follow_the_rows_index_and_leave_fillers_free():
  # Three sources decoded in the order 2, 0, 1, then a filler row (weight 0) pointing at source 0.
  per_source = [np.array([[4, 5], [6, -1]]), np.array([9]), np.array([[1, 2], [3, 4], [5, 6]])]
  batch = _batch([2, 0, 1, 0], [1, 1, 1, 0])
  got = decoding.batch_constraints(per_source, batch, (T, 2), "banned_tokens")
  expected = np.full((4, T, 2), -1, np.int32)
  expected[0, :3] = [[1, 2], [3, 4], [5, 6]]
  expected[1, :2] = [[4, 5], [6, -1]]
  expected[2, 0, 0] = 9  # a (L,) source fills the first slot
  assert got.dtype == np.int32
  np.testing.assert_array_equal(got, expected)

  forced = decoding.batch_constraints([np.array([7, -1]), np.array([8]), np.array([1, 2, 3])],
                                      batch, (T,), "forced_tokens")
  np.testing.assert_array_equal(forced, [[1, 2, 3, -1, -1], [7, -1, -1, -1, -1],
                                         [8, -1, -1, -1, -1], [-1] * T])
  assert decoding.batch_constraints(None, batch, None, "forced_tokens") is None


@pytest.mark.parametrize("per_source, shape, message", [
    ([np.arange(T + 1)], (T,), r"forced_tokens\[0\]: expected ids of shape \(L,\) with L <= 5 "
                               r"target positions, got shape \(6,\)"),
    ([np.zeros((2, 2), np.int32)], (T,), r"forced_tokens\[0\]: .* got shape \(2, 2\)"),
    ([np.zeros((2, 3), np.int32)], (T, 2),
     r"forced_tokens\[0\]: expected ids of shape \(L,\) or \(L, K\) .* got shape \(2, 3\)"),
    ([np.zeros((1, 1, 1), np.int32)], (T, 1), r"got shape \(1, 1, 1\)"),
])
def test_batch_constraints_that_do_not_fit_name_the_source(per_source, shape, message):
  with pytest.raises(ValueError, match=message):
    decoding.batch_constraints(per_source, _batch([0], [1]), shape, "forced_tokens")
