"""The lexical-overlap baseline of sentence-pair matching (experiments.matching.overlap): exact
features of a hand-checked pair, symmetry under swapping, and the command on the AFQMC sample."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

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


def test_the_command_reports_the_dev_chosen_fit_as_the_neural_runs_are(sample, tmp_path, capsys):
  out = tmp_path / "overlap.json"
  assert overlap.main(["--costs", "0.3", "3", "--out", str(out)]) == 0
  record = json.loads(out.read_text(encoding="utf-8"))
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
  for split in ("dev", "test"):
    expected = metrics_lib.binary_metrics(sample.labels(split), prob[split])
    assert {name: record[split][name] for name in metrics_lib.NAMES} == pytest.approx(expected)
    tuned = metrics_lib.binary_metrics(sample.labels(split), prob[split], record["threshold"])
    assert {name: record[split]["tuned"][name] for name in metrics_lib.NAMES} == pytest.approx(
        tuned)
    assert np.sum(record[split]["confusion"]) == len(tokens[split])
  assert list(record["dense_weights"]) == list(overlap.DENSE_NAMES)
  err = capsys.readouterr().err
  assert "test: accuracy" in err and "C=3: dev accuracy" in err


def test_costs_must_be_positive(capsys):
  with pytest.raises(SystemExit) as exit_info:
    overlap.main(["--costs", "0"])
  assert exit_info.value.code == 2
  assert "every --costs value must be positive, got [0.0]" in capsys.readouterr().err
