"""The metrics sentence-pair matching is reported with, as the field reports them (scikit-learn).

With 69% of AFQMC's pairs negative, accuracy alone says little (the majority class scores 0.69):
every figure comes with the F1 of the positive class ('same meaning'), the macro-F1 over both
classes and the ROC AUC of the positive-class probability, which does not depend on a threshold.
The label of a pair is 1 when its probability of class 1 is at least the threshold: 0.5 (the
argmax of the two logits) unless a threshold chosen on dev is given (`best_threshold`: the one of
highest dev accuracy, a hyperparameter like any other, never looked up on test).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn import metrics as sk

NAMES = ("accuracy", "f1", "macro_f1", "auc")
"""accuracy; f1 of class 1; macro-F1 (mean of both classes' F1); ROC AUC of p(class 1)."""


def predicted_labels(prob_positive: np.ndarray, threshold: float = 0.5) -> np.ndarray:
  """Labels int64 (N,): 1 where p(class 1) >= threshold (0.5: the argmax of two logits)."""
  return (np.asarray(prob_positive) >= threshold).astype(np.int64)


def best_threshold(labels: Sequence[int], prob_positive: Sequence[float]) -> float:
  """The threshold of highest accuracy on these (dev) predictions.

  Every distinct probability is a candidate (a threshold between two of them labels the same
  pairs as the upper one), as is 1.0 + the largest (nothing positive); among equally accurate
  ones the closest to 0.5 wins, so a model already at its best with the argmax keeps 0.5's labels.
  """
  labels = np.asarray(labels, np.int64)
  prob = np.asarray(prob_positive, np.float64)
  if not labels.size:
    raise ValueError("no predictions to choose a threshold from")
  order = np.argsort(-prob, kind="stable")
  sorted_prob, sorted_labels = prob[order], labels[order]  # highest first
  # Cut k labels the k highest 1: correct = positives among them + negatives among the rest.
  cut = np.arange(len(labels) + 1)
  positives_above = np.concatenate([[0], np.cumsum(sorted_labels)])  # (N + 1,)
  correct = positives_above + (np.sum(labels == 0) - (cut - positives_above))
  # Its threshold: just above the highest for k = 0, else the k-th highest; a cut between two
  # equal probabilities has none.
  thresholds = np.concatenate([[np.nextafter(sorted_prob[0], np.inf)], sorted_prob])
  valid = np.ones(len(labels) + 1, bool)
  valid[1:-1] = sorted_prob[1:] < sorted_prob[:-1]
  best = np.max(correct[valid])
  candidates = thresholds[valid & (correct == best)]
  return float(candidates[np.argmin(np.abs(candidates - 0.5))])


def binary_metrics(labels: Sequence[int], prob_positive: Sequence[float],
                   threshold: float = 0.5) -> dict[str, float]:
  """accuracy, f1 (positive class), macro_f1 and auc of N predictions.

  Args:
    labels: the true labels (N,), 0 or 1.
    prob_positive: the predicted probability of class 1 (N,).
    threshold: label 1 where p(class 1) >= threshold (the AUC does not depend on it).

  Returns:
    {name: value} for NAMES. The AUC is NaN when the labels hold only one class (it is undefined
    then); F1 of a class that is never predicted nor present is 0.

  Raises:
    ValueError: no predictions, lengths that differ, or labels other than 0 and 1.
  """
  labels = np.asarray(labels, np.int64)
  prob = np.asarray(prob_positive, np.float64)
  if labels.shape != prob.shape or labels.ndim != 1:
    raise ValueError(f"labels {labels.shape} and prob_positive {prob.shape} must be two "
                     f"vectors of one length")
  if not labels.size:
    raise ValueError("no predictions to score")
  if not np.isin(labels, (0, 1)).all():
    raise ValueError(f"labels must be 0 or 1, got {sorted(set(labels.tolist()))}")
  predicted = predicted_labels(prob, threshold)
  both = len(np.unique(labels)) == 2
  return {
      "accuracy": float(np.mean(predicted == labels)),
      "f1": float(sk.f1_score(labels, predicted, pos_label=1, zero_division=0)),
      "macro_f1": float(sk.f1_score(labels, predicted, average="macro", labels=[0, 1],
                                    zero_division=0)),
      "auc": float(sk.roc_auc_score(labels, prob)) if both else float("nan"),
  }


def confusion(labels: Sequence[int], prob_positive: Sequence[float],
              threshold: float = 0.5) -> list[list[int]]:
  """The confusion matrix [[true 0 predicted 0, true 0 predicted 1], [true 1 ..., ...]]."""
  matrix = sk.confusion_matrix(np.asarray(labels, np.int64),
                               predicted_labels(prob_positive, threshold), labels=[0, 1])
  return matrix.tolist()
