"""The metrics sentence-pair matching is reported with, as the field reports them (scikit-learn).

With 69% of AFQMC's pairs negative, accuracy alone says little (the majority class scores 0.69):
every figure comes with the F1 of the positive class ('same meaning'), the macro-F1 over both
classes and the ROC AUC of the positive-class probability, which does not depend on a threshold.
The label of a pair is 1 when its probability of class 1 is at least 0.5 (the argmax of the two
logits).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn import metrics as sk

NAMES = ("accuracy", "f1", "macro_f1", "auc")
"""accuracy; f1 of class 1; macro-F1 (mean of both classes' F1); ROC AUC of p(class 1)."""


def predicted_labels(prob_positive: np.ndarray) -> np.ndarray:
  """Labels int64 (N,): 1 where p(class 1) >= 0.5, as the argmax of two logits gives."""
  return (np.asarray(prob_positive) >= 0.5).astype(np.int64)


def binary_metrics(labels: Sequence[int], prob_positive: Sequence[float]) -> dict[str, float]:
  """accuracy, f1 (positive class), macro_f1 and auc of N predictions.

  Args:
    labels: the true labels (N,), 0 or 1.
    prob_positive: the predicted probability of class 1 (N,).

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
  predicted = predicted_labels(prob)
  both = len(np.unique(labels)) == 2
  return {
      "accuracy": float(np.mean(predicted == labels)),
      "f1": float(sk.f1_score(labels, predicted, pos_label=1, zero_division=0)),
      "macro_f1": float(sk.f1_score(labels, predicted, average="macro", labels=[0, 1],
                                    zero_division=0)),
      "auc": float(sk.roc_auc_score(labels, prob)) if both else float("nan"),
  }


def confusion(labels: Sequence[int], prob_positive: Sequence[float]) -> list[list[int]]:
  """The confusion matrix [[true 0 predicted 0, true 0 predicted 1], [true 1 ..., ...]]."""
  matrix = sk.confusion_matrix(np.asarray(labels, np.int64), predicted_labels(prob_positive),
                               labels=[0, 1])
  return matrix.tolist()
