"""How generated lower lines are scored against the upper lines and the reference lower lines.

Lines are compared as lists of character tokens (pipelines.text.couplet_tokenize); an unknown
character is the single token "<unk>".

  char_bleu            corpus sacreBLEU over characters: hypotheses and references are joined
                       without spaces and scored with sacrebleu's tokenize='char' (every character
                       one token; the same numbers as space-separated characters with
                       tokenize='none'). An "<unk>" in a hypothesis is written as one placeholder
                       character, UNK_CHAR, which matches no reference character.
  exact_length_rate    the share of hypotheses with as many characters as their upper line.
  copy_rate            the share of hypotheses that repeat a character of the upper line at the
                       same position (a common failure: "春风" -> "春雨"). Punctuation is not
                       counted (aligned commas are what a couplet should have), nor "<unk>".
  copied_char_rate     the share of aligned content positions (over min(len) per pair, punctuation
                       and "<unk>" left out) where the hypothesis repeats the upper line.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Sequence

import sacrebleu

UNK_TOKEN = "<unk>"
UNK_CHAR = "\u25a1"  # WHITE SQUARE, the scored stand-in for an unknown character

Tokens = Sequence[str]


def _check_pairs(a: Sequence, a_name: str, b: Sequence, b_name: str) -> None:
  if len(a) != len(b):
    raise ValueError(f"{a_name} and {b_name} must have the same length, got {len(a)} and "
                     f"{len(b)}")
  if not a:
    raise ValueError(f"{a_name}: expected at least one line, got none")


def line_text(tokens: Tokens) -> str:
  """The characters of a line joined without spaces, "<unk>" written as UNK_CHAR."""
  return "".join(UNK_CHAR if t == UNK_TOKEN else t for t in tokens)


def char_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
  """Character-level corpus sacreBLEU (0-100), one reference per hypothesis.

  Args:
    hypotheses: n lines (characters, spaces ignored).
    references: n reference lines.
  """
  _check_pairs(hypotheses, "hypotheses", references, "references")
  return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize="char").score)


def is_content(token: str) -> bool:
  """A character whose repetition at the same position counts as a copy (not punctuation or
  unknown)."""
  return token != UNK_TOKEN and not all(unicodedata.category(c).startswith("P") for c in token)


def same_position_copies(hypothesis: Tokens, upper: Tokens) -> int:
  """How many content characters of `upper` the hypothesis repeats at the same position."""
  return sum(h == u and is_content(u) for h, u in zip(hypothesis, upper))


def exact_length_rate(hypotheses: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  _check_pairs(hypotheses, "hypotheses", uppers, "uppers")
  return sum(len(h) == len(u) for h, u in zip(hypotheses, uppers)) / len(hypotheses)


def copy_rate(hypotheses: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  _check_pairs(hypotheses, "hypotheses", uppers, "uppers")
  return sum(same_position_copies(h, u) > 0 for h, u in zip(hypotheses, uppers)) / len(hypotheses)


def copied_char_rate(hypotheses: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  _check_pairs(hypotheses, "hypotheses", uppers, "uppers")
  aligned = sum(sum(map(is_content, u[:len(h)])) for h, u in zip(hypotheses, uppers))
  copied = sum(same_position_copies(h, u) for h, u in zip(hypotheses, uppers))
  return copied / aligned if aligned else 0.0


@dataclasses.dataclass(frozen=True)
class CoupletScores:
  """All the scores of n generated lower lines (see the module docstring)."""
  bleu: float
  exact_length: float
  copy_rate: float
  copied_chars: float
  count: int

  @classmethod
  def names(cls, suffix: str = "") -> tuple[str, ...]:
    """The names of the rates (every field but `count`), with `suffix`."""
    return tuple(f"{field.name}{suffix}" for field in dataclasses.fields(cls)
                 if field.name != "count")

  def as_dict(self, suffix: str = "") -> dict[str, float]:
    """Metric name -> value, e.g. {'bleu_free': ...} with suffix '_free'."""
    return {f"{field.name}{suffix}": float(getattr(self, field.name))
            for field in dataclasses.fields(self)}


def score_lines(hypotheses: Sequence[Tokens], uppers: Sequence[Tokens],
                references: Sequence[str]) -> CoupletScores:
  """Scores n hypotheses (token lists) given their upper lines (token lists) and references."""
  _check_pairs(hypotheses, "hypotheses", uppers, "uppers")
  return CoupletScores(
      bleu=char_bleu([line_text(h) for h in hypotheses], references),
      exact_length=exact_length_rate(hypotheses, uppers),
      copy_rate=copy_rate(hypotheses, uppers),
      copied_chars=copied_char_rate(hypotheses, uppers),
      count=len(hypotheses))
