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
one worker thread (the default) gives the same vectors in every process; with more, the threads'
order varies. Inference gives the same vectors in every process too: gensim starts each inferred
vector from Python's `hash` of the review, which Python salts per process, and `infer_vectors`
has it start from the review's CRC-32 instead (`_stable_start`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import zlib
from typing import Iterator, Sequence

import numpy as np
from gensim.models import doc2vec as gensim_doc2vec
from gensim.models.doc2vec import Doc2Vec
from gensim.models.doc2vec import TaggedDocument
from sklearn.linear_model import LogisticRegression


@dataclasses.dataclass(frozen=True)
class PVConfig:
  """PV-DBOW's settings (defaults: Mesnil et al.'s scale, 10 epochs to fit the 2-core budget, one
  thread so that every run repeats).

  Attributes:
    dim: D, the vector size.
    epochs: passes over the training texts (and inference steps per review).
    negative: k, negative words per predicted word.
    min_count: words seen fewer times in training are dropped.
    workers: gensim's threads (1, the default, makes training reproducible; 2 took 125-133 s on
      IMDB's 72,500 texts on a 2-core Intel Xeon, 1 takes about twice that: docs/RESULTS.md).
    seed: gensim's random seed.
  """
  dim: int = 100
  epochs: int = 10
  negative: int = 5
  min_count: int = 2
  workers: int = 1
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
  """float32 (N, D): the inferred vectors of reviews outside the model's training texts.

  The same in every process for the same model and reviews in the same order (gensim draws the
  negative words of inference from the model's own random state, which advances review by
  review)."""
  if not len(reviews):
    return np.zeros((0, model.vector_size), np.float32)
  with _stable_start():
    return np.stack([model.infer_vector(as_words(ids)) for ids in reviews]).astype(np.float32)


def _crc32(text: str) -> int:
  return zlib.crc32(text.encode("utf-8"))


@contextlib.contextmanager
def _stable_start() -> Iterator[None]:
  """Within it, gensim's inference starts a review's vector from the review's CRC-32 rather than
  from Python's per-process salted `hash` (gensim 4's `infer_vector` calls doc2vec's
  `pseudorandom_weak_vector(size, seed_string=' '.join(words))`, whose `hashfxn` defaults to
  `hash`). The vector is the same uniform draw in (-0.5/D, 0.5/D), from another seed."""
  original = gensim_doc2vec.pseudorandom_weak_vector

  def start(size, seed_string=None, hashfxn=hash):
    del hashfxn  # always the CRC-32
    return original(size, seed_string=seed_string, hashfxn=_crc32)

  gensim_doc2vec.pseudorandom_weak_vector = start
  try:
    yield
  finally:
    gensim_doc2vec.pseudorandom_weak_vector = original


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

