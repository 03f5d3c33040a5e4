"""Writes a sentiment run's reviews, as ids of its vocabulary, to one .npz file: what
lstm_lm.py reads on a machine that has no tensorflow-datasets (a GPU machine, say).

    python -m experiments.sentiment.export_reviews --workdir runs/imdb37/seed0/teacher \
        --out runs/imdb_lm/reviews.npz [--checkpoint best] [--data-dir DIR]

The reviews are the run's, as its data gives them (its protocol, vocabulary and max_len): the
labelled training reviews (a self-training student's pseudo-labelled ones left out), dev, test,
and IMDB's 50,000 unlabelled reviews. The file holds, for each split S of 'train', 'dev', 'test'
and 'unlabelled':

  S_ids       uint16 or int32 (sum of lengths,)   the reviews' ids, one after another
  S_lengths   int32 (N,)                          each review's number of ids
  S_labels    int8 (N,)                           0 negative, 1 positive (not 'unlabelled')
  S_index     int64 (N,)                          each review's index in IMDB's own split, by
                                                  which the ensemble lines reviews up ('dev',
                                                  'test')

and `vocab_size` and `source` (JSON: the run, its protocol, split seed, max_len, vocabulary
size).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Sequence

import numpy as np

from experiments.cli_flags import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import run_command
from experiments.sentiment.cli import load_sentiment_run
from experiments.sentiment.ensemble import pseudo_labelled_count
from experiments.sentiment.ensemble import unlabelled_reviews


def review_arrays(run, console: Console) -> dict[str, np.ndarray]:
  """The arrays of the module docstring for a loaded sentiment run."""
  data = run.task.data
  vocab_size = len(run.task.vocab)
  dtype = np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
  labelled = len(data.splits["train"].sequences["tokens"]) - pseudo_labelled_count(data)
  reviews = {split: list(data.splits[split].sequences["tokens"]) for split in ("dev", "test")}
  reviews["train"] = [data.splits["train"].sequences["tokens"][i] for i in range(labelled)]
  reviews["unlabelled"] = unlabelled_reviews(run, console)
  arrays = {"vocab_size": np.int64(vocab_size)}
  for split, ids in reviews.items():
    if not ids:
      raise ValueError(f"{run.workdir}: the {split} split has no reviews to export")
    arrays[f"{split}_ids"] = np.concatenate([np.asarray(r) for r in ids]).astype(dtype)
    arrays[f"{split}_lengths"] = np.asarray([len(r) for r in ids], np.int32)
    if split != "unlabelled":
      scalars = data.splits[split].scalars
      arrays[f"{split}_labels"] = np.asarray(scalars["label"][:len(ids)], np.int8)
      arrays[f"{split}_index"] = np.asarray(scalars["index"][:len(ids)], np.int64)
  config = run.config.data
  arrays["source"] = np.asarray(json.dumps({
      "run": run.workdir, "protocol": config.protocol, "split_seed": config.split_seed,
      "max_len": config.max_len, "vocab_size": vocab_size,
      "reviews": {split: len(ids) for split, ids in reviews.items()}}))
  return arrays


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m experiments.sentiment.export_reviews",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, help="the trained sentiment run")
  parser.add_argument("--out", required=True, help="the .npz file to write")
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      help="'best' (default), 'latest', or a step")
  parser.add_argument("--data-dir", help="where the run's data lives now, if it moved")
  return parser


def _run(args: argparse.Namespace, console: Console) -> int:
  if not args.out.endswith(".npz"):
    raise UsageError(f"--out must end in .npz, got {args.out}")
  run = load_sentiment_run(args.workdir, args.checkpoint, args.data_dir, "exported reviews")
  arrays = review_arrays(run, console)
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  tmp = f"{args.out}.tmp{os.getpid()}.npz"
  np.savez_compressed(tmp, **arrays)
  os.replace(tmp, args.out)
  source = json.loads(str(arrays["source"]))
  console.note(f"{source['reviews']} reviews of {args.workdir} written to {args.out} "
               f"({os.path.getsize(args.out) / 2**20:.1f} MiB)")
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  return run_command(_parser(), _run, argv)


if __name__ == "__main__":
  raise SystemExit(main())
