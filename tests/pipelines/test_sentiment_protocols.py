"""Where IMDB's dev split comes from (SentimentOptions.protocol), on made-up and on sample reviews."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from pipelines import datasets, tasks, text
from pipelines.tasks import holdout, read_records
from pipelines.vocab import UNK_ID

WORDS = "good bad film plot actor great awful fine dull moving".split()


def _reviews(n: int, seed: int, movies: int) -> list[dict]:
  """`n` reviews of `movies` movies; each starts with its movie's own word 'mvM' and its id 'rI'
  (an id counted per label, as in IMDB's pos/ and neg/ folders)."""
  rng = np.random.default_rng(seed)
  out, next_id = [], [0, 0]
  for _ in range(n):
    movie, label = int(rng.integers(movies)), int(rng.integers(2))
    words = rng.choice(WORDS, size=int(rng.integers(1, 6)))
    out.append({"text": f"mv{movie} r{next_id[label]} " + " ".join(words), "label": label,
                "rating": 9 if label else 2, "id": next_id[label], "movie": f"tt{movie:07d}"})
    next_id[label] += 1
  return out


TRAIN, TEST = _reviews(83, 0, movies=19), _reviews(29, 1, movies=7)


def _data(protocol: str, **options) -> tasks.SentimentData:
  return tasks.SentimentData.from_records(TRAIN, TEST, max_len=7, boundaries=(7,), min_freq=1,
                                          protocol=protocol, dev_fraction=0.25, **options)


def _first_words(data: tasks.SentimentData, split: str, position: int) -> list[str]:
  ids = data.splits[split].sequences["tokens"]
  return [data.vocab.decode(ids[i][position:position + 1], strip_special=False)[0]
          for i in range(len(ids))]


def test_movie_dev_holds_out_whole_movies():
  data = _data("movie_dev")
  # With min_freq=1 every word of a training review is known: a dev review's movie word is
  # unknown exactly when no review of its movie is in train.
  assert all(word.startswith("mv") for word in _first_words(data, "train", 0))
  dev = data.splits["dev"].sequences["tokens"]
  assert len(dev) > 0 and [dev[i][0] for i in range(len(dev))] == [UNK_ID] * len(dev)
  assert data.num_examples("train") + data.num_examples("dev") == 83
  # Each label's share, round(0.25 * count), or at most a few under it.
  labels = collections.Counter(r["label"] for r in TRAIN)
  dev_labels = collections.Counter(data.splits["dev"].scalars["label"].tolist())
  for label in (0, 1):
    assert round(0.25 * labels[label]) - 3 <= dev_labels[label] <= round(0.25 * labels[label])
  assert data.report["dev"]["from"] == "train" and data.report["dev"]["records"] == len(
      data.splits["dev"].scalars["label"])
  assert data.num_examples("test") == 29


def test_movie_dev_is_deterministic_by_split_seed():
  first, again, other = _data("movie_dev"), _data("movie_dev"), _data("movie_dev", split_seed=1)
  np.testing.assert_array_equal(again.splits["dev"].sequences["tokens"].flat,
                                first.splits["dev"].sequences["tokens"].flat)
  assert sorted(_first_words(other, "train", 0)) != sorted(_first_words(first, "train", 0))


def test_test_halves_train_on_all_of_train_and_halve_test_by_label():
  data = _data("test_halves")
  assert data.num_examples("train") == 83
  labels = np.array([r["label"] for r in TEST])
  ids = np.array([r["id"] for r in TEST])
  held = holdout.halves_per_label(labels, ids, 0)
  for split, rows in (("dev", held), ("test", ~held)):
    # Every review's id word ('r3') was seen in train, so it names the review exactly.
    got = sorted(zip(data.splits[split].scalars["label"].tolist(), _first_words(data, split, 1)))
    assert got == sorted(zip(labels[rows].tolist(), [f"r{i}" for i in ids[rows]])), split
  counts = collections.Counter(labels.tolist())
  assert collections.Counter(data.splits["dev"].scalars["label"].tolist()) == {
      label: n // 2 for label, n in counts.items()}
  assert data.report["dev"]["from"] == "test"
  assert data.report["test"]["records"] == 29 - data.num_examples("dev")
  assert data.report["train"]["records"] == 83


def test_random_dev_is_the_first_protocol():
  data = _data("random_dev", split_seed=3)
  held = holdout.per_label_random(np.array([r["label"] for r in TRAIN]), 0.25, 3)
  words = [r["text"].split()[0] for r, h in zip(TRAIN, held) if h]
  assert _first_words(data, "dev", 0) == words  # in record order, as before
  assert tasks.SentimentOptions().protocol == "random_dev"


@pytest.mark.parametrize("protocol, field", [("movie_dev", "movie"), ("test_halves", "id")])
def test_a_protocol_names_the_field_its_records_lack(protocol, field):
  bare = [{k: v for k, v in r.items() if k != field} for r in TRAIN + TEST]
  with pytest.raises(ValueError, match=rf"protocol '{protocol}' needs the field '{field}' in every "
                                       rf"record, but record 0 has only \[.*\]; .*random_dev"):
    tasks.SentimentData.from_records(bare[:83], bare[83:], min_freq=1, protocol=protocol)
  with pytest.raises(ValueError, match=r"protocol must be one of \['random_dev', 'movie_dev', "
                                       r"'test_halves'\], got 'seed'"):
    tasks.SentimentOptions(protocol="seed")


def test_sample_movie_dev_shares_no_movie_with_train(tmp_path):
  data = tasks.SentimentData.load(data_dir=tmp_path, protocol="movie_dev", max_len=64,
                                  boundaries=(64,))
  records = read_records(datasets.load("imdb", "train", data_dir=tmp_path))
  labels = np.array([r["label"] for r in records])
  movies = np.array([r["movie"].decode() for r in records])
  held = holdout.whole_groups(labels, list(movies), 0.1, 0)
  assert not set(movies[held]) & set(movies[~held])
  assert collections.Counter(labels[held].tolist()) == {0: 100, 1: 100}  # 10% of 1,000 each
  # The dev split is exactly those reviews, in record order.
  dev = data.splits["dev"].sequences["tokens"]
  assert len(dev) == held.sum()
  for i, record in enumerate(r for r, h in zip(records, held) if h):
    words = text.imdb_tokenize(record["text"].decode())[:64]
    assert dev[i].tolist() == data.vocab.encode(words)
  again = tasks.SentimentData.load(data_dir=tmp_path, protocol="movie_dev", max_len=64,
                                   boundaries=(64,))
  assert again.report["cache"].startswith("loaded from")
  np.testing.assert_array_equal(again.splits["dev"].sequences["tokens"].flat, dev.flat)
