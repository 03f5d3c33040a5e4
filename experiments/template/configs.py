"""The template's settings and named runs: typed dataclasses, one function per run.

`Config.model` and `Config.data` are the experiment's own dataclasses; the engine's settings
(`train`, `optimizer`) are experiments.config's. The data settings carry the pipeline's own option
names (pipelines.tasks.SentimentOptions), so they pass through without renaming.
"""

from __future__ import annotations

import dataclasses

from experiments import config as config_lib


@dataclasses.dataclass
class DataConfig:
  """How reviews become batches (options of pipelines.tasks.SentimentData, same names).

  Attributes:
    max_len: tokens kept per review.
    min_freq: words seen fewer times in train are unknown.
    max_size: the most words in the vocabulary (None: all with min_freq).
  """
  max_len: int = 128
  min_freq: int = 3
  max_size: int | None = 8000


@dataclasses.dataclass
class ModelConfig:
  """The model's hyperparameters (model.PoolingClassifier).

  Attributes:
    embed_dim: the word embedding width D.
    score: the pooling's scoring function, one of zoo.SCORE_NAMES.
  """
  embed_dim: int = 64
  score: str = "additive"


def pooling() -> config_lib.Config:
  """Attention pooling over 64-wide word embeddings; batch 64, Adam 3e-3, 4 epochs, the best dev
  accuracy kept. On the shipped sample (1,800 training reviews) it trains in seconds."""
  return config_lib.Config(
      model=ModelConfig(), data=DataConfig(),
      train=config_lib.TrainConfig(batch_size=64, num_epochs=4, log_every=10,
                                   best_metric="dev/accuracy", best_mode="max"),
      optimizer=config_lib.OptimizerConfig(learning_rate=3e-3))


CONFIGS = {"pooling": pooling}
DEFAULT_MODEL = "pooling"
