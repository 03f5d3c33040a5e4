"""The `translate` command (`predict translation`): French for English sentences from a trained run.

    python -m experiments translate "I won !" "Go ." --workdir runs/translation-transformer \
        [--beam-size 4] [--num-results 3] [--length-penalty 0.6] [--heatmap attention.png]

prints one line per input: the best translation, its score (the log-probability, length-penalized
for beam search with a penalty) and the input, tab-separated; with --num-results the other beam
hypotheses below it. A header line, unknown source words and where heatmaps were saved are notes
on standard error. --heatmap saves the source-target attention of the best translation as a PNG.
"""

from __future__ import annotations

import argparse

from experiments import plots
from experiments import runs
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import input_errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The translation command's own flags (experiments/cli.py gives --beam-size, --heatmap ...)."""
  parser.add_argument("--length-penalty", type=float, default=None,
                      help="GNMT length penalty alpha for beam search (default: the run's)")


def predict(args: argparse.Namespace, console: Console) -> int:
  """Translates args.inputs with the run in args.workdir; returns the exit status."""
  beam = 1 if args.beam_size is None else args.beam_size
  if beam < 1 or args.num_results < 1:
    raise UsageError(f"--beam-size and --num-results must be at least 1, got {beam} and "
                     f"{args.num_results}")
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir)
  task = run.task
  num_results = min(args.num_results, beam)
  if beam == 1:
    alpha, search = 0.0, "greedy search"
  else:
    alpha = task.config.data.length_penalty if args.length_penalty is None else args.length_penalty
    search = f"beam search, beam {beam}, length penalty {alpha:g}"
  score = "log-probability" if alpha == 0 else "length-penalized log-probability"
  with input_errors():  # an input with no words
    translations = task.translate(run.params, list(args.inputs), beam_size=beam,
                                  num_results=num_results, length_penalty=alpha,
                                  with_attention=bool(args.heatmap), progress=True)
  console.note(f"# {task.config.model_name} from {args.workdir} ({args.checkpoint} checkpoint, "
               f"step {run.step}), {search}: translation, {score}, input")
  paths = plots.numbered_paths(args.heatmap, len(translations))
  for translation, path in zip(translations, paths):
    console.print(f"{translation.text}\t{translation.score:.4f}\t{translation.source}")
    for rank, (text, value) in enumerate(zip(translation.alternatives[1:],
                                             translation.alternative_scores[1:]), start=2):
      console.print(f"  {rank}. {text}\t{value:.4f}")
    if translation.unknown_source:
      console.note(f"unknown source words (read as <unk>): "
                   f"{', '.join(translation.unknown_source)}")
    if path is not None:
      task.draw_heatmap(translation, path)
      console.note(f"heatmap saved to {path}")
  return 0
