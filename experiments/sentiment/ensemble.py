"""`python -m experiments ensemble sentiment`: a trained sentiment run blended on dev with NBSVM,
paragraph vectors and other members.

    python -m experiments ensemble sentiment --workdir runs/imdb_self/student \
        --out runs/imdb_self/student/ensemble.json [--max-n 3] [--costs 0.1 0.3 1] \
        [--train-on labelled all] [--pv-epochs 10] [--pv-dim 100] [--pv-workers 2] \
        [--blend log_loss|grid] [--checkpoint best] [--data-dir DIR] [--member NAME=FILE ...] \
        [--save-members DIR]

Reads the run's data exactly as the run was trained (its protocol, vocabulary, and for a
self-training student its pseudo-labelled reviews) and fits two more models on it:

- NBSVM (nbsvm.py) on the run's training reviews for each cost (for a student: on its labelled
  reviews, and on all of them with the pseudo-labelled ones);
- paragraph vectors (paragraph_vectors.py; `--pv-epochs 0` leaves them out): PV-DBOW learns a
  vector for each labelled training review and each of IMDB's unlabelled reviews, logistic
  regression on the labelled ones' vectors for each C of paragraph_vectors.PV_COSTS;
- on request (`--member NAME=FILE`, repeatable), a model trained elsewhere, by its dev and test
  log-odds of 'positive' in FILE (lstm_lm.save_member's form, e.g. docs/runs/imdb_lm/'s
  classifier-seedS.npz: the LSTM classifier fine-tuned from a language model pretrained on the
  reviews). Its reviews are lined up with the run's by IMDB's record indices, which must be dev's
  and test's exactly.

With `--save-members DIR` each of the command's own models (the run, NBSVM, paragraph vectors) is
written to DIR/NAME.npz in the member format, so that `blend sentiment` (blend.py) blends saved
models in seconds, or a later ensemble reads one as a `--member`, without fitting it again.

Of each model the fit with the best dev accuracy is kept; then the models' log-odds of 'positive'
are blended:

  z = sum over models m of w_m * z_m / s_m

with s_m the standard deviation of model m's log-odds over dev (so that the weights weigh like
with like), and the weights w >= 0, summing to 1, chosen on dev by one of two rules (`--blend`):

- 'log_loss' (the default since 2026-11-27): the w that minimize dev's mean log-loss of
  sigmoid(t * z), t > 0 a temperature fitted with them (`fit_log_loss_weights`). The log-loss is a
  smooth, convex function of the weights, so a few reviews more or less on dev move them a little,
  where dev accuracy, a step function, can jump from one corner of the grid to another;
- 'grid' (the rule of the records before 2026-11-27): multiples of 0.05 with the best dev
  accuracy (ties: the weights closest to equal, then those giving the run the most).

How stable the choice is gets measured and written down: the rule refitted on 20 bootstrap
resamples of dev (the spread of each weight), and its 5-fold cross-validated dev accuracy (the
rule fitted on four fifths of dev, scored on the fifth left out). Only dev chooses; test is scored
once per choice and written beside it, and so is the other rule's choice (`other_rule`), which
the blend does not use. The result (accuracies of the run alone, of each fit and
of the blend on dev and test; the weights; sizes and times) goes to --out as JSON and a summary to
stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import time
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.optimize
import scipy.special

from experiments import registry
from experiments import runs
from experiments.cli_flags import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.sentiment import fitted
from experiments.sentiment.cli import load_sentiment_run
from experiments.log_odds import accuracies
from experiments.log_odds import accuracy
from experiments.sentiment.lstm_lm import save_member
from experiments.sentiment.nbsvm import fit_nbsvm
from experiments.sentiment.paragraph_vectors import PVConfig
from experiments.sentiment.paragraph_vectors import fit_paragraph_vectors
from experiments.sentiment.task import pseudo_labelled_count

STEP = 0.05  # the 'grid' rule's blend weights are multiples of STEP that sum to 1
BLEND_RULES = ("log_loss", "grid")  # how the blend's weights are chosen on dev (module docstring)
BOOTSTRAPS = 20  # dev resamples the chosen rule is refitted on, to show how much its weights move
FOLDS = 5  # the folds of the cross-validated dev accuracy
GRAD_TOLERANCE = 1e-6  # a log-loss gradient this small counts as zero at the fit's end


def weight_grid(models: int, step: float = STEP) -> list[tuple[float, ...]]:
  """Every weight vector of `models` non-negative multiples of `step` summing to 1, the first
  model's weight descending: weight_grid(2, 0.5) == [(1.0, 0.0), (0.5, 0.5), (0.0, 1.0)]."""
  parts = round(1 / step)
  if models < 1 or parts < 1 or not np.isclose(parts * step, 1.0):
    raise ValueError(f"need at least one model and a step that divides 1, got {models} models "
                     f"and step {step}")

  def compositions(total: int, slots: int):
    if slots == 1:
      yield (total,)
      return
    for first in range(total, -1, -1):
      for rest in compositions(total - first, slots - 1):
        yield (first,) + rest

  return [tuple(round(k * step, 10) for k in counts) for counts in compositions(parts, models)]


def choose_weights(dev_log_odds: dict[str, np.ndarray], dev_labels: np.ndarray,
                   step: float = STEP) -> tuple[dict[str, float], list[list[float]]]:
  """The blend sum_m w_m * z_m / s_m with the best dev accuracy, w on weight_grid.

  Args:
    dev_log_odds: each model's log-odds z_m on dev, (N,) each, in the order of preference.
    dev_labels: (N,) 0/1.
    step: the grid's spacing.

  Returns:
    (the chosen weights by model: of the best ones, those closest to equal weights, and of
    those the one that gives the earlier models the most weight; every candidate as
    [w_1, .., w_M, dev accuracy], in weight_grid's order).
  """
  names = list(dev_log_odds)
  scales = {name: scale(dev_log_odds[name], name) for name in names}
  curve = []
  for weights in weight_grid(len(names), step):
    blended = blend(dev_log_odds, dict(zip(names, weights)), scales)
    curve.append([*weights, accuracy(blended, dev_labels)])
  best = max(row[-1] for row in curve)
  even = 1.0 / len(names)
  chosen = min((row for row in curve if row[-1] == best),
               key=lambda row: (round(sum((w - even) ** 2 for w in row[:-1]), 9),
                                [-w for w in row[:-1]]))
  return dict(zip(names, chosen[:-1])), curve


def fit_log_loss_weights(dev_log_odds: dict[str, np.ndarray], dev_labels: np.ndarray,
                         ) -> tuple[dict[str, float], dict[str, float]]:
  """The blend weights w >= 0 (summing to 1) and temperature t > 0 of least dev log-loss.

  With x_m = z_m / s_m each model's dev log-odds on one scale, v = t * w minimizes

    L(v) = mean over dev reviews i of log(1 + exp(-y_i * sum_m v_m x_im)),  y_i = +-1,  v >= 0

  (L-BFGS-B with the exact gradient; L is convex in v, so the minimum is the minimum); then
  t = sum(v) and w = v / t. That is logistic regression without intercept on the scaled log-odds,
  its coefficients kept non-negative so that no model is blended in reversed.

  Args:
    dev_log_odds: each model's log-odds z_m on dev, (N,) each.
    dev_labels: (N,) 0/1.

  Returns:
    (the weights by model, {'temperature': t, 'dev_log_loss': L at the minimum}).
  """
  names = list(dev_log_odds)
  x = np.stack([np.asarray(dev_log_odds[name], np.float64) / scale(dev_log_odds[name], name)
                for name in names], axis=1)  # (N, M)
  signs = 2.0 * np.asarray(dev_labels, np.float64) - 1.0  # (N,) +-1
  margins = x * signs[:, None]  # (N, M): y_i x_im

  def loss_and_grad(v):  # v (M,)
    m = margins @ v  # (N,)
    loss = np.mean(np.logaddexp(0.0, -m))
    grad = -(scipy.special.expit(-m)[:, None] * margins).mean(axis=0)  # (M,)
    return loss, grad

  start = np.full(len(names), 1.0 / len(names))
  result = scipy.optimize.minimize(loss_and_grad, start, jac=True, method="L-BFGS-B",
                                   bounds=[(0.0, None)] * len(names),
                                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 1000})
  v = np.maximum(result.x, 0.0)
  temperature = float(v.sum())
  # L-BFGS-B may end 'ABNORMAL' when its line search finds no decrease at a minimum already as
  # flat as float64 tells; the loss is convex, so the minimum is the point where the gradient
  # vanishes along every free weight and pushes no weight held at 0 below it (KKT).
  _, grad = loss_and_grad(v)
  stationary = bool(np.all(np.abs(grad[v > 0]) <= GRAD_TOLERANCE)
                    and np.all(grad[v == 0] >= -GRAD_TOLERANCE))
  if not (result.success or stationary):
    raise ValueError(f"the log-loss fit of the blend of {names} stopped with "
                     f"{result.message!r} away from its minimum (weights {v.tolist()}, gradient "
                     f"{grad.tolist()})")
  if temperature <= 0:
    raise ValueError(f"no blend of {names} fits dev better than a coin: every model's log-odds "
                     f"point the wrong way on dev")
  weights = {name: float(w) for name, w in zip(names, v / temperature)}
  return weights, {"temperature": temperature, "dev_log_loss": float(result.fun)}


def choose_by_rule(rule: str, dev_log_odds: dict[str, np.ndarray], dev_labels: np.ndarray,
                   ) -> dict[str, float]:
  """The blend weights `rule` ('log_loss' or 'grid') chooses on these dev log-odds."""
  if rule == "log_loss":
    return fit_log_loss_weights(dev_log_odds, dev_labels)[0]
  if rule == "grid":
    return choose_weights(dev_log_odds, dev_labels)[0]
  raise ValueError(f"unknown blend rule {rule!r}; the rules are {list(BLEND_RULES)}")


def rule_stability(rule: str, dev_log_odds: dict[str, np.ndarray], dev_labels: np.ndarray,
                   bootstraps: int = BOOTSTRAPS, folds: int = FOLDS, seed: int = 0,
                   ) -> dict[str, Any]:
  """How much `rule`'s choice depends on which reviews dev happens to hold.

  Returns:
    {'bootstrap_weights': the rule's weights on each of `bootstraps` resamples of dev (drawn with
     replacement, numpy's default_rng(seed)), 'bootstrap_std': each weight's standard deviation
     over them, 'cv_dev_accuracy': the accuracy on each dev review of the rule fitted on the
     other folds (`folds` folds of a default_rng(seed) permutation), 'folds', 'bootstraps'}.
  """
  names = list(dev_log_odds)
  labels = np.asarray(dev_labels)
  n = len(labels)
  rng = np.random.default_rng(seed)
  resampled = []
  for _ in range(bootstraps):
    rows = rng.integers(0, n, n)
    weights = choose_by_rule(rule, {name: np.asarray(dev_log_odds[name])[rows] for name in names},
                             labels[rows])
    resampled.append([weights[name] for name in names])
  fold_of = np.empty(n, np.int64)
  fold_of[rng.permutation(n)] = np.arange(n) % folds
  right = 0
  for fold in range(folds):
    held, kept = fold_of == fold, fold_of != fold
    weights = choose_by_rule(rule, {name: np.asarray(dev_log_odds[name])[kept] for name in names},
                             labels[kept])
    scales = {name: scale(np.asarray(dev_log_odds[name])[kept], name) for name in names}
    z = blend({name: np.asarray(dev_log_odds[name])[held] for name in names}, weights, scales)
    right += int(np.sum((z > 0).astype(np.int64) == labels[held]))
  spread = np.std(np.asarray(resampled), axis=0) if resampled else np.zeros(len(names))
  return {"bootstraps": bootstraps, "folds": folds,
          "bootstrap_weights": [[round(w, 6) for w in row] for row in resampled],
          "bootstrap_std": {name: float(s) for name, s in zip(names, spread)},
          "cv_dev_accuracy": right / n}


def blend_scores(scores: Mapping[str, Mapping[str, np.ndarray]],
                 labels: Mapping[str, np.ndarray], rule: str = "log_loss", seed: int = 0,
                 ) -> dict[str, Any]:
  """The blend of the models' log-odds that `rule` chooses on dev, scored on dev and test.

  Args:
    scores: model -> split ('dev', 'test') -> (N,) log-odds of 'positive', the models in order of
      preference (the grid rule's ties).
    labels: split -> (N,) 0/1.
    rule: 'log_loss' or 'grid' (module docstring): the blend's rule; the other one's choice is
      written beside it (`other_rule`) and chooses nothing.
    seed: the resampling of `rule_stability`.

  Returns:
    the record's 'ensemble': the rule, the models, the weights (and the log-loss fit's
    temperature), the scales, dev's and test's accuracy, the rule's stability, the other rule's
    choice, and the grid's dev accuracy by weights.
  """
  if rule not in BLEND_RULES:
    raise ValueError(f"unknown blend rule {rule!r}; the rules are {list(BLEND_RULES)}")
  names = list(scores)
  dev_scores = {name: scores[name]["dev"] for name in names}
  grid_weights, dev_curve = choose_weights(dev_scores, labels["dev"])
  log_loss_weights, fit = fit_log_loss_weights(dev_scores, labels["dev"])
  by_rule = {"log_loss": log_loss_weights, "grid": grid_weights}
  scales = {name: scale(scores[name]["dev"], name) for name in names}
  per_rule = {}
  for name, weights in by_rule.items():
    z = {split: blend({m: scores[m][split] for m in names}, weights, scales)
         for split in ("dev", "test")}
    per_rule[name] = {"weights": weights, **accuracies(z, labels),
                      **rule_stability(name, dev_scores, labels["dev"], seed=seed)}
  chosen = per_rule.pop(rule)
  other_rule = {name: {key: r[key] for key in ("weights", "dev_accuracy", "test_accuracy",
                                               "bootstrap_std", "cv_dev_accuracy")}
                for name, r in per_rule.items()}
  return {"rule": rule, "models": names, "weights": chosen.pop("weights"),
          **(fit if rule == "log_loss" else {}), "scales": scales, **chosen,
          "other_rule": other_rule, "dev_accuracy_by_weights": dev_curve}


def blend(log_odds: dict[str, np.ndarray], weights: dict[str, float],
          scales: dict[str, float]) -> np.ndarray:
  """sum over models m of weights[m] * log_odds[m] / scales[m]."""
  return sum(weights[name] * np.asarray(log_odds[name], np.float64) / scales[name]
             for name in log_odds)


def scale(log_odds: np.ndarray, name: str) -> float:
  """The standard deviation of a model's log-odds (over dev), which puts models on one scale."""
  value = float(np.std(log_odds))
  if not np.isfinite(value) or value == 0:
    raise ValueError(f"{name}: the log-odds on dev have no spread (std {value}), so they cannot "
                     f"be weighed against the other models'")
  return value


def ensemble_run(run: runs.Run, max_n: int, costs: Sequence[float],
                 train_on: Sequence[str] = ("labelled", "all"), seed: int = 0,
                 pv: PVConfig | None = PVConfig(), console: Console | None = None,
                 rule: str = "log_loss", members: Mapping[str, str] | None = None,
                 save_members: str | None = None) -> dict[str, Any]:
  """Fits NBSVM (and paragraph vectors) on the run's data, chooses fits and blend on dev, scores
  test.

  Args:
    run: a trained sentiment run.
    max_n: NBSVM's longest n-gram.
    costs: liblinear's C values to try.
    train_on: which training reviews NBSVM may learn from: 'labelled' (IMDB's), 'all' (with a
      self-training student's pseudo-labelled ones; the same as 'labelled' for other runs); each
      is fitted with every cost, and dev chooses among all the fits.
    seed: liblinear's random state.
    pv: the paragraph vectors' settings; None leaves them out of the blend.
    console: where the progress notes go.
    rule: how the blend's weights are chosen on dev: 'log_loss' or 'grid' (module docstring).
    members: name -> a file of dev's and test's log-odds of a model trained elsewhere
      (`read_member`), blended beside the others.
    save_members: a folder to write each of the ensemble's own models to as a member file
      (lstm_lm.save_member: FOLDER/run.npz, nbsvm.npz, ...), for blend.py or a later `--member` to
      reuse without fitting it again (None: nowhere).

  Returns:
    the record written by the command (see the module docstring).
  """
  if not costs or not train_on:
    raise ValueError(f"need at least one cost and one set of training reviews, got costs "
                     f"{list(costs)} and train_on {list(train_on)}")
  if rule not in BLEND_RULES:
    raise ValueError(f"unknown blend rule {rule!r}; the rules are {list(BLEND_RULES)}")
  console = console or Console()
  data = run.task.data
  if data.vocab != run.task.vocab:
    raise ValueError(f"the vocabulary {run.workdir} saved differs from the one its data gives "
                     f"now, so the ids would not mean what the run learned: load the data the "
                     f"run was trained on")
  ids, labels = fitted.split_reviews(data)
  pseudo = pseudo_labelled_count(data)
  sizes = {"labelled": len(ids["train"]) - pseudo, "all": len(ids["train"])}
  unknown = [name for name in train_on if name not in sizes]
  if unknown:
    raise ValueError(f"train_on: unknown names {unknown}; known names are {sorted(sizes)}")
  if not pseudo:  # no pseudo-labelled reviews: 'all' is 'labelled'
    train_on = ["labelled"]

  index = {split: np.asarray(data.splits[split].scalars["index"]) for split in ("dev", "test")}
  members = dict(members or {})
  clash = sorted(set(members) & set(MODEL_NAMES))
  if clash:
    raise ValueError(f"members: the names {clash} are the ensemble's own models'; name them "
                     f"otherwise")
  member_records, scores = {}, {}  # scores: model -> split -> (N,) log-odds
  for name, path in members.items():  # read and checked before anything is fitted
    member_records[name], scores[name] = read_member(path, index, labels)
    console.note(f"member {name} read from {path}: dev {member_records[name]['dev_accuracy']:.4f}"
                 f"  test {member_records[name]['test_accuracy']:.4f}")
  nbsvm_record, scores["nbsvm"], _ = fit_nbsvm(ids, labels, sizes, max_n, costs, train_on,
                                                seed, console.note)
  if pv is not None:
    pv_record, scores["paragraph_vectors"], _ = fit_paragraph_vectors(
        ids, labels, sizes["labelled"], unlabelled_reviews(run, console), pv, console.note)

  started = time.perf_counter()
  scores["run"] = {}
  for split in ("dev", "test"):
    logits = run.task.split_logits(run.params, split)  # (N, 2)
    scores["run"][split] = logits[:, 1].astype(np.float64) - logits[:, 0]
  run_s = time.perf_counter() - started

  names = ["run", "nbsvm"] + (["paragraph_vectors"] if pv is not None else []) + list(members)
  own_records = {"run": {"workdir": run.workdir, "model": run.config.model_name,
                         "checkpoint": run.checkpoint, "step": run.step,
                         **accuracies(scores["run"], labels)},
                 "nbsvm": nbsvm_record,
                 **({"paragraph_vectors": pv_record} if pv is not None else {})}
  saved = {}
  if save_members is not None:
    os.makedirs(save_members, exist_ok=True)
    for name, own in own_records.items():
      saved[name] = os.path.join(save_members, f"{name}.npz")
      save_member(saved[name], index, labels, scores[name],
                  {"saved_from": {"ensemble_of": run.workdir, "name": name, "seed": seed,
                                  "record": own}})
    console.note(f"the models' scores saved to {save_members}/: {', '.join(saved)}")
  record = {
      "run": run.workdir, "model": run.config.model_name, "checkpoint": run.checkpoint,
      "step": run.step, "protocol": run.config.data.protocol,
      "reviews": {split: len(ids[split]) for split in ids},
      "run_alone": {f"{split}_accuracy": accuracy(scores["run"][split], labels[split])
                    for split in ("dev", "test")},
      "nbsvm": nbsvm_record,
      **({"paragraph_vectors": pv_record} if pv is not None else {}),
      **({"members": member_records} if members else {}),
      "ensemble": blend_scores({name: scores[name] for name in names}, labels, rule, seed),
      **({"saved_members": saved} if saved else {}),
      "run_scoring_s": round(run_s, 1),
      "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
  }
  return record


def unlabelled_reviews(run: runs.Run, console: Console) -> list[list[int]]:
  """IMDB's unlabelled reviews, as ids of the run's vocabulary (fitted.unlabelled_reviews)."""
  return fitted.unlabelled_reviews(run.task, console.note)


MODEL_NAMES = ("run", "nbsvm", "paragraph_vectors")  # the ensemble's own models
MEMBER_KEYS = ("dev_log_odds", "dev_index", "dev_labels", "test_log_odds", "test_index",
               "test_labels", "record")
# What a member's own record gives the blend's: lstm_lm.py's settings, or (--save-members) the
# ensemble's model record and where it was fitted.
MEMBER_RECORD_KEYS = ("pretrained", "chosen_epoch", "device", "model", "pretrained_from",
                      "saved_from")


def load_member(path: str) -> dict[str, np.ndarray]:
  """A member file's arrays (MEMBER_KEYS and any others); a ValueError names the file and what is
  missing or unreadable."""
  if not os.path.isfile(path):
    raise ValueError(f"--member: no such file {path}")
  try:
    with np.load(path) as data:
      arrays = {key: data[key] for key in data.files}
  except Exception as e:  # a truncated or foreign file
    raise ValueError(f"--member: {path} is not a readable .npz file ({e})") from e
  missing = [key for key in MEMBER_KEYS if key not in arrays]
  if missing:
    raise ValueError(f"--member: {path} lacks {missing} (write it with lstm_lm.save_member or "
                     f"`ensemble sentiment --save-members`)")
  return arrays


def read_member(path: str, index: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray]
                ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
  """A model trained elsewhere, from its .npz of dev's and test's log-odds (lstm_lm.save_member,
  for a classifier or --save-members): (a record: the file, its accuracies and what its own
  record says of it; split -> float64 (N,) log-odds in the run's order). Its reviews must be the run's dev and test
  reviews, by IMDB's record `index` (split -> (N,)) and `labels`; a ValueError names the file and
  what differs."""
  arrays = load_member(path)
  log_odds = {}
  for split in ("dev", "test"):
    theirs = arrays[f"{split}_index"]
    if len(theirs) != len(index[split]) or not np.array_equal(theirs, index[split]):
      raise ValueError(f"--member: {path} scores other {split} reviews than the run's "
                       f"({len(theirs)} against {len(index[split])}, or in another order): "
                       f"export the reviews of a run with the same protocol and split seed")
    if not np.array_equal(arrays[f"{split}_labels"], labels[split]):
      raise ValueError(f"--member: {path} gives other {split} labels than the run's")
    log_odds[split] = arrays[f"{split}_log_odds"].astype(np.float64)
    if not np.isfinite(log_odds[split]).all():
      raise ValueError(f"--member: {path} holds log-odds that are not finite on {split}")
  own = json.loads(str(arrays["record"]))
  record = {"file": path, **accuracies(log_odds, labels),
            **{key: own[key] for key in MEMBER_RECORD_KEYS if key in own}}
  return record, log_odds


def parse_members(specs: Sequence[str], taken: Sequence[str] = ()) -> dict[str, str]:
  """['NAME=FILE', ...] -> {NAME: FILE}; a UsageError names a malformed spec, a name given twice
  or one of `taken`, or a FILE that does not exist."""
  members = {}
  for spec in specs:
    name, _, path = spec.partition("=")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or not path:
      raise UsageError(f"--member: expected NAME=FILE with a lower-case name of letters, digits "
                       f"and _, got {spec!r}")
    if name in members or name in taken:
      raise UsageError(f"--member: the name {name!r} is taken (by another --member"
                       + (f" or one of the ensemble's models {list(taken)})" if taken else ")"))
    if not os.path.isfile(path):
      raise UsageError(f"--member: no such file {path}")
    members[name] = path
  return members


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The command's flags."""
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
  parser.add_argument("--seed", type=int, default=0,
                      help="liblinear's random state and gensim's seed")
  parser.add_argument("--pv-epochs", type=int, default=PVConfig.epochs,
                      help=f"paragraph vectors' passes over the texts (default "
                           f"{PVConfig.epochs}); 0 leaves them out of the blend")
  parser.add_argument("--pv-dim", type=int, default=PVConfig.dim,
                      help=f"the paragraph vectors' size (default {PVConfig.dim})")
  parser.add_argument("--pv-workers", type=int, default=PVConfig.workers,
                      help=f"gensim's threads (default {PVConfig.workers}, which trains "
                           f"reproducibly; more are faster and not reproducible)")
  parser.add_argument("--member", metavar="NAME=FILE", action="append", default=[],
                      help="blend a model trained elsewhere too: FILE holds its dev and test "
                           "log-odds (lstm_lm.save_member's form); repeatable")
  parser.add_argument("--save-members", metavar="DIR",
                      help="write each of the ensemble's own models' dev and test log-odds to "
                           "DIR/NAME.npz (run, nbsvm, paragraph_vectors), which "
                           "`blend sentiment` and --member read")
  parser.add_argument("--blend", choices=BLEND_RULES, default="log_loss",
                      help="how dev chooses the blend's weights: 'log_loss' (default: least dev "
                           "log-loss, non-negative weights) or 'grid' (best dev accuracy on a "
                           "0.05 grid, the rule before 2026-11-27)")


def run_ensemble(args: argparse.Namespace, console: Console) -> int:
  """Fits the models on the run's data, blends them, writes the record to --out and prints the
  summary as notes.

  Raises:
    UsageError: a flag out of range, a malformed or mismatched --member, or a --workdir without a
      sentiment run.
    ValueError: a run whose saved vocabulary differs from its data's (exit 1).
  """
  if args.max_n < 1 or any(c <= 0 for c in args.costs):
    raise UsageError(f"--max-n must be at least 1 and every --costs value positive, got "
                     f"{args.max_n} and {args.costs}")
  if args.pv_epochs < 0 or args.pv_dim < 1 or args.pv_workers < 1:
    raise UsageError(f"--pv-epochs must be at least 0 and --pv-dim and --pv-workers at least 1, "
                     f"got {args.pv_epochs}, {args.pv_dim} and {args.pv_workers}")
  pv = (PVConfig(dim=args.pv_dim, epochs=args.pv_epochs, workers=args.pv_workers,
                 seed=args.seed) if args.pv_epochs else None)
  members = parse_members(args.member, taken=MODEL_NAMES)
  trained = load_sentiment_run(args.workdir, args.checkpoint, args.data_dir, "ensembles")
  folder = os.path.dirname(os.path.abspath(args.out))
  os.makedirs(folder, exist_ok=True)
  try:
    record = ensemble_run(trained, args.max_n, args.costs, args.train_on, args.seed, pv, console,
                          rule=args.blend, members=members,
                          save_members=args.save_members)
  except ValueError as error:
    if not str(error).startswith("--member"):
      raise
    raise UsageError(str(error)) from None
  with open(args.out, "w") as f:
    json.dump(record, f, indent=2)
  alone, ens = record["run_alone"], record["ensemble"]
  console.note(f"{record['model']} alone: dev {alone['dev_accuracy']:.4f}  "
               f"test {alone['test_accuracy']:.4f}")
  chosen = record["nbsvm"]["chosen"]
  weights = "  ".join(f"{name} {w:.2f}" for name, w in ens["weights"].items())
  console.note(f"blend {weights} (rule {ens['rule']}; NBSVM on {chosen['train_on']} reviews, "
               f"C={chosen['cost']:g}): dev {ens['dev_accuracy']:.4f}  "
               f"test {ens['test_accuracy']:.4f}")
  spread = "  ".join(f"{name} {s:.2f}" for name, s in ens["bootstrap_std"].items())
  console.note(f"the rule on {ens['bootstraps']} resamples of dev: weights' std {spread}; "
               f"{ens['folds']}-fold cross-validated dev accuracy {ens['cv_dev_accuracy']:.4f}")
  console.note(f"written to {args.out}")
  return 0


COMMAND = registry.Command(help="blend a trained run on dev with NBSVM, paragraph vectors and "
                                "saved members (JSON)",
                           add_arguments=add_arguments, run=run_ensemble,
                           description=__doc__.split("\n\n")[0])
