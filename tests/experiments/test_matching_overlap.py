"""The lexical-overlap baseline of sentence-pair matching (experiments.matching.overlap): exact
features of a hand-checked pair, symmetry under swapping, and the run (`train matching --model
overlap`, fitted without gradient steps) on the AFQMC sample: the figures of the old side command's
computation, refitted here, and predict, evaluate and serve on the saved model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from experiments import cli
from experiments import runs
from experiments.explorer import service
from experiments.matching import metrics as metrics_lib
from experiments.matching import overlap
from pipelines.tasks import MatchingData


def test_dense_features_of_a_pair_checked_by_hand():
  a, b = list("花呗怎么还款"), list("怎么还花呗")
  # sets: 6 and 5 characters, all 5 of b in a; bigrams: 花呗 呗怎 怎么 么还 还款 / 怎么 么还 还花 花呗,
  # 3 shared of 6; difflib's one matching block is 怎么还 (3 of 6 + 5 tokens) either way round.
  assert overlap.dense_features(a, b) == pytest.approx(
      [5 / 6, 3 / 6, 1 / 6, 6 / 11, 0.0, 5 / 48], abs=1e-12)
  assert overlap.dense_features(a, a) == pytest.approx([1, 1, 0, 1, 1, 6 / 48], abs=1e-12)
  # One-token sentences have no bigrams: two empty bigram sets count as equal.
  assert overlap.dense_features(["花"], ["借"])[:2] == [0.0, 1.0]
  with pytest.raises(ValueError, match=r"a pair needs a token on each side, got \[\] and"):
    overlap.dense_features([], b)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
  return MatchingData.load(data_dir=tmp_path_factory.mktemp("data"))


def test_every_feature_is_the_same_for_the_pair_swapped(sample):
  pairs = [(sample.tokenize(a), sample.tokenize(b)) for a, b in sample.texts("train")[:301]]
  features = overlap.OverlapFeatures.fit(pairs)
  x = features.transform(pairs).toarray()  # (301, 7 + 2 V)
  swapped = features.transform([(b, a) for a, b in pairs]).toarray()
  np.testing.assert_allclose(x, swapped, atol=1e-12)
  vocab = len(features.vocab)
  assert x.shape == (301, 7 + 2 * vocab) and len(features.names) == x.shape[1]
  # A token is shared, differing, or neither; never both.
  assert not np.any((x[:, 7:7 + vocab] > 0) & (x[:, 7 + vocab:] > 0))
  # The TF-IDF cosine of a sentence with itself is 1.
  same = features._dense([(pairs[0][0], pairs[0][0])])
  assert same[0, overlap.DENSE_NAMES.index("tfidf_cosine")] == pytest.approx(1.0)
  with pytest.raises(ValueError, match="no training pairs"):
    overlap.OverlapFeatures.fit([])


def test_the_run_reports_the_dev_chosen_fit_as_the_neural_runs_are(sample, tmp_path, capsys):
  workdir = str(tmp_path / "overlap")
  assert cli.main(["train", "matching", "--model", "overlap", "--workdir", workdir,
                   "--data.prepared_dir", str(tmp_path / "data"), "--model.costs", "0.3",
                   "3"]) == 0
  results = json.loads((tmp_path / "overlap" / "results.json").read_text(encoding="utf-8"))
  record = results["fit"]
  assert record["pairs"] == {split: len(sample.texts(split)) for split in ("train", "dev", "test")}
  assert [row["cost"] for row in record["fits"]] == [0.3, 3.0]
  assert record["cost"] == max(record["fits"], key=lambda row: row["dev"]["auc"])["cost"]
  # Refitted here from the same features, the chosen cost gives the same figures.
  tokens = {split: [(sample.tokenize(a), sample.tokenize(b)) for a, b in sample.texts(split)]
            for split in ("train", "dev", "test")}
  features = overlap.OverlapFeatures.fit(tokens["train"])
  model = LogisticRegression(C=record["cost"], solver="liblinear", max_iter=1000).fit(
      features.transform(tokens["train"]), sample.labels("train"))
  prob = {split: model.predict_proba(features.transform(tokens[split]))[:, 1]
          for split in ("dev", "test")}
  assert record["threshold"] == metrics_lib.best_threshold(sample.labels("dev"), prob["dev"])
  run = runs.load_run(workdir)
  for split in ("dev", "test"):
    expected = metrics_lib.binary_metrics(sample.labels(split), prob[split])
    assert {name: record[split][name] for name in metrics_lib.NAMES} == pytest.approx(expected)
    tuned = metrics_lib.binary_metrics(sample.labels(split), prob[split], record["threshold"])
    assert {name: record[split]["tuned"][name] for name in metrics_lib.NAMES} == pytest.approx(
        tuned)
    assert np.sum(record[split]["confusion"]) == len(tokens[split])
    # The saved model scores every pair as the fit did, bit for bit, and the run reports the
    # neural runs' metric names with the record's figures.
    np.testing.assert_array_equal(run.params.probabilities(tokens[split]), prob[split])
    assert results[split] == {**{name: record[split][name] for name in metrics_lib.NAMES},
                              "loss": pytest.approx(results[split]["loss"]),
                              "threshold": record["threshold"],
                              **{f"tuned_{name}": record[split]["tuned"][name]
                                 for name in ("accuracy", "f1", "macro_f1")}}
    assert runs.evaluate_run(workdir, split)["metrics"] == results[split]
  assert 0 < results["test"]["loss"] < 1
  assert sorted(record["dense_weights"]) == sorted(overlap.DENSE_NAMES)
  out = capsys.readouterr().out  # the engine's progress lines, as a trained run's
  assert "Test (fitted model): accuracy" in out and "C=3: dev accuracy" in out
  # predict: one `label<TAB>p(same)` line per pair, p from the saved model; serve the same.
  pairs = sample.texts("test")[:3]
  assert cli.main(["predict", "matching", "--workdir", workdir,
                   *[text for pair in pairs for text in pair]]) == 0
  lines = capsys.readouterr().out.splitlines()
  expected = run.params.probabilities([(sample.tokenize(a), sample.tokenize(b))
                                       for a, b in pairs])
  assert lines == [f"{int(p >= 0.5)}\t{p:.4f}" for p in expected]
  # A question longer than data.max_len is read whole (the features count every token): no note.
  long_pair = ("花呗怎么还款" * 20, "怎么还花呗")
  assert cli.main(["predict", "matching", "--workdir", workdir, *long_pair]) == 0
  captured = capsys.readouterr()
  assert "reads the first" not in captured.err
  expected_long = run.params.probabilities([tuple(sample.tokenize(t) for t in long_pair)])[0]
  assert captured.out == f"{int(expected_long >= 0.5)}\t{expected_long:.4f}\n"
  answer = service.Explorer([workdir]).answer("0", {"a": pairs[0][0], "b": pairs[0][1]})
  assert answer["attention"] == [] and answer["output"]["probability"] == expected[0]
  assert cli.main(["predict", "matching", "--workdir", workdir, "--heatmap", "x.png",
                   *pairs[0]]) == 2
  assert "the overlap model has no attention to draw" in capsys.readouterr().err


def test_costs_must_be_positive(capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(["train", "matching", "--model", "overlap", "--model.costs", "0"])
  assert exit_info.value.code == 2
  assert "model.costs must be positive values, at least one, got (0.0,)" in (
      capsys.readouterr().err)
