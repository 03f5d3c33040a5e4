"""A tiny synthetic classification experiment for testing the engine (test-only, never registered
by the package itself).

Examples are 7 token ids from a 13-word vocabulary (0 = pad) with lengths 3..7; the label says
whether more than half of the real tokens are "small" (ids 1..6). An embedding, masked mean
pooling, a hidden layer with dropout and a 2-way output learn it in a few dozen steps.

In a multi-process run (tests/experiments/test_multihost.py) every process draws the same global
batches and keeps its own rows of each, as the pipelines' Batcher does.

Use from a test: `engine_toy.register()` (returns the Experiment; `registry.unregister('toy')` to
undo), or from a shell: PYTHONPATH=tests/experiments python -m experiments --import engine_toy
train toy --workdir /tmp/toy.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import tempfile

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.experimental.compilation_cache import compilation_cache

from experiments import config as config_lib
from experiments import plots
from experiments import registry
from experiments import steps
from experiments.task import Task
from experiments import runs

BATCH = 12  # a multiple of the 4 fake devices the tests run on


def enable_compilation_cache() -> None:
  """Lets successive training runs in the tests load identical programs instead of recompiling.

  Each `trainer.train` call traces fresh closures, so jax's in-memory cache misses; the persistent
  cache is keyed by the compiled program itself and hits. A cache directory configured already
  (JAX_COMPILATION_CACHE_DIR) is left as it is.
  """
  if jax.config.jax_compilation_cache_dir:
    return
  path = os.path.join(tempfile.gettempdir(), f"attention-zoo-jax-cache-{os.getuid()}")
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  compilation_cache.reset_cache()  # jax decides once per process; ask it again


@dataclasses.dataclass
class ToyModelConfig:
  """embed_dim: embedding width; hidden: hidden layer width; dropout: rate after hidden."""
  embed_dim: int = 10
  hidden: int = 16
  dropout: float = 0.1


@dataclasses.dataclass
class ToyDataConfig:
  """Sizes of the synthetic splits, and fault injections for the tests.

  nan_at_batch: the training batch (0-based, counted over epochs) whose loss is multiplied by NaN.
  signal_at_batch: SIGTERM is raised when this training batch is drawn from the iterator.
  kill_at_batch: the process is killed (SIGKILL) when it draws this training batch.
  fault_process: the process signal_at_batch and kill_at_batch hit (None: every process).
  """
  n_train: int = 60
  n_dev: int = 17
  n_test: int = 19
  seq_len: int = 7
  vocab_size: int = 13
  nan_at_batch: int | None = None
  signal_at_batch: int | None = None
  kill_at_batch: int | None = None
  fault_process: int | None = None


def toy_config(embed_dim: int = 10) -> config_lib.Config:
  """The toy run: 5 steps per epoch, 2 epochs, Adam 1e-2."""
  return config_lib.Config(
      train=config_lib.TrainConfig(batch_size=BATCH, num_epochs=2, log_every=2, checkpoint_every=3,
                                   best_metric="dev/accuracy", best_mode="max",
                                   progress_bar=False),
      optimizer=config_lib.OptimizerConfig(learning_rate=1e-2),
      model=ToyModelConfig(embed_dim=embed_dim), data=ToyDataConfig())


def make_examples(n: int, seed: int, cfg: ToyDataConfig) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, cfg.seq_len + 1, size=n).astype(np.int32)
  tokens = rng.integers(1, cfg.vocab_size, size=(n, cfg.seq_len)).astype(np.int32)
  tokens[np.arange(cfg.seq_len)[None, :] >= lengths[:, None]] = 0
  small = ((tokens >= 1) & (tokens <= 6)).sum(1)
  labels = (2 * small > lengths).astype(np.int32)
  return {"tokens": tokens, "lengths": lengths, "label": labels}


def process_rows(batch_size: int) -> slice:
  """This process's rows of a global batch of `batch_size` rows."""
  count = jax.process_count()
  if batch_size % count:
    raise ValueError(f"batch size {batch_size} must be divisible by the {count} processes")
  local = batch_size // count
  return slice(jax.process_index() * local, (jax.process_index() + 1) * local)


class ToyBatches:
  """Endless shuffled training batches with get_state/set_state (the pipelines' contract): this
  process's rows of each global batch of `batch_size`."""

  def __init__(self, examples, batch_size: int, seed: int, cfg: ToyDataConfig):
    self.examples, self.batch_size, self.seed, self.cfg = examples, batch_size, seed, cfg
    self.per_epoch = len(examples["label"]) // batch_size
    self.epoch, self.position = 0, 0
    self.rows = process_rows(batch_size)
    self.hit = cfg.fault_process in (None, jax.process_index())

  def __iter__(self):
    return self

  def __next__(self):
    order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.examples["label"]))
    index = order[self.position * self.batch_size:(self.position + 1) * self.batch_size][self.rows]
    drawn = self.epoch * self.per_epoch + self.position
    self.position += 1
    if self.position == self.per_epoch:
      self.epoch, self.position = self.epoch + 1, 0
    batch = {k: v[index] for k, v in self.examples.items()}
    batch["weight"] = np.ones(len(index), np.float32)
    batch["scale"] = np.full(len(index), np.nan if drawn == self.cfg.nan_at_batch else 1.0,
                             np.float32)
    if drawn == self.cfg.signal_at_batch and self.hit:
      signal.raise_signal(signal.SIGTERM)
    if drawn == self.cfg.kill_at_batch and self.hit:
      os.kill(os.getpid(), signal.SIGKILL)
    return batch

  def get_state(self) -> dict:
    return {"seed": self.seed, "epoch": self.epoch, "position": self.position}

  def set_state(self, state: dict) -> None:
    self.seed, self.epoch, self.position = state["seed"], state["epoch"], state["position"]


class ToyModel(nn.Module):
  """tokens (B, L), lengths (B,) -> logits (B, 2)."""
  vocab_size: int
  embed_dim: int
  hidden: int
  dropout: float
  dtype: jnp.dtype = jnp.float32
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, tokens, lengths, *, deterministic: bool):
    x = nn.Embed(self.vocab_size, self.embed_dim, dtype=self.dtype,
                 param_dtype=self.param_dtype)(tokens)                          # (B, L, D)
    mask = (jnp.arange(tokens.shape[1]) < lengths[:, None]).astype(x.dtype)    # (B, L)
    pooled = (x * mask[..., None]).sum(1) / jnp.maximum(lengths, 1)[:, None].astype(x.dtype)
    h = nn.relu(nn.Dense(self.hidden, dtype=self.dtype, param_dtype=self.param_dtype)(pooled))
    h = nn.Dropout(self.dropout)(h, deterministic=deterministic)
    return nn.Dense(2, dtype=self.dtype, param_dtype=self.param_dtype)(h)      # (B, 2)


class ToyTask(Task):
  """The engine's test task: classification with per-example weights."""

  def __init__(self, config: config_lib.Config):
    super().__init__(config)
    m, d = config.model, config.data
    self.model = ToyModel(d.vocab_size, m.embed_dim, m.hidden, m.dropout,
                          dtype=config.compute_dtype, param_dtype=config.storage_dtype)
    self.splits = {"train": make_examples(d.n_train, 1, d), "dev": make_examples(d.n_dev, 2, d),
                   "test": make_examples(d.n_test, 3, d)}

  def init(self, rng, batch):
    return self.model.init(rng, batch["tokens"], batch["lengths"], deterministic=True)["params"]

  def logits(self, params, batch, rng=None):
    rngs = {"dropout": rng} if rng is not None else {}
    out = self.model.apply({"params": params}, batch["tokens"], batch["lengths"],
                           deterministic=rng is None, rngs=rngs)
    return out.astype(jnp.float32)

  def loss(self, params, batch, rng):
    logits = self.logits(params, batch, rng)
    per_example = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
    per_example = per_example * batch.get("scale", 1.0)
    weight = batch["weight"]
    correct = (logits.argmax(-1) == batch["label"]).astype(jnp.float32)
    loss_pair = steps.weighted_sum(per_example, weight)
    metrics = {"loss": loss_pair, "accuracy": steps.weighted_sum(correct, weight)}
    return loss_pair[0] / jnp.maximum(loss_pair[1], 1.0), metrics

  def train_batches(self):
    return ToyBatches(self.splits["train"], self.config.train.batch_size, self.config.train.seed,
                      self.config.data)

  @property
  def steps_per_epoch(self):
    return self.config.data.n_train // self.config.train.batch_size

  def eval_batches(self, split):
    examples = self.splits[split]
    size = self.config.train.eval_batch_size or self.config.train.batch_size
    rows = process_rows(size)
    n = len(examples["label"])
    for start in range(0, n, size):
      batch = {k: v[start:start + size] for k, v in examples.items()}
      real = len(batch["label"])
      batch = {k: np.concatenate([v, np.zeros((size - real,) + v.shape[1:], v.dtype)])
               for k, v in batch.items()}
      batch["weight"] = (np.arange(size) < real).astype(np.float32)
      batch["lengths"] = np.maximum(batch["lengths"], 1)
      yield {k: v[rows] for k, v in batch.items()}


def predict_command(args, console) -> int:
  """Prints the label and its probability for inputs written as space-separated token ids."""
  run = runs.load_run(args.workdir, args.checkpoint)
  task, params = run.task, run.params
  for text in args.inputs:
    ids = [int(t) for t in text.split()]
    tokens = np.zeros((1, task.config.data.seq_len), np.int32)
    tokens[0, :len(ids)] = ids
    batch = {"tokens": tokens, "lengths": np.array([len(ids)], np.int32)}
    probs = jax.nn.softmax(task.logits(jax.device_get(params), batch))[0]
    label = int(np.argmax(probs))
    console.print(f"{text}\t{label}\t{float(probs[label]):.4f}")
    if args.heatmap:
      weights = np.full(len(ids), 1.0 / len(ids))  # mean pooling: every real token weighs the same
      plots.plot_attention(weights, [str(i) for i in ids], None, args.heatmap,
                           title="toy pooling weights")
  return 0


EXPERIMENT = registry.Experiment(
    name="toy", make_task=ToyTask, configs={"mlp": toy_config, "wide": lambda: toy_config(14)},
    default_model="mlp", predict=predict_command, aliases=("toyclassify",),
    description="synthetic token classification for engine tests")


def register() -> registry.Experiment:
  return registry.register(EXPERIMENT, replace=True)


register()
