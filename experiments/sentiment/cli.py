"""The `predict sentiment` command (alias `classify`): labels and attention for review texts.

    python -m experiments predict sentiment "TEXT" ... [--workdir W] [--weights]
        [--heatmap out.png]

Loads a trained run (runs.load_run: its config, the vocabularies saved beside its checkpoints and
the best or latest parameters), classifies each text and prints one line per text: the label, its
probability and the text (an excerpt of a long one: console.echo), tab-separated. With --weights
each line is followed by the attention weight of every word (weights sum to 1 over the words); with
--heatmap the attention is saved as a PNG; with several texts the files are numbered (out-1.png,
out-2.png, ...). A model without attention (fitted.py's) refuses both (exit 2). A review longer
than the run reads (data.max_len words) is classified by its first data.max_len words, with a note
on standard error saying so.
"""

from __future__ import annotations

import argparse

from experiments import plots
from experiments import runs
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import cut_notice
from experiments.console import echo
from experiments.console import input_batches
from experiments.console import input_errors
from experiments.sentiment.task import Prediction
from experiments.sentiment.task import read_unlabelled
from pipelines import text as text_lib


def load_sentiment_run(workdir: str, checkpoint: str, data_dir: str | None,
                       purpose: str) -> runs.Run:
  """runs.load_run for a command that needs a sentiment run; a UsageError (naming `purpose`, e.g.
  'ensembles') for a missing run or one of another experiment."""
  try:
    run = runs.load_run(workdir, checkpoint, data_dir)
  except FileNotFoundError as e:
    raise UsageError(str(e)) from e
  if run.config.experiment != "sentiment":
    raise UsageError(f"{workdir} is a {run.config.experiment!r} run; {purpose} need a "
                     f"sentiment run")
  return run


def unlabelled_records(run: runs.Run, data_dir: str | None = None) -> list[dict]:
  """IMDB's 'unsupervised' split ({'text', 'id'} records, text as str) from `data_dir` (default:
  the data the run was trained on), prepared where the run's data was."""
  return read_unlabelled(data_dir if data_dir is not None else run.config.data_dir,
                         run.config.data.prepared_dir)


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """`predict sentiment`'s own flag."""
  parser.add_argument("--weights", action="store_true", help="under each text's line, the "
                      "attention weight of every word (models with attention)")


def format_prediction(prediction: Prediction, weights: bool = False) -> list[str]:
  """The label line; with `weights`, then one 'word  weight' line per word (unknown words marked;
  none for a model without attention)."""
  lines = [f"{prediction.label_name}\t{prediction.probability:.4f}\t{echo(prediction.text)}"]
  if not weights or prediction.word_weights is None:
    return lines
  width = max(len(w) for w in prediction.words)
  for word, unknown, weight in zip(prediction.words, prediction.unknown,
                                   prediction.word_weights):
    mark = "  (unknown)" if unknown else ""
    lines.append(f"  {word:<{width}}  {float(weight):.4f}{mark}")
  return lines


def predict(args: argparse.Namespace, console: Console) -> int:
  """Classifies args.inputs with the run in args.workdir, batch by batch; returns the exit
  status."""
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir, experiment="sentiment")
  for batch in input_batches(args):
    answer(run, batch, console)
  return 0


def answer(run: runs.Run, args: argparse.Namespace, console: Console) -> list[Prediction]:
  """What `predict` does once the run is loaded (the explorer calls it too): classifies
  args.inputs (one batch of console.input_batches, or a list), prints the lines through
  `console` (with args.weights, if given, each word's weight) and returns the predictions.

  Raises:
    UsageError: --weights or --heatmap for a model without attention (before any line).
  """
  first = getattr(args, "first_number", 1)
  weights = getattr(args, "weights", False)
  if weights and not run.task.has_attention:
    raise UsageError(f"--weights: the {run.config.model_name} model has no attention weights to "
                     "print")
  with input_errors():  # a text with no words
    predictions = run.task.predict(run.params, list(args.inputs))
  if args.heatmap is not None and predictions[0].attention is None:
    raise UsageError(f"--heatmap: the {run.config.model_name} model has no attention to draw")
  for number, (text, prediction) in enumerate(zip(args.inputs, predictions), start=first):
    total = len(text_lib.imdb_tokenize(text))
    if total > len(prediction.words):
      console.note(cut_notice(number, text, len(prediction.words), total, "words",
                              "data.max_len"))
  if first == 1:
    then = "; then the attention weight per word" if weights else ""
    console.note(f"# {run.config.model_name} from {args.workdir} ({args.checkpoint} checkpoint, "
                 f"step {run.step}): label, probability, text{then}")
  paths = plots.numbered_paths(args.heatmap, len(predictions), first,
                               getattr(args, "numbered", None))
  for prediction, path in zip(predictions, paths):
    for line in format_prediction(prediction, weights):
      console.print(line)
    if path is not None:
      run.task.draw_heatmap(prediction, path)
      console.note(f"heatmap saved to {path}")
  return predictions
