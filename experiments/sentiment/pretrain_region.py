"""Pretrains a region embedding on a sentiment run's reviews and saves it, fitting no classifier:
for the ensemble's `--region-embedding` (experiments.sentiment.ensemble).

    python -m experiments.sentiment.pretrain_region --workdir runs/imdb37/seed0/student \
        --out runs/imdb37/seed0/student/region-width3.region.npz [--width 5] [--epochs 2] \
        [--dim 100] [--seed 0] [--checkpoint best] [--data-dir DIR]

The embedding is the ensemble's (region_cnn.pretrain on the run's labelled training reviews and
IMDB's unlabelled ones, in the run's vocabulary): the same settings and seed give the file the
ensemble would save, so an embedding of another width can be pretrained once, on a free core,
and read beside the first by every later ensemble of the run.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Sequence

from experiments.cli_flags import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import run_command
from experiments.sentiment import region_cnn
from experiments.sentiment.cli import load_sentiment_run
from experiments.sentiment.ensemble import region_pretraining_reviews
from experiments.sentiment.region_cnn import RegionConfig

SUFFIX = ".region.npz"  # the ensemble's name for its saved embeddings


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m experiments.sentiment.pretrain_region",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, help="the trained sentiment run")
  parser.add_argument("--out", required=True, help=f"the embedding file to write (*{SUFFIX})")
  parser.add_argument("--width", type=int, default=RegionConfig.region,
                      help=f"the words of a region (odd; default {RegionConfig.region})")
  parser.add_argument("--epochs", type=float, default=RegionConfig.pretrain_epochs,
                      help=f"passes over the reviews' tokens (default "
                           f"{RegionConfig.pretrain_epochs:g})")
  parser.add_argument("--dim", type=int, default=RegionConfig.dim,
                      help=f"the region vector's size (default {RegionConfig.dim})")
  parser.add_argument("--seed", type=int, default=0,
                      help="the initialization's and the draws' seed (the ensemble's --seed)")
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      help="'best' (default), 'latest', or a step")
  parser.add_argument("--data-dir", help="where the run's data lives now, if it moved")
  return parser


def _run(args: argparse.Namespace, console: Console) -> int:
  if not args.out.endswith(SUFFIX):
    raise UsageError(f"--out must end in {SUFFIX} (the ensemble's name for embeddings), got "
                     f"{args.out}")
  if not args.epochs > 0:
    raise UsageError(f"--epochs must be positive, got {args.epochs}")
  try:
    config = RegionConfig(region=args.width, dim=args.dim, pretrain_epochs=args.epochs,
                          seed=args.seed)
  except ValueError as error:
    names = {"region": "--width", "dim": "--dim"}
    raise UsageError(re.sub(r"RegionConfig\.(\w+)", lambda m: names.get(m.group(1), m.group(0)),
                            str(error))) from None
  run = load_sentiment_run(args.workdir, args.checkpoint, args.data_dir, "region embeddings")
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  reviews = region_pretraining_reviews(run, console)
  tv = region_cnn.pretrain(reviews, len(run.task.vocab), config, console.note)
  region_cnn.save_embedding(args.out, tv, config)
  console.note(f"region embedding of {args.width} words ({tv['steps']} steps over "
               f"{len(reviews):,} reviews, loss {tv['loss']:.4f}, {tv['seconds']:.0f} s) saved "
               f"to {args.out}")
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  return run_command(_parser(), _run, argv)


if __name__ == "__main__":
  sys.exit(main())
