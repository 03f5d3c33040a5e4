"""Paragraph vectors (PV-DBOW, Le and Mikolov 2014) as a sentiment model, from unlabelled text.

  v_d    in R^D        review d's vector, trained to predict the review's own words:
                       maximize sum over words t of d: log sigma(u_t . v_d) + sum over k negative
                       words n ~ unigram^0.75: log sigma(-u_n . v_d)         (skip-gram, no window)
  z_d    = w . v_d + b                                                       log-odds of positive

gensim's Doc2Vec (dm=0) learns v for every training text, labelled and unlabelled alike (the
labels are not used), and w, b are an L2-regularized logistic regression (scikit-learn, cost C) on
the vectors of the labelled ones. A review outside training (dev, test) gets its vector by gensim's
inference: the same objective, gradient steps on v_d alone with the word vectors u frozen. Mesnil et
al. (2014) reported 88.73% on IMDB with PV-DBOW and that it adds to NBSVM in an ensemble; here the
vectors never see dev or test text while training.

Reviews are the pipeline's word ids (rows of ints), written as strings for gensim. Training with
one worker thread gives the same vectors in every process; with more, the threads' order varies.
Inference is not bit-reproducible from one process to the next: gensim starts each inferred vector
from Python's string hash of the review, which Python salts per process (docs/RESULTS.md measures
what a rerun moves).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
from gensim.models.doc2vec import Doc2Vec
from gensim.models.doc2vec import TaggedDocument
from sklearn.linear_model import LogisticRegression


@dataclasses.dataclass(frozen=True)
class PVConfig:
  """PV-DBOW's settings (defaults: Mesnil et al.'s scale, 10 epochs to fit the 2-core budget).

  Attributes:
    dim: D, the vector size.
    epochs: passes over the training texts (and inference steps per review).
    negative: k, negative words per predicted word.
    min_count: words seen fewer times in training are dropped.
    workers: gensim's threads (1 makes training reproducible, at twice the time on 2 cores).
    seed: gensim's random seed.
  """
  dim: int = 100
  epochs: int = 10
  negative: int = 5
  min_count: int = 2
  workers: int = 2
  seed: int = 0

  def __post_init__(self):
    for name in ("dim", "epochs", "negative", "min_count", "workers"):
      if getattr(self, name) < 1:
        raise ValueError(f"PVConfig.{name} must be at least 1, got {getattr(self, name)}")


def as_words(ids: Sequence[int]) -> list[str]:
  """A review's ids as gensim's words: [4, 19] -> ['4', '19']."""
  return [str(int(i)) for i in ids]


def train_vectors(texts: Sequence[Sequence[int]], config: PVConfig = PVConfig()) -> Doc2Vec:
  """PV-DBOW trained on `texts` (N reviews of ids); text i's vector is `model.dv[i]`."""
  if not len(texts):
    raise ValueError("texts: need at least one training text")
  documents = [TaggedDocument(as_words(ids), [i]) for i, ids in enumerate(texts)]
  if not any(doc.words for doc in documents):
    raise ValueError("texts: every training text is empty")
  return Doc2Vec(documents, dm=0, vector_size=config.dim, negative=config.negative, hs=0,
                 min_count=config.min_count, sample=0, epochs=config.epochs,
                 workers=config.workers, seed=config.seed)


def infer_vectors(model: Doc2Vec, reviews: Sequence[Sequence[int]]) -> np.ndarray:
  """float32 (N, D): the inferred vectors of reviews outside the model's training texts."""
  if not len(reviews):
    return np.zeros((0, model.vector_size), np.float32)
  return np.stack([model.infer_vector(as_words(ids)) for ids in reviews]).astype(np.float32)


@dataclasses.dataclass
class PVClassifier:
  """Logistic regression on paragraph vectors; `fit` builds one, `log_odds` scores vectors."""
  classifier: LogisticRegression
  cost: float

  @classmethod
  def fit(cls, vectors: np.ndarray, labels: np.ndarray, cost: float = 1.0) -> PVClassifier:
    """Fits w, b on (N, D) vectors and their 0/1 labels (N,)."""
    labels = np.asarray(labels)
    if vectors.ndim != 2 or labels.shape != (vectors.shape[0],):
      raise ValueError(f"expected vectors (N, D) and labels (N,), got {vectors.shape} and "
                       f"{labels.shape}")
    if cost <= 0:
      raise ValueError(f"cost must be positive, got {cost}")
    return cls(LogisticRegression(C=cost, max_iter=2000).fit(vectors, labels), cost)

  def log_odds(self, vectors: np.ndarray) -> np.ndarray:
    """float64 (N,): log P(positive) - log P(negative) of each vector."""
    return self.classifier.decision_function(vectors)

