"""Pairs of texts -> 'src' / 'tgt_in' / 'tgt_out' ids: what translation and couplets share.

A task subclasses `Seq2SeqData` with its record fields, tokenizer, detokenizer, options class and
whether the two sides share one vocabulary (translation.py, couplet.py).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pipelines.batching import Ragged
from pipelines.tasks.common import (SPLITS, Records, Split, TaskData, encode_truncated,
                                    load_or_build_vocab, read_records, tokenize_records)
from pipelines.vocab import BOS_ID, Vocab


def shift_in_bos(tgt_out: Ragged) -> Ragged:
  """[t1 .. tn, eos] -> [bos, t1 .. tn] for every sequence (the decoder input)."""
  flat = np.empty_like(tgt_out.flat)
  flat[1:] = tgt_out.flat[:-1]
  flat[tgt_out.starts[tgt_out.lengths > 0]] = BOS_ID
  return Ragged(flat, tgt_out.lengths)


class Seq2SeqData(TaskData):
  """Pairs of sequences: 'src' -> 'tgt_in' / 'tgt_out' (see the pipelines.tasks docstring).

  Build it with `from_records(splits, ...)` or `load(...)` of a task subclass. Its options (a
  TranslationOptions or a subclass) have max_src_len, max_tgt_len, boundaries {'src', 'tgt'},
  min_freq, max_size and reverse.
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
    tokens, counts = {}, {}
    for split, records in splits.items():
      toks, _, empty = tokenize_records(records, [src_field, tgt_field], self.tokenize)
      counts[split] = {"records": len(records), "skipped_empty": empty}
      toks, counts[split]["skipped_unequal"] = self._check_pairs(toks)
      tokens[split] = toks

    self._build_vocabs(tokens["train"], vocab_dir)
    for split, toks in tokens.items():
      src, src_cut = encode_truncated(self.src_vocab, toks[src_field], opts.max_src_len - 1,
                                      add_eos=True)
      tgt_out, tgt_cut = encode_truncated(self.tgt_vocab, toks[tgt_field], opts.max_tgt_len - 1,
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
    return {"src": sequences["src"], "tgt_in": shift_in_bos(sequences["tgt_out"]),
            "tgt_out": sequences["tgt_out"]}

  def _check_pairs(self, toks: dict) -> tuple[dict, int]:
    """Hook for task-specific pair checks: returns the kept tokens and how many were dropped."""
    return toks, 0

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
    meta = {"task": self.task, "tokenizer": self.tokenize.__name__,
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
