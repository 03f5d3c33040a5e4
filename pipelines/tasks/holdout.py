"""Which examples a split holds out: pure functions of labels (and ids or groups) and a seed.

Each returns a boolean mask over the N examples given (True: held out). Labels are 0 or 1. Every
function depends only on its arguments' values, so the same reviews are held out whatever order
they come in, except `per_label_random`, which permutes positions (kept as it was first written:
runs made with it must find the same split).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def per_label_random(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
  """round(fraction * n) examples of each label, by one permutation of positions per label.

  Args:
    labels: (N,) int, 0 or 1.
    fraction: the share held out, in (0, 1).
    seed: seeds the permutations (label 0's first, then label 1's).

  Returns:
    (N,) bool, True for the held-out examples.
  """
  rng = np.random.default_rng(seed)
  held = np.zeros(len(labels), dtype=bool)
  for label in (0, 1):
    members = np.flatnonzero(labels == label)
    held[rng.permutation(members)[:round(fraction * len(members))]] = True
  return held


def halves_per_label(labels: np.ndarray, ids: np.ndarray, seed: int) -> np.ndarray:
  """Half of each label (n // 2 of its n examples), drawn by a seeded permutation of the ids.

  Args:
    labels: (N,) int, 0 or 1.
    ids: (N,) int, distinct within a label (IMDB: the review's number in its folder).
    seed: seeds the permutations (label 0's first, then label 1's).

  Returns:
    (N,) bool, True for the half held out.
  """
  rng = np.random.default_rng(seed)
  held = np.zeros(len(labels), dtype=bool)
  for label in (0, 1):
    members = np.flatnonzero(labels == label)
    if len(np.unique(ids[members])) != len(members):
      raise ValueError(f"the ids of label {label} repeat; each example needs its own id")
    by_id = members[np.argsort(ids[members])]  # (n,), ascending ids
    held[rng.permutation(by_id)[:len(by_id) // 2]] = True
  return held


def whole_groups(labels: np.ndarray, groups: Sequence[str], fraction: float,
                 seed: int) -> np.ndarray:
  """Whole groups (IMDB: movies) held out until each label has its share, none over it.

  The groups, sorted by name, are visited in the order of a permutation seeded by `seed`; a group
  is held out when it keeps both labels' held-out counts within round(fraction * that label's
  count), and the visit stops when both are reached. Small groups late in the order fill what is
  left, so each label lands at or just under its share, and no group is on both sides.

  Args:
    labels: (N,) int, 0 or 1.
    groups: (N,) the group name of each example.
    fraction: the share held out per label, in (0, 1).
    seed: seeds the order of the groups.

  Returns:
    (N,) bool, True for the examples of the held-out groups.

  Raises:
    ValueError: no group fits within the shares (groups too large for the data).
  """
  names, group_of = np.unique(np.asarray(groups, dtype=str), return_inverse=True)  # (G,), (N,)
  counts = np.zeros((len(names), 2), dtype=np.int64)  # (G, 2): examples per group and label
  np.add.at(counts, (group_of, labels), 1)
  targets = np.round(fraction * counts.sum(axis=0)).astype(np.int64)  # (2,)
  taken = np.zeros(2, dtype=np.int64)
  chosen = np.zeros(len(names), dtype=bool)  # (G,)
  for group in np.random.default_rng(seed).permutation(len(names)):
    if np.all(taken + counts[group] <= targets):
      chosen[group] = True
      taken += counts[group]
      if np.array_equal(taken, targets):
        break
  if not chosen.any():
    raise ValueError(f"no group fits within the held-out share {fraction} of each label "
                     f"({targets.tolist()} of {counts.sum(axis=0).tolist()} examples; the "
                     f"smallest of the {len(names)} groups has {counts.sum(axis=1).min()})")
  return chosen[group_of]
