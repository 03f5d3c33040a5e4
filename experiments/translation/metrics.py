"""Translation scores as the field reports them: sacreBLEU's cased BLEU, lowercased BLEU and chrF,
each with its signature.

Hypotheses are detokenized outputs and references the raw texts (pipelines keeps them cased and
untokenized); sacreBLEU tokenizes both itself (BLEU with its default '13a' tokenizer, chrF on
characters), so the figures compare with any other sacreBLEU figure on the same references.

A source sentence with several translations (Tatoeba holds many, each a line of the split) is
scored once, against all of them: sacreBLEU clips the n-gram counts against every reference and
takes the closest reference length (chrF the best reference). `group_by_source` gathers them; when
every source is distinct this is the usual one-reference score.

  bleu            cased BLEU: the headline figure
  bleu_lowercase  BLEU with hypotheses and references lowercased (secondary: it forgives case)
  chrf            chrF (character n-gram F-score, beta 2)
The signature of each (sacrebleu's `get_signature()` after scoring) says how it was computed,
e.g. 'nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0' ('var': sources have different
numbers of references).
"""

from __future__ import annotations

import dataclasses
from typing import Hashable, Sequence

import sacrebleu

METRICS = ("bleu", "bleu_lowercase", "chrf")


@dataclasses.dataclass(frozen=True)
class Scores:
  """The figures of one set of hypotheses (0-100 each) and how each was computed.

  Attributes:
    bleu, bleu_lowercase, chrf: see the module docstring.
    sources: the distinct sources scored (each once).
    signatures: metric name -> sacreBLEU signature.
  """
  bleu: float
  bleu_lowercase: float
  chrf: float
  sources: int
  signatures: dict[str, str]

  def figures(self) -> dict[str, float]:
    """Metric name -> value, for METRICS."""
    return {name: getattr(self, name) for name in METRICS}


def group_by_source(sources: Sequence[Hashable], hypotheses: Sequence[str],
                    references: Sequence[str]) -> tuple[list[str], list[list[str | None]]]:
  """Gathers the lines of each distinct source: one hypothesis, all of its references.

  Args:
    sources: n keys, equal for the lines of one source sentence (e.g. its text).
    hypotheses: n hypotheses; the first line of each source gives that source's hypothesis.
    references: n references.

  Returns:
    (hypotheses, reference_streams): m hypotheses for the m distinct sources, in order of first
    appearance, and sacrebleu's reference streams: R lists of m entries (R = the most references
    of a source), stream r holding the r-th reference of each source or None where it has fewer.
  """
  if not len(sources) == len(hypotheses) == len(references):
    raise ValueError(f"sources, hypotheses and references must have the same length, got "
                     f"{len(sources)}, {len(hypotheses)} and {len(references)}")
  first: dict[Hashable, int] = {}
  grouped: list[list[str]] = []
  hyps: list[str] = []
  for source, hypothesis, reference in zip(sources, hypotheses, references):
    if source not in first:
      first[source] = len(grouped)
      grouped.append([])
      hyps.append(hypothesis)
    grouped[first[source]].append(reference)
  most = max((len(refs) for refs in grouped), default=0)
  streams = [[refs[r] if r < len(refs) else None for refs in grouped] for r in range(most)]
  return hyps, streams


def score_translations(hypotheses: Sequence[str], references: Sequence[str],
                       sources: Sequence[Hashable] | None = None) -> Scores:
  """Cased BLEU, lowercased BLEU and chrF of hypotheses, each source once against all of its
  references.

  Args:
    hypotheses: n detokenized outputs.
    references: n raw references, line i for hypothesis i.
    sources: n keys grouping the lines of one source sentence (its text); None: every line is a
      source of its own, with one reference.

  Returns:
    Scores.
  """
  if len(hypotheses) != len(references):
    raise ValueError(f"hypotheses and references must have the same length, got "
                     f"{len(hypotheses)} and {len(references)}")
  if not hypotheses:
    raise ValueError("hypotheses: expected at least one line, got none")
  if sources is None:
    sources = range(len(hypotheses))
  hyps, streams = group_by_source(sources, hypotheses, references)
  metrics = {"bleu": sacrebleu.BLEU(), "bleu_lowercase": sacrebleu.BLEU(lowercase=True),
             "chrf": sacrebleu.CHRF()}
  values = {name: float(metric.corpus_score(hyps, streams).score)
            for name, metric in metrics.items()}
  return Scores(**values, sources=len(hyps),
                signatures={name: str(metric.get_signature()) for name, metric in metrics.items()})


@dataclasses.dataclass(frozen=True)
class LengthBucket:
  """The scores of the sources whose length falls in [low, high] words.

  Attributes:
    low, high: the bucket's bounds in source words, inclusive (high None: no upper bound).
    lines: the lines (source, reference) in the bucket; a source with several references has
      several lines.
    scores: the Scores of its hypotheses (each distinct source once, against all of its
      references), or None for an empty bucket.
  """
  low: int
  high: int | None
  lines: int
  scores: Scores | None

  @property
  def label(self) -> str:
    if self.high is None:
      return f"{self.low}+"
    return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


def source_words(source: str) -> int:
  """A source's length for bucketing: its whitespace-separated words (punctuation attached to a
  word counts with it), the same for every tokenizer."""
  return len(source.split())


def scores_by_length(hypotheses: Sequence[str], references: Sequence[str],
                     sources: Sequence[str], edges: Sequence[int]) -> list[LengthBucket]:
  """`score_translations` within buckets of source length (source_words).

  Args:
    hypotheses, references, sources: n lines each, as score_translations (sources group the
      references of one sentence, and give its length).
    edges: ascending upper bounds, at least 1: buckets [1, e0], [e0 + 1, e1], ..., [e_last + 1,
      inf).

  Returns:
    len(edges) + 1 LengthBuckets, shortest first.

  Raises:
    ValueError: edges not strictly ascending positive integers, or lines of unequal counts.
  """
  edges = list(edges)
  ascending = all(a < b for a, b in zip(edges, edges[1:]))
  if not edges or not ascending or any(not isinstance(e, int) or e < 1 for e in edges):
    raise ValueError(f"edges: expected strictly ascending positive integers, got {edges}")
  if not len(hypotheses) == len(references) == len(sources):
    raise ValueError(f"hypotheses, references and sources must have the same length, got "
                     f"{len(hypotheses)}, {len(references)} and {len(sources)}")
  bounds = list(zip([1] + [e + 1 for e in edges], edges + [None]))
  buckets = []
  for low, high in bounds:
    keep = [i for i, s in enumerate(sources)
            if low <= source_words(s) and (high is None or source_words(s) <= high)]
    scores = (score_translations([hypotheses[i] for i in keep], [references[i] for i in keep],
                                 [sources[i] for i in keep]) if keep else None)
    buckets.append(LengthBucket(low, high, len(keep), scores))
  return buckets
