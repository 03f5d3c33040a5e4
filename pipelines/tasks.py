"""Prepared data for the three tasks: records -> tokens -> ids -> batches, with reports.

    data = SentimentData.load()                       # the shipped IMDB sample
    data = SentimentData.load(source="../shared/data/imdb/aclImdb_v1.tar.gz")
    train = data.train_batches(batch_size=64, seed=0)  # endless, resumable (get_state/set_state)
    for batch in data.eval_batches("dev", batch_size=64): ...

Each task object holds its splits in memory as token ids, its vocabulary (built from the training
split only and saved beside the prepared data, then reloaded on the next run), and a `report` of
what happened to every record. The splits are named 'train', 'dev' and 'test' in every task:
'dev' is the tfds 'validation' split for fra-eng and couplets, and is carved from IMDB's train
split (which has no validation split).

Batches (numpy, leading axis b = batch_size // process_count; see pipelines.batching):
  SentimentData: 'tokens' int32 (b, L), 'lengths' int32 (b,), 'label' int32 (b,) (0 negative,
      1 positive), 'index' int32 (b,), 'weight' float32 (b,).
  TranslationData, CoupletData: 'src' int32 (b, Ls): source ids followed by eos; 'src_len' (b,);
      'tgt_in' int32 (b, Lt): bos followed by the target ids (decoder input, teacher forcing);
      'tgt_out' int32 (b, Lt): the target ids followed by eos (what the decoder predicts);
      'tgt_len' (b,): the length of both; 'index' int32 (b,); 'weight' float32 (b,).
      For couplets the number of characters to generate is tgt_len - 1 == src_len - 1.
  'index' is the example's position in its split (`data.num_examples(split)` of them), which lines
  a prediction up with `data.references(split)` (eval batches come in length order, not index
  order); 'weight' is 0.0 on the filler rows that complete the last evaluation batch.

Nothing is dropped silently. Per split, `report[split]` counts:
  records        records read;
  kept           examples in the split (records - skipped_empty - skipped_unequal);
  skipped_empty  records with an empty text (no tokens) in any field: left out, since an empty
                 sequence carries nothing to learn or score;
  skipped_unequal (couplets) pairs whose lines differ in length: left out;
  truncated      per field, examples longer than the maximum length, cut to it (the first tokens
                 are kept; eos is added after cutting, so it is never lost);
  all_unknown    per field, examples whose every token is unknown to the vocabulary: kept (they
                 are valid input; a high count means the vocabulary is too small);
  unk_rate       per field, the fraction of tokens that map to unk.
`report['vocab']` says whether each vocabulary was built or loaded, and from where.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from pipelines import text as text_lib
from pipelines.batching import Batch, Batcher, Ragged, TrainIterator
from pipelines.vocab import BOS_ID, EOS_ID, UNK_ID, Vocab

Records = Sequence[Mapping[str, Any]]  # a list of dicts or a tfds data source

SPLITS = ("train", "dev", "test")


def read_records(records: Records) -> list[Mapping[str, Any]]:
  """All records of a random-access source (a list, or a tfds data source) as a list."""
  if isinstance(records, list):
    return records
  getitems = getattr(records, "__getitems__", None)
  n = len(records)
  if getitems is not None:
    out = []
    for start in range(0, n, 4096):
      out.extend(getitems(list(range(start, min(start + 4096, n)))))
    return out
  return [records[i] for i in range(n)]


@dataclasses.dataclass
class Split:
  """One split in memory: id sequences per field, per-example values, references for scoring."""
  sequences: dict[str, Ragged]
  scalars: dict[str, np.ndarray]
  references: list[str] | None = None


def _unk_stats(ids: Ragged) -> tuple[int, float]:
  """(examples whose every id is unk, fraction of unk ids), ignoring bos/eos."""
  regular = (ids.flat != BOS_ID) & (ids.flat != EOS_ID)
  unk = ids.flat == UNK_ID
  if not len(ids):
    return 0, 0.0
  owner = np.repeat(np.arange(len(ids)), ids.lengths)
  regular_per = np.bincount(owner, weights=regular, minlength=len(ids))
  unk_per = np.bincount(owner, weights=unk, minlength=len(ids))
  all_unknown = int(np.count_nonzero((unk_per == regular_per) & (regular_per > 0)))
  return all_unknown, float(unk.sum() / max(regular.sum(), 1))


def _default_boundaries(max_len: int, count: int = 4) -> tuple[int, ...]:
  return tuple(sorted({max(1, max_len * k // count) for k in range(1, count + 1)}))


def _vocab_for(path: str | None, token_lists: Callable[[], Sequence[Sequence[str]]], *,
               min_freq: int, max_size: int | None, metadata: dict) -> tuple[Vocab, str]:
  """Loads the vocabulary at `path` if it was built the same way, else builds (and saves) it."""
  if path is not None and os.path.exists(path):
    vocab = Vocab.load(path)
    expected = {"min_freq": min_freq, "max_size": max_size, **metadata}
    if vocab.metadata == expected:
      return vocab, f"loaded from {path}"
    differing = sorted(k for k in set(expected) | set(vocab.metadata)
                       if expected.get(k) != vocab.metadata.get(k))
    how = f"rebuilt (the file at {path} was built with other {', '.join(differing)})"
  else:
    how = "built" if path is None else f"built and saved to {path}"
  vocab = Vocab.build(token_lists(), min_freq=min_freq, max_size=max_size, metadata=metadata)
  if path is not None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    vocab.save(path)
  return vocab, how


class TaskData:
  """What the three tasks share: splits in memory, reports, and the loaders over them."""

  task: str = ""
  length_keys: dict[str, str | None] = {}

  def __init__(self):
    self.splits: dict[str, Split] = {}
    self.report: dict[str, Any] = {}
    self.boundaries: dict[str, tuple[int, ...]] = {}

  def _split(self, split: str) -> Split:
    if split not in self.splits:
      raise ValueError(f"unknown split {split!r} for {self.task}; the splits are "
                       f"{sorted(self.splits)}")
    return self.splits[split]

  def num_examples(self, split: str) -> int:
    return len(self._split(split).scalars["index"])

  def references(self, split: str) -> list[str]:
    """Reference texts of an evaluation split, by example index (for BLEU)."""
    refs = self._split(split).references
    if refs is None:
      raise ValueError(f"{self.task} keeps no reference texts for split {split!r}")
    return refs

  def batcher(self, split: str, batch_size: int, *, overflow: str = "truncate",
              process_index: int | None = None, process_count: int | None = None) -> Batcher:
    """The loader over one split (see pipelines.batching.Batcher)."""
    data = self._split(split)
    return Batcher(data.sequences, data.scalars, boundaries=self.boundaries,
                   batch_size=batch_size, overflow=overflow, length_keys=self.length_keys,
                   process_index=process_index, process_count=process_count)

  def train_batches(self, batch_size: int, seed: int, *, drop_remainder: bool = True,
                    process_index: int | None = None,
                    process_count: int | None = None) -> TrainIterator:
    """Endless shuffled training batches; `get_state()` / `set_state()` resume exactly."""
    return self.batcher("train", batch_size, process_index=process_index,
                        process_count=process_count).train_batches(
                            seed, drop_remainder=drop_remainder)

  def eval_batches(self, split: str, batch_size: int, *, process_index: int | None = None,
                   process_count: int | None = None) -> Iterator[Batch]:
    """One pass over `split`, every example once; filler rows at the end have weight 0."""
    return self.batcher(split, batch_size, process_index=process_index,
                        process_count=process_count).eval_batches()

  def summary(self) -> str:
    """The report as a few readable lines (for logs)."""
    lines = [f"{self.task}: " + "; ".join(f"{name} {how}" for name, how in
                                          self.report["vocab"].items())]
    for split in self.splits:
      r = self.report[split]
      extra = "".join(f", {key} {r[key]}" for key in ("skipped_empty", "skipped_unequal")
                      if r.get(key))
      lines.append(f"  {split}: {r['kept']} of {r['records']} records{extra}; truncated "
                   f"{r['truncated']}; all-unknown {r['all_unknown']}; unk rate "
                   + ", ".join(f"{k} {v:.4f}" for k, v in r["unk_rate"].items()))
    return "\n".join(lines)

  def _finish_report(self, split: str, counts: dict, fields: Mapping[str, str]) -> None:
    """Adds the unknown-token counts of `fields` (report name -> sequence field) to the report."""
    data = self.splits[split]
    stats = {name: _unk_stats(data.sequences[field]) for name, field in fields.items()}
    counts["all_unknown"] = {name: s[0] for name, s in stats.items()}
    counts["unk_rate"] = {name: s[1] for name, s in stats.items()}
    self.report[split] = counts


def _tokenize(records: list[Mapping[str, Any]], fields: Sequence[str],
              tokenize: Callable[[Any], list[str]]) -> tuple[dict[str, list[list[str]]],
                                                            list[int], int]:
  """Tokens of every field of every record; records with an empty field are left out.

  Returns:
    (field -> token lists of the kept records, the kept record positions, how many were empty).
  """
  tokens = {field: [] for field in fields}
  kept, empty = [], 0
  for i, record in enumerate(records):
    try:
      parts = [tokenize(record[field]) for field in fields]
    except KeyError as e:
      raise ValueError(f"record {i} has no field {e}; it has {sorted(record)}") from None
    if not all(parts):
      empty += 1
      continue
    for field, part in zip(fields, parts):
      tokens[field].append(part)
    kept.append(i)
  return tokens, kept, empty


class SentimentData(TaskData):
  """IMDB sentiment classification: lowercased words and punctuation, labels 0/1.

  Args:
    train, test: the records of IMDB's train and test splits ({'text', 'label', ...}).
    max_len: reviews longer than this many tokens keep their first `max_len` tokens (counted).
    boundaries: bucket widths (ascending, the last == max_len); default max_len/4, /2, 3/4, 1.
    min_freq, max_size: vocabulary options (see Vocab.build).
    dev_fraction: the part of train that becomes 'dev', taken per label so that dev keeps the
      label balance; deterministic (a fixed permutation seeded by `split_seed`). The vocabulary
      is built from the rest of train only.
    vocab_dir: where the vocabulary file lives ('imdb_vocab.json'); None: not saved.
  """

  task = "imdb"
  length_keys = {"tokens": "lengths"}

  def __init__(self, train: Records, test: Records, *, max_len: int = 256,
               boundaries: Sequence[int] | None = None, min_freq: int = 5,
               max_size: int | None = None, dev_fraction: float = 0.1, split_seed: int = 0,
               vocab_dir: str | os.PathLike | None = None):
    super().__init__()
    if not 0 < dev_fraction < 1:
      raise ValueError(f"dev_fraction must lie in (0, 1), got {dev_fraction}")
    boundaries = tuple(boundaries or _default_boundaries(max_len))
    if boundaries[-1] != max_len:
      raise ValueError(f"boundaries {boundaries} must end at max_len {max_len}")
    self.boundaries = {"tokens": boundaries}
    self.max_len = max_len

    raw = {"train": read_records(train), "test": read_records(test)}
    tokens, labels, counts = {}, {}, {}
    for split, records in raw.items():
      toks, kept, empty = _tokenize(records, ["text"], text_lib.imdb_tokenize)
      tokens[split] = toks["text"]
      labels[split] = np.array([int(records[i]["label"]) for i in kept], dtype=np.int32)
      if np.any((labels[split] != 0) & (labels[split] != 1)):
        raise ValueError(f"imdb {split}: labels must be 0 or 1, got "
                         f"{sorted(set(labels[split].tolist()))}")
      counts[split] = {"records": len(records), "skipped_empty": empty}

    # Carve dev from train: the same fraction of each label, by a fixed permutation.
    rng = np.random.default_rng(split_seed)
    in_dev = np.zeros(len(labels["train"]), dtype=bool)
    for label in (0, 1):
      members = np.flatnonzero(labels["train"] == label)
      in_dev[rng.permutation(members)[:round(dev_fraction * len(members))]] = True
    parts = {"train": np.flatnonzero(~in_dev), "dev": np.flatnonzero(in_dev),
             "test": np.arange(len(labels["test"]))}
    counts["dev"] = {"records": int(in_dev.sum()), "skipped_empty": 0}
    counts["train"]["records"] -= counts["dev"]["records"]

    path = None if vocab_dir is None else os.path.join(os.fspath(vocab_dir), "imdb_vocab.json")
    self.vocab, how = _vocab_for(
        path, lambda: [tokens["train"][i] for i in parts["train"]], min_freq=min_freq,
        max_size=max_size, metadata={"task": "imdb", "tokenizer": "imdb_tokenize",
                                     "train_examples": len(parts["train"]),
                                     "dev_fraction": dev_fraction, "split_seed": split_seed})
    self.report["vocab"] = {"vocab": how}

    for split in SPLITS:
      source = "test" if split == "test" else "train"
      chosen = [tokens[source][i] for i in parts[split]]
      truncated = sum(len(t) > max_len for t in chosen)
      ids = Ragged.from_sequences([self.vocab.encode(t[:max_len]) for t in chosen])
      self.splits[split] = Split({"tokens": ids},
                                 {"label": labels[source][parts[split]],
                                  "index": np.arange(len(chosen), dtype=np.int32)})
      counts[split].update(kept=len(chosen), truncated={"tokens": truncated})
      self._finish_report(split, counts[split], {"tokens": "tokens"})

  @classmethod
  def load(cls, source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
           download: bool = False, **options) -> SentimentData:
    """From pipelines.datasets.load (args as there; the shipped sample when `source` is None).

    The vocabulary is kept in the prepared dataset's folder, under vocab/. `options` go to
    __init__.
    """
    splits = _load_splits("imdb", ("train", "test"), source, data_dir, download)
    return cls(splits["train"], splits["test"],
               **{"vocab_dir": _vocab_dir("imdb", source, data_dir, download), **options})


class Seq2SeqData(TaskData):
  """Pairs of sequences: 'src' -> 'tgt_in' / 'tgt_out' (see the module docstring for the keys).

  Args:
    splits: split name ('train', 'dev', 'test') -> records with the fields `src_field` and
      `tgt_field`.
    max_src_len, max_tgt_len: the largest 'src' and 'tgt_in' widths, eos/bos included: longer texts
      keep their first max - 1 tokens (counted).
    boundaries: bucket widths, one sequence for both sides or a mapping {'src': ..., 'tgt': ...}
      (ascending, ending at the maximum lengths); default: the task's `default_boundaries` when
      they end at the maximum lengths, else four equal steps up to each maximum.
    min_freq, max_size: vocabulary options (see Vocab.build), built from 'train' only.
    vocab_dir: where the vocabulary files live; None: not saved.
  """

  # Set by each task: the record fields, the text functions, one vocabulary or two.
  src_field: str
  tgt_field: str
  tokenize: Callable[[Any], list[str]]
  detokenize: Callable[[Sequence[str]], str]
  shared_vocab = False
  default_boundaries: tuple[int, ...] = ()
  length_keys = {"src": "src_len", "tgt_in": "tgt_len", "tgt_out": None}

  def __init__(self, splits: Mapping[str, Records], *, max_src_len: int, max_tgt_len: int,
               boundaries: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
               min_freq: int = 1, max_size: int | None = None,
               vocab_dir: str | os.PathLike | None = None):
    super().__init__()
    if "train" not in splits or set(splits) - set(SPLITS):
      raise ValueError(f"splits: expected 'train' and optionally 'dev', 'test', got "
                       f"{sorted(splits)}")
    for name, value in (("max_src_len", max_src_len), ("max_tgt_len", max_tgt_len)):
      if value < 2:
        raise ValueError(f"{name} must be >= 2 (one token and eos/bos), got {value}")
    if not isinstance(boundaries, Mapping):
      boundaries = {"src": boundaries, "tgt": boundaries}

    def default(max_len):
      if self.default_boundaries and self.default_boundaries[-1] == max_len:
        return self.default_boundaries
      return _default_boundaries(max_len)
    src_b = tuple(boundaries.get("src") or default(max_src_len))
    tgt_b = tuple(boundaries.get("tgt") or default(max_tgt_len))
    if src_b[-1] != max_src_len or tgt_b[-1] != max_tgt_len:
      raise ValueError(f"boundaries must end at the maximum lengths ({max_src_len}, "
                       f"{max_tgt_len}), got src {src_b} and tgt {tgt_b}")
    self.boundaries = {"src": src_b, "tgt_in": tgt_b, "tgt_out": tgt_b}
    self.max_src_len, self.max_tgt_len = max_src_len, max_tgt_len

    fields = [self.src_field, self.tgt_field]
    tokens, counts = {}, {}
    for split, records in splits.items():
      records = read_records(records)
      toks, kept, empty = _tokenize(records, fields, self.tokenize)
      counts[split] = {"records": len(records), "skipped_empty": empty}
      toks, counts[split]["skipped_unequal"] = self._check_pairs(split, toks)
      tokens[split] = toks

    self._build_vocabs(tokens["train"], min_freq, max_size, vocab_dir)
    keep_src, keep_tgt = max_src_len - 1, max_tgt_len - 1
    for split, toks in tokens.items():
      src_ids = [self.src_vocab.encode(t[:keep_src], add_eos=True) for t in toks[self.src_field]]
      tgt_ids = [self.tgt_vocab.encode(t[:keep_tgt]) for t in toks[self.tgt_field]]
      self.splits[split] = Split(
          {"src": Ragged.from_sequences(src_ids),
           "tgt_in": Ragged.from_sequences([[BOS_ID] + t for t in tgt_ids]),
           "tgt_out": Ragged.from_sequences([t + [EOS_ID] for t in tgt_ids])},
          {"index": np.arange(len(src_ids), dtype=np.int32)},
          references=None if split == "train" else [self.detokenize(t)
                                                    for t in toks[self.tgt_field]])
      counts[split].update(
          kept=len(src_ids),
          truncated={"src": sum(len(t) > keep_src for t in toks[self.src_field]),
                     "tgt": sum(len(t) > keep_tgt for t in toks[self.tgt_field])})
      self._finish_report(split, counts[split], {"src": "src", "tgt": "tgt_out"})

  def _check_pairs(self, split: str, toks: dict) -> tuple[dict, int]:
    """Hook for task-specific pair checks: returns the kept tokens and how many were dropped."""
    del split
    return toks, 0

  def _build_vocabs(self, train: dict[str, list[list[str]]], min_freq: int,
                    max_size: int | None, vocab_dir) -> None:
    def path(role):
      return None if vocab_dir is None else os.path.join(os.fspath(vocab_dir),
                                                         f"{self.task}_{role}_vocab.json")
    meta = {"task": self.task, "tokenizer": self.tokenize.__name__,
            "train_examples": len(train[self.src_field])}
    if self.shared_vocab:
      vocab, how = _vocab_for(path("shared"), lambda: train[self.src_field] + train[self.tgt_field],
                              min_freq=min_freq, max_size=max_size,
                              metadata={**meta, "fields": [self.src_field, self.tgt_field]})
      self.src_vocab = self.tgt_vocab = vocab
      self.report["vocab"] = {"shared vocab": how}
      return
    self.src_vocab, src_how = _vocab_for(path(self.src_field), lambda: train[self.src_field],
                                         min_freq=min_freq, max_size=max_size,
                                         metadata={**meta, "fields": [self.src_field]})
    self.tgt_vocab, tgt_how = _vocab_for(path(self.tgt_field), lambda: train[self.tgt_field],
                                         min_freq=min_freq, max_size=max_size,
                                         metadata={**meta, "fields": [self.tgt_field]})
    self.report["vocab"] = {"source vocab": src_how, "target vocab": tgt_how}

  def target_text(self, ids: Sequence[int] | np.ndarray) -> str:
    """Detokenized text of predicted target ids (stops at eos; drops pad and bos)."""
    return self.detokenize(self.tgt_vocab.decode(ids))

  def source_text(self, ids: Sequence[int] | np.ndarray) -> str:
    return self.detokenize(self.src_vocab.decode(ids))


class TranslationData(Seq2SeqData):
  """English -> French (d2l's fra-eng preprocessing); separate source and target vocabularies.

  `reverse=True` translates French -> English. Defaults: max lengths 24 (eos/bos included; about
  99.9% of the pairs fit), buckets (8, 12, 16, 24) (half the sentences have at most 7 tokens),
  min_freq 2 (as d2l). See Seq2SeqData for the arguments.
  """

  task = "fra_eng"
  default_boundaries = (8, 12, 16, 24)
  tokenize = staticmethod(text_lib.fra_eng_tokenize)
  detokenize = staticmethod(text_lib.fra_eng_detokenize)

  def __init__(self, splits: Mapping[str, Records], *, reverse: bool = False,
               max_src_len: int = 24, max_tgt_len: int = 24, min_freq: int = 2, **options):
    self.src_field, self.tgt_field = ("fr", "en") if reverse else ("en", "fr")
    super().__init__(splits, max_src_len=max_src_len, max_tgt_len=max_tgt_len,
                     min_freq=min_freq, **options)

  @classmethod
  def load(cls, source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
           download: bool = False, **options) -> TranslationData:
    """From pipelines.datasets.load, like SentimentData.load; `options` go to __init__."""
    return cls(_load_splits("fra_eng", SPLITS, source, data_dir, download),
               **{"vocab_dir": _vocab_dir("fra_eng", source, data_dir, download), **options})


class CoupletData(Seq2SeqData):
  """Chinese couplets, upper line -> lower line, character tokens, one shared vocabulary.

  Pairs whose lines differ in length are left out and counted ('skipped_unequal'). Defaults: max
  lengths 33 (the longest line has 32 characters, plus eos/bos), buckets (8, 12, 18, 33) (median
  7 characters, 90% at most 17), min_freq 2.
  """

  task = "couplet"
  default_boundaries = (8, 12, 18, 33)
  src_field, tgt_field = "upper", "lower"
  tokenize = staticmethod(text_lib.couplet_tokenize)
  detokenize = staticmethod(text_lib.couplet_detokenize)
  shared_vocab = True

  def __init__(self, splits: Mapping[str, Records], *, max_src_len: int = 33,
               max_tgt_len: int = 33, min_freq: int = 2, **options):
    super().__init__(splits, max_src_len=max_src_len, max_tgt_len=max_tgt_len,
                     min_freq=min_freq, **options)

  def _check_pairs(self, split: str, toks: dict) -> tuple[dict, int]:
    upper, lower = toks["upper"], toks["lower"]
    equal = [i for i, (u, l) in enumerate(zip(upper, lower)) if len(u) == len(l)]
    if len(equal) == len(upper):
      return toks, 0
    return {"upper": [upper[i] for i in equal], "lower": [lower[i] for i in equal]}, \
        len(upper) - len(equal)

  @classmethod
  def load(cls, source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
           download: bool = False, **options) -> CoupletData:
    """From pipelines.datasets.load, like SentimentData.load; `options` go to __init__."""
    return cls(_load_splits("couplet", SPLITS, source, data_dir, download),
               **{"vocab_dir": _vocab_dir("couplet", source, data_dir, download), **options})


def _load_splits(name: str, splits: Sequence[str], source, data_dir,
                 download: bool) -> dict[str, Records]:
  """Our split names -> data sources of pipelines.datasets ('dev' is its 'validation')."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  return {split: datasets.load(name, "validation" if split == "dev" else split, source=source,
                               data_dir=data_dir, download=download) for split in splits}


def _vocab_dir(name: str, source, data_dir, download: bool) -> str:
  """The vocab/ folder inside the prepared dataset's folder (so a rebuild of the data drops it)."""
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  builder = datasets.builder(name, source=source, data_dir=data_dir, download=download)
  return os.path.join(os.fspath(builder.data_dir), "vocab")
