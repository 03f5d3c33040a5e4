"""Pseudo-labels: a teacher model's labels for unlabelled examples, as one checked .npz file.

Self-training reads IMDB's 50,000 unlabelled reviews through a trained classifier (the teacher;
`python -m experiments pseudo-label sentiment` writes the file), and a new run (the student)
trains on the labelled reviews plus the unlabelled ones the teacher was sure of
(pipelines.tasks.SentimentOptions.pseudo_labels). The file holds, for N examples,

  'id'           int64 (N,): the example's id in its split (IMDB: the review's number in
                 train/unsup/, the record's 'id'), each at most once;
  'label'        int32 (N,): the teacher's class, 0 or 1;
  'probability'  float32 (N,): the teacher's probability of that class, in [0.5, 1];
  'meta'         uint8: JSON bytes saying where the labels come from (teacher run, checkpoint,
                 step, split ...), for the reader.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile
from typing import Any

import numpy as np

FIELDS = ("id", "label", "probability")


@dataclasses.dataclass(frozen=True)
class PseudoLabels:
  """N teacher labels: ids int64 (N,), labels int32 (N,), probabilities float32 (N,), meta."""
  ids: np.ndarray
  labels: np.ndarray
  probabilities: np.ndarray
  meta: dict[str, Any]

  def __post_init__(self):
    for name in ("ids", "labels", "probabilities"):
      value = getattr(self, name)
      if value.ndim != 1 or len(value) != len(self.ids):
        raise ValueError(f"pseudo-labels: {name} must be 1-D with one entry per id "
                         f"({len(self.ids)}), got shape {value.shape}")
    if len(np.unique(self.ids)) != len(self.ids):
      raise ValueError("pseudo-labels: an id appears more than once")
    if np.any((self.labels != 0) & (self.labels != 1)):
      raise ValueError(f"pseudo-labels: labels must be 0 or 1, got "
                       f"{sorted(set(self.labels.tolist()))[:5]}")
    bad = ~((self.probabilities >= 0.5) & (self.probabilities <= 1.0))  # NaN is bad too
    if np.any(bad):
      raise ValueError(f"pseudo-labels: probabilities must lie in [0.5, 1] (the probability of "
                       f"the chosen class), got {self.probabilities[bad][:3].tolist()}")

  def confident(self, min_probability: float) -> np.ndarray:
    """bool (N,): the examples whose probability is at least `min_probability`."""
    return self.probabilities >= min_probability


def save(path: str | os.PathLike, labels: PseudoLabels) -> str:
  """Writes `labels` to `path` (atomically: a reader never sees half a file); returns the path."""
  path = os.fspath(path)
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  tmp = f"{path}.tmp{os.getpid()}.npz"
  np.savez(tmp, id=labels.ids.astype(np.int64), label=labels.labels.astype(np.int32),
           probability=labels.probabilities.astype(np.float32),
           meta=np.frombuffer(json.dumps(labels.meta).encode(), np.uint8))
  os.replace(tmp, path)
  return path


def load(path: str | os.PathLike) -> PseudoLabels:
  """Reads a file written by `save`; a clear error for a missing, corrupt or malformed one."""
  path = os.fspath(path)
  if not os.path.exists(path):
    raise FileNotFoundError(
        f"pseudo-label file {path} does not exist; write one from a trained run with `python -m "
        f"experiments pseudo-label sentiment --workdir RUN --data-dir DATA --out {path}`")
  try:
    with np.load(path) as npz:
      arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["meta"].tobytes().decode()) if "meta" in arrays else None
  except (OSError, ValueError, zipfile.BadZipFile, UnicodeDecodeError) as e:
    # np.load's ValueError: bytes that are neither npz nor npy; json's decode error is one too.
    raise ValueError(f"pseudo-label file {path} is unreadable ({type(e).__name__}: {e})") from None
  missing = [f for f in (*FIELDS, "meta") if f not in arrays]
  if missing:
    raise ValueError(f"pseudo-label file {path} lacks {missing} (it has {sorted(arrays)})")
  return PseudoLabels(np.asarray(arrays["id"], np.int64), np.asarray(arrays["label"], np.int32),
                      np.asarray(arrays["probability"], np.float32), meta)


def digest(path: str | os.PathLike) -> str:
  """The sha1 of the file's bytes: what a cache built from it is keyed by."""
  path = os.fspath(path)
  if not os.path.exists(path):
    load(path)  # raises the FileNotFoundError that says how to write one
  sha = hashlib.sha1()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      sha.update(block)
  return sha.hexdigest()
