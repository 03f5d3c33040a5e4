"""`python -m experiments blend sentiment`: saved models' log-odds blended on dev, without fitting
any model again.

    python -m experiments blend sentiment --out runs/imdb37/seed0/blend.json \
        --member nbsvm=runs/imdb37/seed0/members/nbsvm.npz \
        --member lstm=docs/runs/imdb_lm/cpu-recipe/head128/classifier-seed0.npz ... \
        [--blend log_loss|grid] [--seed 0]

Each FILE is a member file: dev's and test's log-odds of 'positive' with IMDB's record indices and
labels, as `ensemble sentiment --save-members` (ensemble.py) writes them for its own models (the
run, NBSVM, paragraph vectors) and `lstm_lm.save_member` for any model's. All must score the same
dev and test reviews in the same order (the first file's are the reference; a file of other reviews
is refused, naming it). The weights are chosen on dev by ensemble.py's rules (its docstring:
'log_loss' by default, or 'grid'), with the same stability measures, and test is scored once; the
record (each member's dev and test accuracy and what its file says of it, the blend) goes to --out
as JSON and a summary to stderr. With the same members in the same order, the blend is the one
`ensemble sentiment` writes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from typing import Any, Mapping

import numpy as np

from experiments import registry
from experiments.console import Console
from experiments.console import UsageError
from experiments.sentiment.ensemble import BLEND_RULES
from experiments.sentiment.ensemble import blend_scores
from experiments.sentiment.ensemble import load_member
from experiments.sentiment.ensemble import parse_members
from experiments.sentiment.ensemble import read_member

SPLITS = ("dev", "test")


def blend_members(members: Mapping[str, str], rule: str = "log_loss", seed: int = 0,
                  console: Console | None = None) -> dict[str, Any]:
  """The blend of the member files `members` (name -> path, in order of preference) chosen on dev.

  Returns:
    {'members': name -> the file's record (`ensemble.read_member`), 'reviews': split -> count,
     'ensemble': `ensemble.blend_scores`' record, 'written'}.
  """
  if len(members) < 2:
    raise ValueError(f"a blend needs at least two members, got {list(members)}")
  console = console or Console()
  first = load_member(next(iter(members.values())))
  index = {split: first[f"{split}_index"] for split in SPLITS}
  labels = {split: np.asarray(first[f"{split}_labels"]) for split in SPLITS}
  records, scores = {}, {}
  for name, path in members.items():
    records[name], scores[name] = read_member(path, index, labels)
    console.note(f"member {name} read from {path}: dev {records[name]['dev_accuracy']:.4f}  "
                 f"test {records[name]['test_accuracy']:.4f}")
  return {"members": records, "reviews": {split: len(index[split]) for split in SPLITS},
          "ensemble": blend_scores(scores, labels, rule, seed),
          "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The command's flags."""
  parser.add_argument("--out", required=True, help="the JSON file to write")
  parser.add_argument("--member", metavar="NAME=FILE", action="append", default=[],
                      help="a saved model's dev and test log-odds (`ensemble sentiment "
                           "--save-members`, lstm_lm.save_member); at least two, in order of "
                           "preference")
  parser.add_argument("--blend", choices=BLEND_RULES, default="log_loss",
                      help="how dev chooses the weights (ensemble.py's rules; default log_loss)")
  parser.add_argument("--seed", type=int, default=0,
                      help="the resampling of the rule's stability measures (default 0)")


def run_blend(args: argparse.Namespace, console: Console) -> int:
  """Blends the --member files, writes the record to --out and prints the summary as notes.

  Raises:
    UsageError: fewer than two members, a malformed one, or one of other reviews than the first.
  """
  members = parse_members(args.member)
  if len(members) < 2:
    raise UsageError(f"--member: a blend needs at least two, got {len(members)}")
  try:
    record = blend_members(members, args.blend, args.seed, console)
  except ValueError as error:
    if not str(error).startswith("--member"):
      raise
    raise UsageError(str(error)) from None
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(record, f, indent=2)
  ens = record["ensemble"]
  weights = "  ".join(f"{name} {w:.2f}" for name, w in ens["weights"].items())
  console.note(f"blend {weights} (rule {ens['rule']}): dev {ens['dev_accuracy']:.4f}  "
               f"test {ens['test_accuracy']:.4f}; {ens['folds']}-fold cross-validated dev "
               f"accuracy {ens['cv_dev_accuracy']:.4f}")
  console.note(f"written to {args.out}")
  return 0


COMMAND = registry.Command(help="blend saved models' dev and test log-odds (JSON), nothing "
                                "refitted", add_arguments=add_arguments, run=run_blend,
                           description=__doc__.split("\n\n")[0])
