"""The template's `predict` command: parsing and printing only (the task computes).

Prints one line per text: label, probability and the text, tab-separated; the three words with
the highest pooling weight are a note on standard error, and so is the cut of a text longer than
the model reads (data.max_len words: its first ones are used, as in every experiment).
"""

from __future__ import annotations

import argparse

from experiments import runs
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import cut_notice
from experiments.console import echo
from experiments.console import input_batches
from experiments.console import input_errors
from pipelines import text as text_lib


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """Flags of this experiment's predict command beyond the common ones (experiments/cli.py)."""
  parser.add_argument("--top-words", type=int, default=3,
                      help="how many of the most attended words to note per text")


def predict(args: argparse.Namespace, console: Console) -> int:
  """Classifies args.inputs with the run in args.workdir; returns the exit status."""
  if args.top_words < 0:
    raise UsageError(f"--top-words must be at least 0, got {args.top_words}")
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir,
                      experiment=getattr(args, "experiment", None))
  for batch in input_batches(args):  # written batch by batch, in memory that does not grow
    with input_errors():
      predictions = run.task.predict(run.params, list(batch.inputs))
    for number, (text, p) in enumerate(zip(batch.inputs, predictions), start=batch.first_number):
      total = len(text_lib.imdb_tokenize(text))
      if total > len(p.words):
        console.note(cut_notice(number, text, len(p.words), total, "words", "data.max_len"))
    for p in predictions:
      console.print(f"{p.label}\t{p.probability:.4f}\t{echo(p.text)}")
      top = sorted(zip(p.weights, p.words), reverse=True)[:args.top_words]
      if top:
        console.note("most attended: " + ", ".join(f"{w} {a:.3f}" for a, w in top))
  return 0
