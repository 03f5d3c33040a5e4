"""`python -m experiments ensemble matching`: stacks trained matching runs (and, on request, the
lexical-overlap baseline) into one classifier fitted on dev: does what the models learned add up
to more than the best of them?

    python -m experiments ensemble matching --workdir runs/matching-siamese runs/matching-esim \
        [--overlap] [--checkpoint best] [--data-dir DIR] [--cost 1.0] [--folds 5] [--seed 0] \
        [--out ensemble.json]

Each member gives p(same) of every dev and test pair (a run: its kept checkpoint; `--overlap`:
experiments.matching.overlap fitted on train, C by dev AUC). Two blends of the members' log-odds
z_m = log p / (1 - p):

  stack   a logistic regression with an intercept on the members' log-odds (scikit-learn, L2 with
          inverse strength --cost), fitted on dev's labels. Dev's own figures are out of fold:
          each pair scored by the regression fitted on the other --folds folds (stratified,
          shuffled with --seed), so they are not the figures the regression was fitted to; the
          threshold of highest accuracy is chosen on those, and test is scored by the regression
          fitted on all of dev, at 0.5 and at that threshold.
  mean    the members' mean log-odds, nothing fitted (dev only chooses its threshold).

Every member and blend is reported as the runs are (metrics.binary_metrics: accuracy, F1 of label
1, macro-F1, ROC AUC; confusion matrices; at the argmax and at dev's threshold), with the stack's
coefficients. The members must score the same pairs: runs of one data set and split (the pairs of
each split are compared, and a run with others is refused, naming it).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.model_selection import cross_val_predict

from experiments import registry
from experiments import runs
from experiments.cli_flags import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.matching import metrics as metrics_lib
from experiments.matching import overlap as overlap_lib

SPLITS = ("dev", "test")
OVERLAP_COSTS = (0.03, 0.1, 0.3, 1.0, 3.0)  # the overlap member's C values, dev AUC chooses
EPSILON = 1e-7  # probabilities are clipped to [EPSILON, 1 - EPSILON] before their log-odds


def log_odds(prob: np.ndarray) -> np.ndarray:
  """log p / (1 - p) (N,) float64 of p(same) (N,), clipped away from 0 and 1."""
  p = np.clip(np.asarray(prob, np.float64), EPSILON, 1.0 - EPSILON)
  return np.log(p) - np.log1p(-p)


def scores(labels: np.ndarray, prob: np.ndarray, threshold: float) -> dict[str, Any]:
  """The metrics of one split at the argmax and, under 'tuned', at `threshold`."""
  tuned = metrics_lib.binary_metrics(labels, prob, threshold)
  del tuned["auc"]
  return {**metrics_lib.binary_metrics(labels, prob),
          "confusion": metrics_lib.confusion(labels, prob),
          "tuned": {"threshold": threshold, **tuned,
                    "confusion": metrics_lib.confusion(labels, prob, threshold)}}


def stack(dev_prob: dict[str, np.ndarray], dev_labels: np.ndarray,
          test_prob: dict[str, np.ndarray], cost: float, folds: int, seed: int
          ) -> dict[str, Any]:
  """The stacking regression of the module docstring.

  Args:
    dev_prob, test_prob: each member's p(same), (N_dev,) and (N_test,), the same members.
    dev_labels: (N_dev,) 0/1.
    cost: the regression's C.
    folds: the folds of dev's out-of-fold probabilities.
    seed: shuffles the folds.

  Returns:
    {'dev': out-of-fold p(same) (N_dev,), 'test': p(same) (N_test,) of the fit on all of dev,
     'coefficients': {member: weight of its log-odds}, 'intercept'}.
  """
  names = list(dev_prob)
  x_dev = np.stack([log_odds(dev_prob[name]) for name in names], axis=1)  # (N_dev, M)
  x_test = np.stack([log_odds(test_prob[name]) for name in names], axis=1)  # (N_test, M)
  regression = LogisticRegression(C=cost, max_iter=1000)
  splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
  out_of_fold = cross_val_predict(regression, x_dev, dev_labels, cv=splitter,
                                  method="predict_proba")[:, 1]
  regression.fit(x_dev, dev_labels)
  return {"dev": out_of_fold, "test": regression.predict_proba(x_test)[:, 1],
          "coefficients": {name: float(w) for name, w in zip(names, regression.coef_[0])},
          "intercept": float(regression.intercept_[0])}


def mean_blend(prob: dict[str, np.ndarray]) -> np.ndarray:
  """p(same) (N,) of the members' mean log-odds."""
  z = np.mean([log_odds(p) for p in prob.values()], axis=0)
  return 1.0 / (1.0 + np.exp(-z))


def _score_members(args: argparse.Namespace, console: Console
                   ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, np.ndarray],
                              dict[str, Any]]:
  """({member: {split: p(same)}}, {split: labels}, {member: what it is})."""
  prob: dict[str, dict[str, np.ndarray]] = {}
  info: dict[str, Any] = {}
  labels: dict[str, np.ndarray] = {}
  pairs: dict[str, list[tuple[str, str]]] = {}
  data = None
  for name in args.workdir:
    run = runs.load_run(name, args.checkpoint, args.data_dir, experiment="matching",
                        command="ensemble matching")
    texts = {split: run.task.data.texts(split) for split in SPLITS}
    if data is None:
      data, pairs = run.task.data, texts
    for split in SPLITS:
      if texts[split] != pairs[split]:
        raise UsageError(f"--workdir {name}: its {split} split holds other pairs than "
                         f"{args.workdir[0]}'s ({len(texts[split])} against "
                         f"{len(pairs[split])}): stack runs of one data set and split")
    prob[name] = {}
    for split in SPLITS:
      split_labels, prob[name][split] = run.task.split_probabilities(run.params, split)
      labels.setdefault(split, split_labels)
    info[name] = {"model": run.config.model_name, "checkpoint": args.checkpoint,
                  "step": run.step}
    console.note(f"{name}: {run.config.model_name}, step {run.step}: dev AUC "
                 f"{metrics_lib.binary_metrics(labels['dev'], prob[name]['dev'])['auc']:.4f}")
  if args.overlap:
    record, prob["overlap"], _ = overlap_lib.fit_overlap(data, OVERLAP_COSTS, console.note)
    info["overlap"] = {"model": record["model"], "cost": record["cost"]}
  return prob, labels, info


def ensemble(args: argparse.Namespace, console: Console) -> dict[str, Any]:
  """The record the command writes: every member's and blend's figures."""
  prob, labels, info = _score_members(args, console)
  names = list(prob)
  by_split = {split: {name: prob[name][split] for name in names} for split in SPLITS}
  record: dict[str, Any] = {
      "pairs": {split: int(len(labels[split])) for split in SPLITS},
      "positive_share": {split: float(np.mean(labels[split])) for split in SPLITS},
      "members": {}, "settings": {"cost": args.cost, "folds": args.folds, "seed": args.seed}}
  for name in names:
    threshold = metrics_lib.best_threshold(labels["dev"], prob[name]["dev"])
    record["members"][name] = {**info[name], **{
        split: scores(labels[split], prob[name][split], threshold) for split in SPLITS}}
  stacked = stack(by_split["dev"], labels["dev"], by_split["test"], args.cost, args.folds,
                  args.seed)
  blends = {"stack": {"dev": stacked["dev"], "test": stacked["test"]},
            "mean": {split: mean_blend(by_split[split]) for split in SPLITS}}
  for blend, blend_prob in blends.items():
    threshold = metrics_lib.best_threshold(labels["dev"], blend_prob["dev"])
    record[blend] = {split: scores(labels[split], blend_prob[split], threshold)
                     for split in SPLITS}
  record["stack"].update(coefficients=stacked["coefficients"], intercept=stacked["intercept"])
  return record


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The ensemble's flags."""
  parser.add_argument("--workdir", nargs="+", required=True, metavar="RUN",
                      help="the trained matching runs to stack")
  parser.add_argument("--overlap", action="store_true",
                      help="add the lexical-overlap baseline (experiments.matching.overlap) as a "
                           "member")
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      metavar="best|latest|STEP", help="each run's checkpoint (default best)")
  parser.add_argument("--data-dir", help="where the runs' data lives, if it moved")
  parser.add_argument("--cost", type=float, default=1.0,
                      help="the stacking regression's C (default 1.0)")
  parser.add_argument("--folds", type=int, default=5,
                      help="folds of dev's out-of-fold figures (default 5)")
  parser.add_argument("--seed", type=int, default=0, help="shuffles the folds")
  parser.add_argument("--out", help="also write the JSON here")


def run_ensemble(args: argparse.Namespace, console: Console) -> int:
  """Checks the flags, stacks the members, writes the JSON to --out, prints it and a line a
  member or blend."""
  if args.cost <= 0:
    raise UsageError(f"--cost must be positive, got {args.cost}")
  if args.folds < 2:
    raise UsageError(f"--folds must be at least 2, got {args.folds}")
  given_twice = sorted({w for w in args.workdir if args.workdir.count(w) > 1})
  if given_twice:
    raise UsageError(f"--workdir {given_twice[0]} is given twice")
  if len(args.workdir) + int(args.overlap) < 2:
    raise UsageError("a stack needs at least two members: give another --workdir or --overlap")
  record = ensemble(args, console)
  text = json.dumps(record, indent=2, ensure_ascii=False)
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      f.write(text + "\n")
  console.print(text)
  for name, row in [*record["members"].items(), ("stack", record["stack"]),
                    ("mean", record["mean"])]:
    test = row["test"]
    console.note(f"{name}: test accuracy {test['accuracy']:.4f}  F1 {test['f1']:.4f}  AUC "
                 f"{test['auc']:.4f}; at dev's threshold {test['tuned']['threshold']:.3f}: "
                 f"accuracy {test['tuned']['accuracy']:.4f}  F1 {test['tuned']['f1']:.4f}")
  return 0


COMMAND = registry.Command(help="stack trained matching runs (and --overlap) by a regression "
                           "fitted on dev, judged on test", add_arguments=add_arguments,
                           run=run_ensemble, description=__doc__.split("\n\n")[0])
