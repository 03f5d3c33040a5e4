"""A vocabulary: tokens <-> int ids, with the project's special tokens at fixed ids.

Ids 0-3 are always pad "<pad>", unk "<unk>", bos "<bos>", eos "<eos>" (PAD_ID .. EOS_ID below), in
every vocabulary of every task: batches are padded with 0, and decoders start at bos and stop at
eos by these ids. The regular tokens follow in a deterministic order: by frequency in the training
data, most frequent first, ties broken by the token itself (Unicode code point order). Building
twice from the same data therefore gives the same ids, and `save` / `load` round-trip them
exactly.

Unknown tokens encode to unk. A text made only of unknown tokens encodes to a run of unk ids of the
same length; it is not an error (the task layer counts such examples in its report).

`IdVocab` holds what every vocabulary shares (lookups, `encode`, `decode`): `Vocab` here, over
counted words, and pipelines.subword.SubwordVocab, over a SentencePiece model's pieces.

The file format is JSON in UTF-8:
  {"format": "attention-zoo-vocab", "version": 1, "specials": ["<pad>", "<unk>", "<bos>", "<eos>"],
   "tokens": [every token in id order, specials first], "counts": [training count per token, 0 for
   the specials], "metadata": {free-form, e.g. how and from what the vocabulary was built}}
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from pipelines.checks import positive_int
from pipelines.sources import SourceError, decode_utf8, read_bytes, split_lines

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

FORMAT = "attention-zoo-vocab"
VERSION = 1


class IdVocab:
  """What every vocabulary shares, word-level (Vocab) or subword (pipelines.subword): the id
  lookups and `encode` / `decode`, over the tokens in id order (`_itos`, the special tokens
  first) and a subclass's `token_to_id`."""

  _itos: list[str]
  pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

  def token_to_id(self, token: str) -> int:
    raise NotImplementedError(f"{type(self).__name__} does not define token_to_id")

  def __len__(self) -> int:
    return len(self._itos)

  @property
  def tokens(self) -> list[str]:
    """Every token in id order, the special tokens first."""
    return list(self._itos)

  def id_to_token(self, i: int) -> str:
    if not 0 <= i < len(self._itos):
      raise ValueError(f"id {i} is out of range for a vocabulary of size {len(self)}")
    return self._itos[i]

  def encode(self, tokens: Sequence[str], add_bos: bool = False, add_eos: bool = False,
             as_numpy: bool = False) -> list[int] | np.ndarray:
    """Token ids of `tokens`; unknown tokens become UNK_ID.

    Args:
      tokens: a list of tokens (not a string: a str argument is refused, since iterating it would
        encode single characters).
      add_bos: put BOS_ID first.
      add_eos: put EOS_ID last.
      as_numpy: return an int32 array (L,) instead of a list.
    """
    if isinstance(tokens, (str, bytes)):
      raise ValueError(f"tokens: expected a sequence of tokens, got a string {tokens[:40]!r}; "
                       f"tokenize it first")
    ids = [self.token_to_id(token) for token in tokens]
    if add_bos:
      ids.insert(0, BOS_ID)
    if add_eos:
      ids.append(EOS_ID)
    return np.asarray(ids, dtype=np.int32) if as_numpy else ids

  def decode(self, ids: Iterable[int] | np.ndarray, strip_special: bool = True) -> list[str]:
    """Tokens of `ids`.

    Args:
      ids: token ids (a list or a 1-D array).
      strip_special: stop at the first eos and leave out pad and bos, which is what a model's
        padded output needs. Unknown tokens stay as "<unk>" either way, so that a prediction with
        unknowns is not scored as if it were clean. False: every id maps to its token.

    Returns:
      A list of token strings. An id outside [0, len) raises a ValueError.
    """
    ids = np.asarray(ids)
    if ids.ndim != 1:
      raise ValueError(f"ids: expected a 1-D sequence of ids, got shape {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= len(self._itos)):
      raise ValueError(f"ids must lie in [0, {len(self._itos)}) for this vocabulary, got values "
                       f"from {ids.min()} to {ids.max()}")
    out = []
    for i in ids.tolist():
      if strip_special:
        if i == EOS_ID:
          break
        if i in (PAD_ID, BOS_ID):
          continue
      out.append(self._itos[i])
    return out


class Vocab(IdVocab):
  """Maps tokens to ids and back.

  Build one with `Vocab.build(token_lists, min_freq=..., max_size=...)` from the training split, or
  read one with `Vocab.load(path)`. The constructor takes the regular tokens in id order (ids 4,
  5, ...) and is mostly for `build` and `load`.
  """

  def __init__(self, tokens: Sequence[str], counts: Sequence[int] | None = None,
               metadata: Mapping[str, Any] | None = None):
    tokens = list(tokens)
    if counts is not None and len(counts) != len(tokens):
      raise ValueError(f"counts: expected one count per token ({len(tokens)}), got {len(counts)}")
    self._itos = list(SPECIALS) + tokens
    self._stoi = {token: i for i, token in enumerate(self._itos)}
    if len(self._stoi) != len(self._itos):
      repeated = [t for t, n in collections.Counter(self._itos).items() if n > 1]
      raise ValueError(f"tokens: every token must appear once and none may be a special token "
                       f"{SPECIALS}; repeated: {repeated[:10]}")
    for token in tokens:
      if not isinstance(token, str) or not token:
        raise ValueError(f"tokens: every token must be a non-empty str, got {token!r}")
    self._counts = [0] * len(SPECIALS) + [int(c) for c in (counts or [0] * len(tokens))]
    self.metadata = dict(metadata or {})

  @classmethod
  def build(cls, token_lists: Iterable[Sequence[str]], *, min_freq: int = 1,
            max_size: int | None = None, metadata: Mapping[str, Any] | None = None) -> Vocab:
    """Counts the tokens of `token_lists` (the training split only) and keeps the frequent ones.

    Args:
      token_lists: an iterable of token lists, e.g. `map(imdb_tokenize, texts)`.
      min_freq: keep tokens seen at least this many times (>= 1).
      max_size: the largest `len(vocab)`, the four special tokens included (>= 4); the most
        frequent tokens are kept. None: no limit.
      metadata: stored with the vocabulary (JSON-serialisable), e.g. the options and the source.

    Returns:
      The vocabulary. Special-token strings found in the data are not counted (they keep ids 0-3).
    """
    positive_int(min_freq, "min_freq")
    if max_size is not None:
      positive_int(max_size, "max_size", minimum=len(SPECIALS))  # room for the special tokens
    counter = collections.Counter()
    for tokens in token_lists:
      counter.update(tokens)
    for special in SPECIALS:
      counter.pop(special, None)
    ranked = sorted((item for item in counter.items() if item[1] >= min_freq),
                    key=lambda item: (-item[1], item[0]))
    if max_size is not None:
      ranked = ranked[:max_size - len(SPECIALS)]
    meta = {"min_freq": int(min_freq), "max_size": max_size, **dict(metadata or {})}
    return cls([t for t, _ in ranked], [c for _, c in ranked], meta)

  # ---- lookups

  def __contains__(self, token: str) -> bool:
    return token in self._stoi

  def __eq__(self, other) -> bool:
    return (isinstance(other, Vocab) and self._itos == other._itos
            and self._counts == other._counts and self.metadata == other.metadata)

  def __repr__(self) -> str:
    return f"Vocab(size={len(self)}, first={self._itos[4:9]})"

  def count(self, token: str) -> int:
    """How often `token` occurred in the data the vocabulary was built from (0 if unknown)."""
    i = self._stoi.get(token)
    return 0 if i is None else self._counts[i]

  def token_to_id(self, token: str) -> int:
    """The id of `token`, or UNK_ID (1) if it is not in the vocabulary."""
    return self._stoi.get(token, UNK_ID)

  # ---- files

  def to_json(self) -> dict:
    return {"format": FORMAT, "version": VERSION, "specials": list(SPECIALS),
            "tokens": self._itos, "counts": self._counts, "metadata": self.metadata}

  def save(self, path: str | os.PathLike) -> None:
    """Writes the vocabulary as UTF-8 JSON (atomically: a temporary file is renamed into place)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
      json.dump(self.to_json(), f, ensure_ascii=False, separators=(",", ":"))
    os.replace(tmp, path)

  @classmethod
  def load(cls, path: str | os.PathLike) -> Vocab:
    """Reads a file written by `save`; a missing, corrupt or foreign file raises a ValueError."""
    path = os.fspath(path)
    try:
      with open(path, encoding="utf-8") as f:
        data = json.load(f)
    except FileNotFoundError:
      raise ValueError(f"vocabulary file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
      raise ValueError(f"vocabulary file {path} is corrupt (not UTF-8 JSON): {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
      raise ValueError(f"vocabulary file {path} is not an {FORMAT} file (its 'format' field is "
                       f"{data.get('format') if isinstance(data, dict) else None!r})")
    if data.get("version") != VERSION:
      raise ValueError(f"vocabulary file {path} has format version {data.get('version')!r}; this "
                       f"code reads version {VERSION}")
    tokens, counts = data.get("tokens"), data.get("counts")
    if (data.get("specials") != list(SPECIALS) or not isinstance(tokens, list)
        or tokens[:len(SPECIALS)] != list(SPECIALS) or not isinstance(counts, list)
        or len(counts) != len(tokens) or not all(isinstance(c, int) for c in counts)):
      raise ValueError(f"vocabulary file {path} is corrupt: expected the special tokens "
                       f"{SPECIALS} first and one integer count per token")
    try:
      return cls(tokens[len(SPECIALS):], counts[len(SPECIALS):], data.get("metadata") or {})
    except ValueError as e:
      raise ValueError(f"vocabulary file {path} is corrupt: {e}") from None


# BERT's special tokens, in the order of the project's specials they stand for (pad, unk, bos =
# [CLS], eos = [SEP]).
BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")


def read_bert_vocab(path: str | os.PathLike) -> Vocab:
  """The vocabulary of a BERT vocab.txt (one token a line, as bert-base-chinese's 21,128 lines).

  [PAD], [UNK], [CLS] and [SEP] become the project's pad, unk, bos and eos (ids 0-3); every other
  line is a regular token, in file order, so len(vocab) is the file's number of lines. The ids of
  regular tokens are therefore not BERT's (id 4 is the file's first other token): the same
  tokens, for a model trained from scratch, not for BERT's pretrained weights.

  Raises:
    SourceError (a ValueError): naming the file: it cannot be read, is not UTF-8, has an empty or
      repeated line, or lacks one of the four special tokens.
  """
  path = os.fspath(path)
  data = read_bytes(path, "vocab_file")
  lines = split_lines(decode_utf8(data, f"vocab_file {path}"))
  seen = {}
  for number, token in enumerate(lines, start=1):
    if not token.strip():
      raise SourceError(f"vocab_file {path}:{number}: an empty line (one token a line)")
    if token in seen:
      raise SourceError(f"vocab_file {path}:{number}: {token!r} repeats line {seen[token]}")
    seen[token] = number
  missing = [token for token in BERT_SPECIALS if token not in seen]
  if missing:
    raise SourceError(f"vocab_file {path}: no {', '.join(missing)} line; a BERT vocab.txt has "
                      f"{', '.join(BERT_SPECIALS)}")
  tokens = [token for token in lines if token not in BERT_SPECIALS]
  clash = [token for token in tokens if token in SPECIALS]
  if clash:
    raise SourceError(f"vocab_file {path}: holds the project's special token {clash[0]!r}")
  return Vocab(tokens, metadata={"bert_vocab_file": os.path.basename(path), "lines": len(lines),
                                 "sha256": hashlib.sha256(data).hexdigest()})
