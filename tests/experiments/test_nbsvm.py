"""NBSVM (experiments.sentiment.nbsvm) against hand-computed values, and its blend with a trained
run (experiments.sentiment.ensemble) on the shipped IMDB sample."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse

from experiments import config as config_lib
from experiments import runs
from experiments import trainer
from experiments.sentiment import ensemble
from experiments.sentiment import pseudo_label
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
  assert ensemble.main(["--workdir", workdir, "--out", str(out), "--max-n", "2",
                        "--costs", "0.1", "1", "--pv-dim", "16", "--pv-workers", "1"]) == 0
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
  # The blend's corners are the models alone; the chosen weights are a best one on dev.
  ens = record["ensemble"]
  assert ens["models"] == ["run", "nbsvm", "paragraph_vectors"]
  pv = record["paragraph_vectors"]
  by_weights = {tuple(row[:-1]): row[-1] for row in ens["dev_accuracy_by_weights"]}
  assert by_weights[1.0, 0.0, 0.0] == record["run_alone"]["dev_accuracy"]
  assert by_weights[0.0, 1.0, 0.0] == best["dev_accuracy"]
  assert by_weights[0.0, 0.0, 1.0] == pv["chosen"]["dev_accuracy"]
  assert by_weights[tuple(ens["weights"].values())] == max(by_weights.values())
  assert ens["dev_accuracy"] == max(by_weights.values())
  # Paragraph vectors learn from the labelled training reviews and the 300 unlabelled ones.
  assert pv["labelled"] == data.num_examples("train") and pv["texts"] == pv["labelled"] + 300
  assert [row["cost"] for row in pv["fits"]] == list(ensemble.PV_COSTS)
  assert pv["chosen"] == max(pv["fits"], key=lambda row: row["dev_accuracy"])
  # NBSVM learns the sample: well above chance on its test reviews.
  assert best["test_accuracy"] > 0.6
  err = capsys.readouterr().err
  assert "blend run " in err and "paragraph vectors (16) of" in err
  assert f"written to {out}" in err


@pytest.mark.usefixtures("quick_compiles")
def test_a_students_nbsvm_learns_from_its_labelled_reviews_or_from_all(sample_run, capsys):
  root, teacher = sample_run
  labels_file = str(root / "pseudo.npz")
  assert pseudo_label.main(["--workdir", teacher, "--out", labels_file]) == 0
  cfg = runs.load_config(teacher)
  cfg = config_lib.override(cfg, ["--data.pseudo_labels", labels_file,
                                  "--data.pseudo_min_probability", "0.5", "--train.num_steps=2"])
  student = str(root / "student")
  trainer.train(SentimentTask(cfg), cfg, student)
  out = root / "student_ensemble.json"
  assert ensemble.main(["--workdir", student, "--out", str(out), "--max-n", "2",
                        "--costs", "1", "--pv-epochs", "0"]) == 0
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
  with pytest.raises(SystemExit) as exit_info:
    ensemble.main(["--workdir", sample_run[1], "--out", str(tmp_path / "e.json"), *flags])
  assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_the_ensemble_command_names_a_missing_run(tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_info:
    ensemble.main(["--workdir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "e.json")])
  assert exit_info.value.code == 2 and "nowhere" in capsys.readouterr().err
