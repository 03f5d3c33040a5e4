"""What the tasks share: records, option checks, splits in memory, vocabularies, reports, the cache.

A task module (sentiment.py, seq2seq.py and the two seq2seq tasks) subclasses `TaskData`, names
its options dataclass in `options_class`, and fills a fresh instance in its `from_records`. The
package docstring (pipelines/tasks/__init__.py) describes the batches, the files and the report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from pipelines.batching import Batch, Batcher, Ragged, TrainIterator
from pipelines.subword import SUFFIX as SUBWORD_SUFFIX
from pipelines.subword import SubwordVocab
from pipelines.vocab import BOS_ID, EOS_ID, UNK_ID, Vocab

Records = Sequence[Mapping[str, Any]]  # a list of dicts or a tfds data source

SPLITS = ("train", "dev", "test")
CACHE_FORMAT, CACHE_VERSION = "attention-zoo-task-cache", 1


AnyVocab = Vocab | SubwordVocab
"""A word vocabulary (pipelines.vocab) or a SentencePiece model (pipelines.subword): the same ids
0-3 and the same encode / decode / save / load."""


def read_vocab_file(path: str | os.PathLike) -> AnyVocab:
  """A vocabulary file by its name: a SentencePiece model ('.model'), else a Vocab's JSON."""
  if os.fspath(path).endswith(SUBWORD_SUFFIX):
    return SubwordVocab.load(path)
  return Vocab.load(path)


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


# ---- option checks


def check_boundaries(bounds: Sequence[int], max_len: int, name: str) -> tuple[int, ...]:
  """`bounds` as a tuple of ints; ValueError naming `name` unless it ends at `max_len`."""
  bounds = tuple(int(b) for b in bounds)
  if not bounds or bounds[-1] != max_len:
    raise ValueError(f"{name} {bounds} must end at the maximum length {max_len}")
  return bounds


def quarter_boundaries(max_len: int) -> tuple[int, ...]:
  """The default buckets: max_len/4, /2, 3/4 and max_len (without repeats, each >= 1)."""
  return tuple(sorted({max(1, max_len * k // 4) for k in range(1, 5)}))


def _jsonable(options) -> dict:
  return json.loads(json.dumps(dataclasses.asdict(options)))


# ---- records -> tokens -> ids


@dataclasses.dataclass
class Split:
  """One split in memory: id sequences per field, per-example values, for scoring the reference
  texts and the source texts that group them (sequence-to-sequence evaluation splits), and a
  task's raw texts by field, by example index (sentence pairs, for reading errors)."""
  sequences: dict[str, Ragged]
  scalars: dict[str, np.ndarray]
  references: list[str] | None = None
  sources: list[str] | None = None
  texts: dict[str, list[str]] | None = None


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


def load_or_build_vocab(path: str | None, token_lists: Callable[[], Sequence[Sequence[str]]], *,
                        min_freq: int, max_size: int | None, metadata: dict) -> tuple[Vocab, str]:
  """Loads the vocabulary at `path` if it was built the same way, else builds (and saves) it.

  Returns:
    (the vocabulary, how it came about: the line of `report['vocab']`).
  """
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


def tokenize_records(records: list[Mapping[str, Any]], fields: Sequence[str],
                     tokenize: Callable[[Any], list[str]]
                     ) -> tuple[dict[str, list[list[str]]], list[int], int]:
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


def encode_truncated(vocab: Vocab, token_lists: Sequence[Sequence[str]], keep: int,
                     add_eos: bool = False) -> tuple[Ragged, int]:
  """The ids of the first `keep` tokens of each list (+ eos), and how many lists were longer."""
  ids = Ragged.from_sequences([vocab.encode(t[:keep], add_eos=add_eos) for t in token_lists])
  return ids, sum(len(t) > keep for t in token_lists)


# ---- the base class


class TaskData:
  """What the tasks share: splits in memory, vocabularies, reports, files, and the loaders.

  `TaskData(options)` is an empty task object with checked options; a task's `from_records`
  (encoding records) and `load` (the cache, or the prepared dataset) fill it.

  Args:
    options: option name -> value, as the task's `options_class` takes them.

  Class attributes each task sets:
    task: the dataset's name ('imdb', 'fra_eng', 'couplet'), also the prefix of its files.
    options_class: the task's frozen options dataclass. TaskData names none: a subclass that
      declares none is refused with a TypeError when it is first built.
    length_keys: sequence field -> the batch key of its lengths (None: left out).
    derived_fields: sequence fields rebuilt from the others when read from the cache.
  """

  task: str = ""
  options_class: type
  length_keys: dict[str, str | None] = {}
  derived_fields: tuple[str, ...] = ()

  def __init__(self, options: Mapping[str, Any]):
    self.options = self.make_options(options)
    self.splits: dict[str, Split] = {}
    self.vocabs: dict[str, AnyVocab] = {}  # file name -> vocabulary
    self.report: dict[str, Any] = {}
    self.files_dir: str | None = None  # where `load` keeps the vocabulary and the cache

  @classmethod
  def make_options(cls, options: Mapping[str, Any]):
    """The task's options dataclass from keyword values; unknown names are a ValueError."""
    options_class = getattr(cls, "options_class", None)
    if not (isinstance(options_class, type) and dataclasses.is_dataclass(options_class)):
      raise TypeError(f"{cls.__name__} declares no options_class (the options dataclass every "
                      f"TaskData subclass names for itself), got {options_class!r}")
    names = {f.name for f in dataclasses.fields(options_class)}
    unknown = set(options) - names
    if unknown:
      raise ValueError(f"unknown options {sorted(unknown)}; the options are {sorted(names)}")
    return options_class(**options)

  @property
  def boundaries(self) -> dict[str, tuple[int, ...]]:
    raise NotImplementedError(f"{type(self).__name__} does not define its bucket boundaries")

  def vocab_names(self) -> tuple[str, ...]:
    """The file names of the vocabularies these options need (the keys of `vocabs`)."""
    raise NotImplementedError(f"{type(self).__name__} does not name its vocabulary files")

  def vocab_files(self) -> dict[str, AnyVocab]:
    """File name -> vocabulary, for every vocabulary the task keeps."""
    return dict(self.vocabs)

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
                    shuffle: bool = True, process_index: int | None = None,
                    process_count: int | None = None) -> TrainIterator:
    """Endless training batches, shuffled unless `shuffle` is False (then in order, see
    pipelines.batching); `get_state()` / `set_state()` resume exactly."""
    return self.batcher("train", batch_size, process_index=process_index,
                        process_count=process_count).train_batches(
                            seed, drop_remainder=drop_remainder, shuffle=shuffle)

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
            "sources": {s: d.sources for s, d in self.splits.items()},
            "texts": {s: d.texts for s, d in self.splits.items()},
            "extra": self.cache_extra(),
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
    data = cls(options)
    path = data.cache_path(folder)
    if not os.path.exists(path):
      return None, "none yet"
    try:
      with np.load(path) as npz:
        meta = json.loads(npz["meta"].tobytes().decode())
        if (meta.get("format"), meta.get("version"), meta.get("options")) != (
            CACHE_FORMAT, CACHE_VERSION, _jsonable(data.options)):
          return None, f"{path} was written by another version or with other options"
        if sorted(meta["vocabs"]) != sorted(set(data.vocab_names())):
          return None, (f"{path} names the vocabularies {sorted(meta['vocabs'])}, not "
                        f"{sorted(set(data.vocab_names()))}")
        for name, metadata in meta["vocabs"].items():
          vocab = read_vocab_file(os.path.join(folder, name))
          if vocab.metadata != metadata:
            return None, f"{name} changed since {path} was written"
          data.vocabs[name] = vocab
        for split, refs in meta["references"].items():
          sequences = {field: Ragged(npz[f"{split}__{field}__flat"],
                                     npz[f"{split}__{field}__lengths"])
                       for field in meta["sequences"][split] if field not in data.derived_fields}
          scalars = {name: npz[f"{split}__{name}"] for name in meta["scalars"][split]}
          data.splits[split] = Split(data._derive(sequences), scalars, refs,
                                     meta.get("sources", {}).get(split),
                                     meta.get("texts", {}).get(split))
        data.restore_extra(meta.get("extra") or {})
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as e:
      return None, f"{path} is unreadable ({type(e).__name__}: {e})"
    data.report = dict(meta["report"])
    data.report["vocab"] = {name: f"loaded from {os.path.join(folder, name)}"
                            for name in data.vocabs}
    data.report["cache"] = f"loaded from {path}"
    return data, ""

  def _derive(self, sequences: dict[str, Ragged]) -> dict[str, Ragged]:
    return sequences

  def cache_extra(self) -> dict[str, Any]:
    """What else a task keeps in the cache beside its splits (JSON-able; nothing by default)."""
    return {}

  def restore_extra(self, extra: Mapping[str, Any]) -> None:
    """Takes back what `cache_extra` saved."""
    del extra

  @classmethod
  def _load(cls, name: str, splits: Sequence[str], source, data_dir, download: bool,
            build: Callable[[dict[str, Records], str], TaskData],
            options: Mapping[str, Any]) -> TaskData:
    """The body of every `load`: the cache if it is fresh, else read, encode and cache."""
    from pipelines import datasets  # pylint: disable=g-import-not-at-top
    cls.make_options(options)  # a wrong option fails before a dataset is prepared or read
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
