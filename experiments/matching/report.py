"""`python -m experiments report matching`: scores a trained matching run on whole splits and
lists pairs it gets wrong, for docs/RESULTS.md.

    python -m experiments report matching --workdir runs/matching-esim [--splits dev test]
        [--checkpoint best] [--errors 20] [--seed 0] [--out report.json]

For each split: accuracy, F1 of label 1, macro-F1, ROC AUC (metrics.binary_metrics), the confusion
matrix [[true 0 predicted 0, true 0 predicted 1], [true 1 predicted 0, true 1 predicted 1]] and the
share of label 1 (the majority-class baseline is the share of label 0), at the argmax and, under
'tuned', at the threshold of highest dev accuracy (metrics.best_threshold), which also labels the
listed mistakes. Then, for the first split,
`--errors` of the pairs the model gets wrong, drawn at random (seeded) from its mistakes, half
false positives and half false negatives where there are enough, printed as a Markdown table
(sentence1, sentence2, label, p(same)) on stdout after the JSON, so they can be read and classified
by hand. The JSON (without the table) is written to --out (default <workdir>/report.json).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Sequence

import numpy as np

from experiments import registry
from experiments import runs
from experiments.cli_flags import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.matching import metrics as metrics_lib


def wrong_pairs(labels: np.ndarray, prob: np.ndarray, count: int, seed: int,
                threshold: float = 0.5) -> list[int]:
  """Up to `count` indices of wrong predictions (label 1 where prob >= threshold), half false
  positives and half false negatives (the other kind fills in where one runs short), drawn by a
  generator seeded with `seed`, in ascending order."""
  predicted = metrics_lib.predicted_labels(prob, threshold)
  false_pos = np.flatnonzero((predicted == 1) & (labels == 0))
  false_neg = np.flatnonzero((predicted == 0) & (labels == 1))
  rng = np.random.default_rng(seed)
  take_pos = min(len(false_pos), max(count // 2, count - len(false_neg)))
  take_neg = min(len(false_neg), count - take_pos)
  chosen = np.concatenate([rng.choice(false_pos, take_pos, replace=False),
                           rng.choice(false_neg, take_neg, replace=False)])
  return sorted(int(i) for i in chosen)


def split_report(run: runs.Run, split: str, threshold: float
                 ) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
  """(the metrics of one split at the argmax and at `threshold`, its labels, its p(same))."""
  labels, prob = run.task.split_probabilities(run.params, split)
  scores = metrics_lib.binary_metrics(labels, prob)
  scores.update(confusion=metrics_lib.confusion(labels, prob), pairs=int(len(labels)),
                positive_share=float(np.mean(labels == 1)))
  tuned = metrics_lib.binary_metrics(labels, prob, threshold)
  del tuned["auc"]
  scores["tuned"] = {"threshold": threshold, **tuned,
                     "confusion": metrics_lib.confusion(labels, prob, threshold)}
  return scores, labels, prob


def error_table(pairs: Sequence[tuple[str, str]], labels: np.ndarray, prob: np.ndarray,
                rows: Sequence[int]) -> list[str]:
  """The Markdown table of the chosen pairs."""
  out = ["| # | sentence1 | sentence2 | label | p(same) |", "|---|---|---|---|---|"]
  for row in rows:
    first, second = (text.replace("|", "\\|") for text in pairs[row])
    out.append(f"| {row} | {first} | {second} | {labels[row]} | {prob[row]:.3f} |")
  return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The report's flags."""
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--splits", nargs="+", default=["dev", "test"], choices=("dev", "test"))
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      metavar="best|latest|STEP")
  parser.add_argument("--data-dir", help="where the run's data lives, if it moved")
  parser.add_argument("--errors", type=int, default=20,
                      help="how many wrong pairs of the first split to list (0: none)")
  parser.add_argument("--seed", type=int, default=0, help="seeds the choice of wrong pairs")
  parser.add_argument("--out", help="the JSON file (default <workdir>/report.json)")


def run_report(args: argparse.Namespace, console: Console) -> int:
  """Scores the run, writes the JSON to --out, prints it and the table of wrong pairs."""
  if args.errors < 0:
    raise UsageError(f"--errors must be at least 0, got {args.errors}")
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir, experiment="matching",
                      command="report matching")
  report: dict[str, Any] = {"workdir": args.workdir, "model": run.config.model_name,
                            "checkpoint": args.checkpoint, "step": run.step}
  table: list[str] = []
  threshold = metrics_lib.best_threshold(*run.task.split_probabilities(run.params, "dev"))
  for i, split in enumerate(args.splits):
    scores, labels, prob = split_report(run, split, threshold)
    report[split] = scores
    if i == 0 and args.errors > 0:
      rows = wrong_pairs(labels, prob, args.errors, args.seed, threshold)
      report[split]["errors_listed"] = rows
      table = error_table(run.task.data.texts(split), labels, prob, rows)
  out = args.out or os.path.join(args.workdir, "report.json")
  with open(out, "w", encoding="utf-8") as f:
    json.dump(report, f, indent=2, ensure_ascii=False)
  console.print(json.dumps(report, indent=2, ensure_ascii=False))
  for line in table:
    console.print(line)
  return 0


COMMAND = registry.Command(help="score a trained matching run on whole splits (JSON) and list "
                           "pairs it gets wrong", add_arguments=add_arguments, run=run_report,
                           description=__doc__.split("\n\n")[0])
