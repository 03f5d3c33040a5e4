"""The template's Task: everything the engine needs from an experiment, and prediction.

The engine (experiments/trainer.py) calls `init`, `loss` (jitted, sharded), `train_batches` /
`eval_batches` / `steps_per_epoch` (the base class serves them from `load_data`'s result) and
saves the `ARTIFACTS` into the run's directory before the first step, so that `runs.load_run`
can rebuild the task for prediction without reading the data.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments import steps
from experiments.task import Task
from pipelines import text as text_lib
from pipelines.tasks import SentimentData
from pipelines.vocab import UNK_ID, Vocab

from .model import PoolingClassifier

LABELS = ("negative", "positive")


@dataclasses.dataclass
class Prediction:
  """The label of one text, its probability, and the pooling weight of each word read."""
  text: str
  label: str
  probability: float
  words: list[str]
  weights: list[float]


class PoolingTask(Task):
  """IMDB sentiment with model.PoolingClassifier (see the package docstring)."""

  ARTIFACTS = {"vocab": "vocab.json"}

  def load_data(self) -> SentimentData:
    """The prepared IMDB splits (the shipped sample when config.data_dir is None)."""
    return SentimentData.load(source=self.config.data_dir, **dataclasses.asdict(self.config.data))

  def artifacts_from_data(self) -> dict[str, Vocab]:
    return {"vocab": self.data.vocab}

  @property
  def model(self) -> PoolingClassifier:
    m = self.config.model
    return PoolingClassifier(len(self.artifact("vocab")), m.embed_dim, m.score)

  def example_batch(self) -> dict[str, np.ndarray]:
    """Shapes for `init` without reading the data (prediction never opens it)."""
    size, width = self.config.train.batch_size, self.config.data.max_len
    return {"tokens": np.full((size, width), UNK_ID, np.int32), "lengths": np.ones(size, np.int32),
            "label": np.zeros(size, np.int32), "weight": np.ones(size, np.float32)}

  def init(self, rng: jax.Array, batch) -> Any:
    return self.model.init(rng, jnp.asarray(batch["tokens"]), jnp.asarray(batch["lengths"]))["params"]

  def loss(self, params, batch, rng):
    del rng  # no dropout in this model
    logits, _ = self.model.apply({"params": params}, batch["tokens"], batch["lengths"])  # (B, 2)
    per_example = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])  # (B,)
    correct = (jnp.argmax(logits, -1) == batch["label"]).astype(jnp.float32)  # (B,)
    loss_pair = steps.weighted_sum(per_example, batch["weight"])
    metrics = {"loss": loss_pair, "accuracy": steps.weighted_sum(correct, batch["weight"])}
    return loss_pair[0] / jnp.maximum(loss_pair[1], 1.0), metrics

  def predict(self, params, texts: Sequence[str]) -> list[Prediction]:
    """The label, probability and word weights of each text (ValueError for a text without
    words)."""
    out = []
    for text in texts:
      words = text_lib.imdb_tokenize(text)[:self.config.data.max_len]
      if not words:
        raise ValueError(f"the text {text!r} has no words to classify")
      ids = np.asarray([self.artifact("vocab").encode(words)], np.int32)  # (1, n)
      logits, weights = self.model.apply({"params": params}, ids,
                                         np.array([len(words)], np.int32))
      probs = np.asarray(jax.nn.softmax(logits[0]))  # (2,)
      label = int(np.argmax(probs))
      out.append(Prediction(text, LABELS[label], float(probs[label]), words,
                            np.asarray(weights[0]).tolist()))
    return out
