"""What an experiment gives the engine (a `Task`, named runs, commands) and the registry of them.

An experiment module (experiments/sentiment.py, ...) defines a `Task` subclass and registers one
`Experiment` at import time:

    registry.register(registry.Experiment(
        name="sentiment",
        make_task=SentimentTask,                     # Config -> Task
        configs={"bilstm": bilstm_config, ...},      # model name -> Config (one named run each)
        default_model="bilstm",
        predict=predict_command,                     # optional: `python -m experiments predict ...`
        aliases=("classify",)))                      # optional extra top-level commands

and adds its module name to `EXPERIMENT_MODULES` below so the command line finds it.

The metric convention: a task reports metrics as a dict name -> (total, count) of float32 scalars,
summed over the examples of the batch with their weights (padding rows of an evaluation batch have
weight 0). The engine adds totals and counts over steps and batches and reports total / count, so
every metric is an exact weighted mean however the data was batched or sharded. `steps.weighted_sum`
builds such a pair.
"""

from __future__ import annotations

import abc
import argparse
import dataclasses
import importlib
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

import jax

from experiments.config import Config

Batch = Mapping[str, Any]
"""A dict of arrays with leading axis B (see the 'Batches' contract); includes 'weight' (B,)."""
Metrics = dict[str, tuple[jax.Array, jax.Array]]
"""name -> (weighted total, total weight), both float32 scalars."""

# Modules imported by `load_experiments`; an experiment module adds its name here.
EXPERIMENT_MODULES: tuple[str, ...] = ("experiments.sentiment", "experiments.translation",
                                       "experiments.couplet")


class ResumableIterator(Protocol):
  """An endless iterator of training batches whose position can be saved and restored."""

  def __iter__(self) -> Iterator[Batch]:
    ...

  def __next__(self) -> Batch:
    ...

  def get_state(self) -> dict:
    """JSON-serialisable position (seed, epoch, position)."""

  def set_state(self, state: dict) -> None:
    """Continues exactly where the iterator that produced `state` would have continued."""


class Task(abc.ABC):
  """One experiment's model, loss, metrics and data. The engine does the rest.

  A task is built from a `Config` (it reads `config.model`, `config.data`, `config.data_dir`,
  `config.train.batch_size`, `config.train.seed` and the dtypes `config.compute_dtype` /
  `config.storage_dtype`). Its `init`, `loss` and `eval_metrics` are pure functions of arrays that
  the engine jits and shards; they must not print or touch files.
  """

  def __init__(self, config: Config):
    self.config = config

  # -- model ---------------------------------------------------------------------------------------

  @abc.abstractmethod
  def init(self, rng: jax.Array, batch: Batch) -> Any:
    """Returns the initial parameters (a pytree), shaped for `batch`."""

  @abc.abstractmethod
  def loss(self, params: Any, batch: Batch, rng: jax.Array | None) -> tuple[jax.Array, Metrics]:
    """The training objective of one batch.

    Args:
      params: the parameters.
      batch: one batch (weights in batch['weight']).
      rng: a key for dropout and other noise; None means deterministic (evaluation).

    Returns:
      (loss, metrics): the float32 scalar to minimise (a weighted mean, plus any regulariser) and
      metric pairs name -> (total, count) that should include 'loss'.
    """

  def eval_metrics(self, params: Any, batch: Batch) -> Metrics:
    """Metric pairs of one evaluation batch; by default those of the deterministic loss."""
    return self.loss(params, batch, None)[1]

  # -- data ----------------------------------------------------------------------------------------

  @abc.abstractmethod
  def train_batches(self) -> ResumableIterator:
    """An endless iterator of training batches (epoch after epoch, seeded by config.train.seed)."""

  def example_batch(self) -> Batch:
    """A batch with the shapes `init` needs: by default the first batch of a new training iterator.

    Override it when opening the training data is expensive and only inference is wanted.
    """
    return next(iter(self.train_batches()))

  @property
  @abc.abstractmethod
  def steps_per_epoch(self) -> int:
    """How many training batches make one epoch."""

  @abc.abstractmethod
  def eval_batches(self, split: str) -> Iterable[Batch]:
    """A finite pass over `split` ('dev' or 'test') with padding rows of weight 0."""

  # -- optional hooks ------------------------------------------------------------------------------

  def extra_eval(self, params: Any, split: str) -> dict[str, float]:
    """Metrics that need more than a batch-wise sum (BLEU by decoding...); {} by default.

    Called by the engine after every dev evaluation and at the final test evaluation; the returned
    names get the split prefix ('dev/bleu').
    """
    del params, split
    return {}

  def on_train_end(self, params: Any, workdir: str) -> None:
    """Called once with the parameters used for the test evaluation (to draw a heatmap, ...)."""
    del params, workdir


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A registered experiment.

  Attributes:
    name: the name used on the command line ('sentiment').
    make_task: builds the task from a config (usually the Task subclass itself).
    configs: model name -> function returning that named run's Config.
    default_model: the model trained when the command line gives no --model.
    predict: optional `predict(args: argparse.Namespace) -> int` for `python -m experiments predict
      <name> ...`; it gets args.inputs, args.workdir, args.checkpoint, args.heatmap, args.beam_size,
      args.num_results, args.options and returns the exit status.
    add_predict_arguments: optional function adding the experiment's own flags to its predict
      parser.
    aliases: extra top-level commands meaning `predict <name>` ('translate', 'couplet').
    description: one line for --help.
  """
  name: str
  make_task: Callable[[Config], Task]
  configs: Mapping[str, Callable[[], Config]]
  default_model: str
  predict: Callable[[argparse.Namespace], int] | None = None
  add_predict_arguments: Callable[[argparse.ArgumentParser], None] | None = None
  aliases: tuple[str, ...] = ()
  description: str = ""

  def __post_init__(self):
    if self.default_model not in self.configs:
      raise ValueError(f"experiment {self.name!r}: default_model {self.default_model!r} is not one "
                       f"of its models ({', '.join(self.configs)})")

  def config(self, model: str | None = None) -> Config:
    """The named run's config, with `experiment` and `model_name` filled in."""
    model = self.default_model if model is None else model
    if model not in self.configs:
      raise ValueError(f"unknown model {model!r} for experiment {self.name!r}; known models: "
                       f"{', '.join(sorted(self.configs))}")
    cfg = self.configs[model]()
    cfg.experiment, cfg.model_name = self.name, model
    return cfg


_EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment, *, replace: bool = False) -> Experiment:
  """Adds `experiment` to the registry (the same name twice is an error unless `replace`)."""
  if experiment.name in _EXPERIMENTS and not replace:
    raise ValueError(f"an experiment named {experiment.name!r} is already registered")
  _EXPERIMENTS[experiment.name] = experiment
  return experiment


def unregister(name: str) -> None:
  _EXPERIMENTS.pop(name, None)


def load_experiments(extra_modules: Iterable[str] = ()) -> dict[str, Experiment]:
  """Imports the experiment modules (which register themselves) and returns the registry."""
  for module in (*EXPERIMENT_MODULES, *extra_modules):
    importlib.import_module(module)
  return dict(_EXPERIMENTS)


def get_experiment(name: str) -> Experiment:
  """The registered experiment `name`; a ValueError lists the known names otherwise."""
  if name not in _EXPERIMENTS:
    known = ", ".join(sorted(_EXPERIMENTS)) or "none registered"
    raise ValueError(f"unknown experiment {name!r}; known experiments: {known}")
  return _EXPERIMENTS[name]


def get_config(experiment: str, model: str | None = None) -> Config:
  """The config of a named run, e.g. get_config('sentiment', 'bilstm_additive')."""
  return get_experiment(experiment).config(model)
