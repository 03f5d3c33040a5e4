"""The matching commands: `predict matching` and `evaluate --pairs` (parsing and printing only).

    python -m experiments predict matching "花呗怎么还款" "怎么还花呗" --workdir runs/matching-esim
    python -m experiments predict matching --input-file pairs.tsv --workdir RUN > labels.tsv
    python -m experiments predict matching "花呗怎么还款" "怎么还花呗" --workdir RUN \
        --heatmap pair.png [--layer -1] [--head 0]
    python -m experiments evaluate --workdir RUN --pairs labelled.tsv

`predict` writes exactly one line per pair, in input order: `label<TAB>probability`, the label 0
(different meaning) or 1 (same meaning) as in the data, and the probability of label 1 with four
decimals; the label is 1 where that probability is at least --threshold (0.5 by default; a run's
results.json holds the threshold of highest dev accuracy). Pairs come as two arguments each (`A B [A B ...]`), or one per line of --input-file or
standard input as `sentence1<TAB>sentence2` (a third column, such as a label, is ignored; a
fourth is an error naming the line; a first line that names the columns, such as
`text_a<TAB>text_b<TAB>label`, is skipped with a note); an argument holding a TAB is a whole pair
too. A question longer than the run reads (data.max_len
tokens) is cut, with a note on standard error saying how much was read. --heatmap saves, per pair,
the attention between the two questions (numbered -1, -2, ... for several pairs): the soft
alignment of decomposable / esim, each question's pooling weights for siamese, and for the
Transformer the a-to-b block of one layer (--layer, default the last) and one head (--head,
default the mean over heads) under the [CLS] row.

`evaluate --pairs FILE` scores a run on your own labelled pairs (`sentence1<TAB>sentence2<TAB>label`
lines, label 0 or 1, a header line skipped as above) and prints JSON: accuracy, F1 of label 1,
macro-F1, ROC AUC, the confusion matrix and the number of pairs.
"""

from __future__ import annotations

import argparse
import json

from experiments import plots
from experiments import runs
from experiments.console import MAX_LINE_BYTES
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import header_note
from experiments.console import input_batches
from experiments.console import input_errors
from experiments.console import open_lines
from experiments.matching import metrics as metrics_lib
from experiments.matching.task import Prediction
from pipelines.sources import is_header
from pipelines.tasks.matching import PAIR_HEADER
from pipelines.tasks.matching import pair_rows
from experiments.task import FittedTask


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The matching command's own flags (experiments/cli.py gives --heatmap, --input-file ...)."""
  parser.add_argument("--layer", type=int, default=-1,
                      help="with --heatmap on a Transformer run: the layer drawn (default -1, the "
                      "last)")
  parser.add_argument("--threshold", type=float, default=0.5,
                      help="label 1 where p(same) >= this (default 0.5, the argmax; a run's "
                      "results.json has the threshold of highest dev accuracy as "
                      "test/threshold)")
  parser.add_argument("--head", type=int, default=None,
                      help="with --heatmap on a Transformer run: the head drawn (default: the "
                      "mean over heads)")


def _excerpt(text: str, limit: int = 40) -> str:
  return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_pairs(inputs: list[str], from_file: str | None, first_line: int = 1,
                on_header=None) -> list[tuple[str, str]]:
  """The pairs of a predict command's inputs (see the module docstring for the forms); the
  inputs are lines first_line, first_line + 1, ... of the file, whose line 1, when it is a header
  (PAIR_HEADER), is skipped and handed to `on_header`.

  Raises:
    UsageError: a line of a file without a TAB or with more than three columns, a TAB-separated
      input with an empty sentence, an odd number of plain arguments.
  """
  tabbed = ["\t" in text for text in inputs]
  if from_file is not None or any(tabbed):
    where = "standard input" if from_file in (None, "-") else from_file
    pairs = []
    for number, text in enumerate(inputs, start=first_line):
      fields = text.split("\t")
      if from_file is not None and number == 1 and is_header(fields, PAIR_HEADER):
        if on_header is not None:
          on_header(text)
        continue
      place = f"line {number} of {where}" if from_file is not None else f"input {number}"
      if len(fields) < 2:
        raise UsageError(f"{place} has no TAB: every pair is sentence1<TAB>sentence2, got "
                         f"{_excerpt(text)}")
      if len(fields) > 3:
        raise UsageError(f"{place} has {len(fields)} columns; a pair has at most three, "
                         f"sentence1<TAB>sentence2<TAB>label: {_excerpt(text)}")
      if not fields[0].strip() or not fields[1].strip():
        raise UsageError(f"{place} has an empty sentence: {_excerpt(text)}")
      pairs.append((fields[0], fields[1]))
    return pairs
  if len(inputs) % 2:
    raise UsageError(f"got {len(inputs)} questions: give them two by two (each pair as two "
                     "arguments), or as sentence1<TAB>sentence2 lines with --input-file")
  return [(inputs[i], inputs[i + 1]) for i in range(0, len(inputs), 2)]


def predict(args: argparse.Namespace, console: Console) -> int:
  """Classifies the pairs of args.inputs with the run in args.workdir, batch by batch; returns
  the exit status."""
  check_options(args)
  if isinstance(args.inputs, list):  # arguments: their errors come before the run is loaded
    parse_pairs(args.inputs, args.input_file)
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir, experiment="matching")
  source = None if isinstance(args.inputs, list) else (args.input_file or "-")
  name = "standard input" if source == "-" else source
  done = 0  # pairs answered so far
  for batch in input_batches(args):
    pairs = parse_pairs(batch.inputs, source, batch.first_number,
                        lambda line: console.note(header_note(name, line)))
    batch.numbered = not (done == 0 and batch.last and len(pairs) == 1)
    batch.first_number = done + 1
    if pairs:
      answer(run, pairs, batch, console)
    done += len(pairs)
  if not done:
    raise UsageError(f"{name} holds no pairs, only a header line")
  return 0


def check_options(args: argparse.Namespace) -> None:
  """The UsageError of a --threshold outside [0, 1] (before any run is loaded)."""
  if not 0.0 <= args.threshold <= 1.0:
    raise UsageError(f"--threshold must lie in [0, 1], got {args.threshold}")


def format_prediction(prediction: Prediction, threshold: float) -> str:
  """The line `predict` prints for one pair: `label<TAB>probability` (label 1 where p(same) >=
  threshold)."""
  label = int(prediction.probability >= threshold)
  return f"{label}\t{prediction.probability:.4f}"


def answer(run: runs.Run, pairs: list[tuple[str, str]], args: argparse.Namespace,
           console: Console) -> list[Prediction]:
  """What `predict` does once the options are checked, the pairs parsed and the run loaded (the
  explorer calls it too): classifies the pairs, prints the lines through `console` and returns
  the predictions."""
  task = run.task
  # A fitted model (the overlap baseline) reads whole questions; a network their first max_len.
  limit = float("inf") if isinstance(task, FittedTask) else task.config.data.max_len
  first = getattr(args, "first_number", 1)
  with input_errors():
    for number, pair in enumerate(pairs, start=first):
      for name, text in zip(("first", "second"), pair):
        count = len(task.tokenize(text))
        if count > limit:
          console.note(f"pair {number}: the {name} question has {count} tokens; the model reads "
                       f"the first {limit}")
    predictions = task.predict(run.params, pairs)
  if args.heatmap is not None and not predictions[0].attention:
    raise UsageError(f"--heatmap: the {run.config.model_name} model has no attention to draw")
  if args.heatmap is not None and args.head is not None:
    if "self_attention" not in predictions[0].attention:
      raise UsageError("--head applies to Transformer runs only")
    heads = predictions[0].attention["self_attention"].shape[1]  # (layers, H, n, n)
    if not 0 <= args.head < heads:
      raise UsageError(f"--head must lie in [0, {heads}), got {args.head}")
  paths = plots.numbered_paths(args.heatmap, len(predictions), first,
                               getattr(args, "numbered", None))
  for prediction, path in zip(predictions, paths):
    console.print(format_prediction(prediction, args.threshold))
    unknown = [t for side, flags in zip(prediction.tokens, prediction.unknown)
               for t, u in zip(side, flags) if u]
    if unknown:
      console.note(f"unknown to the vocabulary: {' '.join(unknown[:20])}")
    if path is not None:
      if "self_attention" in prediction.attention:
        layers = prediction.attention["self_attention"].shape[0]
        if not -layers <= args.layer < layers:
          raise UsageError(f"--layer must lie in [{-layers}, {layers}), got {args.layer}")
      task.draw_heatmap(prediction, path, layer=args.layer, head=args.head)
      console.note(f"heatmap saved to {path}")
  return predictions


def evaluate_pairs(args: argparse.Namespace, console: Console) -> int:
  """`evaluate --pairs FILE`: the metrics of the run on the user's labelled pairs, as JSON."""
  reader = open_lines(args.pairs, max_line_bytes=getattr(args, "max_line_bytes", MAX_LINE_BYTES))
  headers = []  # the header line, when line 1 is one
  with input_errors():  # read line by line: a line over --max-line-bytes is refused unread
    rows = list(pair_rows(reader, args.pairs, headers.append))
  for line in headers:
    console.note(header_note(args.pairs, line))
  unlabelled = [i for i, (_, _, label) in enumerate(rows, start=1 + len(headers))
                if label is None]
  if unlabelled:
    raise UsageError(f"line {unlabelled[0]} of {args.pairs} has no label ({len(unlabelled)} "
                     "lines without one): evaluate needs sentence1<TAB>sentence2<TAB>label lines")
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir, experiment="matching",
                      command="evaluate --pairs")
  labels = [label for _, _, label in rows]
  with input_errors():
    prob = run.task.probabilities(run.params, [(a, b) for a, b, _ in rows])
    scores = metrics_lib.binary_metrics(labels, prob)
  scores.update(confusion=metrics_lib.confusion(labels, prob), pairs=len(rows),
                checkpoint=str(args.checkpoint))
  console.print(json.dumps(scores, indent=2))
  return 0
