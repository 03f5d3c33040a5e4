"""A trained sentiment run together with NBSVM on its own data, the blend chosen by dev accuracy.

    python -m experiments.sentiment.ensemble --workdir runs/imdb_self/student \
        --out runs/imdb_self/student/ensemble.json [--max-n 3] [--costs 0.1 0.3 1] \
        [--train-on labelled all] [--checkpoint best] [--data-dir DIR]

Reads the run's data exactly as the run was trained (its protocol, vocabulary, and for a
self-training student its pseudo-labelled reviews), fits NBSVM (nbsvm.py) on the run's training
reviews for each cost (for a student: on its labelled reviews, and on all of them with the
pseudo-labelled ones) and keeps the fit with the best dev accuracy, then blends the two models'
log-odds of 'positive':

  z = w * z_nbsvm / s_nbsvm + (1 - w) * z_run / s_run

with s the standard deviation of each model's log-odds over dev (so that w weighs like with like)
and w in 0, 0.05, .., 1 chosen by dev accuracy (ties: the w closest to 0.5). Only dev chooses;
test is scored once per choice and written beside it. The result (accuracies of the run alone,
each NBSVM cost, and the blend on dev and test; sizes and times) goes to --out as JSON and a
summary to stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from typing import Any, Sequence

import numpy as np

from experiments import runs
from experiments.cli import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import run_command
from experiments.sentiment.cli import load_sentiment_run
from experiments.sentiment.nbsvm import NBSVM
from experiments.sentiment.nbsvm import binary_features

WEIGHTS = np.round(np.linspace(0.0, 1.0, 21), 2)  # the blend weights w tried on dev


def accuracy(log_odds: np.ndarray, labels: np.ndarray) -> float:
  """The share of examples whose sign of log-odds gives the label (0 counts as negative, as
  argmax over equal logits picks class 0)."""
  return float(np.mean((np.asarray(log_odds) > 0).astype(np.int64) == np.asarray(labels)))


def choose_weight(dev_a: np.ndarray, dev_b: np.ndarray, dev_labels: np.ndarray,
                  weights: np.ndarray = WEIGHTS) -> tuple[float, list[float]]:
  """The weight w of b in w * b / s_b + (1 - w) * a / s_a with the best dev accuracy.

  Args:
    dev_a, dev_b: (N,) the two models' log-odds on dev.
    dev_labels: (N,) 0/1.
    weights: the candidate w, ascending.

  Returns:
    (the chosen w: of the best ones, the closest to 0.5, the smaller on a tie; the dev accuracy
    of every candidate, in order).
  """
  scale_a, scale_b = _scale(dev_a, "dev_a"), _scale(dev_b, "dev_b")
  scores = [accuracy(blend(dev_a, dev_b, w, scale_a, scale_b), dev_labels) for w in weights]
  best = max(scores)
  tied = [w for w, s in zip(weights, scores) if s == best]
  return float(min(tied, key=lambda w: (abs(w - 0.5), w))), scores


def blend(a: np.ndarray, b: np.ndarray, weight: float, scale_a: float,
          scale_b: float) -> np.ndarray:
  """w * b / scale_b + (1 - w) * a / scale_a."""
  return weight * np.asarray(b) / scale_b + (1.0 - weight) * np.asarray(a) / scale_a


def _scale(log_odds: np.ndarray, name: str) -> float:
  scale = float(np.std(log_odds))
  if not np.isfinite(scale) or scale == 0:
    raise ValueError(f"{name}: the log-odds on dev have no spread (std {scale}), so they cannot "
                     f"be weighed against the other model's")
  return scale


def ensemble_run(run: runs.Run, max_n: int, costs: Sequence[float],
                 train_on: Sequence[str] = ("labelled", "all"), seed: int = 0,
                 console: Console | None = None) -> dict[str, Any]:
  """Fits NBSVM on the run's training reviews, chooses the fit and the blend on dev, scores test.

  Args:
    run: a trained sentiment run.
    max_n: the longest n-gram.
    costs: liblinear's C values to try.
    train_on: which training reviews NBSVM may learn from: 'labelled' (IMDB's), 'all' (with a
      self-training student's pseudo-labelled ones; the same as 'labelled' for other runs); each
      is fitted with every cost, and dev chooses among all the fits.
    seed: liblinear's random state.
    console: where the progress notes go.

  Returns:
    the record written by the command (see the module docstring).
  """
  if not costs or not train_on:
    raise ValueError(f"need at least one cost and one set of training reviews, got costs "
                     f"{list(costs)} and train_on {list(train_on)}")
  console = console or Console()
  data = run.task.data
  if data.vocab != run.task.vocab:
    raise ValueError(f"the vocabulary {run.workdir} saved differs from the one its data gives "
                     f"now, so the ids would not mean what the run learned: load the data the "
                     f"run was trained on")
  ids = {split: data.splits[split].sequences["tokens"] for split in ("train", "dev", "test")}
  labels = {split: np.asarray(data.splits[split].scalars["label"]) for split in ids}
  # A self-training student's training split is its labelled reviews, then the pseudo-labelled.
  pseudo = data.report.get("train", {}).get("pseudo_labelled", {}).get("kept", 0)
  sizes = {"labelled": len(ids["train"]) - pseudo, "all": len(ids["train"])}
  unknown = [name for name in train_on if name not in sizes]
  if unknown:
    raise ValueError(f"train_on: unknown names {unknown}; known names are {sorted(sizes)}")
  if not pseudo:  # no pseudo-labelled reviews: 'all' is 'labelled'
    train_on = ["labelled"]

  per_fit, fitted, count_s = [], {}, {}
  for name in dict.fromkeys(train_on):
    started = time.perf_counter()
    vectorizer, train_features = binary_features(
        [ids["train"][i] for i in range(sizes[name])], max_n)
    features = {"dev": vectorizer.transform(list(ids["dev"])),
                "test": vectorizer.transform(list(ids["test"]))}
    count_s[name] = round(time.perf_counter() - started, 1)
    console.note(f"{train_features.shape[1]:,} n-grams (n <= {max_n}) in the {sizes[name]:,} "
                 f"{name} training reviews, counted in {count_s[name]:.0f} s")
    for cost in costs:
      started = time.perf_counter()
      model = NBSVM.from_features(train_features, vectorizer, labels["train"][:sizes[name]],
                                  max_n=max_n, cost=cost, seed=seed)
      scores = {split: model.scores(features[split]) for split in ("dev", "test")}
      fitted[name, cost] = scores
      per_fit.append({"train_on": name, "train_reviews": sizes[name],
                      "features": int(train_features.shape[1]), "cost": cost,
                      "dev_accuracy": accuracy(scores["dev"], labels["dev"]),
                      "test_accuracy": accuracy(scores["test"], labels["test"]),
                      "fit_s": round(time.perf_counter() - started, 1)})
      console.note(f"NBSVM on {name} reviews, C={cost:g}: dev {per_fit[-1]['dev_accuracy']:.4f}"
                   f"  test {per_fit[-1]['test_accuracy']:.4f}")
    del model, vectorizer, train_features, features  # the n-gram vocabulary takes gigabytes
  chosen = max(per_fit, key=lambda row: row["dev_accuracy"])  # the first of the best
  nbsvm = fitted[chosen["train_on"], chosen["cost"]]

  started = time.perf_counter()
  run_log_odds = {}
  for split in ("dev", "test"):
    logits = run.task.split_logits(run.params, split)  # (N, 2)
    run_log_odds[split] = logits[:, 1].astype(np.float64) - logits[:, 0]
  run_s = time.perf_counter() - started

  weight, dev_curve = choose_weight(run_log_odds["dev"], nbsvm["dev"], labels["dev"])
  scales = (_scale(run_log_odds["dev"], "run"), _scale(nbsvm["dev"], "nbsvm"))
  blended = {split: blend(run_log_odds[split], nbsvm[split], weight, *scales)
             for split in ("dev", "test")}
  record = {
      "run": run.workdir, "model": run.config.model_name, "checkpoint": run.checkpoint,
      "step": run.step, "protocol": run.config.data.protocol,
      "reviews": {split: len(ids[split]) for split in ids},
      "run_alone": {f"{split}_accuracy": accuracy(run_log_odds[split], labels[split])
                    for split in ("dev", "test")},
      "nbsvm": {"max_n": max_n, "fits": per_fit, "chosen": chosen, "count_s": count_s},
      "ensemble": {"weight": weight, "scales": {"run": scales[0], "nbsvm": scales[1]},
                   "dev_accuracy": accuracy(blended["dev"], labels["dev"]),
                   "test_accuracy": accuracy(blended["test"], labels["test"]),
                   "dev_accuracy_by_weight": dict(zip(map(float, WEIGHTS), dev_curve))},
      "run_scoring_s": round(run_s, 1),
      "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
  }
  return record


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.sentiment.ensemble",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, help="the trained sentiment run")
  parser.add_argument("--out", required=True, help="the JSON file to write")
  parser.add_argument("--data-dir", help="where the run's data lives now, if it moved")
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      help="'best' (default), 'latest', or a step")
  parser.add_argument("--max-n", type=int, default=3, help="the longest n-gram (default 3)")
  parser.add_argument("--costs", type=float, nargs="+", default=[0.1, 0.3, 1.0],
                      help="liblinear's C values tried, the best by dev kept")
  parser.add_argument("--train-on", nargs="+", choices=("labelled", "all"),
                      default=["labelled", "all"],
                      help="NBSVM's training reviews: IMDB's labelled ones, and/or all of the "
                           "run's (with a self-training student's pseudo-labelled ones); dev "
                           "chooses (default: both)")
  parser.add_argument("--seed", type=int, default=0, help="liblinear's random state")
  return run_command(parser, _write, argv)


def _write(args: argparse.Namespace, console: Console) -> int:
  if args.max_n < 1 or any(c <= 0 for c in args.costs):
    raise UsageError(f"--max-n must be at least 1 and every --costs value positive, got "
                     f"{args.max_n} and {args.costs}")
  run = load_sentiment_run(args.workdir, args.checkpoint, args.data_dir, "ensembles")
  record = ensemble_run(run, args.max_n, args.costs, args.train_on, args.seed, console)
  folder = os.path.dirname(os.path.abspath(args.out))
  os.makedirs(folder, exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(record, f, indent=2)
  alone, ens = record["run_alone"], record["ensemble"]
  console.note(f"{record['model']} alone: dev {alone['dev_accuracy']:.4f}  "
               f"test {alone['test_accuracy']:.4f}")
  chosen = record["nbsvm"]["chosen"]
  console.note(f"blend w={ens['weight']:.2f} (NBSVM on {chosen['train_on']} reviews, "
               f"C={chosen['cost']:g}): "
               f"dev {ens['dev_accuracy']:.4f}  test {ens['test_accuracy']:.4f}")
  console.note(f"written to {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
