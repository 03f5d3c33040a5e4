"""IMDB sentiment: reviews -> lowercased word ids (and, on request, word-bigram ids), labels 0/1."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

import numpy as np

from pipelines import text as text_lib
from pipelines.checks import positive_int
from pipelines.tasks.common import (SPLITS, Records, Split, TaskData, check_boundaries,
                                    encode_truncated, load_or_build_vocab, quarter_boundaries,
                                    read_records, tokenize_records)
from pipelines.vocab import Vocab

VOCAB_FILE, BIGRAM_VOCAB_FILE = "imdb_vocab.json", "imdb_bigram_vocab.json"


@dataclasses.dataclass(frozen=True)
class SentimentOptions:
  """How IMDB reviews become ids.

  Attributes:
    max_len: reviews longer than this many tokens keep their first `max_len` (counted).
    boundaries: bucket widths, ascending, the last == max_len; None: max_len/4, /2, 3/4, 1.
    min_freq, max_size: vocabulary options (see Vocab.build).
    dev_fraction: the part of train that becomes 'dev', taken per label so that dev keeps the
      label balance, by a fixed permutation seeded by `split_seed`. The vocabulary is built from
      the rest of train only.
    bigrams: also give every word its bigram with the word before it (pipelines.text.word_bigrams)
      as the field 'bigrams', aligned with 'tokens' (same length, position t for word t), with
      its own vocabulary (bigrams seen at least `bigram_min_freq` times in the training part,
      at most `bigram_max_size`, kept in 'imdb_bigram_vocab.json').
  """
  max_len: int = 256
  boundaries: tuple[int, ...] | None = None
  min_freq: int = 5
  max_size: int | None = None
  dev_fraction: float = 0.1
  split_seed: int = 0
  bigrams: bool = False
  bigram_min_freq: int = 3
  bigram_max_size: int | None = None

  def __post_init__(self):
    positive_int(self.max_len, "max_len")
    positive_int(self.split_seed, "split_seed", minimum=0)
    if not 0 < self.dev_fraction < 1:
      raise ValueError(f"dev_fraction must lie in (0, 1), got {self.dev_fraction}")
    object.__setattr__(self, "boundaries", check_boundaries(
        self.boundaries or quarter_boundaries(self.max_len), self.max_len, "boundaries"))


class SentimentData(TaskData):
  """IMDB sentiment classification: lowercased words and punctuation, labels 0/1.

  Build it with `SentimentData.from_records(train, test, ...)` or `SentimentData.load(...)`.
  The vocabularies: `vocab` ('imdb_vocab.json') and, with bigrams, `bigram_vocab`
  ('imdb_bigram_vocab.json'; None without).
  """

  task = "imdb"
  options_class = SentimentOptions

  @classmethod
  def from_records(cls, train: Records, test: Records, *,
                   vocab_dir: str | os.PathLike | None = None, **options) -> SentimentData:
    """Encodes IMDB's records; 'dev' is carved from train (see SentimentOptions.dev_fraction).

    Args:
      train, test: the records of IMDB's train and test splits ({'text', 'label', ...}).
      vocab_dir: where the vocabulary files are kept; None: not saved.
      **options: see SentimentOptions (max_len=256, boundaries, min_freq=5, max_size,
        dev_fraction=0.1, split_seed=0, bigrams=False, bigram_min_freq=3, bigram_max_size).
    """
    data = cls(options)
    data._encode_records(read_records(train), read_records(test), vocab_dir)
    return data

  def _encode_records(self, train: list[Mapping[str, Any]], test: list[Mapping[str, Any]],
                      vocab_dir: str | os.PathLike | None) -> None:
    opts = self.options
    tokens, labels, counts = {}, {}, {}
    for split, records in (("train", train), ("test", test)):
      toks, kept, empty = tokenize_records(records, ["text"], text_lib.imdb_tokenize)
      tokens[split] = toks["text"]
      labels[split] = np.array([int(records[i]["label"]) for i in kept], dtype=np.int32)
      if np.any((labels[split] != 0) & (labels[split] != 1)):
        raise ValueError(f"imdb {split}: labels must be 0 or 1, got "
                         f"{sorted(set(labels[split].tolist()))}")
      counts[split] = {"records": len(records), "skipped_empty": empty}

    # Carve dev from train: the same fraction of each label, by a fixed permutation.
    rng = np.random.default_rng(opts.split_seed)
    in_dev = np.zeros(len(labels["train"]), dtype=bool)
    for label in (0, 1):
      members = np.flatnonzero(labels["train"] == label)
      in_dev[rng.permutation(members)[:round(opts.dev_fraction * len(members))]] = True
    parts = {"train": np.flatnonzero(~in_dev), "dev": np.flatnonzero(in_dev),
             "test": np.arange(len(labels["test"]))}
    counts["dev"] = {"records": int(in_dev.sum()), "skipped_empty": 0}
    counts["train"]["records"] -= counts["dev"]["records"]

    self._build_vocabs([tokens["train"][i] for i in parts["train"]], vocab_dir)
    for split in SPLITS:
      source = "test" if split == "test" else "train"
      words = [tokens[source][i] for i in parts[split]]
      ids, truncated = encode_truncated(self.vocab, words, opts.max_len)
      sequences = {"tokens": ids}
      if opts.bigrams:  # from the kept words only, so position t is word t's bigram
        sequences["bigrams"], _ = encode_truncated(
            self.bigram_vocab, [text_lib.word_bigrams(w[:opts.max_len]) for w in words],
            opts.max_len)
      self.splits[split] = Split(sequences, {"label": labels[source][parts[split]],
                                             "index": np.arange(len(ids), dtype=np.int32)})
      counts[split].update(kept=len(ids), truncated={"tokens": truncated})
      self._finish_report(split, counts[split], {field: field for field in sequences})

  def _build_vocabs(self, train_words: list[list[str]], vocab_dir) -> None:
    """The word (and bigram) vocabulary of the training part, loaded or built; into `report`."""
    opts = self.options
    meta = {"task": "imdb", "train_examples": len(train_words),
            "dev_fraction": opts.dev_fraction, "split_seed": opts.split_seed}
    how = {VOCAB_FILE: (lambda: train_words, opts.min_freq, opts.max_size, "imdb_tokenize"),
           BIGRAM_VOCAB_FILE: (lambda: map(text_lib.word_bigrams, train_words),
                               opts.bigram_min_freq, opts.bigram_max_size,
                               "imdb_tokenize+word_bigrams")}
    self.report["vocab"] = {}
    for name in self.vocab_names():
      token_lists, min_freq, max_size, tokenizer = how[name]
      path = None if vocab_dir is None else os.path.join(os.fspath(vocab_dir), name)
      self.vocabs[name], self.report["vocab"][name] = load_or_build_vocab(
          path, token_lists, min_freq=min_freq, max_size=max_size,
          metadata={**meta, "tokenizer": tokenizer})

  def vocab_names(self) -> tuple[str, ...]:
    return (VOCAB_FILE, BIGRAM_VOCAB_FILE) if self.options.bigrams else (VOCAB_FILE,)

  @property
  def vocab(self) -> Vocab:
    return self.vocabs[VOCAB_FILE]

  @property
  def bigram_vocab(self) -> Vocab | None:
    return self.vocabs.get(BIGRAM_VOCAB_FILE)

  @property
  def length_keys(self) -> dict[str, str | None]:  # bigrams are exactly as long as the tokens
    return {"tokens": "lengths", **({"bigrams": None} if self.options.bigrams else {})}

  @property
  def boundaries(self) -> dict[str, tuple[int, ...]]:
    bounds = self.options.boundaries
    return {"tokens": bounds, **({"bigrams": bounds} if self.options.bigrams else {})}

  @classmethod
  def load(cls, source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
           download: bool = False, **options) -> SentimentData:
    """From pipelines.datasets.load (args as there; the shipped sample when `source` is None).

    The vocabulary and the encoded splits are kept in the prepared dataset's folder, under
    tokenized/ (see the pipelines.tasks docstring). `options` as SentimentOptions.
    """
    return cls._load("imdb", ("train", "test"), source, data_dir, download,
                     lambda r, folder: cls.from_records(r["train"], r["test"], vocab_dir=folder,
                                                        **options),
                     options)
