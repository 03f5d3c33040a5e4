"""`python -m experiments by-length translation`: BLEU by source length, trained runs' test
translations scored within buckets of English length.

    python -m experiments by-length translation runs/translation-seq2seq_cpu \
        runs/translation-bahdanau_cpu [--edges 4 6 8 10] [--json by_length.json]

Reads each run's test_translations.tsv (written at the end of training: the source, reference,
greedy and beam translation of every test line; a TSV file may be named instead of its run) and
prints a Markdown table on standard output: one row per bucket of source length (whitespace
words of the English sentence, metrics.source_words), and per run the cased sacreBLEU of its
greedy and beam translations there, every source once against all of its references
(metrics.scores_by_length), beside the sources in the bucket; then the sacreBLEU signature. No
model is loaded: this scores what training wrote.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from typing import Sequence

from experiments import registry
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import read_lines
from experiments.translation import metrics
from experiments.translation.task import TEST_TRANSLATIONS_FILE

COLUMNS = ("source", "reference", "greedy", "beam")
DEFAULT_EDGES = (4, 6, 8, 10)


def read_translations(path: str) -> dict[str, list[str]]:
  """The columns of a test_translations.tsv (or of the one in the run directory `path`).

  Raises:
    UsageError: the file is missing or unreadable, its header is not source, reference, greedy,
      beam, or a line has another number of fields (naming the file and line).
  """
  if os.path.isdir(path):
    path = os.path.join(path, TEST_TRANSLATIONS_FILE)
  if not os.path.isfile(path):
    raise UsageError(f"{path}: no such file (a run writes {TEST_TRANSLATIONS_FILE} at the end of "
                     f"its training)")
  lines = read_lines(path)
  rows = list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
  if not rows or tuple(rows[0]) != COLUMNS:
    raise UsageError(f"{path}, line 1: expected the header {' '.join(COLUMNS)} (tab-separated), "
                     f"got {lines[0][:60]!r}" if lines else f"{path} is empty")
  out = {name: [] for name in COLUMNS}
  for number, row in enumerate(rows[1:], start=2):
    if len(row) != len(COLUMNS):
      raise UsageError(f"{path}, line {number}: expected {len(COLUMNS)} tab-separated fields, got "
                       f"{len(row)}")
    for name, value in zip(COLUMNS, row):
      out[name].append(value)
  if not out["source"]:
    raise UsageError(f"{path} holds no translations")
  return out


def by_length(runs: dict[str, dict[str, list[str]]], edges: Sequence[int]
              ) -> dict[str, dict[str, list[metrics.LengthBucket]]]:
  """Run name -> {'greedy': buckets, 'beam': buckets} (metrics.scores_by_length)."""
  return {name: {kind: metrics.scores_by_length(columns[kind], columns["reference"],
                                                columns["source"], edges)
                 for kind in ("greedy", "beam")}
          for name, columns in runs.items()}


def markdown(table: dict[str, dict[str, list[metrics.LengthBucket]]]) -> list[str]:
  """The table's lines: bucket, sources, then greedy / beam BLEU per run."""
  names = list(table)
  head = ["source words", "sources"] + [f"{n} {kind}" for n in names for kind in ("greedy", "beam")]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  first = table[names[0]]["greedy"]
  for row, bucket in enumerate(first):
    cells = [bucket.label, str(bucket.scores.sources if bucket.scores else 0)]
    for name in names:
      for kind in ("greedy", "beam"):
        scores = table[name][kind][row].scores
        cells.append("-" if scores is None else f"{scores.bleu:.2f}")
    lines.append("| " + " | ".join(cells) + " |")
  return lines


def run(args: argparse.Namespace, console: Console) -> int:
  """Reads the runs' translations and prints the table (and writes --json)."""
  if any(e < 1 for e in args.edges) or sorted(set(args.edges)) != list(args.edges):
    raise UsageError(f"--edges: expected strictly ascending positive word counts, got "
                     f"{args.edges}")
  runs = {}
  for path in args.runs:
    name = os.path.basename(os.path.normpath(path if os.path.isdir(path)
                                             else os.path.dirname(path) or path))
    runs[name if name not in runs else path] = read_translations(path)
  sources = {name: columns["source"] for name, columns in runs.items()}
  if len({tuple(s) for s in sources.values()}) > 1:
    console.note("note: the runs translated different test lines; each bucket's source count is "
                 f"the first run's ({next(iter(runs))})")
  table = by_length(runs, args.edges)
  for line in markdown(table):
    console.print(line)
  signature = next(b.scores.signatures["bleu"] for b in table[next(iter(table))]["greedy"]
                   if b.scores is not None)
  console.print(f"\nBLEU: sacreBLEU {signature}; source words: whitespace-separated")
  if args.json:
    record = {"edges": list(args.edges), "signature": signature, "runs": {
        name: {kind: [{"bucket": b.label, "lines": b.lines,
                       "sources": b.scores.sources if b.scores else 0,
                       "bleu": b.scores.bleu if b.scores else None,
                       "chrf": b.scores.chrf if b.scores else None} for b in buckets]
               for kind, buckets in kinds.items()}
        for name, kinds in table.items()}}
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(record, f, ensure_ascii=False, indent=2)
      f.write("\n")
    console.note(f"saved {args.json}")
  return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The runs and the buckets."""
  parser.add_argument("runs", nargs="+", metavar="RUN",
                      help="run directories (or their test_translations.tsv files)")
  parser.add_argument("--edges", type=int, nargs="+", default=list(DEFAULT_EDGES),
                      help="the buckets' upper bounds in source words, ascending (default: "
                           f"{' '.join(map(str, DEFAULT_EDGES))}: 1-4, 5-6, 7-8, 9-10, 11+)")
  parser.add_argument("--json", metavar="FILE", help="also write the figures here as JSON")


COMMAND = registry.Command(help="BLEU by source length of runs' test translations (Markdown)",
                           add_arguments=add_arguments, run=run,
                           description=__doc__.split("\n\n")[0])
