"""The held-out choices of pipelines.tasks.holdout: exact small cases, shares, order and seeds."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from pipelines.tasks import holdout

# 23 examples: 11 of label 0, 12 of label 1.
LABELS = np.array([1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 0], np.int32)


def test_per_label_random_keeps_the_first_protocols_exact_choice():
  # What the dev carving of commit c5c5546 chose for these labels, fraction 0.3, seed 5: runs
  # saved with protocol 'random_dev' must find the same dev split.
  held = holdout.per_label_random(LABELS, 0.3, 5)
  assert np.flatnonzero(held).tolist() == [2, 6, 11, 15, 17, 20, 22]
  assert collections.Counter(LABELS[held].tolist()) == {0: 3, 1: 4}  # round(3.3), round(3.6)


def test_halves_per_label_holds_half_of_each_label_whatever_the_order():
  ids = np.array([41, 7, 3, 19, 2, 88, 5, 13, 21, 60, 8, 33, 1, 4, 9, 17, 71, 26, 50, 11, 6,
                  30, 12])
  held = holdout.halves_per_label(LABELS, ids, 3)
  assert collections.Counter(LABELS[held].tolist()) == {0: 5, 1: 6}  # 11 // 2, 12 // 2
  assert np.array_equal(held, holdout.halves_per_label(LABELS, ids, 3))
  # The same (label, id) pairs are held out when the examples come in another order.
  order = np.random.default_rng(0).permutation(len(ids))
  again = holdout.halves_per_label(LABELS[order], ids[order], 3)
  assert set(zip(LABELS[order][again], ids[order][again])) == set(zip(LABELS[held], ids[held]))
  assert not np.array_equal(holdout.halves_per_label(LABELS, ids, 4), held)
  # Ids may repeat across labels (IMDB's pos/ and neg/ folders both count from 0), not within one.
  both = holdout.halves_per_label(np.array([0, 0, 1, 1, 1]), np.array([0, 1, 0, 1, 2]), 0)
  assert both.sum() == 2 and both[:2].sum() == 1
  with pytest.raises(ValueError, match="the ids of label 1 repeat"):
    holdout.halves_per_label(np.array([0, 1, 1]), np.array([4, 9, 9]), 0)


def test_whole_groups_takes_the_only_group_that_fits():
  # Targets round(0.25 * 3) = 1 negative and round(0.25 * 5) = 1 positive; only movie 'b' (one
  # of each) fits, whatever the seed: the others hold two reviews of one label.
  labels = np.array([0, 0, 1, 0, 1, 1, 1, 1])
  movies = ["a", "a", "b", "b", "c", "c", "d", "d"]
  for seed in range(5):
    assert holdout.whole_groups(labels, movies, 0.25, seed).tolist() == [
        False, False, True, True, False, False, False, False]


def _movies(n_movies: int, seed: int) -> tuple[np.ndarray, list[str]]:
  """Reviews of `n_movies` movies with 1 to 30 reviews each, most of them few (as in IMDB, where
  a fifth of the movies have one review in train), labels drawn per review."""
  rng = np.random.default_rng(seed)
  sizes = np.minimum(rng.geometric(0.2, size=n_movies), 30)
  movies = [f"tt{1000 + m:07d}" for m, size in enumerate(sizes) for _ in range(size)]
  return rng.integers(0, 2, size=len(movies)), movies


def test_whole_groups_never_splits_a_movie_and_fills_each_label_to_its_share():
  labels, movies = _movies(301, 1)
  held = holdout.whole_groups(labels, movies, 0.1, 0)
  movies = np.array(movies)
  assert not set(movies[held]) & set(movies[~held])
  for label in (0, 1):
    target = round(0.1 * np.sum(labels == label))
    assert target - 2 <= np.sum(held & (labels == label)) <= target, label
  # Deterministic by seed, and independent of the order the reviews come in.
  assert np.array_equal(held, holdout.whole_groups(labels, list(movies), 0.1, 0))
  order = np.random.default_rng(2).permutation(len(labels))
  again = holdout.whole_groups(labels[order], list(movies[order]), 0.1, 0)
  assert set(movies[order][again]) == set(movies[held])
  assert set(movies[holdout.whole_groups(labels, list(movies), 0.1, 1)]) != set(movies[held])


def test_whole_groups_refuses_when_no_group_fits():
  with pytest.raises(ValueError, match=r"no group fits within the held-out share 0.1 .*\[0, 0\] "
                                       r"of \[3, 2\] examples; the smallest of the 2 groups has 2"):
    holdout.whole_groups(np.array([0, 0, 0, 1, 1]), ["a", "a", "a", "b", "b"], 0.1, 0)
