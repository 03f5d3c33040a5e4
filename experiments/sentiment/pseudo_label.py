"""`python -m experiments pseudo-label sentiment`: labels IMDB's unlabelled reviews with a trained
run, the teacher's half of self-training.

    python -m experiments pseudo-label sentiment --workdir runs/sentiment-ngram_attn \
        --out runs/sentiment-ngram_attn/pseudo_labels.npz [--data-dir ../shared/data/imdb] \
        [--checkpoint best] [--batch-size 256] [--limit N]

Reads the 'unsupervised' split of IMDB (50,000 reviews of the full data, 300 of the shipped
sample; by default from the data the run was trained on), classifies every review with the run's
best (or latest, or a step's) parameters, and writes each review's id, the predicted label and its
probability to --out (pipelines.pseudo_labels). A student run then trains on them with
`--data.pseudo_labels FILE --data.pseudo_min_probability P` (experiments/sentiment/configs.py).
Reviews without a word cannot be labelled: they are counted on stderr and left out of the file.
"""

from __future__ import annotations

import argparse
import datetime
from typing import Sequence

import numpy as np

from experiments import registry
from experiments import runs
from experiments.cli_flags import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.sentiment.cli import unlabelled_records
from pipelines import pseudo_labels as pseudo_lib

SPLIT = "unsupervised"


def label_reviews(run: runs.Run, records: Sequence[dict], batch_size: int = 256,
                  progress: bool = False) -> tuple[pseudo_lib.PseudoLabels, int]:
  """The run's labels for `records` ({'text': str, 'id'}), and how many had no word to classify."""
  texts = [record["text"] for record in records]
  rows, probabilities = run.task.probabilities(run.params, texts, batch_size, progress)  # (K, 2)
  labels = np.argmax(probabilities, axis=-1).astype(np.int32)  # (K,)
  meta = {"teacher": run.workdir, "model": run.config.model_name, "checkpoint": run.checkpoint,
          "step": run.step, "split": SPLIT, "reviews": len(records),
          "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
  ids = np.array([int(records[i]["id"]) for i in rows], np.int64)
  chosen = probabilities[np.arange(len(rows)), labels]
  labelled = pseudo_lib.PseudoLabels(ids, labels, chosen.astype(np.float32), meta)
  return labelled, len(texts) - len(rows)


def summary(labels: pseudo_lib.PseudoLabels) -> list[str]:
  """Readable lines: the label balance, and how many reviews pass each probability threshold."""
  n = len(labels.ids)
  lines = [f"{n} reviews labelled: {int(labels.labels.sum())} positive, "
           f"{n - int(labels.labels.sum())} negative"]
  for threshold in (0.6, 0.7, 0.8, 0.9, 0.95, 0.99):
    kept = labels.confident(threshold)
    lines.append(f"  probability >= {threshold:.2f}: {int(kept.sum())} reviews "
                 f"({int(labels.labels[kept].sum())} positive)")
  return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The command's flags."""
  parser.add_argument("--workdir", required=True, help="the trained sentiment run (the teacher)")
  parser.add_argument("--out", required=True, help="the pseudo-label file to write (.npz)")
  parser.add_argument("--data-dir", help="IMDB's archive or folder (default: the data the run "
                      "was trained on)")
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      metavar="best|latest|STEP", help="'best' (default), 'latest', or a step")
  parser.add_argument("--batch-size", type=int, default=256,
                      help="reviews classified at once (default 256)")
  parser.add_argument("--limit", type=int, help="label only the first N reviews (quick checks)")


def run(args: argparse.Namespace, console: Console) -> int:
  """Labels the unlabelled reviews, writes them to --out and prints the summary as notes.

  Raises:
    UsageError: --batch-size or --limit below 1, or a --workdir of another experiment.
    FileNotFoundError: a --workdir without a run, or a --data-dir without the data.
  """
  for flag, value in (("--batch-size", args.batch_size), ("--limit", args.limit)):
    if value is not None and value < 1:
      raise UsageError(f"{flag} must be at least 1, got {value}")
  teacher = runs.load_run(args.workdir, args.checkpoint, experiment="sentiment",
                          command="pseudo-label sentiment")
  records = unlabelled_records(teacher, args.data_dir)
  if args.limit is not None:
    records = records[:args.limit]
  labels, empty = label_reviews(teacher, records, args.batch_size, progress=True)
  pseudo_lib.save(args.out, labels)
  for line in summary(labels):
    console.note(line)
  if empty:
    console.note(f"{empty} reviews had no word to classify and are not in the file")
  console.note(f"written to {args.out} ({teacher.config.model_name}, {args.checkpoint} "
               f"checkpoint, step {teacher.step})")
  return 0


COMMAND = registry.Command(help="label IMDB's unlabelled reviews with a trained run (a "
                                "self-training student's data)",
                           add_arguments=add_arguments, run=run,
                           description=__doc__.split("\n\n")[0])
