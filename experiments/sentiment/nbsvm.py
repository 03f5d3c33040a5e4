"""NBSVM: logistic regression on Naive-Bayes-scaled binary n-gram features (Wang and Manning 2012).

The classic strong bag-of-n-grams baseline for sentiment, in the form Mesnil et al. (2014) used on
IMDB (uni+bi+trigrams, 91.87% test accuracy; 91.22% with uni+bigrams in Wang and Manning):

  x_d    in {0, 1}^F   which n-grams (n = 1 .. max_n) review d holds              (binary bag)
  p      = alpha + sum of x_d over the positive training reviews                  (F,)
  q      = alpha + sum of x_d over the negative training reviews                  (F,)
  r      = log((p / |p|_1) / (q / |q|_1))                                        (F,) NB log-count ratio
  z_d    = w . (r * x_d) + b                                                      log-odds of positive

with w, b fitted by L2-regularized logistic regression (scikit-learn's liblinear, cost C). The
n-gram vocabulary is every n-gram of the training reviews (scikit-learn's CountVectorizer); an
n-gram never seen in training has no feature. Reviews are the pipeline's word ids (Ragged rows),
so the n-grams are those of the task's tokenizer and vocabulary.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.sparse
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

from experiments.log_odds import accuracies


def word_ngrams(ids: Sequence[int], max_n: int) -> list[tuple[int, ...]]:
  """Every n-gram of `ids` for n = 1 .. max_n, as tuples, unigrams first then by position.

  >>> word_ngrams([4, 9, 7], 2)
  [(4,), (9,), (7,), (4, 9), (9, 7)]
  """
  ids = [int(i) for i in ids]
  return [tuple(ids[start:start + n]) for n in range(1, max_n + 1)
          for start in range(len(ids) - n + 1)]


def nb_log_count_ratio(features: scipy.sparse.spmatrix, labels: np.ndarray,
                       alpha: float = 1.0) -> np.ndarray:
  """r = log((p / |p|_1) / (q / |q|_1)), p and q the smoothed feature sums of each class.

  Args:
    features: (N, F) non-negative counts (binary for NBSVM).
    labels: int (N,), 0 or 1.
    alpha: the smoothing added to every feature's sum (Wang and Manning: 1).

  Returns:
    float64 (F,): positive for features more frequent in positive reviews.
  """
  labels = np.asarray(labels)
  if labels.shape != (features.shape[0],):
    raise ValueError(f"labels: expected shape ({features.shape[0]},) (one per row of the "
                     f"features), got {labels.shape}")
  if not np.all((labels == 0) | (labels == 1)):
    raise ValueError(f"labels must be 0 or 1, got {sorted(set(labels.tolist()))}")
  if not (labels == 0).any() or not (labels == 1).any():
    raise ValueError("labels: need reviews of both classes to compare their n-gram counts")
  if alpha <= 0:
    raise ValueError(f"alpha must be positive, got {alpha}")
  features = scipy.sparse.csr_matrix(features)
  p = alpha + np.asarray(features[labels == 1].sum(axis=0), np.float64).ravel()  # (F,)
  q = alpha + np.asarray(features[labels == 0].sum(axis=0), np.float64).ravel()  # (F,)
  return np.log(p / p.sum()) - np.log(q / q.sum())


@dataclasses.dataclass
class NBSVM:
  """A fitted NBSVM; `fit` builds one, `log_odds` scores reviews.

  Attributes:
    vectorizer: the fitted n-gram vocabulary (binary counts).
    ratio: (F,) the NB log-count ratio r.
    classifier: the fitted logistic regression on r * x.
    max_n: the longest n-gram.
    cost: liblinear's C.
  """
  vectorizer: CountVectorizer
  ratio: np.ndarray
  classifier: LogisticRegression
  max_n: int
  cost: float

  @classmethod
  def fit(cls, reviews: Sequence[Sequence[int]], labels: np.ndarray, *, max_n: int = 3,
          cost: float = 1.0, alpha: float = 1.0, seed: int = 0) -> NBSVM:
    """Fits the n-gram vocabulary, the NB ratio and the logistic regression.

    Args:
      reviews: N id sequences (the training reviews).
      labels: int (N,), 0 negative / 1 positive.
      max_n: the longest n-gram (3: uni+bi+trigrams).
      cost: liblinear's C (the inverse of the L2 penalty's strength).
      alpha: the NB smoothing.
      seed: liblinear's random state (its dual solver visits examples in a random order).

    Returns:
      the fitted NBSVM.
    """
    vectorizer, features = binary_features(reviews, max_n)
    return cls.from_features(features, vectorizer, labels, max_n=max_n, cost=cost, alpha=alpha,
                             seed=seed)

  @classmethod
  def from_features(cls, features: scipy.sparse.spmatrix, vectorizer: CountVectorizer,
                    labels: np.ndarray, *, max_n: int, cost: float = 1.0, alpha: float = 1.0,
                    seed: int = 0) -> NBSVM:
    """As `fit`, from the binary features (N, F) of the training reviews and the vectorizer that
    made them (`binary_features(reviews, max_n)`), so that several costs share one counting."""
    if cost <= 0:
      raise ValueError(f"cost must be positive, got {cost}")
    ratio = nb_log_count_ratio(features, labels, alpha)
    classifier = LogisticRegression(C=cost, solver="liblinear", dual=True, max_iter=1000,
                                    random_state=seed)
    classifier.fit(_scaled(features, ratio), np.asarray(labels))
    return cls(vectorizer, ratio, classifier, max_n, cost)

  def log_odds(self, reviews: Sequence[Sequence[int]]) -> np.ndarray:
    """float64 (N,): log P(positive) - log P(negative) of each review."""
    return self.scores(self.vectorizer.transform(list(reviews)))

  def scores(self, features: scipy.sparse.spmatrix) -> np.ndarray:
    """float64 (N,): the log-odds of reviews given as binary features (N, F) of this vocabulary
    (`self.vectorizer.transform`)."""
    if features.shape[1] != len(self.ratio):
      raise ValueError(f"features: expected {len(self.ratio)} columns (this NBSVM's n-grams), "
                       f"got {features.shape[1]}")
    return self.classifier.decision_function(_scaled(features, self.ratio))


def binary_features(reviews: Sequence[Sequence[int]], max_n: int
                    ) -> tuple[CountVectorizer, scipy.sparse.csr_matrix]:
  """The n-gram vocabulary of `reviews` and their binary bags (N, F), float32 CSR."""
  if max_n < 1:
    raise ValueError(f"max_n must be at least 1, got {max_n}")
  if not len(reviews):
    raise ValueError("reviews: need at least one training review")
  # A partial, not a lambda, so that a fitted NBSVM pickles (a fitted run saves it so).
  vectorizer = CountVectorizer(analyzer=functools.partial(word_ngrams, max_n=max_n), binary=True,
                               dtype=np.float32)
  return vectorizer, vectorizer.fit_transform(list(reviews)).tocsr()


def _scaled(features: scipy.sparse.spmatrix, ratio: np.ndarray) -> scipy.sparse.csr_matrix:
  """r * x for every row x of `features` (N, F)."""
  return scipy.sparse.csr_matrix(features.multiply(ratio.astype(np.float32)[None, :]))


def fit_nbsvm(ids: Mapping[str, Sequence[Sequence[int]]], labels: Mapping[str, np.ndarray],
              sizes: Mapping[str, int], max_n: int, costs: Sequence[float],
              train_on: Sequence[str], seed: int, note: Callable[[str], None]
              ) -> tuple[dict, dict[str, np.ndarray], NBSVM]:
  """NBSVM fitted on each set of training reviews with each cost, the best by dev accuracy kept
  (the first of the best): what the `nbsvm` run and the ensemble both fit.

  Args:
    ids: split ('train', 'dev', 'test') -> the reviews as id sequences.
    labels: split -> int (N,) 0/1.
    sizes: name of a set of training reviews -> how many of the first of ids['train'] it holds
      ('labelled': IMDB's; 'all': with a self-training student's pseudo-labelled ones).
    max_n: the longest n-gram.
    costs: liblinear's C values tried on each set.
    train_on: the names of `sizes` fitted on.
    seed: liblinear's random state.
    note: where progress lines go.

  Returns:
    (record, scores, model): every fit's dev and test accuracy and the chosen one; the chosen
    fit's log-odds float64 {'dev': (N_dev,), 'test': (N_test,)}; the chosen NBSVM.
  """
  per_fit, count_s = [], {}
  best, best_scores, best_dev = None, None, -1.0
  for name in dict.fromkeys(train_on):
    started = time.perf_counter()
    vectorizer, train_features = binary_features(
        [ids["train"][i] for i in range(sizes[name])], max_n)
    features = {"dev": vectorizer.transform(list(ids["dev"])),
                "test": vectorizer.transform(list(ids["test"]))}
    count_s[name] = round(time.perf_counter() - started, 1)
    note(f"{train_features.shape[1]:,} n-grams (n <= {max_n}) in the {sizes[name]:,} "
         f"{name} training reviews, counted in {count_s[name]:.0f} s")
    for cost in costs:
      started = time.perf_counter()
      model = NBSVM.from_features(train_features, vectorizer, labels["train"][:sizes[name]],
                                  max_n=max_n, cost=cost, seed=seed)
      scores = {split: model.scores(features[split]) for split in ("dev", "test")}
      per_fit.append({"train_on": name, "train_reviews": sizes[name],
                      "features": int(train_features.shape[1]), "cost": cost,
                      **accuracies(scores, labels),
                      "fit_s": round(time.perf_counter() - started, 1)})
      note(f"NBSVM on {name} reviews, C={cost:g}: dev {per_fit[-1]['dev_accuracy']:.4f}"
           f"  test {per_fit[-1]['test_accuracy']:.4f}")
      if per_fit[-1]["dev_accuracy"] > best_dev:  # the first of the best
        best, best_scores, best_dev = model, scores, per_fit[-1]["dev_accuracy"]
    # Only the best fit's vocabulary is kept: the n-gram vocabulary takes gigabytes.
    del model, vectorizer, train_features, features
  chosen = max(per_fit, key=lambda row: row["dev_accuracy"])  # the first of the best
  record = {"max_n": max_n, "fits": per_fit, "chosen": chosen, "count_s": count_s}
  return record, best_scores, best
