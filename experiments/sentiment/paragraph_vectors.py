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
import time
import zlib
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
from gensim.models import doc2vec as gensim_doc2vec
from gensim.models.doc2vec import Doc2Vec
from gensim.models.doc2vec import TaggedDocument
from sklearn.linear_model import LogisticRegression

from experiments.log_odds import accuracies

PV_COSTS = (0.01, 0.1, 1.0)  # the logistic regression's C on paragraph vectors, dev chooses


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



@dataclasses.dataclass
class FittedPV:
  """Paragraph vectors with the classifier on them: what the `paragraph_vectors` run saves.

  Attributes:
    vectors: the trained PV-DBOW model (its random state as training left it).
    classifier: the dev-chosen logistic regression on the vectors.
    starts: split ('dev', 'test') -> the state of `vectors.random` (numpy's RandomState.get_state)
      that split's inference started from when it was fitted: gensim draws the negative words of
      inference from the model's own random state, which advances review by review, and the fit
      inferred dev, then test. Inference restarts from them, so a loaded model gives each split
      the fit's very figures, and a new text (each from dev's start: the state training left) the
      same answer every time.
  """
  vectors: Doc2Vec
  classifier: PVClassifier
  starts: dict[str, Any]

  def split_log_odds(self, reviews: Sequence[Sequence[int]], split: str) -> np.ndarray:
    """float64 (N,): the log-odds of the reviews (id sequences) of `split`, inferred in order from
    the state that split's inference started from in the fit."""
    self.vectors.random.set_state(self.starts[split])
    return self.classifier.log_odds(infer_vectors(self.vectors, reviews))

  def log_odds(self, reviews: Sequence[Sequence[int]]) -> np.ndarray:
    """float64 (N,): the log-odds of new reviews, each inferred from the state training left (so
    a review gets the same answer alone or among others)."""
    return np.concatenate([self.split_log_odds([review], "dev") for review in reviews]
                          ) if len(reviews) else np.zeros(0)


def fit_paragraph_vectors(ids: Mapping[str, Sequence[Sequence[int]]],
                          labels: Mapping[str, np.ndarray], labelled: int,
                          unlabelled: Sequence[Sequence[int]], config: PVConfig,
                          note: Callable[[str], None]) -> tuple[dict, dict[str, np.ndarray],
                                                                FittedPV]:
  """PV-DBOW on the labelled training reviews and the unlabelled ones, logistic regression on the
  labelled ones' vectors for each of PV_COSTS, the best by dev accuracy kept (the first of the
  best): what the `paragraph_vectors` run and the ensemble both fit.

  Args:
    ids: split ('train', 'dev', 'test') -> the reviews as id sequences.
    labels: split -> int (N,) 0/1.
    labelled: how many of the first of ids['train'] are labelled reviews (the vectors' training
      texts and the classifier's examples; a student's pseudo-labelled ones come after them).
    unlabelled: more training texts for the vectors (IMDB's unlabelled reviews, as ids).
    config: PV-DBOW's settings.
    note: where progress lines go.

  Returns:
    (record, scores, model): every fit's dev and test accuracy and the chosen one; the chosen
    fit's log-odds float64 {'dev': (N_dev,), 'test': (N_test,)}; the FittedPV.
  """
  started = time.perf_counter()
  texts = [ids["train"][i] for i in range(labelled)] + list(unlabelled)
  model = train_vectors(texts, config)
  train_s = time.perf_counter() - started
  started = time.perf_counter()
  vectors, starts = {}, {}
  for split in ("dev", "test"):  # in this order: each continues the random state (FittedPV)
    starts[split] = model.random.get_state()
    vectors[split] = infer_vectors(model, list(ids[split]))
  infer_s = time.perf_counter() - started
  note(f"paragraph vectors ({config.dim}) of {len(texts):,} texts trained in "
       f"{train_s:.0f} s, dev and test inferred in {infer_s:.0f} s")
  train_vectors_ = np.stack([model.dv[i] for i in range(labelled)])  # (labelled, D)
  per_fit, fitted, classifiers = [], {}, {}
  for cost in PV_COSTS:
    classifiers[cost] = PVClassifier.fit(train_vectors_, labels["train"][:labelled], cost)
    fitted[cost] = {split: classifiers[cost].log_odds(vectors[split]) for split in ("dev", "test")}
    per_fit.append({"cost": cost, **accuracies(fitted[cost], labels)})
    note(f"paragraph vectors, C={cost:g}: dev {per_fit[-1]['dev_accuracy']:.4f}  "
         f"test {per_fit[-1]['test_accuracy']:.4f}")
  chosen = max(per_fit, key=lambda row: row["dev_accuracy"])
  record = {"config": dataclasses.asdict(config), "texts": len(texts), "labelled": labelled,
            "fits": per_fit, "chosen": chosen, "train_s": round(train_s, 1),
            "infer_s": round(infer_s, 1)}
  return (record, fitted[chosen["cost"]],
          FittedPV(model, classifiers[chosen["cost"]], starts))
