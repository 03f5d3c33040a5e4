"""NBSVM (experiments.sentiment.nbsvm) against hand-computed values, and its blend with a trained
run (`python -m experiments ensemble sentiment`) on the shipped IMDB sample."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse

from experiments import cli
from experiments import config as config_lib
from experiments import runs
from experiments import trainer
from experiments.sentiment import ensemble
from experiments.sentiment import paragraph_vectors
from experiments.sentiment.nbsvm import NBSVM
from experiments.sentiment.nbsvm import binary_features
from experiments.sentiment.nbsvm import nb_log_count_ratio
from experiments.sentiment.nbsvm import word_ngrams
from experiments.sentiment.task import SentimentTask
from _sample_runs import train_sample_ngram_run


def test_word_ngrams_lists_unigrams_then_longer_ones_by_position():
  assert word_ngrams([4, 9, 7, 4], 3) == [(4,), (9,), (7,), (4,), (4, 9), (9, 7), (7, 4),
                                          (4, 9, 7), (9, 7, 4)]
  assert word_ngrams(np.array([5, 6], np.int32), 3) == [(5,), (6,), (5, 6)]
  assert word_ngrams([], 2) == []


def test_nb_log_count_ratio_matches_the_formula_by_hand():
  features = scipy.sparse.csr_matrix(np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], np.float32))
  labels = np.array([1, 0, 1])
  # alpha 1: p = 1 + [2, 1, 1] = [3, 2, 2] (sum 7), q = 1 + [0, 1, 1] = [1, 2, 2] (sum 5).
  expected = [math.log((3 / 7) / (1 / 5)), math.log((2 / 7) / (2 / 5)),
              math.log((2 / 7) / (2 / 5))]
  np.testing.assert_allclose(nb_log_count_ratio(features, labels), expected, rtol=1e-12)
  # alpha 0.5: p = [2.5, 1.5, 1.5] (sum 5.5), q = [0.5, 1.5, 1.5] (sum 3.5).
  np.testing.assert_allclose(nb_log_count_ratio(features, labels, alpha=0.5)[0],
                             math.log((2.5 / 5.5) / (0.5 / 3.5)), rtol=1e-12)


@pytest.mark.parametrize("labels, alpha, message", [
    ([1, 0], 1.0, r"expected shape \(3,\)"),
    ([1, 2, 0], 1.0, "must be 0 or 1"),
    ([1, 1, 1], 1.0, "both classes"),
    ([1, 0, 1], 0.0, "alpha must be positive"),
])
def test_nb_log_count_ratio_refuses_bad_labels_and_smoothing(labels, alpha, message):
  features = scipy.sparse.csr_matrix(np.eye(3, dtype=np.float32))
  with pytest.raises(ValueError, match=message):
    nb_log_count_ratio(features, np.array(labels), alpha)


def _order_reviews(count: int, seed: int) -> tuple[list[list[int]], np.ndarray]:
  """Reviews of random filler words (10..39) holding both 4 and 9: '4 9' in that order in the
  positive ones, '9 4' in the negative ones. Their bags of words are alike; their bigrams are
  not."""
  rng = np.random.default_rng(seed)
  reviews, labels = [], rng.integers(0, 2, size=count)
  for label in labels:
    filler = rng.integers(10, 40, size=int(rng.integers(4, 12))).tolist()
    at = int(rng.integers(0, len(filler) + 1))
    reviews.append(filler[:at] + ([4, 9] if label else [9, 4]) + filler[at:])
  return reviews, labels


def test_nbsvm_needs_bigrams_to_read_word_order():
  train, train_labels = _order_reviews(301, seed=0)
  test, test_labels = _order_reviews(203, seed=1)
  unigrams = NBSVM.fit(train, train_labels, max_n=1)
  bigrams = NBSVM.fit(train, train_labels, max_n=2)
  assert ensemble.accuracy(bigrams.log_odds(test), test_labels) == 1.0
  assert ensemble.accuracy(unigrams.log_odds(test), test_labels) < 0.7
  assert bigrams.log_odds(test).dtype == np.float64 and bigrams.log_odds(test).shape == (203,)
  # The bigrams that decide carry the largest NB ratios, of opposite signs.
  vocabulary = bigrams.vectorizer.vocabulary_
  assert bigrams.ratio[vocabulary[(4, 9)]] > 3 and bigrams.ratio[vocabulary[(9, 4)]] < -3


def test_nbsvm_reuses_features_and_checks_their_width():
  reviews, labels = _order_reviews(57, seed=2)
  vectorizer, features = binary_features(reviews, 2)
  assert features.shape[0] == 57 and set(np.unique(features.data)) == {1.0}
  again = NBSVM.from_features(features, vectorizer, labels, max_n=2, cost=0.3)
  fresh = NBSVM.fit(reviews, labels, max_n=2, cost=0.3)
  np.testing.assert_allclose(again.log_odds(reviews), fresh.log_odds(reviews), rtol=1e-9)
  with pytest.raises(ValueError, match="expected .* columns"):
    again.scores(features[:, :-1])
  with pytest.raises(ValueError, match="cost must be positive"):
    NBSVM.from_features(features, vectorizer, labels, max_n=2, cost=0.0)
  with pytest.raises(ValueError, match="max_n must be at least 1"):
    NBSVM.fit(reviews, labels, max_n=0)
  with pytest.raises(ValueError, match="at least one training review"):
    binary_features([], 2)


def test_weight_grid_lists_every_split_of_one_in_steps():
  assert ensemble.weight_grid(2, 0.5) == [(1.0, 0.0), (0.5, 0.5), (0.0, 1.0)]
  grid = ensemble.weight_grid(3, 0.05)
  assert len(grid) == 231 == len(set(grid))  # C(22, 2) ways to split 20 steps among 3
  assert all(abs(sum(w) - 1.0) < 1e-9 and min(w) >= 0 for w in grid)
  assert grid[0] == (1.0, 0.0, 0.0) and grid[-1] == (0.0, 0.0, 1.0)
  with pytest.raises(ValueError, match="step that divides 1"):
    ensemble.weight_grid(2, 0.3)


def test_choose_weights_finds_the_blend_that_fixes_both_models():
  labels = np.array([1, 0, 1, 0])
  a = np.array([3.0, -3.0, -1.0, 1.0])  # right on the first two only
  b = np.array([-1.0, 1.0, 3.0, -3.0])  # right on the last two only; same spread as a
  weights, curve = ensemble.choose_weights({"a": a, "b": b}, labels)
  # All four are right for 0.25 < w_b < 0.75; of the best, the closest to even is 0.5 / 0.5.
  assert weights == {"a": 0.5, "b": 0.5}
  assert [row[:2] for row in curve] == [list(w) for w in ensemble.weight_grid(2)]
  assert curve[0][-1] == 0.5 and curve[-1][-1] == 0.5  # each alone: two of four
  assert all(curve[i][-1] == 1.0 for i in range(6, 15))  # w_b = 0.30 .. 0.70


def test_choose_weights_breaks_ties_towards_an_even_blend_then_the_first_model():
  labels = np.array([1, 0, 1, 0])
  a = np.array([2.0, -2.0, 2.0, -2.0])  # always right
  b = np.array([1.0, -1.0, -1.0, 1.0])  # wrong on the last two: the blend is right for w_b < 0.5
  weights, curve = ensemble.choose_weights({"a": a, "b": b}, labels)
  assert weights == {"a": 0.55, "b": 0.45}
  assert curve[11] == [0.45, 0.55, 0.5] and curve[9] == [0.55, 0.45, 1.0]
  # With a copy of a, every w_b < 0.5 is best: of those closest to a third each, the one that
  # gives a, then the copy, the most.
  weights, _ = ensemble.choose_weights({"a": a, "copy": a.copy(), "b": b}, labels)
  assert weights == {"a": 0.35, "copy": 0.35, "b": 0.3}
  with pytest.raises(ValueError, match="b: the log-odds on dev have no spread"):
    ensemble.choose_weights({"a": a, "b": np.ones(4)}, labels)


def _noisy_models(n: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
  """Dev log-odds of three models of n reviews: two informative ones of different strength and
  scale, and one that points the wrong way more often than not."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 2, n)
  signs = 2.0 * labels - 1.0
  return {"strong": 3.0 * (signs + rng.normal(0, 1.1, n)),
          "weak": 0.5 * (signs + rng.normal(0, 2.3, n)),
          "reversed": -0.2 * signs + rng.normal(0, 1.0, n)}, labels


def test_log_loss_weights_are_logistic_regression_without_intercept():
  from sklearn.linear_model import LogisticRegression
  log_odds, labels = _noisy_models(997, seed=5)
  del log_odds["reversed"]  # both left have positive coefficients: the bound is not active
  weights, fit = ensemble.fit_log_loss_weights(log_odds, labels)
  x = np.stack([z / np.std(z) for z in log_odds.values()], axis=1)  # (997, 2)
  reference = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12,
                                 max_iter=10_000).fit(x, labels)
  v = reference.coef_[0]  # (2,)
  assert v.min() > 0
  assert fit["temperature"] == pytest.approx(v.sum(), rel=1e-5)
  np.testing.assert_allclose(list(weights.values()), v / v.sum(), rtol=1e-5)
  probability = reference.predict_proba(x)[np.arange(997), labels]
  assert fit["dev_log_loss"] == pytest.approx(-np.mean(np.log(probability)), rel=1e-9)
  assert sum(weights.values()) == pytest.approx(1.0, abs=1e-12)


def test_log_loss_weights_give_a_reversed_model_nothing():
  log_odds, labels = _noisy_models(997, seed=5)
  weights, _ = ensemble.fit_log_loss_weights(log_odds, labels)
  assert weights["reversed"] == 0.0 and weights["strong"] > weights["weak"] > 0
  with pytest.raises(ValueError, match="point the wrong way on dev"):
    ensemble.fit_log_loss_weights({"a": -log_odds["strong"], "b": -log_odds["weak"]}, labels)


def test_an_abnormal_end_at_the_minimum_is_kept_and_one_away_from_it_is_not(monkeypatch):
  """L-BFGS-B's 'ABNORMAL' end (its line search finding no decrease) is accepted where the
  gradient says the minimum is reached, and named where it is not."""
  log_odds, labels = _noisy_models(997, seed=5)
  weights, fit = ensemble.fit_log_loss_weights(log_odds, labels)
  optimum = np.array([weights[name] for name in log_odds]) * fit["temperature"]
  minimize = ensemble.scipy.optimize.minimize

  def stopped_at(x):
    def fake(*args, **kwargs):
      result = minimize(*args, **kwargs)
      result.x, result.success, result.message = x, False, "ABNORMAL: "
      return result
    return fake

  monkeypatch.setattr(ensemble.scipy.optimize, "minimize", stopped_at(optimum))
  again, _ = ensemble.fit_log_loss_weights(log_odds, labels)
  assert again == pytest.approx(weights, abs=1e-9)
  monkeypatch.setattr(ensemble.scipy.optimize, "minimize", stopped_at(optimum * 1.5))
  with pytest.raises(ValueError, match=r"stopped with 'ABNORMAL: ' away from its minimum"):
    ensemble.fit_log_loss_weights(log_odds, labels)


@pytest.mark.parametrize("rule", ensemble.BLEND_RULES)
def test_rule_stability_refits_on_resamples_and_held_out_folds(rule):
  log_odds, labels = _noisy_models(401, seed=6)
  record = ensemble.rule_stability(rule, log_odds, labels, bootstraps=7, folds=3, seed=2)
  assert record["bootstraps"] == 7 and record["folds"] == 3
  rows = np.asarray(record["bootstrap_weights"])  # (7, 3)
  assert rows.shape == (7, 3) and np.allclose(rows.sum(axis=1), 1.0, atol=1e-5)
  assert list(record["bootstrap_std"]) == ["strong", "weak", "reversed"]
  np.testing.assert_allclose(list(record["bootstrap_std"].values()), rows.std(axis=0), atol=1e-6)
  # The cross-validated accuracy counts each review once, scored by a rule that never saw it:
  # recomputed here fold by fold.
  fold_of = np.empty(401, np.int64)
  rng = np.random.default_rng(2)
  for _ in range(7):
    rng.integers(0, 401, 401)
  fold_of[rng.permutation(401)] = np.arange(401) % 3
  right = 0
  for fold in range(3):
    kept = {name: z[fold_of != fold] for name, z in log_odds.items()}
    weights = ensemble.choose_by_rule(rule, kept, labels[fold_of != fold])
    scales = {name: np.std(z) for name, z in kept.items()}
    z = ensemble.blend({name: z[fold_of == fold] for name, z in log_odds.items()}, weights,
                       scales)
    right += int(np.sum((z > 0) == labels[fold_of == fold]))
  assert record["cv_dev_accuracy"] == right / 401
  assert 0.7 < record["cv_dev_accuracy"] < 1.0
  assert ensemble.rule_stability(rule, log_odds, labels, bootstraps=7, folds=3,
                                 seed=2) == record  # the same seed, the same record
  with pytest.raises(ValueError, match="unknown blend rule 'vote'"):
    ensemble.choose_by_rule("vote", log_odds, labels)


def test_log_loss_weights_move_less_than_the_grids_over_dev_resamples():
  """The reason for the rule: on dev sets of 2,501 reviews drawn like the real blend's (three
  correlated models), the grid's dev-accuracy choice jumps about far more than the log-loss fit."""
  rng = np.random.default_rng(11)
  n = 2501
  labels = rng.integers(0, 2, n)
  signs = 2.0 * labels - 1.0
  shared = rng.normal(0, 1.0, n)  # what all three get wrong together
  log_odds = {"run": 2 * signs + 1.2 * shared + rng.normal(0, 1.0, n),
              "nbsvm": 2 * signs + 1.2 * shared + rng.normal(0, 0.8, n),
              "pv": 1.4 * signs + 0.8 * shared + rng.normal(0, 1.3, n)}
  spread = {rule: ensemble.rule_stability(rule, log_odds, labels, bootstraps=12, folds=2)[
      "bootstrap_std"] for rule in ensemble.BLEND_RULES}
  for name in log_odds:
    assert spread["log_loss"][name] < 0.6 * spread["grid"][name], spread


def test_blend_weighs_each_model_by_its_spread():
  log_odds = {"a": np.array([2.0, -2.0]), "b": np.array([-10.0, 30.0])}
  z = ensemble.blend(log_odds, {"a": 0.25, "b": 0.75}, {"a": 2.0, "b": 10.0})
  np.testing.assert_allclose(z, [0.25 * 1 + 0.75 * -1, 0.25 * -1 + 0.75 * 3])


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
  """A briefly trained ngram_attn run on the shipped IMDB sample (reviews cut to 64 tokens)."""
  root = tmp_path_factory.mktemp("ensemble")
  workdir = train_sample_ngram_run(root, max_len=64, boundaries=(21, 64), steps=6)
  return root, workdir


@pytest.mark.usefixtures("quick_compiles")
def test_the_ensemble_command_scores_the_run_nbsvm_and_their_blend(sample_run, capsys):
  root, workdir = sample_run
  out = root / "out" / "ensemble.json"
  assert cli.main(["ensemble", "sentiment", "--workdir", workdir, "--out", str(out), "--max-n",
                   "2", "--costs", "0.1", "1", "--pv-dim", "16", "--pv-workers", "1"]) == 0
  record = json.loads(out.read_text())
  run = runs.load_run(workdir)
  data = run.task.data
  assert record["reviews"] == {split: data.num_examples(split)
                               for split in ("train", "dev", "test")}
  # The run alone scores what the engine's evaluation scores.
  for split in ("dev", "test"):
    engine = trainer.evaluate(run.task, run.params, split, extra=False)["accuracy"]
    assert record["run_alone"][f"{split}_accuracy"] == pytest.approx(engine, abs=1e-6)
  fits = record["nbsvm"]["fits"]  # a run without pseudo-labels: its labelled reviews only
  assert [(row["train_on"], row["cost"]) for row in fits] == [("labelled", 0.1), ("labelled", 1.0)]
  assert all(row["train_reviews"] == data.num_examples("train") for row in fits)
  best = max(fits, key=lambda row: row["dev_accuracy"])
  assert record["nbsvm"]["chosen"] == best
  assert record["nbsvm"]["max_n"] == 2 and best["features"] > 1000
  # The blend's corners are the models alone (the grid rule's curve is written for every rule);
  # the default rule's weights are non-negative, sum to 1, and were refitted on dev resamples.
  ens = record["ensemble"]
  assert ens["models"] == ["run", "nbsvm", "paragraph_vectors"] and ens["rule"] == "log_loss"
  pv = record["paragraph_vectors"]
  by_weights = {tuple(row[:-1]): row[-1] for row in ens["dev_accuracy_by_weights"]}
  assert by_weights[1.0, 0.0, 0.0] == record["run_alone"]["dev_accuracy"]
  assert by_weights[0.0, 1.0, 0.0] == best["dev_accuracy"]
  assert by_weights[0.0, 0.0, 1.0] == pv["chosen"]["dev_accuracy"]
  assert list(ens["weights"]) == ens["models"] and min(ens["weights"].values()) >= 0
  assert sum(ens["weights"].values()) == pytest.approx(1.0, abs=1e-9)
  assert ens["temperature"] > 0 and 0 < ens["dev_log_loss"] < np.log(2)
  assert ens["bootstraps"] == ensemble.BOOTSTRAPS == len(ens["bootstrap_weights"])
  assert ens["folds"] == ensemble.FOLDS and 0.5 < ens["cv_dev_accuracy"] <= 1.0
  # The grid rule's choice on the same fits is written beside, and is a best one on dev.
  other = ens["other_rule"]["grid"]
  assert list(ens["other_rule"]) == ["grid"]
  assert other["dev_accuracy"] == max(by_weights.values())
  assert other["dev_accuracy"] == by_weights[tuple(other["weights"].values())]
  assert list(other["bootstrap_std"]) == ens["models"] and 0.5 < other["cv_dev_accuracy"] <= 1
  # Paragraph vectors learn from the labelled training reviews and the 300 unlabelled ones.
  assert pv["labelled"] == data.num_examples("train") and pv["texts"] == pv["labelled"] + 300
  assert [row["cost"] for row in pv["fits"]] == list(paragraph_vectors.PV_COSTS)
  assert pv["chosen"] == max(pv["fits"], key=lambda row: row["dev_accuracy"])
  # NBSVM learns the sample: well above chance on its test reviews.
  assert best["test_accuracy"] > 0.6
  err = capsys.readouterr().err
  assert "blend run " in err and "(rule log_loss;" in err and "paragraph vectors (16) of" in err
  assert "resamples of dev: weights' std run " in err and f"written to {out}" in err
  # The grid rule (the records before 2026-11-27) keeps a best weight vector on dev.
  grid_out = root / "out" / "ensemble_grid.json"
  assert cli.main(["ensemble", "sentiment", "--workdir", workdir, "--out", str(grid_out),
                   "--max-n", "2", "--costs", "1", "--pv-epochs", "0", "--blend", "grid"]) == 0
  grid = json.loads(grid_out.read_text())["ensemble"]
  by_weights = {tuple(row[:-1]): row[-1] for row in grid["dev_accuracy_by_weights"]}
  assert grid["rule"] == "grid" and "temperature" not in grid
  assert list(grid["other_rule"]) == ["log_loss"]
  assert by_weights[tuple(grid["weights"].values())] == max(by_weights.values())
  assert grid["dev_accuracy"] == max(by_weights.values())


@pytest.mark.usefixtures("quick_compiles")
def test_a_students_nbsvm_learns_from_its_labelled_reviews_or_from_all(sample_run, capsys):
  root, teacher = sample_run
  labels_file = str(root / "pseudo.npz")
  assert cli.main(["pseudo-label", "sentiment", "--workdir", teacher, "--out", labels_file]) == 0
  cfg = runs.load_config(teacher)
  cfg = config_lib.override(cfg, ["--data.pseudo_labels", labels_file,
                                  "--data.pseudo_min_probability", "0.5", "--train.num_steps=2"])
  student = str(root / "student")
  trainer.train(SentimentTask(cfg), cfg, student)
  out = root / "student_ensemble.json"
  assert cli.main(["ensemble", "sentiment", "--workdir", student, "--out", str(out), "--max-n",
                   "2", "--costs", "1", "--pv-epochs", "0"]) == 0
  record = json.loads(out.read_text())
  data = runs.load_run(student).task.data
  pseudo = data.report["train"]["pseudo_labelled"]["kept"]
  assert pseudo > 100  # the sample's 300 unlabelled reviews, all of them at 0.5
  labelled = data.num_examples("train") - pseudo
  assert labelled == runs.load_run(teacher).task.data.num_examples("train")
  fits = record["nbsvm"]["fits"]
  assert [(row["train_on"], row["train_reviews"]) for row in fits] == [
      ("labelled", labelled), ("all", labelled + pseudo)]
  assert fits[1]["features"] > fits[0]["features"]  # the unlabelled reviews bring new n-grams
  assert record["ensemble"]["models"] == ["run", "nbsvm"]  # --pv-epochs 0
  assert "paragraph_vectors" not in record
  assert "NBSVM on all reviews" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--max-n", "0"], "--max-n must be at least 1"),
    (["--costs", "1", "-1"], "every --costs value positive"),
    (["--pv-epochs", "-1"], "--pv-epochs must be at least 0"),
    (["--pv-dim", "0"], "--pv-dim and --pv-workers at least 1"),
])
def test_the_ensemble_command_refuses_bad_flags(sample_run, tmp_path, capsys, flags, message):
  assert cli.main(["ensemble", "sentiment", "--workdir", sample_run[1], "--out",
                   str(tmp_path / "e.json"), *flags]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_the_ensemble_command_names_a_missing_run(tmp_path, capsys):
  assert cli.main(["ensemble", "sentiment", "--workdir", str(tmp_path / "nowhere"), "--out",
                   str(tmp_path / "e.json")]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and "nowhere" in err and err.count("\n") == 1
