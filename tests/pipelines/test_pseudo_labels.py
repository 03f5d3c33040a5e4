"""Pseudo-label files and the self-training option of IMDB (SentimentOptions.pseudo_labels)."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines import pseudo_labels as pseudo_lib
from pipelines import tasks

META = {"teacher": "runs/t", "step": 7}


def _labels(ids, labels, probabilities) -> pseudo_lib.PseudoLabels:
  return pseudo_lib.PseudoLabels(np.array(ids, np.int64), np.array(labels, np.int32),
                                 np.array(probabilities, np.float32), dict(META))


def test_a_file_reads_back_exactly(tmp_path):
  written = _labels([4, 0, 9], [1, 0, 1], [0.5, 0.875, 1.0])
  path = pseudo_lib.save(tmp_path / "sub" / "p.npz", written)
  read = pseudo_lib.load(path)
  np.testing.assert_array_equal(read.ids, [4, 0, 9])
  np.testing.assert_array_equal(read.labels, [1, 0, 1])
  np.testing.assert_array_equal(read.probabilities, np.array([0.5, 0.875, 1.0], np.float32))
  assert read.meta == META and read.ids.dtype == np.int64 and read.labels.dtype == np.int32
  np.testing.assert_array_equal(read.confident(0.875), [False, True, True])


@pytest.mark.parametrize("ids, labels, probabilities, message", [
    ([1, 1], [0, 1], [0.9, 0.9], "more than once"),
    ([1, 2], [0, 2], [0.9, 0.9], "0 or 1"),
    ([1, 2], [0, 1], [0.9, 0.25], r"\[0.5, 1\]"),
    ([1, 2], [0, 1], [0.9, np.nan], r"\[0.5, 1\]"),
    ([1, 2, 3], [0, 1], [0.9, 0.7, 0.6], "one entry per id"),
])
def test_bad_labels_are_refused(ids, labels, probabilities, message):
  with pytest.raises(ValueError, match=message):
    _labels(ids, labels, probabilities)


def test_missing_and_corrupt_files_say_what_is_wrong(tmp_path):
  with pytest.raises(FileNotFoundError, match="python -m experiments pseudo-label sentiment --workdir RUN"):
    pseudo_lib.load(tmp_path / "none.npz")
  with pytest.raises(FileNotFoundError, match="none.npz does not exist"):
    pseudo_lib.digest(tmp_path / "none.npz")
  (tmp_path / "bad.npz").write_bytes(b"not a zip file")
  with pytest.raises(ValueError, match="bad.npz is unreadable"):
    pseudo_lib.load(tmp_path / "bad.npz")
  np.savez(tmp_path / "partial.npz", id=np.arange(3))
  with pytest.raises(ValueError, match=r"lacks \['label', 'probability', 'meta'\]"):
    pseudo_lib.load(tmp_path / "partial.npz")


# ---- IMDB with pseudo-labelled reviews

TRAIN = [{"text": t, "label": y, "id": i} for i, (t, y) in enumerate([
    ("good film", 1), ("bad film", 0), ("great plot", 1), ("dull plot", 0), ("fine actor", 1),
    ("awful actor", 0), ("good plot", 1)])]
TEST = [{"text": t, "label": y, "id": i} for i, (t, y) in enumerate([
    ("good actor", 1), ("bad plot", 0), ("great film", 1)])]
UNLABELLED = [{"text": t, "label": -1, "id": i} for i, t in enumerate([
    "superb score", "tedious mess", "good film again", "  ", "moving score"])]


def _data(tmp_path, probabilities, min_probability=0.5, **options) -> tasks.SentimentData:
  path = pseudo_lib.save(tmp_path / "p.npz",
                         _labels([4, 0, 1, 3], [1, 1, 0, 0], probabilities))
  return tasks.SentimentData.from_records(
      TRAIN, TEST, unlabelled=UNLABELLED, max_len=5, boundaries=(5,), min_freq=1,
      protocol="random_dev", dev_fraction=0.3, pseudo_labels=path,
      pseudo_min_probability=min_probability, **options)


def _texts(data, split):
  ids = data.splits[split].sequences["tokens"]
  return [" ".join(data.vocab.decode(ids[i])) for i in range(len(ids))]


def test_confident_unlabelled_reviews_join_train_with_the_teachers_label(tmp_path):
  plain = tasks.SentimentData.from_records(TRAIN, TEST, max_len=5, boundaries=(5,), min_freq=1,
                                           protocol="random_dev", dev_fraction=0.3)
  # Ids 4, 0, 1, 3 with probabilities 0.99, 0.7, 0.95, 0.9; at 0.9: ids 4 and 1 (id 3, blank,
  # has no word: left out and counted).
  data = _data(tmp_path, [0.99, 0.7, 0.95, 0.9], 0.9)
  n = plain.num_examples("train")
  assert data.num_examples("train") == n + 2
  assert _texts(data, "train")[:n] == _texts(plain, "train")
  assert _texts(data, "train")[n:] == ["moving score", "tedious mess"]
  np.testing.assert_array_equal(data.splits["train"].scalars["label"][n:], [1, 0])
  np.testing.assert_array_equal(data.splits["train"].scalars["index"], np.arange(n + 2))
  # Words seen only in the pseudo-labelled reviews have ids; those of left-out ones do not.
  assert all(w in data.vocab for w in ("moving", "tedious", "mess", "score"))
  assert "superb" not in data.vocab and "superb" not in plain.vocab
  assert _texts(data, "dev") == _texts(plain, "dev") and _texts(data, "test") == _texts(plain,
                                                                                        "test")
  # Read and skipped as labelled reviews are: 2 kept and the blank one among the train records.
  assert data.report["train"]["records"] == plain.report["train"]["records"] + 3
  assert data.report["train"]["skipped_empty"] == plain.report["train"]["skipped_empty"] + 1
  assert data.report["train"]["kept"] == n + 2
  assert data.report["train"]["pseudo_labelled"] == {
      "file": str(tmp_path / "p.npz"), "in_file": 4, "min_probability": 0.9, "kept": 2,
      "skipped_empty": 1, "positive": 1}


def test_every_pseudo_labelled_review_at_the_lowest_threshold(tmp_path):
  data = _data(tmp_path, [0.99, 0.7, 0.95, 0.9], bigrams=True, bigram_min_freq=1)
  assert data.report["train"]["pseudo_labelled"]["kept"] == 3
  assert "superb score" in _texts(data, "train")
  assert "superb score" in data.bigram_vocab and "good film" in data.bigram_vocab


def test_pseudo_labels_need_the_unlabelled_reviews_they_name(tmp_path):
  path = pseudo_lib.save(tmp_path / "p.npz", _labels([2, 17], [1, 0], [0.9, 0.9]))
  common = dict(max_len=5, boundaries=(5,), min_freq=1, pseudo_labels=path)
  with pytest.raises(ValueError, match="needs the records of IMDB's 'unsupervised' split"):
    tasks.SentimentData.from_records(TRAIN, TEST, **common)
  with pytest.raises(ValueError, match=r"names 1 reviews .* \(ids \[17\]"):
    tasks.SentimentData.from_records(TRAIN, TEST, unlabelled=UNLABELLED, **common)
  with pytest.raises(ValueError, match="pseudo_min_probability must lie in"):
    tasks.SentimentOptions(pseudo_min_probability=0.3)


def test_the_cache_is_keyed_by_the_files_bytes(tmp_path):
  path = tmp_path / "p.npz"
  pseudo_lib.save(path, _labels([1], [1], [0.9]))
  data = tasks.SentimentData({"pseudo_labels": str(path)})
  first = data.cache_path(tmp_path)
  assert first == data.cache_path(tmp_path) and "_pseudo" in first
  pseudo_lib.save(path, _labels([1], [0], [0.9]))
  assert data.cache_path(tmp_path) != first
  assert "_pseudo" not in tasks.SentimentData({}).cache_path(tmp_path)
