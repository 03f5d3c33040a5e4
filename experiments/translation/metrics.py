"""Corpus BLEU with sacrebleu, one reference per line or all the references of a source at once.

Hypotheses and references are detokenized text (pipelines.text.fra_eng_detokenize), which
sacrebleu tokenizes again with its default '13a' tokenizer, so the numbers are comparable with any
other sacreBLEU figure on the same references.

Two figures are reported on a test split in which one English sentence can have several French
translations (each a line of the split):

  * `corpus_bleu(hypotheses, references)`: one hypothesis-reference pair per line, as the split
    stores them; a source with k translations is decoded k times (identically) and each copy is
    scored against one of them.
  * `multi_reference_bleu(sources, hypotheses, references)`: the lines are grouped by source, each
    source is scored once, against all of its translations (sacrebleu takes the clipped n-gram
    counts over the references and the closest reference length).
"""

from __future__ import annotations

from typing import Hashable, Sequence

import sacrebleu


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
  """sacreBLEU (0-100) of hypotheses against one reference each.

  Args:
    hypotheses: n detokenized hypotheses.
    references: n detokenized references, line i for hypothesis i.

  Returns:
    The corpus BLEU score.
  """
  if len(hypotheses) != len(references):
    raise ValueError(f"hypotheses and references must have the same length, got "
                     f"{len(hypotheses)} and {len(references)}")
  if not hypotheses:
    raise ValueError("hypotheses: expected at least one line, got none")
  return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)


def group_by_source(sources: Sequence[Hashable], hypotheses: Sequence[str],
                    references: Sequence[str]) -> tuple[list[str], list[list[str | None]]]:
  """Gathers the lines of each distinct source: one hypothesis, all of its references.

  Args:
    sources: n keys, equal for the lines of one source sentence (e.g. its token tuple).
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


def multi_reference_bleu(sources: Sequence[Hashable], hypotheses: Sequence[str],
                         references: Sequence[str]) -> tuple[float, int]:
  """sacreBLEU with every source scored once against all of its references.

  Args:
    sources, hypotheses, references: as in `group_by_source`.

  Returns:
    (BLEU 0-100, the number of distinct sources).
  """
  hyps, streams = group_by_source(sources, hypotheses, references)
  if not hyps:
    raise ValueError("hypotheses: expected at least one line, got none")
  return float(sacrebleu.corpus_bleu(hyps, streams).score), len(hyps)
