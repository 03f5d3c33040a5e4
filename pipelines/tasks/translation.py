"""fra-eng translation: English -> French pairs, as SentencePiece subwords or d2l's words.

Two tokenizers (the option `tokenizer`):
  'd2l_words'      d2l's preprocessing (pipelines.text.fra_eng_tokenize: lowercased, a space
                   before , . ! ?, split on spaces) and two word vocabularies, English and French
                   (min_freq, max_size); outputs come back lowercased, and words outside the
                   vocabulary become <unk>.
  'sentencepiece'  one SentencePiece model for both languages (pipelines.subword), trained on the
                   English and French texts of the training split, `vocab_size` pieces at most:
                   cased raw text in, normal text out (its own detokenizer), byte fallback so
                   that nothing is unknown. One joint model rather than one per language: the two
                   share an alphabet, names, numbers and punctuation, so a joint model spends no
                   pieces twice, a source word copied into the output (a name, a number) keeps
                   its pieces, and a Transformer can share one embedding table between encoder,
                   decoder and output layer (TransformerConfig.share_embeddings).

Either way the evaluation splits keep the raw, cased French texts as references (and the raw
English texts as sources, which group the several translations of one sentence), so BLEU scores
what a user would read against what Tatoeba holds.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

from pipelines import subword
from pipelines import text as text_lib
from pipelines.checks import positive_int
from pipelines.tasks.seq2seq import Seq2SeqData
from pipelines.tasks.seq2seq import Seq2SeqOptions

TOKENIZERS = ("sentencepiece", "d2l_words")


@dataclasses.dataclass(frozen=True)
class FraEngText:
  """fra-eng text to tokens and back, for either tokenizer.

  Attributes:
    subwords: the joint SentencePiece model; None: d2l's words.
  """
  subwords: subword.SubwordVocab | None = None

  def tokenize(self, text: text_lib.Text) -> list[str]:
    """The tokens of an English or French text (pieces of the joint model, or d2l's words)."""
    if self.subwords is not None:
      return self.subwords.tokenize(text)
    return text_lib.fra_eng_tokenize(text)

  def detokenize(self, tokens: Sequence[str]) -> str:
    """Text of tokens: SentencePiece's decoding, or d2l's words joined (lowercased)."""
    if self.subwords is not None:
      return self.subwords.detokenize(tokens)
    return text_lib.fra_eng_detokenize(tokens)


@dataclasses.dataclass(frozen=True)
class TranslationOptions(Seq2SeqOptions):
  """How fra-eng pairs become ids: Seq2SeqOptions, and

  Attributes:
    tokenizer: 'd2l_words' (the default, d2l's preprocessing) or 'sentencepiece' (see the
      module docstring).
    vocab_size: the most pieces of the SentencePiece model (ignored by 'd2l_words', whose
      vocabularies follow min_freq and max_size).
  Lengths count tokens of the chosen tokenizer: 24 fits about 99.9% of the pairs as words, and
  99.7% of the English and 98.9% of the French texts as pieces of an 8,000-piece model.
  """
  tokenizer: str = "d2l_words"
  vocab_size: int = 8000

  def __post_init__(self):
    super().__post_init__()
    if self.tokenizer not in TOKENIZERS:
      raise ValueError(f"tokenizer: expected one of {list(TOKENIZERS)}, got {self.tokenizer!r}")
    positive_int(self.vocab_size, "vocab_size", minimum=subword.MIN_VOCAB_SIZE)


class TranslationData(Seq2SeqData):
  """English -> French from fra-eng; subwords or d2l's words (TranslationOptions.tokenizer).

  Options: TranslationOptions (max_src_len=24, max_tgt_len=24, boundaries, tokenizer='d2l_words',
  vocab_size=8000, min_freq=2, max_size, reverse=False).
  """

  task = "fra_eng"
  fields = ("en", "fr")
  options_class = TranslationOptions

  @property
  def subwords(self) -> bool:
    """Whether the texts are SentencePiece pieces (else d2l's words)."""
    return self.options.tokenizer == "sentencepiece"

  @property
  def text(self) -> FraEngText:
    """The tokenizer and detokenizer of these options (once the subword model exists)."""
    return FraEngText(self.src_vocab if self.subwords else None)

  def tokenize(self, text: text_lib.Text) -> list[str]:
    return self.text.tokenize(text)

  def detokenize(self, tokens: Sequence[str]) -> str:
    return self.text.detokenize(tokens)

  @property
  def tokenizer_name(self) -> str:
    return text_lib.fra_eng_tokenize.__name__

  def scoring_text(self, raw: str, tokens: list[str]) -> str:
    """The raw text (stripped): BLEU scores outputs against the cased, untokenized references."""
    del tokens
    return raw

  def _vocab_names(self) -> tuple[str, str]:
    if self.subwords:
      return (f"{self.task}_sentencepiece_{self.options.vocab_size}{subword.SUFFIX}",) * 2
    return super()._vocab_names()

  def fit_tokenizer(self, train: list[Mapping[str, Any]],
                    vocab_dir: str | os.PathLike | None) -> None:
    """Trains (or reloads) the joint SentencePiece model on the English and French training
    texts; nothing for d2l's words."""
    if not self.subwords:
      return
    (name,) = self.vocab_names()
    path = None if vocab_dir is None else os.path.join(os.fspath(vocab_dir), name)
    self.vocabs[name], how = subword.load_or_train(
        path, lambda: [r[field] for r in train for field in self.fields],
        vocab_size=self.options.vocab_size)
    self.report["vocab"] = {name: how}

  def _build_vocabs(self, train: dict[str, list[list[str]]], vocab_dir) -> None:
    if not self.subwords:  # the SentencePiece model is the vocabulary
      super()._build_vocabs(train, vocab_dir)
