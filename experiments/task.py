"""What an experiment gives the engine: a `Task` (model, loss, data, artifacts, evaluation hooks).

The engine (trainer.py, runs.py) calls only what is declared here. A task is built from a `Config`
and reads `config.model`, `config.data`, `config.data_dir`, `config.train.batch_size` /
`eval_batch_size` / `seed` and the dtypes `config.compute_dtype` / `config.storage_dtype`.

Its `init`, `loss` and `eval_metrics` are pure functions of arrays that the engine jits and shards;
they must not print or touch files. Everything else (opening the data, decoding, drawing) runs on
the host.

The metric convention: a task reports metrics as a dict name -> (total, count) of float32 scalars,
summed over the examples of the batch with their weights (padding rows of an evaluation batch have
weight 0). The engine adds totals and counts over steps and batches and reports total / count, so
every metric is an exact weighted mean however the data was batched or sharded. `steps.weighted_sum`
builds such a pair.

Data: a task either returns a prepared dataset from `load_data` (an object with
`train_batches(batch_size, seed)` and `eval_batches(split, batch_size)`, as every
`pipelines.tasks.TaskData` has), and the base class does the batching, or overrides
`train_batches`, `steps_per_epoch` and `eval_batches` itself. In a multi-process run
(experiments/distributed.py) each process's batches are its own rows of every global batch of
`batch_size` rows (rows [p*b, (p+1)*b), b = batch_size // process_count, as the pipelines' Batcher
yields them), and every process yields equally many batches with the same iterator positions.

Artifacts: what a trained run needs besides its parameters to predict (vocabularies, subword
models). A task names them in `ARTIFACTS` (name -> file in the run's directory; a '.model' file is
a SentencePiece model, anything else a word vocabulary's JSON: pipelines.tasks.read_vocab_file)
and returns the ones its data built from `artifacts_from_data`; the engine saves them into the
workdir before the first step, and `runs.load_run` loads them back, so predicting never opens the
training data.

Signatures: a metric computed by a library whose settings change its value (sacreBLEU's
tokenization, casing, number of references) is reported with the library's description of how
it was computed; `metric_signatures(split)` returns them, and the engine writes them into
results.json beside the figures.
"""

from __future__ import annotations

import abc
import dataclasses
import os
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Protocol

import jax

from experiments.config import Config
from pipelines.tasks import AnyVocab
from pipelines.tasks import read_vocab_file

Batch = Mapping[str, Any]
"""A dict of arrays with leading axis B (see pipelines.tasks); includes 'weight' (B,)."""
Metrics = dict[str, tuple[jax.Array, jax.Array]]
"""name -> (weighted total, total weight), both float32 scalars."""


def pipeline_options(data_config: Any, options_class: type) -> dict[str, Any]:
  """The settings of an experiment's data config that are options of a pipeline, by their name.

  Data configs use the pipeline's names for the pipeline's options (`max_len`, `boundaries`,
  `max_size` ...), so one name reaches from the command line to the pipeline; the settings only
  the experiment knows (`prepared_dir`, `beam_size` ...) are left out.

  Args:
    data_config: the experiment's data dataclass (config.data).
    options_class: the pipeline's options dataclass, e.g. pipelines.tasks.SentimentOptions.
  """
  names = {f.name for f in dataclasses.fields(options_class)}
  return {f.name: getattr(data_config, f.name) for f in dataclasses.fields(data_config)
          if f.name in names}


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

  Args:
    config: the run's configuration.
    data: already prepared data (None: `load_data()` when first needed).
    artifacts: artifacts to use instead of the data's (name -> Vocab, e.g. a run's saved copies).
  """

  RNG_CHAIN: ClassVar[bool] = False
  """How a training step's key is drawn: False, fold_in(key, step) of the run's fixed key; True,
  the key carried in the state is split in two each step, the first carried on and the second
  used (the keys of a loop that splits its dropout key every step; the chain is checkpointed with
  the state, so a resumed run draws the same keys)."""

  ARTIFACTS: ClassVar[Mapping[str, str]] = {}
  """Artifact name -> file name in a run's directory (a pipelines.vocab.Vocab's JSON, or a
  pipelines.subword.SubwordVocab's '.model')."""

  def __init__(self, config: Config, *, data: Any = None,
               artifacts: Mapping[str, AnyVocab] | None = None):
    self.config = config
    self._data = data
    self._artifacts = dict(artifacts or {})
    unknown = set(self._artifacts) - set(self.ARTIFACTS)
    if unknown:
      raise ValueError(f"{type(self).__name__} has no artifacts {sorted(unknown)}; its artifacts "
                       f"are {sorted(self.ARTIFACTS)}")
    self._steps_per_epoch: int | None = None

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

  def loss_and_grads(self, params: Any, batch: Batch, rng: jax.Array
                     ) -> tuple[tuple[jax.Array, Metrics], Any]:
    """((objective, metrics), the objective's gradients with respect to `params`) of one training
    batch: by default `jax.value_and_grad` of `loss`. A task overrides it where its update follows
    more than one scalar's gradient computed once (adversarial training adds the gradient at
    inputs moved along the first gradient)."""
    return jax.value_and_grad(self.loss, has_aux=True)(params, batch, rng)

  def eval_metrics(self, params: Any, batch: Batch) -> Metrics:
    """Metric pairs of one evaluation batch; by default those of the deterministic loss."""
    return self.loss(params, batch, None)[1]

  # -- data ----------------------------------------------------------------------------------------

  def load_data(self) -> Any:
    """Opens the prepared data (with `train_batches` and `eval_batches`); called once, lazily."""
    raise NotImplementedError(f"{type(self).__name__} must implement load_data(), or override "
                              "train_batches, steps_per_epoch and eval_batches")

  @property
  def data(self) -> Any:
    """The prepared data (opened on first use)."""
    if self._data is None:
      self._data = self.load_data()
    return self._data

  def train_batches(self) -> ResumableIterator:
    """An endless iterator of training batches (epoch after epoch, seeded by config.train.seed)."""
    tc = self.config.train
    return self.data.train_batches(tc.batch_size, tc.seed)

  @property
  def steps_per_epoch(self) -> int:
    """How many training batches make one epoch."""
    if self._steps_per_epoch is None:
      self._steps_per_epoch = self.train_batches().batches_per_epoch
    return self._steps_per_epoch

  def eval_batches(self, split: str) -> Iterable[Batch]:
    """A finite pass over `split` ('dev' or 'test') with padding rows of weight 0."""
    tc = self.config.train
    return self.data.eval_batches(split, tc.eval_batch_size or tc.batch_size)

  def example_batch(self) -> Batch:
    """A batch with the shapes `init` needs: by default the first batch of a new training iterator.

    Override it when opening the training data is expensive and only inference is wanted.
    """
    return next(iter(self.train_batches()))

  # -- artifacts -----------------------------------------------------------------------------------

  def artifacts_from_data(self) -> dict[str, AnyVocab | None]:
    """The artifacts as the prepared data builds them (name -> Vocab, None where not used)."""
    return {}

  def artifact(self, name: str) -> AnyVocab | None:
    """The artifact `name`: the one given or loaded from a run, else the data's."""
    if name not in self.ARTIFACTS:
      raise ValueError(f"{type(self).__name__} has no artifact {name!r}; its artifacts are "
                       f"{sorted(self.ARTIFACTS)}")
    if name not in self._artifacts:
      self._artifacts[name] = self.artifacts_from_data().get(name)
    return self._artifacts[name]

  def save_artifacts(self, workdir: str) -> list[str]:
    """Writes every artifact the run uses into `workdir`; returns the paths written."""
    written = []
    for name, file_name in self.ARTIFACTS.items():
      value = self.artifact(name)
      if value is not None:
        path = os.path.join(workdir, file_name)
        value.save(path)
        written.append(path)
    return written

  def load_artifacts(self, workdir: str) -> list[str]:
    """Reads the artifacts a run saved in `workdir` (those it did not save stay the data's)."""
    loaded = []
    for name, file_name in self.ARTIFACTS.items():
      path = os.path.join(workdir, file_name)
      if os.path.exists(path):
        self._artifacts[name] = read_vocab_file(path)
        loaded.append(name)
    return loaded

  # -- evaluation hooks ----------------------------------------------------------------------------

  def extra_metric_names(self, split: str) -> tuple[str, ...]:
    """The names `extra_eval(..., split, ...)` returns; the engine checks best_metric against
    them before the first step, and every evaluation against this list."""
    del split
    return ()

  def extra_eval(self, params: Any, split: str, metrics: Mapping[str, float]) -> dict[str, float]:
    """Metrics that need more than a batch-wise sum (BLEU by decoding...); {} by default.

    Args:
      params: the parameters evaluated.
      split: 'dev' or 'test'.
      metrics: the weighted means the engine has just computed over the split (so a task derives
        e.g. perplexity from 'nll' without a second pass).

    In a multi-process run every process calls it, with the same metrics and a copy of the
    parameters on its own devices, and must return the same values (each may e.g. decode the
    whole split).

    Returns:
      name -> value for exactly `extra_metric_names(split)`; the engine adds the split prefix.
    """
    del params, split, metrics
    return {}

  def metric_signatures(self, split: str) -> dict[str, str]:
    """Metric name -> how it was computed (e.g. sacreBLEU's signature), for the metrics of the
    last `extra_eval` on `split` that have one; {} by default."""
    del split
    return {}

  def on_train_end(self, params: Any, workdir: str) -> None:
    """Called once with the parameters used for the test evaluation (to draw a heatmap, ...).

    In a multi-process run only process 0 calls it, with a copy of the parameters on its own
    devices (a computation on the global arrays would wait for the other processes forever)."""
    del params, workdir


class FittedTask(Task):
  """A task whose model is fitted on the data in one call (scikit-learn, gensim, a closed form)
  instead of by gradient steps: it declares `fit` and no loss.

  The engine (experiments/fitting.py) runs it as every run: the workdir lock, config.json, the
  task's artifacts, results.json with the dev and test metrics; the model `fit` returns is saved
  (pickled) into the run's `model/` folder under the same sha256 manifest as checkpoints
  (checkpoints.write_manifest), verified before every load. `runs.load_run` hands the loaded model
  to `predict` (and the other inference methods) where a trained run's parameters go.
  """

  @abc.abstractmethod
  def fit(self, note: Callable[[str], None]) -> tuple[Any, dict[str, Any]]:
    """Fits the model on the training data (choices on dev allowed, never on test).

    Args:
      note: a callable taking one line of progress (the console's note).

    Returns:
      (model, record): the fitted model (any picklable object, what inference methods take as
      `params`) and what the fit chose and found, JSON-able (written into results.json as 'fit').
    """

  @abc.abstractmethod
  def evaluate_model(self, model: Any, split: str) -> dict[str, float]:
    """The model's metrics on `split` ('dev' or 'test'): name -> value (the same names on every
    split, e.g. 'accuracy' and 'loss' as the trained runs of the experiment report them)."""

  def init(self, rng: jax.Array, batch: Batch) -> Any:
    raise TypeError(f"{type(self).__name__} is fitted in one call (fit), not initialised and "
                    "trained by gradient steps")

  def loss(self, params: Any, batch: Batch, rng: jax.Array | None) -> tuple[jax.Array, Metrics]:
    raise TypeError(f"{type(self).__name__} is fitted in one call (fit): it has no loss")

  def example_batch(self) -> Batch:
    raise TypeError(f"{type(self).__name__} is fitted in one call (fit): it takes no batches")
