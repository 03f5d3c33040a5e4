"""Subword vocabularies: a SentencePiece model trained on a task's training texts.

    subwords = SubwordVocab.train(train_texts, vocab_size=8000)
    pieces = subwords.tokenize("Qu'est-ce que c'est ?")   # ['▁Qu', "'", 'est', '-', 'ce', ...]
    ids = subwords.encode(pieces, add_eos=True)
    subwords.detokenize(subwords.decode(ids))             # "Qu'est-ce que c'est ?"

Text goes in raw and cased (no lowercasing, no punctuation splitting) and comes back out as
normal text: SentencePiece marks word starts with '▁' inside its pieces, so `detokenize` restores
the spaces exactly where the text had them ("Va !", "J'ai gagné !"). The model is trained with

  * the unigram language model (`model_type='unigram'`, as T5 and many OPUS-MT models);
  * byte fallback: a character outside the vocabulary is spelled as its UTF-8 bytes (pieces
    '<0xE2>' ...), so no text ever encodes to unk and no decoded text holds an unknown marker;
  * character coverage 1.0: every character of the training texts gets a piece of its own (the
    fra-eng alphabet is small), so digits, « » and € never fall back to bytes;
  * NFKC normalisation ('nmt_nfkc'): no-break spaces (U+00A0, U+202F) become plain spaces and
    runs of spaces collapse, the rest of the text is kept as it is.
`vocab_size` is a ceiling: a small training set (the shipped sample) yields fewer pieces than
asked for instead of an error.

Ids 0-3 are pipelines.vocab's special tokens, in every model: pad '<pad>', unk '<unk>', bos
'<bos>', eos '<eos>', so batches, decoders and the task layer treat a SubwordVocab exactly like a
word Vocab (the same `encode`, `decode`, `len`, `save`, `load` and `metadata`).

File: the serialized SentencePiece model (`.model`), the same file `spm_encode --model` reads.
Its `metadata` is read back from the model's own training settings (model type, vocabulary size
asked for, character coverage, byte fallback, normalisation), so a file trained differently is
recognised without a file beside it.
"""

from __future__ import annotations

import io
import os
from typing import Any, Callable, Iterable, Sequence

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from pipelines.checks import positive_int
from pipelines.text import Text, as_text
from pipelines.vocab import (BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, SPECIALS, UNK, UNK_ID,
                             IdVocab)

SUFFIX = ".model"
MODEL_TYPE = "unigram"
CHARACTER_COVERAGE = 1.0
NORMALIZATION = "nmt_nfkc"
# The smallest vocabulary worth asking for: the 4 special tokens and the 256 byte pieces.
MIN_VOCAB_SIZE = len(SPECIALS) + 256 + 1
# SentencePiece's model depends on the number of training threads, so it is fixed: the same texts
# give the same model on every machine.
NUM_THREADS = 2


def _trainer_settings(vocab_size: int) -> dict[str, Any]:
  return dict(vocab_size=vocab_size, model_type=MODEL_TYPE, character_coverage=CHARACTER_COVERAGE,
              byte_fallback=True, normalization_rule_name=NORMALIZATION, hard_vocab_limit=False,
              pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_piece=PAD,
              unk_piece=UNK, bos_piece=BOS, eos_piece=EOS)


def expected_metadata(vocab_size: int) -> dict[str, Any]:
  """The `metadata` of a model that `SubwordVocab.train(..., vocab_size)` trains."""
  return {"tokenizer": "sentencepiece", "model_type": MODEL_TYPE, "vocab_size": int(vocab_size),
          "character_coverage": CHARACTER_COVERAGE, "byte_fallback": True,
          "normalization": NORMALIZATION}


class SubwordVocab(IdVocab):
  """A SentencePiece model with the interface of pipelines.vocab.Vocab (IdVocab's lookups,
  encode and decode over its pieces), plus its tokenizer.

  Build one with `SubwordVocab.train(texts, vocab_size=...)` from the training split, or read one
  with `SubwordVocab.load(path)`. The constructor takes a serialized model.
  """

  def __init__(self, model_proto: bytes):
    self._proto = bytes(model_proto)
    self._sp = spm.SentencePieceProcessor(model_proto=self._proto)
    ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
    if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
      raise ValueError(f"the SentencePiece model gives pad, unk, bos and eos the ids {ids}; "
                       f"this project needs {(PAD_ID, UNK_ID, BOS_ID, EOS_ID)} (train it with "
                       "SubwordVocab.train)")
    self._itos = [self._sp.id_to_piece(i) for i in range(len(self._sp))]
    spec = sentencepiece_model_pb2.ModelProto.FromString(self._proto)
    trainer, normalizer = spec.trainer_spec, spec.normalizer_spec
    self.metadata = {"tokenizer": "sentencepiece",
                     "model_type": sentencepiece_model_pb2.TrainerSpec.ModelType.Name(
                         trainer.model_type).lower(),
                     "vocab_size": int(trainer.vocab_size),
                     "character_coverage": round(float(trainer.character_coverage), 6),
                     "byte_fallback": bool(trainer.byte_fallback),
                     "normalization": normalizer.name}

  @classmethod
  def train(cls, texts: Iterable[Text], *, vocab_size: int) -> SubwordVocab:
    """Trains a model on `texts` (the training split only; the same texts give the same model).

    Args:
      texts: raw texts (str or UTF-8 bytes), one sentence each; blank ones are skipped.
      vocab_size: the most pieces (special tokens and byte pieces included), >= MIN_VOCAB_SIZE.

    Raises:
      ValueError: no text to train on, or a vocab_size SentencePiece cannot work with (its
        message, naming the size).
    """
    positive_int(vocab_size, "vocab_size", minimum=MIN_VOCAB_SIZE)
    sentences = [t for t in map(as_text, texts) if t.strip()]
    if not sentences:
      raise ValueError("SubwordVocab.train: no non-blank text to train on")
    model = io.BytesIO()
    try:
      spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model,
                                     minloglevel=2, num_threads=NUM_THREADS,
                                     **_trainer_settings(vocab_size))
    except RuntimeError as e:
      raise ValueError(f"SentencePiece could not train a model of vocab_size {vocab_size} on "
                       f"{len(sentences)} texts: {e}") from None
    return cls(model.getvalue())

  # ---- text

  def tokenize(self, text: Text) -> list[str]:
    """The pieces of a raw text: "J'ai gagné !" -> ['▁J', "'", 'ai', '▁gagné', '▁!'].

    A text that is empty or only whitespace gives []."""
    return self._sp.encode(as_text(text), out_type=str)

  def detokenize(self, pieces: Sequence[str]) -> str:
    """The text of pieces (byte pieces joined back into their characters)."""
    return self._sp.decode_pieces(list(pieces))

  # ---- lookups (encode and decode are IdVocab's)

  def __contains__(self, token: str) -> bool:
    return self._sp.piece_to_id(token) != UNK_ID or token == UNK

  def __eq__(self, other) -> bool:
    return isinstance(other, SubwordVocab) and self._proto == other._proto

  def __repr__(self) -> str:
    return f"SubwordVocab(size={len(self)}, first={self._itos[4:9]})"

  def token_to_id(self, token: str) -> int:
    """The id of a piece, or UNK_ID (1) if it is not one."""
    return self._sp.piece_to_id(token)

  # ---- files

  def save(self, path: str | os.PathLike) -> None:
    """Writes the serialized model (atomically: a temporary file is renamed into place)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
      f.write(self._proto)
    os.replace(tmp, path)

  @classmethod
  def load(cls, path: str | os.PathLike) -> SubwordVocab:
    """Reads a file written by `save`; a missing or unreadable file raises a ValueError."""
    path = os.fspath(path)
    try:
      with open(path, "rb") as f:
        proto = f.read()
    except FileNotFoundError:
      raise ValueError(f"subword model {path} does not exist") from None
    try:
      return cls(proto)
    except (RuntimeError, OSError) as e:
      raise ValueError(f"subword model {path} is not a SentencePiece model ({e})") from None
    except ValueError as e:
      raise ValueError(f"subword model {path}: {e}") from None


def load_or_train(path: str | None, texts: Callable[[], Iterable[Text]], *, vocab_size: int
                  ) -> tuple[SubwordVocab, str]:
  """The model at `path` if it was trained with these settings, else one trained on `texts()`
  (and saved at `path` unless it is None).

  Returns:
    (the model, how it came about: the line of a task's `report['vocab']`).
  """
  if path is not None and os.path.exists(path):
    try:
      found = SubwordVocab.load(path)
    except ValueError as e:
      how = f"retrained ({e})"
    else:
      if found.metadata == expected_metadata(vocab_size):
        return found, f"loaded from {path}"
      differing = sorted(k for k, v in expected_metadata(vocab_size).items()
                         if found.metadata.get(k) != v)
      how = f"retrained (the file at {path} was trained with other {', '.join(differing)})"
  else:
    how = "trained" if path is None else f"trained and saved to {path}"
  model = SubwordVocab.train(texts(), vocab_size=vocab_size)
  if path is not None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    model.save(path)
  return model, how
