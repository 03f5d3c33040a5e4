"""Pairs of texts -> 'src' / 'tgt_in' / 'tgt_out' ids: what translation and couplets share.

A task subclasses `Seq2SeqData` with its record fields, tokenizer, detokenizer, options class (a
`Seq2SeqOptions` subclass) and whether the two sides share one vocabulary (translation.py,
couplet.py).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pipelines.batching import Ragged
from pipelines.checks import positive_int
from pipelines.tasks.common import (SPLITS, Records, Split, TaskData, check_boundaries,
                                    encode_truncated, load_or_build_vocab, quarter_boundaries,
                                    read_records, tokenize_records)
from pipelines.text import as_text
from pipelines.vocab import BOS_ID, Vocab


@dataclasses.dataclass(frozen=True)
class Seq2SeqOptions:
  """How pairs of texts become ids (each task subclasses it with its own defaults).

  Attributes:
    max_src_len, max_tgt_len: the largest 'src' and 'tgt_in' widths, eos/bos included: longer
      texts keep their first max - 1 tokens (counted).
    boundaries: bucket widths, one sequence for both sides or a mapping {'src': ..., 'tgt': ...},
      ascending and ending at the maximum lengths; None: `default_boundaries` when it ends at the
      maximum length, else four equal steps.
    min_freq, max_size: word vocabulary options (see Vocab.build); min_freq 2 as d2l.
    reverse: swap the two sides (French -> English, lower line -> upper line).
  """
  max_src_len: int = 24
  max_tgt_len: int = 24
  boundaries: Any = None
  min_freq: int = 2
  max_size: int | None = None
  reverse: bool = False
  default_boundaries = (8, 12, 16, 24)

  def __post_init__(self):
    for name in ("max_src_len", "max_tgt_len"):
      positive_int(getattr(self, name), name, minimum=2)  # one token and eos/bos
    given = self.boundaries
    if not isinstance(given, Mapping):
      given = {"src": given, "tgt": given}
    unknown = set(given) - {"src", "tgt"}
    if unknown:
      raise ValueError(f"boundaries: expected the keys 'src' and 'tgt', got {sorted(given)}")
    out = {}
    for side, max_len in (("src", self.max_src_len), ("tgt", self.max_tgt_len)):
      default = (self.default_boundaries if self.default_boundaries[-1] == max_len
                 else quarter_boundaries(max_len))
      out[side] = check_boundaries(given.get(side) or default, max_len, f"boundaries[{side!r}]")
    object.__setattr__(self, "boundaries", out)


def shift_in_bos(tgt_out: Ragged) -> Ragged:
  """[t1 .. tn, eos] -> [bos, t1 .. tn] for every sequence (the decoder input)."""
  flat = np.empty_like(tgt_out.flat)
  flat[1:] = tgt_out.flat[:-1]
  flat[tgt_out.starts[tgt_out.lengths > 0]] = BOS_ID
  return Ragged(flat, tgt_out.lengths)


class Seq2SeqData(TaskData):
  """Pairs of sequences: 'src' -> 'tgt_in' / 'tgt_out' (see the pipelines.tasks docstring).

  Build it with `from_records(splits, ...)` or `load(...)` of a task subclass. Its options (a
  Seq2SeqOptions subclass) have max_src_len, max_tgt_len, boundaries {'src', 'tgt'}, min_freq,
  max_size and reverse.

  The evaluation splits keep two texts per example beside the ids: `references(split)`, what
  the target side is scored against, and `sources(split)`, what groups the several references of
  one source; both are `scoring_text` of the record's text (the detokenized tokens, unless a
  task keeps the raw text).

  Hooks a task may override: `fit_tokenizer` (learn a tokenizer from the training records before
  any text is tokenized), `check_pairs` (leave out pairs), `scoring_text`.
  """

  # Set by each task: the record fields, the text functions, one vocabulary or two.
  fields: tuple[str, str]
  tokenize: Callable[[Any], list[str]]
  detokenize: Callable[[Sequence[str]], str]
  shared_vocab = False
  length_keys = {"src": "src_len", "tgt_in": "tgt_len", "tgt_out": None}
  derived_fields = ("tgt_in",)

  @classmethod
  def from_records(cls, splits: Mapping[str, Records], *,
                   vocab_dir: str | os.PathLike | None = None, **options) -> Seq2SeqData:
    """Encodes the pairs of every split; the vocabularies come from 'train' only.

    Args:
      splits: split name ('train', and optionally 'dev', 'test') -> records with the task's two
        text fields.
      vocab_dir: where the vocabulary files are kept; None: not saved.
      **options: see the task's options class.
    """
    data = cls(options)
    if "train" not in splits or set(splits) - set(SPLITS):
      raise ValueError(f"splits: expected 'train' and optionally 'dev', 'test', got "
                       f"{sorted(splits)}")
    data._encode_records({split: read_records(records) for split, records in splits.items()},
                         vocab_dir)
    return data

  def _encode_records(self, splits: Mapping[str, list[Mapping[str, Any]]],
                      vocab_dir: str | os.PathLike | None) -> None:
    opts = self.options
    src_field, tgt_field = self.src_field, self.tgt_field
    self.fit_tokenizer(splits["train"], vocab_dir)
    tokens, texts, counts = {}, {}, {}
    for split, records in splits.items():
      toks, kept, empty = tokenize_records(records, [src_field, tgt_field], self.tokenize)
      keep = self.check_pairs(toks)
      counts[split] = {"records": len(records), "skipped_empty": empty,
                       "skipped_unequal": len(kept) - len(keep)}
      tokens[split] = {field: [toks[field][i] for i in keep] for field in toks}
      texts[split] = {field: None for field in toks}
      if split != "train":  # the texts of the evaluation splits, for scoring
        for field in toks:
          raw = (as_text(records[kept[i]][field]).strip() for i in keep)
          texts[split][field] = list(map(self.scoring_text, raw, tokens[split][field]))

    self._build_vocabs(tokens["train"], vocab_dir)
    for split, toks in tokens.items():
      src, src_cut = encode_truncated(self.src_vocab, toks[src_field], opts.max_src_len - 1,
                                      add_eos=True)
      tgt_out, tgt_cut = encode_truncated(self.tgt_vocab, toks[tgt_field], opts.max_tgt_len - 1,
                                          add_eos=True)
      self.splits[split] = Split(
          self._derive({"src": src, "tgt_out": tgt_out}),
          {"index": np.arange(len(src), dtype=np.int32)},
          references=texts[split][tgt_field], sources=texts[split][src_field])
      counts[split].update(kept=len(src), truncated={"src": src_cut, "tgt": tgt_cut})
      self._finish_report(split, counts[split], {"src": "src", "tgt": "tgt_out"})

  # ---- hooks

  def fit_tokenizer(self, train: list[Mapping[str, Any]],
                    vocab_dir: str | os.PathLike | None) -> None:
    """Learns what tokenizing needs from the training records, before any text is tokenized
    (nothing by default: word vocabularies are built from the tokens, by `_build_vocabs`)."""
    del train, vocab_dir

  def check_pairs(self, tokens: dict[str, list[list[str]]]) -> list[int]:
    """The positions of the tokenized pairs to keep (all by default); the others are counted
    as 'skipped_unequal'."""
    return list(range(len(tokens[self.fields[0]])))

  def scoring_text(self, raw: str, tokens: list[str]) -> str:
    """The text kept for one side of an evaluation example (references, sources): by default
    the detokenized tokens, so a hypothesis and its reference are normalised alike."""
    del raw
    return self.detokenize(tokens)

  @property
  def tokenizer_name(self) -> str:
    """The tokenizer recorded in the word vocabularies' metadata."""
    return self.tokenize.__name__

  def sources(self, split: str) -> list[str]:
    """Source texts of an evaluation split, by example index (equal for the examples of one
    source sentence, so they group its references)."""
    sources = self._split(split).sources
    if sources is None:
      raise ValueError(f"{self.task} keeps no source texts for split {split!r}")
    return sources

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
    return {"src": sequences["src"], "tgt_in": shift_in_bos(sequences["tgt_out"]),
            "tgt_out": sequences["tgt_out"]}

  def _vocab_names(self) -> tuple[str, str]:
    """The (source, target) vocabulary file names; the same name twice when shared."""
    if self.shared_vocab:
      return (f"{self.task}_shared_vocab.json",) * 2
    return f"{self.task}_{self.src_field}_vocab.json", f"{self.task}_{self.tgt_field}_vocab.json"

  def vocab_names(self) -> tuple[str, ...]:
    return tuple(dict.fromkeys(self._vocab_names()))

  @property
  def src_vocab(self) -> Vocab:
    return self.vocabs[self._vocab_names()[0]]

  @property
  def tgt_vocab(self) -> Vocab:
    return self.vocabs[self._vocab_names()[1]]

  def _build_vocabs(self, train: dict[str, list[list[str]]], vocab_dir) -> None:
    opts = self.options
    meta = {"task": self.task, "tokenizer": self.tokenizer_name,
            "train_examples": len(train[self.src_field])}
    # A shared vocabulary lists its fields in the task's order, so `reverse` reuses its file.
    groups = ([self.fields] if self.shared_vocab else [(self.src_field,), (self.tgt_field,)])
    self.report["vocab"] = {}
    for name, group in zip(self.vocab_names(), groups):
      path = None if vocab_dir is None else os.path.join(os.fspath(vocab_dir), name)
      self.vocabs[name], self.report["vocab"][name] = load_or_build_vocab(
          path, lambda group=group: [t for field in group for t in train[field]],
          min_freq=opts.min_freq, max_size=opts.max_size,
          metadata={**meta, "fields": list(group)})

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
                     lambda r, folder: cls.from_records(r, vocab_dir=folder, **options), options)
