"""Paragraph vectors (experiments.sentiment.paragraph_vectors): gensim's PV-DBOW on id reviews, the
logistic regression on its vectors, and one-worker training that every process repeats."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from experiments.sentiment.paragraph_vectors import PVClassifier
from experiments.sentiment.paragraph_vectors import PVConfig
from experiments.sentiment.paragraph_vectors import as_words
from experiments.sentiment.paragraph_vectors import infer_vectors
from experiments.sentiment.paragraph_vectors import train_vectors

REPO = pathlib.Path(__file__).resolve().parents[2]
TINY = PVConfig(dim=12, epochs=40, min_count=1, workers=1, seed=3)


def _two_topic_reviews(count: int, seed: int) -> tuple[list[list[int]], np.ndarray]:
  """Reviews of 17 ids: label 1 draws most words from ids 5..24, label 0 from 25..44, and both
  from the shared ids 45..74."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 2, count)
  reviews = []
  for label in labels:
    own = rng.integers(5, 25, 11) if label else rng.integers(25, 45, 11)
    reviews.append(rng.permutation(np.concatenate([own, rng.integers(45, 75, 6)])).tolist())
  return reviews, labels


def test_as_words_writes_ids_as_strings():
  assert as_words(np.array([4, 19, 0])) == ["4", "19", "0"]


@pytest.mark.parametrize("field", ["dim", "epochs", "negative", "min_count", "workers"])
def test_pv_config_refuses_sizes_below_one(field):
  with pytest.raises(ValueError, match=f"PVConfig.{field} must be at least 1, got 0"):
    PVConfig(**{field: 0})


def test_paragraph_vectors_separate_two_topics_in_unseen_reviews():
  train, train_labels = _two_topic_reviews(137, seed=0)
  test, test_labels = _two_topic_reviews(53, seed=1)
  model = train_vectors(train, TINY)
  vectors = np.stack([model.dv[i] for i in range(len(train))])  # (137, 12)
  assert vectors.shape == (137, 12)
  classifier = PVClassifier.fit(vectors, train_labels, cost=1.0)
  inferred = infer_vectors(model, test)  # (53, 12)
  assert inferred.shape == (53, 12) and inferred.dtype == np.float32
  log_odds = classifier.log_odds(inferred)
  assert np.mean((log_odds > 0) == test_labels) >= 0.9
  assert infer_vectors(model, []).shape == (0, 12)


def test_one_worker_trains_and_infers_the_same_vectors_in_every_process(tmp_path):
  """Training draws its initial vectors from PVConfig.seed and inference starts each vector from
  the review's CRC-32, neither from Python's string hash (which Python salts per process, as
  PYTHONHASHSEED does here); the default is one worker."""
  assert PVConfig().workers == 1
  script = ("import sys, numpy as np\n"
            "from experiments.sentiment.paragraph_vectors import PVConfig, infer_vectors, "
            "train_vectors\n"
            "rng = np.random.default_rng(0)\n"
            "texts = [rng.integers(5, 60, 23).tolist() for _ in range(31)]\n"
            "unseen = [rng.integers(5, 60, 19).tolist() for _ in range(7)]\n"
            "model = train_vectors(texts, PVConfig(dim=8, epochs=5, min_count=1))\n"
            "np.save(sys.argv[1], np.stack([model.dv[i] for i in range(31)]))\n"
            "np.save(sys.argv[2], infer_vectors(model, unseen))\n")
  trained, inferred = [], []
  for salt in ("1", "2"):
    paths = [tmp_path / f"trained_{salt}.npy", tmp_path / f"inferred_{salt}.npy"]
    env = dict(os.environ, PYTHONHASHSEED=salt)
    subprocess.run([sys.executable, "-c", script, *map(str, paths)], check=True, env=env, cwd=REPO)
    trained.append(np.load(paths[0]))
    inferred.append(np.load(paths[1]))
  np.testing.assert_array_equal(trained[0], trained[1])
  assert inferred[0].shape == (7, 8)
  np.testing.assert_array_equal(inferred[0], inferred[1])


def test_inference_leaves_gensims_own_start_in_place():
  from gensim.models import doc2vec as gensim_doc2vec
  original = gensim_doc2vec.pseudorandom_weak_vector
  model = train_vectors(*_two_topic_reviews(23, seed=4)[:1], TINY)
  infer_vectors(model, [[5, 6, 7]])
  assert gensim_doc2vec.pseudorandom_weak_vector is original


def test_errors_name_what_is_wrong():
  with pytest.raises(ValueError, match="need at least one training text"):
    train_vectors([], TINY)
  with pytest.raises(ValueError, match="every training text is empty"):
    train_vectors([[], []], TINY)
  with pytest.raises(ValueError, match=r"expected vectors \(N, D\) and labels \(N,\)"):
    PVClassifier.fit(np.zeros((5, 3)), np.zeros(4, np.int64))
  with pytest.raises(ValueError, match="cost must be positive"):
    PVClassifier.fit(np.zeros((2, 3)), np.array([0, 1]), cost=0.0)
