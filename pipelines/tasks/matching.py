"""Chinese question pairs (AFQMC, LCQMC): two sentences -> their ids, the joined pair, a 0/1 label.

Each sentence is tokenized on its own (`MatchingOptions.tokenizer`: characters with ASCII words
whole, pipelines.text.chinese_chars_tokenize, or the pieces of a SentencePiece model trained on
the training sentences) and cut to its first `max_len` tokens; the vocabulary is built from the
training split only, over both sentences. The joined pair is the input of a cross-encoder (one
sequence for both sentences, BERT-style):

    pair      [CLS] a_1 .. a_m [SEP] b_1 .. b_n [SEP]      [CLS] = BOS_ID (2), [SEP] = EOS_ID (3)
    segments    0    0  ..  0    0    1  ..  1    1        (0 on padding)

so a pair is m + n + 3 ids long, at most 2 * max_len + 3. 'pair' and 'segments' are rebuilt from
'a' and 'b' (`join_pairs`), not stored in the cache.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np

from pipelines import subword
from pipelines import text as text_lib
from pipelines.batching import Batch, Batcher, Ragged
from pipelines.checks import positive_int
from pipelines.sources import SourceError, decode_utf8, is_header, read_bytes, split_lines
from pipelines.tasks.common import (SPLITS, Records, Split, TaskData, check_boundaries,
                                    encode_truncated, load_or_build_vocab, quarter_boundaries,
                                    read_records)
from pipelines.vocab import BOS_ID, EOS_ID, read_bert_vocab

CLS_ID, SEP_ID = BOS_ID, EOS_ID
CHARS_VOCAB_FILE = "question_pairs_chars_vocab.json"
TOKENIZERS = ("chars", "subword")
PAIR_ORDERS = ("as_given", "both")
FIELDS = ("sentence1", "sentence2")


@dataclasses.dataclass(frozen=True)
class MatchingOptions:
  """How question pairs become ids.

  Attributes:
    max_len: tokens kept per sentence (longer sentences keep their first `max_len`, counted). 48
      tokens of 'chars' hold 99.7% of AFQMC's sentences whole (median 12 characters, longest
      112); of a 4,000-piece 'subword' model, all but 5 of the 54,908 training sentences.
    boundaries: per-sentence bucket widths, ascending, the last == max_len; None: max_len/4, /2,
      3/4, 1. The joined pair's widths are 2 * width + 3.
    tokenizer: 'chars' (pipelines.text.chinese_chars_tokenize, a word vocabulary following
      min_freq and max_size) or 'subword' (a SentencePiece model of at most `subword_vocab_size`
      pieces trained on the training sentences, pipelines.subword).
    min_freq, max_size: the character vocabulary's options (see Vocab.build).
    subword_vocab_size: the most pieces of the SentencePiece model ('subword' only).
    pair_order: 'as_given', or 'both': the training split also holds every pair swapped (sentence2
      first) with the same label, as data augmentation (the examples after the given ones); dev
      and test stay as given. The vocabulary is counted over the pairs as given either way.
    vocab_file: a BERT vocab.txt (bert-base-chinese's: 21,128 tokens, one a line) whose tokens
      are the vocabulary instead of the training split's characters ('chars' only; min_freq and
      max_size are then unused; pipelines.vocab.read_bert_vocab). Each token of the 'chars'
      tokenizer is looked up whole: a Chinese character is one token, and a non-Chinese word
      that is not a line of the file (no lowercasing, no WordPiece split) is unknown. None: the
      vocabulary is built from the training split.
  """
  max_len: int = 48
  boundaries: tuple[int, ...] | None = None
  tokenizer: Literal["chars", "subword"] = "chars"
  min_freq: int = 2
  max_size: int | None = None
  subword_vocab_size: int = 4000
  pair_order: Literal["as_given", "both"] = "as_given"
  vocab_file: str | None = None

  def __post_init__(self):
    positive_int(self.max_len, "max_len")
    if self.vocab_file is not None:
      if self.tokenizer != "chars":
        raise ValueError(f"vocab_file: a BERT vocabulary is read for tokenizer 'chars', not "
                         f"{self.tokenizer!r}")
      if not os.path.isfile(self.vocab_file):
        raise SourceError(f"vocab_file: {self.vocab_file} is not a file (bert-base-chinese's "
                         "vocab.txt, one token a line)")
    if self.tokenizer not in TOKENIZERS:
      raise ValueError(f"tokenizer: expected one of {list(TOKENIZERS)}, got {self.tokenizer!r}")
    if self.pair_order not in PAIR_ORDERS:
      raise ValueError(f"pair_order: expected one of {list(PAIR_ORDERS)}, got "
                       f"{self.pair_order!r}")
    positive_int(self.subword_vocab_size, "subword_vocab_size", minimum=subword.MIN_VOCAB_SIZE)
    object.__setattr__(self, "boundaries", check_boundaries(
        self.boundaries or quarter_boundaries(self.max_len), self.max_len, "boundaries"))


@functools.lru_cache(maxsize=8)
def _tag_of(path: str, mtime_ns: int, size: int) -> str:
  del mtime_ns, size  # the cache key: a changed file is hashed again
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()[:12]


def _file_tag(path: str) -> str:
  """The first 12 hex digits of the sha256 of the file at `path`."""
  stat = os.stat(path)
  return _tag_of(os.path.abspath(path), stat.st_mtime_ns, stat.st_size)


def pair_width(width: int) -> int:
  """The joined pair's width for a per-sentence width: [CLS] a [SEP] b [SEP]."""
  return 2 * width + 3


def join_pairs(a: Ragged, b: Ragged) -> tuple[Ragged, Ragged]:
  """The joined pairs [CLS] a [SEP] b [SEP] and their segments (0 up to the first [SEP], 1 after).

  Args:
    a, b: the first and second sentences' ids, N each.

  Returns:
    (pair, segments): Ragged, N sequences of length len(a_i) + len(b_i) + 3 each.
  """
  if len(a) != len(b):
    raise ValueError(f"join_pairs: {len(a)} first sentences but {len(b)} second ones")
  lengths = a.lengths.astype(np.int64) + b.lengths + 3
  starts = np.cumsum(lengths) - lengths
  owner = np.repeat(np.arange(len(a)), lengths)              # (T,) the pair of each position
  within = np.arange(int(lengths.sum())) - starts[owner]    # (T,) the position inside its pair
  len_a = a.lengths[owner]
  second = within >= len_a + 2                                # b and the last [SEP]
  flat = np.full(within.shape, SEP_ID, np.int32)
  flat[within == 0] = CLS_ID
  flat[(within >= 1) & (within <= len_a)] = a.flat          # a's ids, pair by pair, in order
  flat[second & (within < lengths[owner] - 1)] = b.flat
  return Ragged(flat, lengths), Ragged(second.astype(np.int32), lengths)


class MatchingData(TaskData):
  """Sentence-pair matching (AFQMC, LCQMC): does sentence2 mean the same as sentence1?

  Build it with `MatchingData.from_records({'train': ..., 'dev': ..., 'test': ...})` or
  `MatchingData.load(...)`. Options: MatchingOptions (max_len=48, boundaries, tokenizer='chars',
  min_freq=2, max_size, subword_vocab_size=4000, pair_order='as_given', vocab_file).

  Batches (numpy, leading axis b; pipelines.batching):
    'a' int32 (b, La), 'a_len' int32 (b,): sentence1's ids (no special tokens), padded with 0;
    'b' int32 (b, Lb), 'b_len' int32 (b,): sentence2's ids;
    'pair' int32 (b, Lp), 'pair_len' int32 (b,): [CLS] a [SEP] b [SEP] (CLS_ID = 2, SEP_ID = 3);
    'segments' int32 (b, Lp): 0 on [CLS] a [SEP], 1 on b [SEP], 0 on padding;
    'label' int32 (b,): 1 same meaning, 0 not; 'index' int32 (b,): the position in the split
    (`texts(split)[index]` are its sentences); 'weight' float32 (b,): 0.0 on filler rows.
  La and Lb are a bucket's per-sentence width (MatchingOptions.boundaries), Lp = 2 * width + 3.

  Attributes beyond TaskData's: `unlabelled_texts`, the sentences of the unlabelled pairs (CLUE's
  test.json: sentence1 and sentence2 of each pair in turn), or [] (not used for training here).
  """

  task = "question_pairs"
  options_class = MatchingOptions
  length_keys = {"a": "a_len", "b": "b_len", "pair": "pair_len", "segments": None}
  derived_fields = ("pair", "segments")

  def __init__(self, options: Mapping[str, Any]):
    super().__init__(options)
    self.unlabelled_texts: list[str] = []

  @classmethod
  def from_records(cls, splits: Mapping[str, Records], *, unlabelled: Records | None = None,
                   vocab_dir: str | os.PathLike | None = None, **options) -> MatchingData:
    """Encodes the pairs of every split; the vocabulary comes from 'train' only.

    Args:
      splits: 'train' and optionally 'dev', 'test' -> records {'sentence1', 'sentence2', 'label'
        (0 or 1)} (str or UTF-8 bytes).
      unlabelled: records {'sentence1', 'sentence2'} whose sentences are kept as
        `unlabelled_texts`; None: none.
      vocab_dir: where the vocabulary file is kept; None: not saved.
      **options: see MatchingOptions.
    """
    data = cls(options)
    if "train" not in splits or set(splits) - set(SPLITS):
      raise ValueError(f"splits: expected 'train' and optionally 'dev', 'test', got "
                       f"{sorted(splits)}")
    data._encode_records({split: read_records(records) for split, records in splits.items()},
                         vocab_dir)
    if unlabelled is not None:
      records = read_records(unlabelled)
      data.unlabelled_texts = [text_lib.as_text(r[field]) for r in records for field in FIELDS]
      data.report["unlabelled"] = {"records": len(records)}
    return data

  def _encode_records(self, splits: Mapping[str, list[Mapping[str, Any]]],
                      vocab_dir: str | os.PathLike | None) -> None:
    opts = self.options
    if opts.tokenizer == "subword":  # the tokenizer itself is learnt from the training sentences
      self._fit_subwords(splits["train"], vocab_dir)
    pairs, counts = {}, {}
    for split, records in splits.items():
      pairs[split], counts[split] = self._tokenize_split(split, records)
    if opts.tokenizer == "chars":
      self._build_chars_vocab(pairs["train"], vocab_dir)
    for split, (texts, tokens, labels) in pairs.items():
      a, cut_a = encode_truncated(self.vocab, tokens["sentence1"], opts.max_len)
      b, cut_b = encode_truncated(self.vocab, tokens["sentence2"], opts.max_len)
      counts[split].update(kept=len(a), truncated={"a": cut_a, "b": cut_b})
      if split == "train" and opts.pair_order == "both":
        a, b = (Ragged(np.concatenate([a.flat, b.flat]), np.concatenate([a.lengths, b.lengths])),
                Ragged(np.concatenate([b.flat, a.flat]), np.concatenate([b.lengths, a.lengths])))
        texts = {"sentence1": texts["sentence1"] + texts["sentence2"],
                 "sentence2": texts["sentence2"] + texts["sentence1"]}
        labels = np.concatenate([labels, labels])
        counts[split].update(kept=len(a), swapped_added=len(a) // 2)
      self.splits[split] = Split(self._derive({"a": a, "b": b}),
                                 {"label": labels, "index": np.arange(len(a), dtype=np.int32)},
                                 texts=texts)
      self._finish_report(split, counts[split], {"a": "a", "b": "b"})

  def _tokenize_split(self, split: str, records: list[Mapping[str, Any]]):
    """((texts, tokens, labels) of the pairs whose sentences both have tokens, the counts)."""
    texts = {field: [] for field in FIELDS}
    tokens = {field: [] for field in FIELDS}
    labels, empty = [], 0
    for i, record in enumerate(records):
      try:
        raw = [text_lib.as_text(record[field]) for field in FIELDS]
        label = record["label"]
      except KeyError as e:
        raise ValueError(f"{split} record {i} has no field {e}; it has {sorted(record)}") from None
      if int(label) not in (0, 1):
        raise ValueError(f"{split} record {i}: the label must be 0 or 1, got {label!r} (an "
                         f"unlabelled pair belongs in `unlabelled`)")
      parts = [self.tokenize(t) for t in raw]
      if not all(parts):
        empty += 1
        continue
      for field, t, part in zip(FIELDS, raw, parts):
        texts[field].append(t)
        tokens[field].append(part)
      labels.append(int(label))
    counts = {"records": len(records), "skipped_empty": empty}
    return (texts, tokens, np.asarray(labels, dtype=np.int32)), counts

  # ---- vocabularies

  def vocab_names(self) -> tuple[str, ...]:
    if self.options.tokenizer == "subword":
      return (f"{self.task}_sentencepiece_{self.options.subword_vocab_size}{subword.SUFFIX}",)
    if self.options.vocab_file is not None:  # named by its contents: an edited file is reread
      return (f"{self.task}_bert_vocab_{_file_tag(self.options.vocab_file)}.json",)
    return (CHARS_VOCAB_FILE,)

  @property
  def vocab(self):
    """The one vocabulary of both sentences (a Vocab, or a SubwordVocab for 'subword')."""
    return self.vocabs[self.vocab_names()[0]]

  def _path(self, vocab_dir) -> str | None:
    return None if vocab_dir is None else os.path.join(os.fspath(vocab_dir), self.vocab_names()[0])

  def _fit_subwords(self, train: list[Mapping[str, Any]], vocab_dir) -> None:
    name = self.vocab_names()[0]
    self.vocabs[name], how = subword.load_or_train(
        self._path(vocab_dir), lambda: [r[field] for r in train for field in FIELDS],
        vocab_size=self.options.subword_vocab_size)
    self.report["vocab"] = {name: how}

  def _build_chars_vocab(self, train, vocab_dir) -> None:
    if self.options.vocab_file is not None:
      name = self.vocab_names()[0]
      self.vocabs[name] = read_bert_vocab(self.options.vocab_file)
      if vocab_dir is not None:
        os.makedirs(vocab_dir, exist_ok=True)
        self.vocabs[name].save(self._path(vocab_dir))
      self.report["vocab"] = {name: f"read from {self.options.vocab_file}"}
      return
    _, tokens, _ = train
    meta = {"task": self.task, "tokenizer": text_lib.chinese_chars_tokenize.__name__,
            "train_examples": len(tokens["sentence1"]), "fields": list(FIELDS)}
    self.vocabs[CHARS_VOCAB_FILE], how = load_or_build_vocab(
        self._path(vocab_dir), lambda: tokens["sentence1"] + tokens["sentence2"],
        min_freq=self.options.min_freq, max_size=self.options.max_size, metadata=meta)
    self.report["vocab"] = {CHARS_VOCAB_FILE: how}

  # ---- text

  def tokenize(self, text: text_lib.Text) -> list[str]:
    """The tokens of one sentence with these options' tokenizer (the subword one once trained)."""
    if self.options.tokenizer == "subword":
      return self.vocab.tokenize(text)
    return text_lib.chinese_chars_tokenize(text)

  def texts(self, split: str) -> list[tuple[str, str]]:
    """The raw (sentence1, sentence2) of every example of `split`, by index."""
    texts = self._split(split).texts
    return list(zip(texts["sentence1"], texts["sentence2"]))

  def labels(self, split: str) -> np.ndarray:
    """int32 (N,): the label of every example of `split`, by index."""
    return self._split(split).scalars["label"]

  # ---- pairs of a user

  def encode_pairs(self, pairs: Sequence[tuple[text_lib.Text, text_lib.Text]],
                   labels: Sequence[int] | None = None) -> Split:
    """Encodes a user's pairs as a split (for prediction and evaluation, not for training).

    Args:
      pairs: (sentence1, sentence2) each; each sentence is cut to max_len tokens.
      labels: 0 or 1 per pair, or None (the split then has no 'label').

    Raises:
      ValueError: a sentence has no tokens (naming the pair and which sentence), or a label is
        not 0/1.
    """
    tokens = {field: [] for field in FIELDS}
    for i, pair in enumerate(pairs):
      for field, sentence in zip(FIELDS, pair):
        part = self.tokenize(sentence)
        if not part:
          where = "" if len(pairs) == 1 else f"pair {i}: "
          raise ValueError(f"{where}{field} has no tokens: {text_lib.as_text(sentence)!r}")
        tokens[field].append(part)
    a, _ = encode_truncated(self.vocab, tokens["sentence1"], self.options.max_len)
    b, _ = encode_truncated(self.vocab, tokens["sentence2"], self.options.max_len)
    scalars = {"index": np.arange(len(a), dtype=np.int32)}
    if labels is not None:
      scalars["label"] = np.asarray(labels, dtype=np.int32)
      if len(scalars["label"]) != len(a) or np.any((scalars["label"] != 0)
                                                   & (scalars["label"] != 1)):
        raise ValueError(f"labels: expected one 0 or 1 per pair ({len(a)}), got "
                         f"{list(labels)[:10]}")
    return Split(self._derive({"a": a, "b": b}), scalars,
                 texts={f: [text_lib.as_text(p[k]) for p in pairs] for k, f in enumerate(FIELDS)})

  def pair_batches(self, pairs: Sequence[tuple[text_lib.Text, text_lib.Text]], batch_size: int,
                   labels: Sequence[int] | None = None) -> Iterator[Batch]:
    """Evaluation batches of a user's pairs (`encode_pairs`), one process, in bucket order;
    'index' is the position in `pairs`."""
    data = self.encode_pairs(pairs, labels)
    return Batcher(data.sequences, data.scalars, boundaries=self.boundaries,
                   batch_size=batch_size, length_keys=self.length_keys, process_index=0,
                   process_count=1).eval_batches()

  def pretraining_batcher(self, batch_size: int, *, process_index: int | None = None,
                          process_count: int | None = None) -> Batcher:
    """The loader of self-supervised pretraining: the training split's pairs followed by the
    unlabelled pairs (`unlabelled_texts`, two sentences a pair), labels left out; 'index' runs over
    both. An unlabelled pair with a sentence that has no tokens is left out (the report of the
    data counts none in CLUE's test.json)."""
    train = self._split("train")
    sequences = dict(train.sequences)
    texts = self.unlabelled_texts
    pairs = [(texts[i], texts[i + 1]) for i in range(0, len(texts) - 1, 2)]
    pairs = [p for p in pairs if self.tokenize(p[0]) and self.tokenize(p[1])]
    if pairs:
      extra = self.encode_pairs(pairs).sequences
      sequences = {name: Ragged(np.concatenate([seq.flat, extra[name].flat]),
                                np.concatenate([seq.lengths, extra[name].lengths]))
                   for name, seq in sequences.items()}
    count = len(sequences["a"])
    return Batcher(sequences, {"index": np.arange(count, dtype=np.int32)},
                   boundaries=self.boundaries, batch_size=batch_size,
                   length_keys=self.length_keys, process_index=process_index,
                   process_count=process_count)

  def encode_pair(self, sentence1: text_lib.Text, sentence2: text_lib.Text) -> Batch:
    """One pair as a batch of one: the batch fields without 'label' ('a', 'a_len', 'b', 'b_len',
    'pair', 'pair_len', 'segments', 'index', 'weight'), leading axis 1, padded to its bucket's
    widths as a batch of the Batcher is. ValueError naming the sentence that has no tokens."""
    return next(self.pair_batches([(sentence1, sentence2)], batch_size=1))

  # ---- batches and the cache

  @property
  def boundaries(self) -> dict[str, tuple[int, ...]]:
    bounds = self.options.boundaries
    pair = tuple(pair_width(width) for width in bounds)
    return {"a": bounds, "b": bounds, "pair": pair, "segments": pair}

  def _derive(self, sequences: dict[str, Ragged]) -> dict[str, Ragged]:
    pair, segments = join_pairs(sequences["a"], sequences["b"])
    return {"a": sequences["a"], "b": sequences["b"], "pair": pair, "segments": segments}

  def cache_extra(self) -> dict[str, Any]:
    return {"unlabelled_texts": self.unlabelled_texts}

  def restore_extra(self, extra: Mapping[str, Any]) -> None:
    self.unlabelled_texts = list(extra.get("unlabelled_texts") or [])

  def summary(self) -> str:
    lines = [super().summary()]
    if self.report.get("train", {}).get("swapped_added"):
      lines.append(f"  train holds {self.report['train']['swapped_added']} swapped pairs "
                   f"(pair_order='both')")
    if self.unlabelled_texts:
      lines.append(f"  unlabelled: {len(self.unlabelled_texts) // 2} pairs kept as texts")
    return "\n".join(lines)

  @classmethod
  def load(cls, source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
           download: bool = False, **options) -> MatchingData:
    """From pipelines.datasets (args as there; the shipped AFQMC sample when `source` is None).

    'dev' is the dataset's 'validation' split; its 'unlabelled' split, where the source had one,
    becomes `unlabelled_texts`. The vocabulary and the encoded splits are kept in the prepared
    dataset's folder under tokenized/ (see the pipelines.tasks docstring). `options` as
    MatchingOptions.
    """
    from pipelines import datasets  # pylint: disable=g-import-not-at-top
    cls.make_options(options)  # a wrong option fails before a dataset is prepared or read
    prepared = datasets.prepare(cls.task, source=source, data_dir=data_dir, download=download)
    splits = SPLITS + (("unlabelled",) if "unlabelled" in prepared.splits else ())
    return cls._load(cls.task, splits, source, data_dir, download,
                     lambda r, folder: cls.from_records(
                         {split: r[split] for split in SPLITS}, unlabelled=r.get("unlabelled"),
                         vocab_dir=folder, **options),
                     options)


# The names a header line of a pairs file may give each column (pipelines.sources.is_header).
PAIR_HEADER = (("sentence1", "sentence_a", "text_a", "question1", "query1", "q1"),
               ("sentence2", "sentence_b", "text_b", "question2", "query2", "q2"),
               ("label", "is_duplicate", "similar"))


def pair_row(line: str, where: str) -> tuple[str, str, int | None]:
  """One line of a user's pairs, `sentence1 TAB sentence2 [TAB label]`, as (sentence1, sentence2,
  label 0/1 or None without a third column).

  Raises:
    SourceError (a ValueError) naming `where`: fewer than two or more than three columns (a
      blank line too), an empty sentence, a label other than 0/1.
  """
  fields = line.split("\t")
  if not 2 <= len(fields) <= 3:
    raise SourceError(f"{where}: expected sentence1 TAB sentence2 [TAB label], got "
                      f"{len(fields)} column(s): {line[:60]!r}")
  for field, sentence in zip(FIELDS, fields):
    if not sentence.strip():
      raise SourceError(f"{where}: {field} is empty")
  label = None
  if len(fields) == 3:
    if fields[2].strip() not in ("0", "1"):
      raise SourceError(f"{where}: the label must be 0 or 1, got {fields[2][:60]!r}")
    label = int(fields[2])
  return fields[0], fields[1], label


def pair_rows(lines: Iterable[str], name: str,
              on_header: Callable[[str], None] | None = None
              ) -> Iterator[tuple[str, str, int | None]]:
  """pair_row of each line of the file `name`, read as they are iterated; a first line that is a
  header (PAIR_HEADER, e.g. `text_a TAB text_b TAB label`) is skipped and handed to `on_header`."""
  for number, line in enumerate(lines, start=1):
    if number == 1 and is_header(line.split("\t"), PAIR_HEADER):
      if on_header is not None:
        on_header(line)
      continue
    yield pair_row(line, f"{name}:{number}")


def read_pairs_tsv(path: str | os.PathLike) -> list[tuple[str, str, int | None]]:
  """A user's pairs: one `sentence1 TAB sentence2 [TAB label]` a line (UTF-8); a first line that
  is a header (PAIR_HEADER) is skipped.

  Returns:
    (sentence1, sentence2, label 0/1, or None where the line has no third column) per line.

  Raises:
    SourceError (a ValueError) naming the file and line: what pair_row refuses, invalid UTF-8.
  """
  path = os.fspath(path)
  return list(pair_rows(split_lines(decode_utf8(read_bytes(path), path)), path))
