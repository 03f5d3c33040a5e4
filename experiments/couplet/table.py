"""`python -m experiments table couplet`: random couplets of a split side by side, for a reader to
judge by eye (docs/RESULTS.md).

    python -m experiments table couplet --workdirs runs/couplet/transformer_cpu \
        runs/couplet/lstm_cpu [--count 20] [--seed 0] [--split test] [--free] [--force-punct]
        [--no-copy] [--out table.md]

Draws `--count` couplets of the split uniformly at random without replacement (numpy's
default_rng(--seed); shown in split order), generates the best lower line of each with every run
(beam search with the run's beam size, under the decoding form the flags ask for, as in the
`couplet` command: by default the exact length only), and prints a Markdown table: number, upper
line, reference, then one column per run, headed by its named run (or its directory when two runs
share a name, numbered when a directory is given twice). The runs must hold the same split: the same upper lines at the drawn positions,
which they do when they were prepared from the same data with the same options.
"""

from __future__ import annotations

import argparse
import os
from typing import Sequence

import numpy as np

from experiments import registry
from experiments import runs
from experiments.cli_flags import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.couplet import cli as couplet_cli


def pick_indices(size: int, count: int, seed: int) -> list[int]:
  """`count` distinct positions of a split of `size` couplets, drawn with default_rng(seed), in
  ascending order.

  Raises:
    ValueError: for count < 1 or more couplets than the split has.
  """
  if count < 1 or count > size:
    raise ValueError(f"cannot draw {count} couplets from a split of {size}; ask for 1 to {size}")
  return sorted(int(i) for i in np.random.default_rng(seed).choice(size, count, replace=False))


def _cell(text: str) -> str:
  return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(uppers: Sequence[str], references: Sequence[str],
                   columns: dict[str, Sequence[str]]) -> str:
  """A Markdown table, one row per couplet: number, upper line, reference, each column's line."""
  for name, lines in columns.items():
    if len(lines) != len(uppers):
      raise ValueError(f"column {name!r} has {len(lines)} lines for {len(uppers)} upper lines")
  header = ["#", "upper line", "reference", *columns]
  rows = ["| " + " | ".join(map(_cell, header)) + " |",
          "|" + "---:|" + "---|" * (len(header) - 1)]
  for i, (upper, reference) in enumerate(zip(uppers, references)):
    cells = [str(i + 1), upper, reference, *(lines[i] for lines in columns.values())]
    rows.append("| " + " | ".join(map(_cell, cells)) + " |")
  return "\n".join(rows) + "\n"


def _column_names(workdirs: Sequence[str], names: Sequence[str]) -> list[str]:
  """The runs' names; their directories where names repeat; numbered where those repeat too."""
  labels = list(names) if len(set(names)) == len(names) else [os.path.normpath(w)
                                                              for w in workdirs]
  if len(set(labels)) == len(labels):
    return labels
  return [f"{label} ({i})" for i, label in enumerate(labels, start=1)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The table's flags: the runs, the draw, and the couplet command's decoding form flags."""
  parser.add_argument("--workdirs", nargs="+", required=True, help="trained couplet runs")
  parser.add_argument("--count", type=int, default=20, help="couplets to draw (default 20)")
  parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
  parser.add_argument("--split", choices=("dev", "test"), default="test")
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      metavar="best|latest|STEP")
  parser.add_argument("--data-dir", help="where the runs' data lives, if moved")
  couplet_cli.add_arguments(parser)
  parser.add_argument("--out", help="also write the table to this file")


def run(args: argparse.Namespace, console: Console) -> int:
  """Draws the couplets, generates each run's lines and prints the table."""
  options = couplet_cli.form_options(args)
  try:
    loaded = [runs.load_run(w, args.checkpoint, args.data_dir, experiment="couplet",
                            command="table couplet") for w in args.workdirs]
  except FileNotFoundError as e:  # a directory that holds no run
    raise UsageError(str(e)) from e
  first = loaded[0].task.data
  uppers_all, references_all = first.sources(args.split), first.references(args.split)
  try:
    indices = pick_indices(len(uppers_all), args.count, args.seed)
  except ValueError as e:
    raise UsageError(f"--count {args.count}: {e}") from e
  uppers = [uppers_all[i] for i in indices]
  references = [references_all[i] for i in indices]
  names, columns = [], []
  for workdir, run in zip(args.workdirs, loaded):
    theirs = run.task.data.sources(args.split)
    if len(theirs) != len(uppers_all) or any(theirs[i] != u for i, u in zip(indices, uppers)):
      raise UsageError(f"{workdir} holds another {args.split} split than {args.workdirs[0]} "
                       "(prepared from other data or options); compare runs of the same data")
    names.append(run.task.config.model_name or os.path.basename(os.path.normpath(workdir)))
    columns.append([g.lines[0] for g in run.task.generate(
        run.params, uppers, options=options, length_penalty=args.length_penalty,
        progress=True)])
  table = markdown_table(uppers, references, dict(zip(_column_names(args.workdirs, names),
                                                      columns)))
  console.note(f"{args.count} {args.split} couplets drawn with seed {args.seed} "
               f"(positions {', '.join(map(str, indices))}); decoding: {options.name}")
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      f.write(table)
  console.print(table.rstrip("\n"))
  return 0



COMMAND = registry.Command(help="random couplets of a split, each run's lower line beside the "
                           "reference (Markdown)", add_arguments=add_arguments, run=run,
                           description=__doc__.split("\n\n")[0])
