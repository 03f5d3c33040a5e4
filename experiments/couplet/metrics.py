"""How generated lower lines are scored against their upper lines and the reference lower lines.

Lines are lists of character tokens (pipelines.text.couplet_tokenize); an unknown character is the
single token "<unk>". form.py defines punctuation, content characters, repetition and copies.

  bleu                  corpus sacreBLEU over characters: hypotheses and references are joined
                        without spaces and scored with sacrebleu's tokenize='char' (every character
                        one token; the same numbers as space-separated characters with
                        tokenize='none'), n-grams up to 4. An "<unk>" in a hypothesis is written as
                        one placeholder character, UNK_CHAR, which matches no reference character.
  bleu1, bleu2          the same with max_ngram_order 1 and 2: the geometric mean of the clipped
                        1-gram (and 2-gram) precisions times the brevity penalty, in 0-100.
  exact_length          the share of hypotheses with as many characters as their upper line.
  oracle_lines          not a metric but a diagnostic: from each line's n-best list, the hypothesis
                        with the best sentence-level BLEU-2 against its reference. It reads the
                        reference, so the scores of those lines bound what any reranking of the
                        n-best (MBR, a rescoring model) could reach, not what a decoder does.
The form rates, each the share of the n lines (form.py has the rules):
  punct_match_rate      punctuation exactly where the upper line's is (same marks, none elsewhere).
  unwanted_repeat_rate  a character repeated at positions (i, j) where the upper line has no
                        repetition.
  repeat_pattern_rate   characters repeated exactly where the upper line repeats (AABB <-> CCDD).
  copy_rate             at least one content character of the upper line at the same position (a
                        common failure: "春风" -> "春雨"; aligned commas are no copy).
and one share of positions:
  copied_chars          copied characters / aligned content positions of the upper line (over
                        min(len) per pair).
Each form rate is also computed for the reference lines against their upper lines (`ref_<name>`),
the level a model should reach: human lower lines also break some of these rules.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import sacrebleu

from experiments.couplet import form
from experiments.couplet.form import Tokens
from pipelines import text as text_lib

UNK_CHAR = "\u25a1"  # WHITE SQUARE, the scored stand-in for an unknown character


def _check_pairs(a: Sequence, a_name: str, b: Sequence, b_name: str) -> None:
  if len(a) != len(b):
    raise ValueError(f"{a_name} and {b_name} must have the same length, got {len(a)} and "
                     f"{len(b)}")
  if not a:
    raise ValueError(f"{a_name}: expected at least one line, got none")


def line_text(tokens: Tokens) -> str:
  """The characters of a line joined without spaces, "<unk>" written as UNK_CHAR."""
  return "".join(UNK_CHAR if t == form.UNK_TOKEN else t for t in tokens)


def char_bleu(hypotheses: Sequence[str], references: Sequence[str], max_order: int = 4) -> float:
  """Character-level corpus sacreBLEU (0-100), one reference per hypothesis.

  Args:
    hypotheses: n lines (characters, spaces ignored).
    references: n reference lines.
    max_order: the longest n-gram (sacrebleu's max_ngram_order): 4 for BLEU, 1 or 2 for BLEU-1/2.
  """
  _check_pairs(hypotheses, "hypotheses", references, "references")
  bleu = sacrebleu.metrics.BLEU(tokenize="char", max_ngram_order=max_order)
  return float(bleu.corpus_score(list(hypotheses), [list(references)]).score)


def oracle_lines(nbest: Sequence[Sequence[Tokens]], references: Sequence[str],
                 max_order: int = 2) -> list[Tokens]:
  """Each line's hypothesis closest to its reference (the n-best oracle; see the module docstring).

  Closest: the highest sentence-level character BLEU with n-grams up to `max_order` (sacrebleu's
  sentence_score with effective_order, so a short line is not zeroed by its missing longer
  n-grams); ties go to the earlier hypothesis, i.e. the decoder's own ranking.

  Args:
    nbest: for each of n lines, its hypotheses (token lists), best-scored first; at least one each.
    references: the n reference lower lines as text.
    max_order: the longest n-gram of the sentence BLEU (2: BLEU-2, the issue's headline score).
  """
  _check_pairs(nbest, "nbest", references, "references")
  bleu = sacrebleu.metrics.BLEU(tokenize="char", max_ngram_order=max_order, effective_order=True)
  picked = []
  for i, (hypotheses, reference) in enumerate(zip(nbest, references)):
    if not hypotheses:
      raise ValueError(f"nbest[{i}] has no hypotheses")
    scores = [bleu.sentence_score(line_text(h), [reference]).score for h in hypotheses]
    picked.append(hypotheses[max(range(len(scores)), key=lambda k: (scores[k], -k))])
  return picked


def _share(test: Callable[[Tokens, Tokens], bool], lowers: Sequence[Tokens],
           uppers: Sequence[Tokens]) -> float:
  _check_pairs(lowers, "lowers", uppers, "uppers")
  return sum(bool(test(low, up)) for low, up in zip(lowers, uppers)) / len(lowers)


def exact_length_rate(lowers: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  return _share(lambda low, up: len(low) == len(up), lowers, uppers)


def punct_match_rate(lowers: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  return _share(form.punct_matches, lowers, uppers)


def unwanted_repeat_rate(lowers: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  return _share(form.has_unwanted_repeat, lowers, uppers)


def repeat_pattern_rate(lowers: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  return _share(form.repeat_pattern_matches, lowers, uppers)


def copy_rate(lowers: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  return _share(lambda low, up: form.same_position_copies(low, up) > 0, lowers, uppers)


def copied_char_rate(lowers: Sequence[Tokens], uppers: Sequence[Tokens]) -> float:
  _check_pairs(lowers, "lowers", uppers, "uppers")
  aligned = sum(sum(map(form.is_content, up[:len(low)])) for low, up in zip(lowers, uppers))
  copied = sum(form.same_position_copies(low, up) for low, up in zip(lowers, uppers))
  return copied / aligned if aligned else 0.0


FORM_RATES: dict[str, Callable[[Sequence[Tokens], Sequence[Tokens]], float]] = {
    "punct_match_rate": punct_match_rate,
    "unwanted_repeat_rate": unwanted_repeat_rate,
    "repeat_pattern_rate": repeat_pattern_rate,
    "copy_rate": copy_rate,
    "copied_chars": copied_char_rate,
}
REFERENCE_NAMES = tuple(f"ref_{name}" for name in FORM_RATES)


@dataclasses.dataclass(frozen=True)
class CoupletScores:
  """All the scores of n generated lower lines (see the module docstring).

  Attributes:
    reference: the form rates of the n reference lines, by REFERENCE_NAMES ('ref_copy_rate' ...).
  """
  bleu: float
  bleu1: float
  bleu2: float
  exact_length: float
  punct_match_rate: float
  unwanted_repeat_rate: float
  repeat_pattern_rate: float
  copy_rate: float
  copied_chars: float
  count: int
  reference: dict[str, float]

  @classmethod
  def names(cls, suffix: str = "") -> tuple[str, ...]:
    """The names of the hypotheses' rates (neither `count` nor the references'), with `suffix`."""
    return tuple(f"{field.name}{suffix}" for field in dataclasses.fields(cls)
                 if field.name not in ("count", "reference"))

  def as_dict(self, suffix: str = "") -> dict[str, float]:
    """Metric name -> value: the hypotheses' rates and count with `suffix` (e.g. 'bleu_free'),
    then the references' rates (which do not depend on how the lines were decoded)."""
    own = {f"{name}{suffix}": float(getattr(self, name)) for name in self.names() + ("count",)}
    return {**own, **self.reference}


def score_lines(hypotheses: Sequence[Tokens], uppers: Sequence[Tokens], references: Sequence[str],
                reference_tokens: Sequence[Tokens] | None = None) -> CoupletScores:
  """Scores n hypotheses given their upper lines and reference lines.

  Args:
    hypotheses: n generated lower lines (token lists).
    uppers: their n upper lines (token lists, as the model read them).
    references: the n reference lower lines as text (for BLEU).
    reference_tokens: the same as token lists for the references' form rates, best read as the
      model reads them ("<unk>" for unknown characters, like `uppers`); None: the characters of
      `references`.
  """
  _check_pairs(hypotheses, "hypotheses", uppers, "uppers")
  _check_pairs(hypotheses, "hypotheses", references, "references")
  if reference_tokens is None:
    reference_tokens = [text_lib.couplet_tokenize(ref) for ref in references]
  texts = [line_text(h) for h in hypotheses]
  rates = {name: rate(hypotheses, uppers) for name, rate in FORM_RATES.items()}
  return CoupletScores(
      bleu=char_bleu(texts, references), bleu1=char_bleu(texts, references, max_order=1),
      bleu2=char_bleu(texts, references, max_order=2),
      exact_length=exact_length_rate(hypotheses, uppers), **rates, count=len(hypotheses),
      reference={f"ref_{name}": rate(reference_tokens, uppers)
                 for name, rate in FORM_RATES.items()})
