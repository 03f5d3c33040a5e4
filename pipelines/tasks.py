"""Prepared data for the three tasks: records -> tokens -> ids -> batches, with reports.

    data = SentimentData.load()                       # the shipped IMDB sample
    data = SentimentData.load(source="../shared/data/imdb/aclImdb_v1.tar.gz", max_len=400)
    train = data.train_batches(batch_size=64, seed=0)  # endless, resumable (get_state/set_state)
    for batch in data.eval_batches("dev", batch_size=64): ...

Each task object holds its splits in memory as token ids, its vocabulary (built from the training
split only), and a `report` of what happened to every record. The options that shape the ids are
a small frozen dataclass per task (`SentimentOptions`, `TranslationOptions`, `CoupletOptions`);
pass them as keyword arguments. The splits are named 'train', 'dev' and 'test' in every task:
'dev' is the tfds 'validation' split for fra-eng and couplets, and is carved from IMDB's train
split (which has no validation split).

Files: `load()` keeps, in the prepared dataset's folder (pipelines.datasets) under tokenized/,
  - the vocabulary as JSON (pipelines.vocab), reloaded identically on the next run; a file built
    with other options or from other data is rebuilt and the report says why;
  - a cache of the encoded splits (npz, one per set of options), so that a later run skips reading
    and tokenizing the records (full couplets: minutes -> about a second). A cache that is stale
    or unreadable is rebuilt, and the report says so. Rebuilding the dataset removes both.
Built directly from records (`SentimentData(train, test, vocab_dir=...)`), only the vocabulary is
kept, in `vocab_dir` (None: nothing is written).

Batches (numpy, leading axis b = batch_size // process_count; see pipelines.batching):
  SentimentData: 'tokens' int32 (b, L), 'lengths' int32 (b,), 'label' int32 (b,) (0 negative,
      1 positive), 'index' int32 (b,), 'weight' float32 (b,); with the option bigrams=True also
      'bigrams' int32 (b, L): the id of each word's bigram with the word before it.
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
`report['vocab']` says whether each vocabulary was built or loaded, and from where;
`report['cache']` the same for the cache of encoded splits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from pipelines import text as text_lib
from pipelines.batching import Batch, Batcher, Ragged, TrainIterator
from pipelines.vocab import BOS_ID, EOS_ID, UNK_ID, Vocab

Records = Sequence[Mapping[str, Any]]  # a list of dicts or a tfds data source

SPLITS = ("train", "dev", "test")
CACHE_FORMAT, CACHE_VERSION = "attention-zoo-task-cache", 1


def read_records(records: Records) -> list[Mapping[str, Any]]:
  """All records of a random-access source (a list, or a tfds data source) as a list."""
  if isinstance(records, list):
    return records
  getitems = getattr(records, "__getitems__", None)
  n = len(records)
  if getitems is None:
    return [records[i] for i in range(n)]
  out = []
  for start in range(0, n, 4096):  # one record at a time is ~100x slower on tfds sources
    out.extend(getitems(list(range(start, min(start + 4096, n)))))
  return out


# ---- options


def _positive_int(value, name: str, minimum: int = 1) -> None:
  if isinstance(value, bool) or int(value) != value or value < minimum:
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_boundaries(bounds: Sequence[int], max_len: int, name: str) -> tuple[int, ...]:
  bounds = tuple(int(b) for b in bounds)
  if not bounds or bounds[-1] != max_len:
    raise ValueError(f"{name} {bounds} must end at the maximum length {max_len}")
  return bounds


def _quarters(max_len: int) -> tuple[int, ...]:
  return tuple(sorted({max(1, max_len * k // 4) for k in range(1, 5)}))


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
    _positive_int(self.max_len, "max_len")
    if not 0 < self.dev_fraction < 1:
      raise ValueError(f"dev_fraction must lie in (0, 1), got {self.dev_fraction}")
    object.__setattr__(self, "boundaries", _check_boundaries(
        self.boundaries or _quarters(self.max_len), self.max_len, "boundaries"))


@dataclasses.dataclass(frozen=True)
class TranslationOptions:
  """How fra-eng pairs become ids.

  Attributes:
    max_src_len, max_tgt_len: the largest 'src' and 'tgt_in' widths, eos/bos included: longer
      texts keep their first max - 1 tokens (counted). 24 fits about 99.9% of the pairs.
    boundaries: bucket widths, one sequence for both sides or a mapping {'src': ..., 'tgt': ...},
      ascending and ending at the maximum lengths; None: `default_boundaries` when it ends at the
      maximum length, else four equal steps.
    min_freq, max_size: vocabulary options (see Vocab.build); min_freq 2 as d2l.
    reverse: translate French -> English instead of English -> French.
  """
  max_src_len: int = 24
  max_tgt_len: int = 24
  boundaries: Any = None
  min_freq: int = 2
  max_size: int | None = None
  reverse: bool = False
  default_boundaries = (8, 12, 16, 24)  # half the sentences have at most 7 tokens

  def __post_init__(self):
    for name in ("max_src_len", "max_tgt_len"):
      _positive_int(getattr(self, name), name, minimum=2)  # one token and eos/bos
    given = self.boundaries
    if not isinstance(given, Mapping):
      given = {"src": given, "tgt": given}
    unknown = set(given) - {"src", "tgt"}
    if unknown:
      raise ValueError(f"boundaries: expected the keys 'src' and 'tgt', got {sorted(given)}")
    out = {}
    for side, max_len in (("src", self.max_src_len), ("tgt", self.max_tgt_len)):
      default = (self.default_boundaries if self.default_boundaries[-1] == max_len
                 else _quarters(max_len))
      out[side] = _check_boundaries(given.get(side) or default, max_len, f"boundaries[{side!r}]")
    object.__setattr__(self, "boundaries", out)


@dataclasses.dataclass(frozen=True)
class CoupletOptions(TranslationOptions):
  """How couplets become ids: as TranslationOptions, with couplet defaults.

  The longest line has 32 characters (+ eos/bos = 33); the median 7, 90% at most 17. `reverse`
  generates upper lines from lower lines.
  """
  max_src_len: int = 33
  max_tgt_len: int = 33
  default_boundaries = (8, 12, 18, 33)


def _make_options(cls, options: Mapping[str, Any]):
  names = {f.name for f in dataclasses.fields(cls)}
  unknown = set(options) - names
  if unknown:
    raise ValueError(f"unknown options {sorted(unknown)}; the options are {sorted(names)}")
  return cls(**options)


def _jsonable(options) -> dict:
  return json.loads(json.dumps(dataclasses.asdict(options)))


# ---- the shared machinery


@dataclasses.dataclass
class Split:
  """One split in memory: id sequences per field, per-example values, references for scoring."""
  sequences: dict[str, Ragged]
  scalars: dict[str, np.ndarray]
  references: list[str] | None = None


def _unk_stats(ids: Ragged) -> tuple[int, float]:
  """(examples whose every id is unk, fraction of unk ids), ignoring bos/eos."""
  if not len(ids):
    return 0, 0.0
  regular = (ids.flat != BOS_ID) & (ids.flat != EOS_ID)
  unk = ids.flat == UNK_ID
  owner = np.repeat(np.arange(len(ids)), ids.lengths)
  regular_per = np.bincount(owner, weights=regular, minlength=len(ids))
  unk_per = np.bincount(owner, weights=unk, minlength=len(ids))
  all_unknown = int(np.count_nonzero((unk_per == regular_per) & (regular_per > 0)))
  return all_unknown, float(unk.sum() / max(regular.sum(), 1))


def _vocab_for(path: str | None, token_lists: Callable[[], Sequence[Sequence[str]]], *,
               min_freq: int, max_size: int | None, metadata: dict) -> tuple[Vocab, str]:
  """Loads the vocabulary at `path` if it was built the same way, else builds (and saves) it."""
  if path is not None and os.path.exists(path):
    vocab = Vocab.load(path)
    expected = {"min_freq": min_freq, "max_size": max_size, **metadata}
    if vocab.metadata == json.loads(json.dumps(expected)):
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


def _encode(vocab: Vocab, token_lists: Sequence[Sequence[str]], keep: int,
            add_eos: bool = False) -> tuple[Ragged, int]:
  """The ids of the first `keep` tokens of each list (+ eos), and how many lists were longer."""
  ids = Ragged.from_sequences([vocab.encode(t[:keep], add_eos=add_eos) for t in token_lists])
  return ids, sum(len(t) > keep for t in token_lists)


def _shift_in_bos(tgt_out: Ragged) -> Ragged:
  """[t1 .. tn, eos] -> [bos, t1 .. tn] for every sequence (the decoder input)."""
  flat = np.empty_like(tgt_out.flat)
  flat[1:] = tgt_out.flat[:-1]
  flat[tgt_out.starts[tgt_out.lengths > 0]] = BOS_ID
  return Ragged(flat, tgt_out.lengths)


class TaskData:
  """What the three tasks share: splits in memory, reports, files, and the loaders."""

  task: str = ""
  length_keys: dict[str, str | None] = {}
  options_class: type = SentimentOptions
  derived_fields: tuple[str, ...] = ()  # rebuilt from the others when read from the cache

  def __init__(self, options: Mapping[str, Any]):
    self.options = _make_options(self.options_class, options)
    self.splits: dict[str, Split] = {}
    self.report: dict[str, Any] = {}
    self.files_dir: str | None = None  # where `load` keeps the vocabulary and the cache

  @property
  def boundaries(self) -> dict[str, tuple[int, ...]]:
    raise NotImplementedError

  def vocab_files(self) -> dict[str, Vocab]:
    """File name -> vocabulary, for every vocabulary the task keeps."""
    raise NotImplementedError

  # ---- splits and batches

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

  # ---- reports

  def summary(self) -> str:
    """The report as a few readable lines (for logs)."""
    lines = [f"{self.task}: " + "; ".join(f"{name} {how}" for name, how in
                                          self.report["vocab"].items())]
    if "cache" in self.report:
      lines.append(f"  encoded splits {self.report['cache']}")
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

  # ---- the cache of encoded splits

  def cache_path(self, folder: str | os.PathLike) -> str:
    """Where the encoded splits for these options live inside `folder`."""
    key = json.dumps(_jsonable(self.options), sort_keys=True).encode()
    return os.path.join(os.fspath(folder),
                        f"{self.task}_data_{hashlib.sha1(key).hexdigest()[:12]}.npz")

  def save_cache(self, folder: str | os.PathLike) -> str:
    """Writes the encoded splits, references and report (atomically); returns the path."""
    path = self.cache_path(folder)
    arrays = {}
    for split, data in self.splits.items():
      for field, seqs in data.sequences.items():
        if field not in self.derived_fields:
          arrays[f"{split}__{field}__flat"] = seqs.flat
          arrays[f"{split}__{field}__lengths"] = seqs.lengths
      for name, values in data.scalars.items():
        arrays[f"{split}__{name}"] = values
    meta = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "task": self.task,
            "options": _jsonable(self.options),
            "report": {k: v for k, v in self.report.items() if k not in ("vocab", "cache")},
            "references": {s: d.references for s, d in self.splits.items()},
            "scalars": {s: sorted(d.scalars) for s, d in self.splits.items()},
            "sequences": {s: sorted(d.sequences) for s, d in self.splits.items()},
            "vocabs": {name: vocab.metadata for name, vocab in self.vocab_files().items()}}
    arrays["meta"] = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode(), np.uint8)
    tmp = f"{path}.tmp{os.getpid()}.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return path

  @classmethod
  def _from_cache(cls, folder: str, options: Mapping[str, Any]) -> tuple[TaskData | None, str]:
    """The task data read back from `folder`, or (None, why not)."""
    self = cls.__new__(cls)
    TaskData.__init__(self, options)
    path = self.cache_path(folder)
    if not os.path.exists(path):
      return None, "none yet"
    try:
      with np.load(path) as npz:
        meta = json.loads(npz["meta"].tobytes().decode())
        if (meta.get("format"), meta.get("version"), meta.get("options")) != (
            CACHE_FORMAT, CACHE_VERSION, _jsonable(self.options)):
          return None, f"{path} was written by another version or with other options"
        vocabs = {}
        for name, metadata in meta["vocabs"].items():
          vocab = Vocab.load(os.path.join(folder, name))
          if vocab.metadata != metadata:
            return None, f"{name} changed since {path} was written"
          vocabs[name] = vocab
        self._set_vocabs(vocabs)
        for split, refs in meta["references"].items():
          sequences = {field: Ragged(npz[f"{split}__{field}__flat"],
                                     npz[f"{split}__{field}__lengths"])
                       for field in meta["sequences"][split] if field not in self.derived_fields}
          scalars = {name: npz[f"{split}__{name}"] for name in meta["scalars"][split]}
          self.splits[split] = Split(self._derive(sequences), scalars, refs)
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as e:
      return None, f"{path} is unreadable ({type(e).__name__}: {e})"
    self.report = dict(meta["report"])
    self.report["vocab"] = {name: f"loaded from {os.path.join(folder, name)}" for name in vocabs}
    self.report["cache"] = f"loaded from {path}"
    return self, ""

  def _set_vocabs(self, vocabs: Mapping[str, Vocab]) -> None:
    raise NotImplementedError

  def _derive(self, sequences: dict[str, Ragged]) -> dict[str, Ragged]:
    return sequences

  @classmethod
  def _load(cls, name: str, splits: Sequence[str], source, data_dir, download: bool,
            build: Callable[[dict[str, Records], str], TaskData],
            options: Mapping[str, Any]) -> TaskData:
    """The body of every `load`: the cache if it is fresh, else read, encode and cache."""
    from pipelines import datasets  # pylint: disable=g-import-not-at-top
    folder = os.path.join(os.fspath(datasets.builder(
        name, source=source, data_dir=data_dir, download=download).data_dir), "tokenized")
    data, why = cls._from_cache(folder, options) if os.path.isdir(folder) else (None, "none yet")
    if data is not None:
      data.files_dir = folder
      return data
    records = {split: datasets.load(name, "validation" if split == "dev" else split,
                                    source=source, data_dir=data_dir, download=download)
               for split in splits}
    data = build(records, folder)
    data.files_dir = folder
    path = data.save_cache(folder)
    data.report["cache"] = (f"saved to {path}" if why == "none yet"
                            else f"rebuilt and saved to {path} (the old one: {why})")
    return data


# ---- the tasks


class SentimentData(TaskData):
  """IMDB sentiment classification: lowercased words and punctuation, labels 0/1.

  Args:
    train, test: the records of IMDB's train and test splits ({'text', 'label', ...}).
    vocab_dir: where the vocabulary files ('imdb_vocab.json', with bigrams also
      'imdb_bigram_vocab.json') are kept; None: not saved.
    **options: see SentimentOptions (max_len=256, boundaries, min_freq=5, max_size,
      dev_fraction=0.1, split_seed=0, bigrams=False, bigram_min_freq=3, bigram_max_size).
  """

  task = "imdb"
  options_class = SentimentOptions

  def __init__(self, train: Records, test: Records, *,
               vocab_dir: str | os.PathLike | None = None, **options):
    super().__init__(options)
    opts = self.options
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
    rng = np.random.default_rng(opts.split_seed)
    in_dev = np.zeros(len(labels["train"]), dtype=bool)
    for label in (0, 1):
      members = np.flatnonzero(labels["train"] == label)
      in_dev[rng.permutation(members)[:round(opts.dev_fraction * len(members))]] = True
    parts = {"train": np.flatnonzero(~in_dev), "dev": np.flatnonzero(in_dev),
             "test": np.arange(len(labels["test"]))}
    counts["dev"] = {"records": int(in_dev.sum()), "skipped_empty": 0}
    counts["train"]["records"] -= counts["dev"]["records"]

    path = None if vocab_dir is None else os.path.join(os.fspath(vocab_dir), "imdb_vocab.json")
    self.vocab, how = _vocab_for(
        path, lambda: [tokens["train"][i] for i in parts["train"]], min_freq=opts.min_freq,
        max_size=opts.max_size, metadata={"task": "imdb", "tokenizer": "imdb_tokenize",
                                          "train_examples": len(parts["train"]),
                                          "dev_fraction": opts.dev_fraction,
                                          "split_seed": opts.split_seed})
    self.report["vocab"] = {"imdb_vocab.json": how}
    self.bigram_vocab = None
    if opts.bigrams:
      path = (None if vocab_dir is None
              else os.path.join(os.fspath(vocab_dir), "imdb_bigram_vocab.json"))
      self.bigram_vocab, how = _vocab_for(
          path, lambda: (text_lib.word_bigrams(tokens["train"][i]) for i in parts["train"]),
          min_freq=opts.bigram_min_freq, max_size=opts.bigram_max_size,
          metadata={"task": "imdb", "tokenizer": "imdb_tokenize+word_bigrams",
                    "train_examples": len(parts["train"]), "dev_fraction": opts.dev_fraction,
                    "split_seed": opts.split_seed})
      self.report["vocab"]["imdb_bigram_vocab.json"] = how

    for split in SPLITS:
      source = "test" if split == "test" else "train"
      words = [tokens[source][i] for i in parts[split]]
      ids, truncated = _encode(self.vocab, words, opts.max_len)
      sequences = {"tokens": ids}
      if opts.bigrams:  # from the kept words only, so position t is word t's bigram
        sequences["bigrams"], _ = _encode(
            self.bigram_vocab, [text_lib.word_bigrams(w[:opts.max_len]) for w in words],
            opts.max_len)
      self.splits[split] = Split(sequences, {"label": labels[source][parts[split]],
                                             "index": np.arange(len(ids), dtype=np.int32)})
      counts[split].update(kept=len(ids), truncated={"tokens": truncated})
      fields = {"tokens": "tokens", **({"bigrams": "bigrams"} if opts.bigrams else {})}
      self._finish_report(split, counts[split], fields)

  @property
  def length_keys(self) -> dict[str, str | None]:  # bigrams are exactly as long as the tokens
    return {"tokens": "lengths", **({"bigrams": None} if self.options.bigrams else {})}

  @property
  def boundaries(self) -> dict[str, tuple[int, ...]]:
    bounds = self.options.boundaries
    return {"tokens": bounds, **({"bigrams": bounds} if self.options.bigrams else {})}

  def vocab_files(self) -> dict[str, Vocab]:
    files = {"imdb_vocab.json": self.vocab}
    if self.options.bigrams:
      files["imdb_bigram_vocab.json"] = self.bigram_vocab
    return files

  def _set_vocabs(self, vocabs: Mapping[str, Vocab]) -> None:
    self.vocab = vocabs["imdb_vocab.json"]
    self.bigram_vocab = vocabs.get("imdb_bigram_vocab.json")

  @classmethod
  def load(cls, source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
           download: bool = False, **options) -> SentimentData:
    """From pipelines.datasets.load (args as there; the shipped sample when `source` is None).

    The vocabulary and the encoded splits are kept in the prepared dataset's folder, under
    tokenized/ (see the module docstring). `options` as SentimentOptions.
    """
    return cls._load("imdb", ("train", "test"), source, data_dir, download,
                     lambda r, folder: cls(r["train"], r["test"], vocab_dir=folder, **options),
                     options)


class Seq2SeqData(TaskData):
  """Pairs of sequences: 'src' -> 'tgt_in' / 'tgt_out' (see the module docstring for the keys).

  Args:
    splits: split name ('train', and optionally 'dev', 'test') -> records with the task's two
      text fields.
    vocab_dir: where the vocabulary files are kept; None: not saved.
    **options: see the task's options class.
  """

  # Set by each task: the record fields, the text functions, one vocabulary or two.
  fields: tuple[str, str]
  tokenize: Callable[[Any], list[str]]
  detokenize: Callable[[Sequence[str]], str]
  shared_vocab = False
  length_keys = {"src": "src_len", "tgt_in": "tgt_len", "tgt_out": None}
  derived_fields = ("tgt_in",)

  def __init__(self, splits: Mapping[str, Records], *,
               vocab_dir: str | os.PathLike | None = None, **options):
    super().__init__(options)
    if "train" not in splits or set(splits) - set(SPLITS):
      raise ValueError(f"splits: expected 'train' and optionally 'dev', 'test', got "
                       f"{sorted(splits)}")
    opts = self.options
    src_field, tgt_field = self.src_field, self.tgt_field
    tokens, counts = {}, {}
    for split, records in splits.items():
      records = read_records(records)
      toks, _, empty = _tokenize(records, [src_field, tgt_field], self.tokenize)
      counts[split] = {"records": len(records), "skipped_empty": empty}
      toks, counts[split]["skipped_unequal"] = self._check_pairs(toks)
      tokens[split] = toks

    self._build_vocabs(tokens["train"], vocab_dir)
    for split, toks in tokens.items():
      src, src_cut = _encode(self.src_vocab, toks[src_field], opts.max_src_len - 1, add_eos=True)
      tgt_out, tgt_cut = _encode(self.tgt_vocab, toks[tgt_field], opts.max_tgt_len - 1,
                                 add_eos=True)
      self.splits[split] = Split(
          self._derive({"src": src, "tgt_out": tgt_out}),
          {"index": np.arange(len(src), dtype=np.int32)},
          references=None if split == "train" else [self.detokenize(t) for t in toks[tgt_field]])
      counts[split].update(kept=len(src), truncated={"src": src_cut, "tgt": tgt_cut})
      self._finish_report(split, counts[split], {"src": "src", "tgt": "tgt_out"})

  @property
  def src_field(self) -> str:
    return self.fields[1] if self.options.reverse else self.fields[0]

  @property
  def tgt_field(self) -> str:
    return self.fields[0] if self.options.reverse else self.fields[1]

  @property
  def boundaries(self) -> dict[str, tuple[int, ...]]:
    b = self.options.boundaries
    return {"src": b["src"], "tgt_in": b["tgt"], "tgt_out": b["tgt"]}

  def _derive(self, sequences: dict[str, Ragged]) -> dict[str, Ragged]:
    return {"src": sequences["src"], "tgt_in": _shift_in_bos(sequences["tgt_out"]),
            "tgt_out": sequences["tgt_out"]}

  def _check_pairs(self, toks: dict) -> tuple[dict, int]:
    """Hook for task-specific pair checks: returns the kept tokens and how many were dropped."""
    return toks, 0

  def _vocab_names(self) -> tuple[str, str]:
    if self.shared_vocab:
      return (f"{self.task}_shared_vocab.json",) * 2
    return f"{self.task}_{self.src_field}_vocab.json", f"{self.task}_{self.tgt_field}_vocab.json"

  def vocab_files(self) -> dict[str, Vocab]:
    src_name, tgt_name = self._vocab_names()
    return {src_name: self.src_vocab, tgt_name: self.tgt_vocab}

  def _set_vocabs(self, vocabs: Mapping[str, Vocab]) -> None:
    src_name, tgt_name = self._vocab_names()
    self.src_vocab, self.tgt_vocab = vocabs[src_name], vocabs[tgt_name]

  def _build_vocabs(self, train: dict[str, list[list[str]]], vocab_dir) -> None:
    opts = self.options
    meta = {"task": self.task, "tokenizer": self.tokenize.__name__,
            "train_examples": len(train[self.src_field])}
    names = self._vocab_names()
    # A shared vocabulary lists its fields in the task's order, so `reverse` reuses its file.
    groups = ([self.fields] if self.shared_vocab else [(self.src_field,), (self.tgt_field,)])
    vocabs, self.report["vocab"] = {}, {}
    for name, group in zip(names, groups):
      path = None if vocab_dir is None else os.path.join(os.fspath(vocab_dir), name)
      vocabs[name], self.report["vocab"][name] = _vocab_for(
          path, lambda group=group: [t for field in group for t in train[field]],
          min_freq=opts.min_freq, max_size=opts.max_size,
          metadata={**meta, "fields": list(group)})
    self.src_vocab, self.tgt_vocab = vocabs[names[0]], vocabs[names[-1]]

  def target_text(self, ids: Sequence[int] | np.ndarray) -> str:
    """Detokenized text of predicted target ids (stops at eos; drops pad and bos)."""
    return self.detokenize(self.tgt_vocab.decode(ids))

  def source_text(self, ids: Sequence[int] | np.ndarray) -> str:
    return self.detokenize(self.src_vocab.decode(ids))

  @classmethod
  def load(cls, source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
           download: bool = False, **options) -> Seq2SeqData:
    """From pipelines.datasets.load, like SentimentData.load; `options` as the options class."""
    return cls._load(cls.task, SPLITS, source, data_dir, download,
                     lambda r, folder: cls(r, vocab_dir=folder, **options), options)


class TranslationData(Seq2SeqData):
  """English -> French with d2l's fra-eng preprocessing; separate source and target vocabularies.

  Options: TranslationOptions (max_src_len=24, max_tgt_len=24, boundaries, min_freq=2,
  max_size, reverse=False).
  """

  task = "fra_eng"
  fields = ("en", "fr")
  options_class = TranslationOptions
  tokenize = staticmethod(text_lib.fra_eng_tokenize)
  detokenize = staticmethod(text_lib.fra_eng_detokenize)


class CoupletData(Seq2SeqData):
  """Chinese couplets, upper line -> lower line, character tokens, one shared vocabulary.

  Pairs whose lines differ in length are left out and counted ('skipped_unequal'). Options:
  CoupletOptions (max_src_len=33, max_tgt_len=33, boundaries, min_freq=2, max_size).
  """

  task = "couplet"
  fields = ("upper", "lower")
  options_class = CoupletOptions
  tokenize = staticmethod(text_lib.couplet_tokenize)
  detokenize = staticmethod(text_lib.couplet_detokenize)
  shared_vocab = True

  def _check_pairs(self, toks: dict) -> tuple[dict, int]:
    upper, lower = toks["upper"], toks["lower"]
    equal = [i for i, (u, l) in enumerate(zip(upper, lower)) if len(u) == len(l)]
    if len(equal) == len(upper):
      return toks, 0
    return ({"upper": [upper[i] for i in equal], "lower": [lower[i] for i in equal]},
            len(upper) - len(equal))
