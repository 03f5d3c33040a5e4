"""Scores of binary classifiers that give each example a log-odds z = log p(1) - log p(0): their
accuracy and log-loss (the fitted models' of every experiment, the sentiment ensemble's)."""

from __future__ import annotations

from typing import Mapping

import numpy as np


def accuracy(log_odds: np.ndarray, labels: np.ndarray) -> float:
  """The share of examples whose sign of log-odds gives the label (0 counts as negative, as
  argmax over equal logits picks class 0)."""
  return float(np.mean((np.asarray(log_odds) > 0).astype(np.int64) == np.asarray(labels)))


def accuracies(log_odds: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray]) -> dict:
  """{'<split>_accuracy': accuracy} of every split of `log_odds` (split -> (N,))."""
  return {f"{split}_accuracy": accuracy(log_odds[split], labels[split]) for split in log_odds}


def log_loss(log_odds: np.ndarray, labels: np.ndarray) -> float:
  """The mean cross-entropy of the labels (N,) 0/1 under p(1) = sigmoid(z), z (N,): the mean of
  log(1 + exp(-z)) for label 1 and log(1 + exp(z)) for label 0 (the trained runs' 'loss' of the
  logits (0, z))."""
  signs = 2.0 * np.asarray(labels, np.float64) - 1.0  # (N,) +1 / -1
  return float(np.mean(np.logaddexp(0.0, -signs * np.asarray(log_odds, np.float64))))
