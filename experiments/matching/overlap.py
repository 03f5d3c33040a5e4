"""A lexical-overlap baseline for sentence-pair matching: how far surface overlap alone gets.

    python -m experiments train matching --model overlap [--data-dir ../shared/data/afqmc] \
        [--model.costs 0.1 1 10]
    python -m experiments predict matching "花呗怎么还款" "怎么还花呗" --workdir runs/matching-overlap

Each pair (a, b), tokenized as the matching runs tokenize it (characters for Chinese,
MatchingData.tokenize), becomes one feature vector, the same for (b, a):

  dense (7)   Jaccard of the token sets; Jaccard of the token-bigram sets; |len a - len b| /
              max(len a, len b); difflib's SequenceMatcher ratio 2 M / (len a + len b) (M: tokens
              in matching blocks); the cosine of the two sentences' TF-IDF vectors of token
              1- and 2-grams (idf over train's sentences); whether the sentences are equal; the
              shorter length / 48. Standardized on train.
  shared      one indicator per vocabulary token present in both sentences;
  differing   one indicator per vocabulary token present in exactly one of them (on AFQMC: 花 on
              one side and 借 on the other is Huabei against Jiebei, a different product).

An L2-regularized logistic regression (scikit-learn, liblinear) on them, for each cost C of
model.costs; dev ROC AUC chooses C (as `train.best_metric dev/auc` chooses the neural runs'
checkpoints). The run (OverlapTask, fitted without gradient steps: experiments/fitting.py) reports
dev and test as the neural runs do (their metric names): at the argmax (p >= 0.5) and at the
threshold of highest dev accuracy (metrics.best_threshold); results.json's 'fit' holds every
cost's dev figures, the confusion matrices and the heaviest features. The vocabulary (tokens seen
at least twice in train, the runs' min_freq) and everything fitted come from train only. The
model reads whole sentences (data.max_len does not cut them).
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable, Sequence

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from experiments.console import UsageError
from experiments.log_odds import log_loss
from experiments.matching import metrics as metrics_lib
from experiments.matching.task import MatchingTask
from experiments.matching.task import Prediction
from experiments.task import FittedTask

DENSE_NAMES = ("jaccard", "bigram_jaccard", "length_gap", "sequence_ratio", "tfidf_cosine",
               "equal", "shorter_length")
LENGTH_SCALE = 48  # the matching runs' max_len: shorter_length is len / 48
MIN_FREQ = 2  # vocabulary tokens are seen at least this often in train (the runs' min_freq)


def _bigrams(tokens: Sequence[str]) -> set[tuple[str, str]]:
  return set(zip(tokens, tokens[1:]))


def _tfidf_terms(tokens: Sequence[str]) -> list[str]:
  """The TF-IDF's terms of a sentence: its tokens, then its token bigrams ('x y')."""
  return list(tokens) + [f"{x} {y}" for x, y in zip(tokens, tokens[1:])]


def _jaccard(x: set, y: set) -> float:
  """|x & y| / |x | y|; 1 for two empty sets (two one-token sentences have no bigrams)."""
  union = x | y
  return len(x & y) / len(union) if union else 1.0


def dense_features(a: Sequence[str], b: Sequence[str]) -> list[float]:
  """The dense features of DENSE_NAMES but the TF-IDF cosine (the model adds it), for one pair of
  token lists; the same for (b, a)."""
  if not a or not b:
    raise ValueError(f"a pair needs a token on each side, got {list(a)} and {list(b)}")
  ratio_ab = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
  ratio_ba = difflib.SequenceMatcher(None, b, a, autojunk=False).ratio()
  return [_jaccard(set(a), set(b)), _jaccard(_bigrams(a), _bigrams(b)),
          abs(len(a) - len(b)) / max(len(a), len(b)),
          (ratio_ab + ratio_ba) / 2,  # difflib's blocks depend on the order; averaged: symmetric
          float(list(a) == list(b)), min(len(a), len(b)) / LENGTH_SCALE]


@dataclasses.dataclass
class OverlapFeatures:
  """Pairs of token lists -> the feature matrix; `fit` learns the vocabulary, idf and scaling on
  train's pairs."""
  vocab: dict[str, int]
  tfidf: TfidfVectorizer
  scaler: StandardScaler

  @classmethod
  def fit(cls, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> OverlapFeatures:
    if not pairs:
      raise ValueError("no training pairs to fit the features on")
    counts: dict[str, int] = {}
    for a, b in pairs:
      for token in (*a, *b):
        counts[token] = counts.get(token, 0) + 1
    vocab = {token: i for i, token in enumerate(sorted(t for t, c in counts.items()
                                                       if c >= MIN_FREQ))}
    tfidf = TfidfVectorizer(analyzer=_tfidf_terms)
    tfidf.fit([tokens for pair in pairs for tokens in pair])
    features = cls(vocab, tfidf, StandardScaler())
    features.scaler.fit(features._dense(pairs))
    return features

  def _dense(self, pairs) -> np.ndarray:
    """(N, 7) unscaled dense features, in DENSE_NAMES' order."""
    rows = np.array([dense_features(a, b) for a, b in pairs], np.float64)  # (N, 6)
    left = self.tfidf.transform([a for a, _ in pairs])  # rows are L2-normalized
    right = self.tfidf.transform([b for _, b in pairs])
    cosine = np.asarray(left.multiply(right).sum(axis=1)).ravel()  # (N,)
    return np.column_stack([rows[:, :4], cosine, rows[:, 4:]])

  def transform(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> sparse.csr_matrix:
    """(N, 7 + 2 V) float64: scaled dense features, shared-token and differing-token indicators."""
    dense = self.scaler.transform(self._dense(pairs))
    shared_cols, differing_cols = [], []
    for a, b in pairs:
      x = {self.vocab[t] for t in a if t in self.vocab}
      y = {self.vocab[t] for t in b if t in self.vocab}
      shared_cols.append(sorted(x & y))
      differing_cols.append(sorted(x ^ y))
    size = len(self.vocab)
    shared = _indicators(shared_cols, len(pairs), size)
    differing = _indicators(differing_cols, len(pairs), size)
    return sparse.hstack([sparse.csr_matrix(dense), shared, differing], format="csr")

  @property
  def names(self) -> list[str]:
    tokens = sorted(self.vocab, key=self.vocab.get)
    return [*DENSE_NAMES, *(f"shared:{t}" for t in tokens), *(f"differing:{t}" for t in tokens)]


def _indicators(columns: list[list[int]], n: int, size: int) -> sparse.csr_matrix:
  """(n, size) 0/1 with row i's ones at columns[i]."""
  indptr = np.cumsum([0] + [len(c) for c in columns])
  indices = np.array([j for c in columns for j in c], np.int64)
  return sparse.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, size))


@dataclasses.dataclass
class OverlapModel:
  """A fitted baseline: the features, the dev-chosen logistic regression, its cost, and the
  threshold of highest dev accuracy."""
  features: OverlapFeatures
  classifier: LogisticRegression
  cost: float
  threshold: float

  def scores(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]
             ) -> tuple[np.ndarray, np.ndarray]:
    """float64 (N,) twice: log p(same) - log p(different), and p(same), of pairs of token
    lists."""
    x = self.features.transform(pairs)
    return self.classifier.decision_function(x), self.classifier.predict_proba(x)[:, 1]

  def probabilities(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> np.ndarray:
    """float64 (N,): p(same) of pairs of token lists."""
    return self.classifier.predict_proba(self.features.transform(pairs))[:, 1]


def fit_overlap(data, costs: Sequence[float], note: Callable[[str], None]
                ) -> tuple[dict[str, Any], dict[str, np.ndarray], OverlapModel]:
  """Fits the baseline on `data`'s train split (a pipelines.tasks.matching.MatchingData), one
  logistic regression per cost, dev AUC choosing: the record (every cost's dev figures, the
  chosen one's dev and test figures and heaviest features), the chosen fit's p(same) of every
  pair by split {'dev': (N_dev,), 'test': (N_test,)} in the data's order, and the model."""
  if not costs or any(c <= 0 for c in costs):
    raise ValueError(f"need at least one positive cost, got {list(costs)}")
  tokens = {split: [(data.tokenize(a), data.tokenize(b)) for a, b in data.texts(split)]
            for split in ("train", "dev", "test")}
  labels = {split: np.asarray(data.labels(split), np.int64) for split in tokens}
  features = OverlapFeatures.fit(tokens["train"])
  x = {split: features.transform(pairs) for split, pairs in tokens.items()}
  fits, models, probs = [], {}, {}
  for cost in dict.fromkeys(costs):
    models[cost] = LogisticRegression(C=cost, solver="liblinear", max_iter=1000).fit(
        x["train"], labels["train"])
    probs[cost] = {split: models[cost].predict_proba(x[split])[:, 1] for split in ("dev", "test")}
    dev = metrics_lib.binary_metrics(labels["dev"], probs[cost]["dev"])
    fits.append({"cost": cost, "dev": dev})
    note(f"C={cost:g}: dev accuracy {dev['accuracy']:.4f}  AUC {dev['auc']:.4f}")
  chosen = max(fits, key=lambda row: row["dev"]["auc"])  # the first of the best
  prob = probs[chosen["cost"]]
  threshold = metrics_lib.best_threshold(labels["dev"], prob["dev"])
  record: dict[str, Any] = {
      "model": "overlap (logistic regression on lexical-overlap features)",
      "pairs": {split: len(pairs) for split, pairs in tokens.items()},
      "features": {"dense": list(DENSE_NAMES), "vocabulary": len(features.vocab),
                   "total": int(x["train"].shape[1])},
      "fits": fits, "cost": chosen["cost"], "threshold": threshold}
  for split in ("dev", "test"):
    record[split] = {
        **metrics_lib.binary_metrics(labels[split], prob[split]),
        "confusion": metrics_lib.confusion(labels[split], prob[split]),
        "positive_share": float(np.mean(labels[split])),
        "tuned": {**metrics_lib.binary_metrics(labels[split], prob[split], threshold),
                  "confusion": metrics_lib.confusion(labels[split], prob[split], threshold)}}
  coef = models[chosen["cost"]].coef_[0]
  record["dense_weights"] = {name: float(w) for name, w in zip(DENSE_NAMES, coef)}
  names = features.names
  order = np.argsort(coef)
  record["most_negative"] = [[names[i], round(float(coef[i]), 4)] for i in order[:15]]
  record["most_positive"] = [[names[i], round(float(coef[i]), 4)] for i in order[::-1][:15]]
  return record, prob, OverlapModel(features, models[chosen["cost"]], chosen["cost"], threshold)


class OverlapTask(FittedTask, MatchingTask):
  """The baseline as a run (configs.OverlapConfig): fitted on the data the matching runs read."""

  def fit(self, note: Callable[[str], None]) -> tuple[OverlapModel, dict[str, Any]]:
    record, _, model = fit_overlap(self.data, self.config.model.costs, note)
    return model, record

  def _split_pairs(self, split: str) -> list[tuple[list[str], list[str]]]:
    return [(self.data.tokenize(a), self.data.tokenize(b)) for a, b in self.data.texts(split)]

  def evaluate_model(self, model: OverlapModel, split: str) -> dict[str, float]:
    """The neural runs' metrics (MatchingTask.extra_eval's, and accuracy and loss at 0.5), at the
    fit's dev threshold."""
    labels = np.asarray(self.data.labels(split), np.int64)
    z, prob = model.scores(self._split_pairs(split))
    at_half = metrics_lib.binary_metrics(labels, prob)
    tuned = metrics_lib.binary_metrics(labels, prob, model.threshold)
    return {**at_half, "loss": log_loss(z, labels), "threshold": model.threshold,
            "tuned_accuracy": tuned["accuracy"], "tuned_f1": tuned["f1"],
            "tuned_macro_f1": tuned["macro_f1"]}

  def _token_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[str], list[str]]]:
    out = []
    for a, b in pairs:
      tokens = (self.tokenize(a), self.tokenize(b))
      if not tokens[0] or not tokens[1]:
        raise ValueError(f"the pair {(a, b)!r} has an empty question")
      out.append(tokens)
    return out

  def probabilities(self, params: OverlapModel, pairs: Sequence[tuple[str, str]],
                    batch_size: int = 256) -> np.ndarray:
    del batch_size  # scored at once
    return params.probabilities(self._token_pairs(pairs))

  def predict(self, params: OverlapModel, pairs: Sequence[tuple[str, str]]) -> list[Prediction]:
    """Each pair's label at 0.5, p(same) and its whole tokens (unknown: outside the baseline's
    vocabulary); no attention."""
    tokens = self._token_pairs(pairs)
    prob = params.probabilities(tokens)
    vocab = params.features.vocab
    return [Prediction(pair, (list(a), list(b)),
                       ([t not in vocab for t in a], [t not in vocab for t in b]),
                       int(p >= 0.5), float(p), {})
            for pair, (a, b), p in zip(pairs, tokens, prob)]

  def draw_heatmap(self, prediction: Prediction, path: str, layer: int = -1,
                   head: int | None = None) -> str:
    raise UsageError("--heatmap: the overlap baseline has no attention to draw")

  def on_train_end(self, params, workdir: str) -> None:
    del params, workdir  # nothing to draw
