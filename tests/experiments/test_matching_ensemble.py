"""Stacking matching runs (experiments.matching.ensemble): the blends' math by hand, and the command
`python -m experiments ensemble matching` on two small runs trained on the shipped AFQMC sample."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from experiments import cli
from experiments import config as config_lib
from experiments import runs
from experiments import trainer
from experiments.matching import configs
from experiments.matching import ensemble
from experiments.matching import metrics as metrics_lib
from experiments.matching.task import MatchingTask
from pipelines.tasks import MatchingData

pytestmark = pytest.mark.usefixtures("quick_compiles")


def test_log_odds_and_the_mean_blend_by_hand():
  np.testing.assert_allclose(ensemble.log_odds(np.array([0.5, 0.75, 0.2])),
                             [0.0, np.log(3.0), -np.log(4.0)], rtol=1e-12)
  # 0 and 1 are clipped to finite log-odds, the same distance from 0.
  ends = ensemble.log_odds(np.array([0.0, 1.0]))
  assert np.all(np.isfinite(ends)) and ends[0] == pytest.approx(-ends[1])
  p = np.array([0.1, 0.6, 0.93])
  np.testing.assert_allclose(ensemble.mean_blend({"a": p, "b": 1 - p}), 0.5, atol=1e-12)
  np.testing.assert_allclose(ensemble.mean_blend({"a": p}), p, rtol=1e-9)
  # Log-odds 0 and log 9 average to log 3: p = 3 / 4.
  assert ensemble.mean_blend({"a": np.array([0.5]), "b": np.array([0.9])})[0] == pytest.approx(
      0.75, abs=1e-9)


def test_the_stack_scores_each_dev_pair_by_a_fit_without_its_fold():
  rng = np.random.default_rng(3)
  n_dev, n_test = 301, 97
  dev_labels = (rng.random(n_dev) < 0.31).astype(np.int64)
  test_labels = (rng.random(n_test) < 0.31).astype(np.int64)

  def member(labels, signal):  # p(same) that leans toward the label by `signal`
    z = signal * (2 * labels - 1) + rng.normal(size=len(labels))
    return 1 / (1 + np.exp(-z))

  dev = {"good": member(dev_labels, 2.0), "noise": member(dev_labels, 0.0)}
  test = {"good": member(test_labels, 2.0), "noise": member(test_labels, 0.0)}
  out = ensemble.stack(dev, dev_labels, test, cost=1.0, folds=5, seed=7)
  assert out["dev"].shape == (n_dev,) and out["test"].shape == (n_test,)
  assert out["coefficients"]["good"] > 0.5 > abs(out["coefficients"]["noise"])
  # The intercept carries the 31% prior: a pair both members call even is below a half.
  assert 1 / (1 + np.exp(-out["intercept"])) < 0.5
  # Each fold's pairs are scored by the regression fitted on the other four folds.
  x = np.stack([ensemble.log_odds(dev[name]) for name in ("good", "noise")], axis=1)
  train, held = next(StratifiedKFold(5, shuffle=True, random_state=7).split(x, dev_labels))
  fold_fit = LogisticRegression(C=1.0, max_iter=1000).fit(x[train], dev_labels[train])
  np.testing.assert_allclose(out["dev"][held], fold_fit.predict_proba(x[held])[:, 1], rtol=1e-9)
  full_fit = LogisticRegression(C=1.0, max_iter=1000).fit(x, dev_labels)
  assert not np.allclose(out["dev"][held], full_fit.predict_proba(x[held])[:, 1])
  x_test = np.stack([ensemble.log_odds(test[name]) for name in ("good", "noise")], axis=1)
  np.testing.assert_allclose(out["test"], full_fit.predict_proba(x_test)[:, 1], rtol=1e-9)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
  """A small siamese BiLSTM and a small ESIM, 5 and 7 steps on the sample."""
  root = tmp_path_factory.mktemp("stack")
  sample = MatchingData.load(data_dir=root / "data", max_len=12, boundaries=(12,))
  workdirs = []
  for name, steps in (("siamese", 5), ("esim", 7)):
    cfg = configs.CONFIGS[name]()
    cfg.experiment, cfg.model_name = "matching", name
    cfg = config_lib.override(cfg, [
        "--model.embed_dim=12", "--model.hidden_size=10", "--data.max_len=12",
        "--data.boundaries=12", f"--train.num_steps={steps}", "--train.batch_size=16",
        "--train.progress_bar=False"])
    workdir = str(root / name)
    trainer.train(MatchingTask(cfg, data=sample), cfg, workdir)
    workdirs.append(workdir)
  return root, workdirs


def test_the_command_reports_members_and_both_blends(two_runs, capsys):
  root, workdirs = two_runs
  out = root / "stack.json"
  assert cli.main(["ensemble", "matching", "--workdir", *workdirs, "--overlap", "--folds", "3",
                   "--out", str(out)]) == 0
  record = json.loads(out.read_text())
  assert list(record["members"]) == [*workdirs, "overlap"]
  assert record["settings"] == {"cost": 1.0, "folds": 3, "seed": 0}
  for workdir in workdirs:  # a member's figures are its run's own
    run = runs.load_run(workdir)
    labels, prob = run.task.split_probabilities(run.params, "test")
    member = record["members"][workdir]
    assert member["test"]["auc"] == pytest.approx(metrics_lib.binary_metrics(labels, prob)["auc"])
    assert member["step"] == run.step and member["model"] == run.config.model_name
    assert record["pairs"]["test"] == len(labels)
  for blend in ("stack", "mean"):
    for split in ("dev", "test"):
      row = record[blend][split]
      assert np.sum(row["confusion"]) == record["pairs"][split]
      assert row["tuned"]["threshold"] == record[blend]["dev"]["tuned"]["threshold"]
      assert 0 <= row["accuracy"] <= 1 and 0 <= row["auc"] <= 1
  assert set(record["stack"]["coefficients"]) == set(record["members"])
  assert "stack: test accuracy" in capsys.readouterr().err


def test_the_command_refuses_what_cannot_be_stacked(two_runs, capsys, monkeypatch):
  _, workdirs = two_runs
  for argv, message in [
      (["--workdir", workdirs[0]], "a stack needs at least two members"),
      (["--workdir", workdirs[0], workdirs[0]], f"--workdir {workdirs[0]} is given twice"),
      (["--workdir", *workdirs, "--folds", "1"], "--folds must be at least 2, got 1"),
      (["--workdir", *workdirs, "--cost", "0"], "--cost must be positive, got 0.0")]:
    assert cli.main(["ensemble", "matching", *argv]) == 2, argv
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {message}") and captured.out == "", argv
    assert captured.err.count("\n") == 1, argv  # one line
  # A run whose test split holds other pairs (another data set or split) is named.
  load_run = runs.load_run

  def other_pairs(workdir, *args, **kwargs):
    run = load_run(workdir, *args, **kwargs)
    if workdir == workdirs[1]:
      texts = run.task.data.texts
      monkeypatch.setattr(run.task.data, "texts",
                          lambda split: texts(split)[::-1] if split == "test" else texts(split))
    return run

  monkeypatch.setattr(runs, "load_run", other_pairs)
  assert cli.main(["ensemble", "matching", "--workdir", *workdirs]) == 2
  assert (f"--workdir {workdirs[1]}: its test split holds other pairs than {workdirs[0]}'s"
          in capsys.readouterr().err)
