"""The sentiment runs fitted in one call (task.FittedTask): NBSVM and paragraph vectors.

    python -m experiments train sentiment --model nbsvm --data-dir ../shared/data/imdb
    python -m experiments predict sentiment --workdir runs/sentiment-nbsvm "a fine film"

Each reads IMDB exactly as the trained runs of the same data settings do (the same splits,
vocabulary and ids; with data.pseudo_labels a self-training student's reviews too) and fits with
the functions the ensemble uses (nbsvm.fit_nbsvm, paragraph_vectors.fit_paragraph_vectors), so
the run's model is the ensemble's member of the same settings and seed. A model gives each review
a log-odds z of 'positive'; it predicts positive where z > 0 with probability sigmoid(z), and
reports accuracy and loss (the mean cross-entropy, as the trained runs do). It has no attention:
its predictions carry no word weights, and there is no heatmap to draw.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np
import scipy.special

from experiments.console import UsageError
from experiments.sentiment import configs
from experiments.log_odds import accuracy
from experiments.log_odds import log_loss
from experiments.sentiment.nbsvm import fit_nbsvm
from experiments.sentiment.paragraph_vectors import PVConfig
from experiments.sentiment.paragraph_vectors import fit_paragraph_vectors
from experiments.sentiment.task import Prediction
from experiments.sentiment.task import SentimentTask
from experiments.sentiment.task import pseudo_labelled_count
from experiments.sentiment.task import read_unlabelled
from experiments.task import FittedTask
from pipelines.vocab import UNK_ID


def split_reviews(data) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
  """The reviews of every split as id sequences, and their labels: ({split: rows},
  {split: (N,)})."""
  ids = {split: data.splits[split].sequences["tokens"] for split in ("train", "dev", "test")}
  labels = {split: np.asarray(data.splits[split].scalars["label"]) for split in ids}
  return ids, labels


def unlabelled_reviews(task: SentimentTask, note: Callable[[str], None]) -> list[list[int]]:
  """IMDB's unlabelled reviews, as ids of the task's vocabulary (cut to its max_len); reviews
  without a word are counted and left out."""
  started = time.perf_counter()
  reviews, empty = [], 0
  for record in read_unlabelled(task.config.data_dir, task.config.data.prepared_dir):
    try:
      reviews.append(task.encode(record["text"])[1])
    except ValueError:  # no word
      empty += 1
  note(f"{len(reviews):,} unlabelled reviews read in {time.perf_counter() - started:.0f} s"
       + (f" ({empty} without a word left out)" if empty else ""))
  return reviews


class FittedSentimentTask(FittedTask, SentimentTask):
  """A sentiment model that gives each review a log-odds of 'positive' (subclasses: `log_odds`)."""

  has_attention = False  # its predictions have no word weights, nor attention to draw

  def log_odds(self, model: Any, reviews: Sequence[Sequence[int]], split: str | None = None
               ) -> np.ndarray:
    """float64 (N,): the model's log-odds of reviews (id sequences); `split` names the data split
    they are, None for new text."""
    raise NotImplementedError

  def evaluate_model(self, model: Any, split: str) -> dict[str, float]:
    ids, labels = split_reviews(self.data)
    z = self.log_odds(model, list(ids[split]), split)
    return {"accuracy": accuracy(z, labels[split]), "loss": log_loss(z, labels[split])}

  def predict(self, params: Any, texts: Sequence[str]) -> list[Prediction]:
    """Classifies each text (cut to data.max_len words, as training read the reviews): positive
    where its log-odds z > 0, with probability sigmoid(z); no word weights (no attention)."""
    encoded = [self.encode(t) for t in texts]
    z = self.log_odds(params, [ids for _, ids in encoded])
    out = []
    for text, (words, ids), value in zip(texts, encoded, z):
      label = int(value > 0)
      positive = float(scipy.special.expit(value))
      out.append(Prediction(text, words, [i == UNK_ID for i in ids], label,
                            positive if label else 1.0 - positive, None, None))
    return out

  def attention_maps(self, params, prediction: Prediction) -> dict[str, np.ndarray]:
    del params, prediction
    return {}

  def draw_heatmap(self, prediction: Prediction, path: str) -> str:
    raise UsageError(f"--heatmap: the {self.config.model_name} model has no attention to draw")

  def on_train_end(self, params, workdir: str) -> None:
    del params, workdir  # nothing to draw


class NBSVMTask(FittedSentimentTask):
  """NBSVM (configs.NBSVMConfig) on the training reviews; the model: the dev-chosen nbsvm.NBSVM."""

  def fit(self, note: Callable[[str], None]) -> tuple[Any, dict[str, Any]]:
    m = self.config.model
    ids, labels = split_reviews(self.data)
    pseudo = pseudo_labelled_count(self.data)
    sizes = {"labelled": len(ids["train"]) - pseudo, "all": len(ids["train"])}
    train_on = m.train_on if pseudo else ("labelled",)  # without pseudo-labels 'all' is 'labelled'
    record, _, model = fit_nbsvm(ids, labels, sizes, m.max_n, m.costs, train_on,
                                 self.config.train.seed, note)
    return model, record

  def log_odds(self, model, reviews, split=None) -> np.ndarray:
    del split  # NBSVM scores a review alone
    return model.log_odds(reviews)


class ParagraphVectorsTask(FittedSentimentTask):
  """Paragraph vectors (configs.ParagraphVectorsConfig) on the labelled training reviews and IMDB's
  unlabelled ones; the model is a paragraph_vectors.FittedPV."""

  def fit(self, note: Callable[[str], None]) -> tuple[Any, dict[str, Any]]:
    m = self.config.model
    ids, labels = split_reviews(self.data)
    labelled = len(ids["train"]) - pseudo_labelled_count(self.data)
    pv = PVConfig(dim=m.dim, epochs=m.epochs, negative=m.negative, min_count=m.min_count,
                  workers=m.workers, seed=self.config.train.seed)
    record, _, model = fit_paragraph_vectors(ids, labels, labelled,
                                             unlabelled_reviews(self, note), pv, note)
    return model, record

  def log_odds(self, model, reviews, split=None) -> np.ndarray:
    # A split as the fit inferred it, new text one review at a time (paragraph_vectors.FittedPV).
    return model.log_odds(reviews) if split is None else model.split_log_odds(reviews, split)


TASKS = {configs.NBSVMConfig: NBSVMTask, configs.ParagraphVectorsConfig: ParagraphVectorsTask}
"""Model config class -> the task that fits it."""
