"""The `couplet` command: lower lines for upper lines from a trained run.

    python -m experiments couplet "晚风摇树树还挺" [--workdir runs/couplet-lstm] [--beams 3]
        [--beam-size 10] [--free] [--heatmap attention.png]

For each upper line it prints the best lower line; with --beams N the N best lines of the beam,
one per line as "rank<TAB>line<TAB>log-probability". Several upper lines are separated by a blank
line. By default every lower line has exactly as many characters as its upper line (the length
constraint of zoo.search); --free lets the model end the line where it likes. --heatmap saves the
attention of the best line over the upper line (numbered -1, -2 ... for several upper lines).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

from experiments import trainer
from experiments.couplet import task as task_lib
from experiments.translation.decode import heatmap_paths
from pipelines.vocab import Vocab


def add_couplet_arguments(parser: argparse.ArgumentParser) -> None:
  """The couplet command's own flags (the engine gives --workdir, --beam-size, --heatmap ...)."""
  parser.add_argument("--beams", type=int, default=None, metavar="N",
                      help="print the N best lower lines of the beam (default 1)")
  parser.add_argument("--free", action="store_true",
                      help="no length constraint: the model decides where the line ends")


def load_run(workdir: str, which: str = "best", data_dir: str | None = None
             ) -> tuple[task_lib.CoupletTask, Any, int]:
  """(task, params, step) of a trained run; the vocabulary comes from the workdir when saved
  there, so the couplet data is not read."""
  config = trainer.load_config(workdir)
  if data_dir is not None:
    config.data_dir = data_dir
  vocab_path = os.path.join(workdir, task_lib.VOCAB_FILE)
  vocab = Vocab.load(vocab_path) if os.path.exists(vocab_path) else None
  task = task_lib.CoupletTask(config, vocab=vocab)
  params, step = trainer.restore_params(task, config, workdir, which)
  return task, params, step


def couplet_command(args: argparse.Namespace, print_fn: Callable[[str], None] = print) -> int:
  """`python -m experiments couplet ...` (arguments as in experiments/__main__.py)."""
  num_results = getattr(args, "beams", None) or args.num_results or 1
  if num_results < 1 or (args.beam_size is not None and args.beam_size < 1):
    print(f"error: --beams and --beam-size must be at least 1, got {num_results} and "
          f"{args.beam_size}", file=sys.stderr)
    return 2
  task, params, _ = load_run(args.workdir, args.checkpoint, getattr(args, "data_dir", None))
  try:
    generations = task.generate(params, list(args.inputs), num_results=num_results,
                                beam_size=args.beam_size,
                                constrained=not getattr(args, "free", False))
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  paths = (heatmap_paths(args.heatmap, len(generations)) if args.heatmap
           else [None] * len(generations))
  for i, (generation, path) in enumerate(zip(generations, paths)):
    if i:
      print_fn("")
    if num_results == 1:
      print_fn(generation.lines[0])
    else:
      for rank, (line, score) in enumerate(zip(generation.lines, generation.scores), start=1):
        print_fn(f"{rank}\t{line}\t{score:.4f}")
    if generation.unknown:
      print(f"note: characters outside the vocabulary (read as <unk>): "
            f"{''.join(generation.unknown)}", file=sys.stderr)
    if path is not None:
      task.draw_heatmap(params, generation, path)
      print(f"attention heatmap saved to {path}", file=sys.stderr)
  return 0
