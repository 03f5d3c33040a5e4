"""The flags that the engine's commands (experiments/cli.py) and the experiments' own command code
(each experiment's cli.py) share, so that an experiment's command names no engine command module.

    add_predict_arguments(parser)   every predict command's flags (inputs, --workdir, --heatmap ...)
    add_decoding_arguments(parser)  --beam-size and --num-results, for experiments that decode
    checkpoint_choice               --checkpoint's type: best, latest or a kept step
"""

from __future__ import annotations

import argparse

from experiments import runs
from experiments.console import add_line_limit_argument


def checkpoint_choice(value: str) -> str:
  """--checkpoint's type: 'best', 'latest' or the step number of a kept checkpoint."""
  if not runs.is_checkpoint_choice(value):
    raise argparse.ArgumentTypeError(f"expected best, latest or a step number, got {value!r}")
  return value


def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
  """The flags every experiment's predict command has (its own come from its cli.py)."""
  parser.add_argument("inputs", nargs="*", help="texts to run the model on (none: read them one "
                      "per line from --input-file or standard input)")
  parser.add_argument("--input-file", metavar="PATH", help="read the inputs from this UTF-8 file, "
                      "one per line ('-': standard input)")
  parser.add_argument("--workdir", help="the training run's directory (default: runs/<experiment>-"
                      "<model>)")
  parser.add_argument("--model", help="the model, to find the default --workdir")
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      metavar="best|latest|STEP")
  parser.add_argument("--data-dir", help="where the run's data lives, if it moved (read only when "
                      "the run did not save its vocabularies)")
  parser.add_argument("--heatmap", metavar="PNG", help="also save the attention heatmap here "
                      "(numbered -1, -2, ... for several inputs)")
  add_line_limit_argument(parser)


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
  """--beam-size and --num-results, for the predict commands of the experiments that decode with
  a search (translation, couplet), which call this from their own add_arguments: a classifier's
  command does not offer flags it would ignore."""
  parser.add_argument("--beam-size", type=int, help="beam width (default: the run's own "
                      "data.beam_size; 1: greedy search)")
  parser.add_argument("--num-results", type=int, default=1, help="how many results per input")
