"""IMDB sentiment: reviews -> lowercased word ids (and, on request, word-bigram ids), labels 0/1."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Literal, Mapping

import numpy as np

from pipelines import pseudo_labels as pseudo_lib
from pipelines import text as text_lib
from pipelines.checks import positive_int
from pipelines.tasks import holdout
from pipelines.tasks.common import (SPLITS, Records, Split, TaskData, check_boundaries,
                                    encode_truncated, load_or_build_vocab, quarter_boundaries,
                                    read_records, tokenize_records)
from pipelines.vocab import Vocab

VOCAB_FILE, BIGRAM_VOCAB_FILE = "imdb_vocab.json", "imdb_bigram_vocab.json"
PROTOCOLS = ("random_dev", "movie_dev", "test_halves")


@dataclasses.dataclass(frozen=True)
class SentimentOptions:
  """How IMDB reviews become ids, and which reviews make the train, dev and test splits.

  Attributes:
    max_len: reviews longer than this many tokens keep their first `max_len` (counted).
    boundaries: bucket widths, ascending, the last == max_len; None: max_len/4, /2, 3/4, 1.
    min_freq, max_size: vocabulary options (see Vocab.build).
    protocol: where 'dev' comes from (the vocabulary is built from the 'train' split only):
      'random_dev': `dev_fraction` of IMDB train, taken per label (so dev keeps the label balance)
        by a permutation of the records' positions seeded by `split_seed`; dev shares its movies
        with train. The first protocol, kept so that runs made with it find the same split.
      'movie_dev': about `dev_fraction` of IMDB train, whole movies at a time, so that no movie
        of dev has a review in train (as no movie of test has); balanced by label as well as the
        movies allow (holdout.whole_groups, seeded by `split_seed`). Needs each record's 'movie'.
      'test_halves': the nndl chapter's protocol: all of IMDB train is 'train', and IMDB test is
        cut into two halves balanced by label (half of each label, drawn by a permutation of the
        review ids seeded by `split_seed`; on the full data 12,500 reviews each, 6,250 per
        label), 'dev' and 'test'. Dev is then drawn from the test distribution (other movies than train's, the
        same movies as test), so choosing by it selects on test-distribution data: the test
        accuracy it gives is not that of a model chosen blind to the test set. Needs each
        record's 'id'. `dev_fraction` is not used.
    dev_fraction: the part of IMDB train that becomes 'dev' ('random_dev', 'movie_dev').
    split_seed: seeds the choice of the dev reviews (and of the test halves).
    bigrams: also give every word its bigram with the word before it (pipelines.text.word_bigrams)
      as the field 'bigrams', aligned with 'tokens' (same length, position t for word t), with
      its own vocabulary (bigrams seen at least `bigram_min_freq` times in the training part,
      at most `bigram_max_size`, kept in 'imdb_bigram_vocab.json').
    pseudo_labels: self-training: a file of a teacher's labels for IMDB's unlabelled reviews
      (pipelines.pseudo_labels, written by `experiments pseudo-label sentiment`). The unlabelled
      reviews whose teacher probability is at least `pseudo_min_probability` join the training
      part with the teacher's label, and the vocabularies are counted over the training part with
      them (so words and bigrams seen only in unlabelled reviews get ids). Dev and test are as
      the protocol says. Needs the records of IMDB's 'unsupervised' split. None: no self-training.
    pseudo_min_probability: see pseudo_labels (0.5 keeps every pseudo-labelled review).
  """
  max_len: int = 256
  boundaries: tuple[int, ...] | None = None
  min_freq: int = 5
  max_size: int | None = None
  protocol: Literal["random_dev", "movie_dev", "test_halves"] = "random_dev"
  dev_fraction: float = 0.1
  split_seed: int = 0
  bigrams: bool = False
  bigram_min_freq: int = 3
  bigram_max_size: int | None = None
  pseudo_labels: str | None = None
  pseudo_min_probability: float = 0.5

  def __post_init__(self):
    positive_int(self.max_len, "max_len")
    positive_int(self.split_seed, "split_seed", minimum=0)
    if self.protocol not in PROTOCOLS:
      raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {self.protocol!r}")
    if not 0 < self.dev_fraction < 1:
      raise ValueError(f"dev_fraction must lie in (0, 1), got {self.dev_fraction}")
    if not 0.5 <= self.pseudo_min_probability <= 1:
      raise ValueError(f"pseudo_min_probability must lie in [0.5, 1], got "
                       f"{self.pseudo_min_probability}")
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
  def from_records(cls, train: Records, test: Records, *, unlabelled: Records | None = None,
                   vocab_dir: str | os.PathLike | None = None, **options) -> SentimentData:
    """Encodes IMDB's records into 'train', 'dev' and 'test' (see SentimentOptions.protocol).

    Args:
      train, test: the records of IMDB's train and test splits ({'text', 'label', and for the
        protocols that need them 'movie' or 'id'}).
      unlabelled: the records of IMDB's 'unsupervised' split ({'text', 'id'}); read only with the
        option pseudo_labels.
      vocab_dir: where the vocabulary files are kept; None: not saved.
      **options: see SentimentOptions (max_len=256, boundaries, min_freq=5, max_size,
        protocol='random_dev', dev_fraction=0.1, split_seed=0, bigrams=False, bigram_min_freq=3,
        bigram_max_size, pseudo_labels=None, pseudo_min_probability=0.5).
    """
    data = cls(options)
    if data.options.pseudo_labels is not None and unlabelled is None:
      raise ValueError("the option pseudo_labels needs the records of IMDB's 'unsupervised' "
                       "split: pass them as `unlabelled`")
    data._encode_records(read_records(train), read_records(test), vocab_dir,
                         None if unlabelled is None or data.options.pseudo_labels is None
                         else read_records(unlabelled))
    return data

  def _encode_records(self, train: list[Mapping[str, Any]], test: list[Mapping[str, Any]],
                      vocab_dir: str | os.PathLike | None,
                      unlabelled: list[Mapping[str, Any]] | None = None) -> None:
    opts = self.options
    records = {"train": train, "test": test}
    tokens, labels, kept, counts = {}, {}, {}, {}
    for source, recs in records.items():
      toks, kept[source], empty = tokenize_records(recs, ["text"], text_lib.imdb_tokenize)
      tokens[source] = toks["text"]
      labels[source] = np.array([int(recs[i]["label"]) for i in kept[source]], dtype=np.int32)
      if np.any((labels[source] != 0) & (labels[source] != 1)):
        raise ValueError(f"imdb {source}: labels must be 0 or 1, got "
                         f"{sorted(set(labels[source].tolist()))}")
      counts[source] = {"records": len(recs), "skipped_empty": empty}

    parts = self._parts(records, kept, labels)
    dev_source, dev_rows = parts["dev"]
    counts["dev"] = {"records": len(dev_rows), "skipped_empty": 0, "from": dev_source}
    counts[dev_source]["records"] -= len(dev_rows)

    extra_words, extra_labels = [], np.zeros(0, np.int32)  # the pseudo-labelled reviews
    if unlabelled is not None:
      extra_words, extra_labels, pseudo = self._pseudo_labelled(unlabelled)
      counts["train"]["pseudo_labelled"] = pseudo  # read and skipped as the labelled ones are
      counts["train"]["records"] += pseudo["kept"] + pseudo["skipped_empty"]
      counts["train"]["skipped_empty"] += pseudo["skipped_empty"]
    train_source, train_rows = parts["train"]
    self._build_vocabs([tokens[train_source][i] for i in train_rows] + extra_words, vocab_dir)
    for split in SPLITS:
      source, rows = parts[split]
      words = [tokens[source][i] for i in rows]
      split_labels = labels[source][rows]
      if split == "train" and extra_words:
        words, split_labels = words + extra_words, np.concatenate([split_labels, extra_labels])
      ids, truncated = encode_truncated(self.vocab, words, opts.max_len)
      sequences = {"tokens": ids}
      if opts.bigrams:  # from the kept words only, so position t is word t's bigram
        sequences["bigrams"], _ = encode_truncated(
            self.bigram_vocab, [text_lib.word_bigrams(w[:opts.max_len]) for w in words],
            opts.max_len)
      self.splits[split] = Split(sequences, {"label": split_labels,
                                             "index": np.arange(len(ids), dtype=np.int32)})
      counts[split].update(kept=len(ids), truncated={"tokens": truncated})
      self._finish_report(split, counts[split], {field: field for field in sequences})

  def _pseudo_labelled(self, unlabelled: list[Mapping[str, Any]]
                       ) -> tuple[list[list[str]], np.ndarray, dict[str, Any]]:
    """The tokens and teacher labels of the unlabelled reviews the teacher was sure of, and
    their count for the report; a ValueError when the file names a review that is not there."""
    opts = self.options
    teacher = pseudo_lib.load(opts.pseudo_labels)
    chosen = teacher.confident(opts.pseudo_min_probability)
    position = {}
    for i, record in enumerate(unlabelled):
      if "id" not in record:
        raise ValueError(f"pseudo_labels needs the field 'id' in every unlabelled record, but "
                         f"record {i} has only {sorted(record)}")
      position[int(record["id"])] = i
    missing = [int(i) for i in teacher.ids if int(i) not in position]
    if missing:
      raise ValueError(f"the pseudo-label file {opts.pseudo_labels} names {len(missing)} reviews "
                       f"that the unlabelled split does not hold (ids {missing[:5]} ...): it was "
                       f"written for other data")
    rows = [position[int(i)] for i in teacher.ids[chosen]]
    toks, kept, empty = tokenize_records([unlabelled[r] for r in rows], ["text"],
                                         text_lib.imdb_tokenize)
    labels = teacher.labels[chosen][kept].astype(np.int32)
    count = {"file": os.fspath(opts.pseudo_labels), "in_file": len(teacher.ids),
             "min_probability": opts.pseudo_min_probability, "kept": len(kept),
             "skipped_empty": empty, "positive": int(labels.sum())}
    return toks["text"], labels, count

  def _parts(self, records: Mapping[str, list[Mapping[str, Any]]],
             kept: Mapping[str, list[int]], labels: Mapping[str, np.ndarray]
             ) -> dict[str, tuple[str, np.ndarray]]:
    """Split -> (the IMDB split its reviews come from, their rows among that split's kept ones)."""
    opts = self.options
    everything = {source: np.arange(len(labels[source])) for source in labels}
    if opts.protocol == "test_halves":
      ids = _field_values(records["test"], kept["test"], "id", opts.protocol)
      in_dev = holdout.halves_per_label(labels["test"], np.asarray(ids, np.int64),
                                        opts.split_seed)
      return {"train": ("train", everything["train"]), "dev": ("test", np.flatnonzero(in_dev)),
              "test": ("test", np.flatnonzero(~in_dev))}
    if opts.protocol == "movie_dev":
      movies = _field_values(records["train"], kept["train"], "movie", opts.protocol)
      in_dev = holdout.whole_groups(labels["train"], [_text(m) for m in movies],
                                    opts.dev_fraction, opts.split_seed)
    else:
      in_dev = holdout.per_label_random(labels["train"], opts.dev_fraction, opts.split_seed)
    return {"train": ("train", np.flatnonzero(~in_dev)), "dev": ("train", np.flatnonzero(in_dev)),
            "test": ("test", everything["test"])}

  def _build_vocabs(self, train_words: list[list[str]], vocab_dir) -> None:
    """The word (and bigram) vocabulary of the training part, loaded or built; into `report`."""
    opts = self.options
    meta = {"task": "imdb", "train_examples": len(train_words), "protocol": opts.protocol,
            "dev_fraction": opts.dev_fraction, "split_seed": opts.split_seed}
    if opts.pseudo_labels is not None:  # a vocabulary counted over pseudo-labelled reviews too
      meta.update(pseudo_labels=pseudo_lib.digest(opts.pseudo_labels),
                  pseudo_min_probability=opts.pseudo_min_probability)
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
    splits = ("train", "test") + (("unsupervised",) if options.get("pseudo_labels") else ())
    return cls._load("imdb", splits, source, data_dir, download,
                     lambda r, folder: cls.from_records(
                         r["train"], r["test"], unlabelled=r.get("unsupervised"),
                         vocab_dir=folder, **options),
                     options)

  def cache_path(self, folder: str | os.PathLike) -> str:
    """As TaskData's, keyed also by the pseudo-label file's bytes (a new file at the same path
    is a new cache)."""
    path = super().cache_path(folder)
    if self.options.pseudo_labels is None:
      return path
    return f"{path[:-len('.npz')]}_pseudo{pseudo_lib.digest(self.options.pseudo_labels)[:12]}.npz"


def _text(value: str | bytes) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _field_values(records: list[Mapping[str, Any]], kept: list[int], field: str,
                  protocol: str) -> list[Any]:
  """records[i][field] for every kept i; a ValueError naming the protocol when one lacks it."""
  try:
    return [records[i][field] for i in kept]
  except KeyError:
    missing = next(i for i in kept if field not in records[i])
    raise ValueError(f"protocol {protocol!r} needs the field {field!r} in every record, but "
                     f"record {missing} has only {sorted(records[missing])}; the imdb builder "
                     f"(pipelines.datasets, version 1.1.0 on) keeps it, or use "
                     f"protocol='random_dev'") from None
