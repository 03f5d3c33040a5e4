"""`python -m experiments predict sentiment "TEXT" ... [--workdir W] [--heatmap out.png]`.

Loads a trained run (its config.json, the vocabulary saved beside its checkpoints, and the best or
latest parameters), classifies each text and prints the label, its probability and the attention
weight of every word (weights sum to 1 over the words). With --heatmap the attention is saved as a
PNG; with several texts the files are numbered (out-1.png, out-2.png, ...).
"""

from __future__ import annotations

import argparse
import os
from typing import Callable, Sequence

from experiments import trainer
from experiments.sentiment import task as task_lib
from pipelines.vocab import Vocab


def load_run(workdir: str, checkpoint: str = "best", data_dir: str | None = None
             ) -> tuple[task_lib.SentimentTask, object, int]:
  """(task, parameters, step) of a trained sentiment run.

  The vocabularies come from `<workdir>/vocab.json` (and bigram_vocab.json for a run with word
  bigrams) when the run saved them, else from the run's data (`data_dir` overrides where that
  lives).
  """
  config = trainer.load_config(workdir)
  if data_dir is not None:
    config.data_dir = data_dir
  vocabs = []
  for name in (task_lib.VOCAB_FILE, task_lib.BIGRAM_VOCAB_FILE):
    path = os.path.join(workdir, name)
    vocabs.append(Vocab.load(path) if os.path.exists(path) else None)
  task = task_lib.SentimentTask(config, vocab=vocabs[0], bigram_vocab=vocabs[1])
  params, step = trainer.restore_params(task, config, workdir, checkpoint)
  return task, params, step


def heatmap_paths(path: str, count: int) -> list[str]:
  """`path` for one text; path with -1, -2, ... before the extension for several."""
  if count == 1:
    return [path]
  stem, ext = os.path.splitext(path)
  return [f"{stem}-{i}{ext or '.png'}" for i in range(1, count + 1)]


def format_prediction(prediction: task_lib.Prediction) -> str:
  """The label line, then one 'word  weight' line per word (unknown words marked)."""
  lines = [f"{prediction.label_name}\t{prediction.probability:.4f}\t{prediction.text}"]
  width = max(len(w) for w in prediction.words)
  for word, unknown, weight in zip(prediction.words, prediction.unknown,
                                   prediction.word_weights):
    mark = "  (unknown)" if unknown else ""
    lines.append(f"  {word:<{width}}  {float(weight):.4f}{mark}")
  return "\n".join(lines)


def predict_command(args: argparse.Namespace, print_fn: Callable[[str], None] = print) -> int:
  """The `predict sentiment` command (arguments as in experiments/__main__.py)."""
  task, params, step = load_run(args.workdir, args.checkpoint, getattr(args, "data_dir", None))
  predictions = task.predict(params, list(args.inputs))
  print_fn(f"# {task.config.model_name} from {args.workdir} ({args.checkpoint} checkpoint, "
           f"step {step}): label, probability, text; then the attention weight per word")
  paths: Sequence[str | None] = ([None] * len(predictions) if not args.heatmap
                                 else heatmap_paths(args.heatmap, len(predictions)))
  for prediction, path in zip(predictions, paths):
    print_fn(format_prediction(prediction))
    if path is not None:
      task.draw_heatmap(prediction, path)
      print_fn(f"  heatmap saved to {path}")
  return 0
