"""The LSTM language model on the engine: `LanguageModelTask` pretrains lstm_lm.LanguageModel on
IMDB's reviews (the `lstm_lm` run), `ClassifierTask` fine-tunes lstm_lm.Classifier from it (the
`lstm_lm_classifier` run). Their networks, windows and regularizers are lstm_lm.py's; the settings
lm_configs.py's.

The reviews are the run's data (SentimentData: its protocol, vocabulary and data.max_len), as ids,
with every id from model.vocab_cap on read as unk and, with model.backward, each review reversed:

  pretraining   training: the labelled training reviews (never a self-training student's pseudo-
                labelled ones), then IMDB's unlabelled reviews (those without a word left out),
                each followed by eos, as one stream (lstm_lm.lm_stream), cut into windows of
                model.window tokens at an offset drawn for each epoch (lstm_lm.epoch_batches);
                dev and test: their own reviews' stream, windows from offset 0; the metric is the
                next token's loss in nats ('loss') and its exponential ('perplexity').
  fine-tuning   each split's reviews, of a long one its first model.read_len tokens or with
                model.head its head and tail (lstm_lm.head_and_tail), length-bucketed at
                model.widths; the metrics are the cross-entropy and the accuracy (with
                model.also_first a long review's accuracy is that of the mean of its two views'
                log-odds).

Both draw a step's dropout key by splitting the carried key (Task.RNG_CHAIN), as the loops these
runs replaced did (lstm_lm.py's own `pretrain` and `finetune`), so a run computes, step for step,
what those computed for the same seed and settings (tests/experiments/test_lm_runs.py).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments import steps
from experiments.config import Config
from experiments.sentiment import lm_configs
from experiments.sentiment import lstm_lm as nets
from experiments.sentiment.task import Prediction
from experiments.sentiment.task import SentimentTask
from experiments.sentiment.task import pseudo_labelled_count
from experiments.sentiment.task import read_unlabelled
from pipelines.batching import Batcher
from pipelines.batching import Ragged
from pipelines.vocab import UNK_ID


class _ReviewIds(SentimentTask):
  """What both tasks share: the reviews as the network's ids, the network's settings."""

  RNG_CHAIN = True

  def __init__(self, config: Config, **kwargs):
    super().__init__(config, **kwargs)
    config.model.network(config.train.dtype)  # a ValueError for a dtype the LSTM does not take
    if jax.process_count() > 1:
      raise ValueError(f"the LSTM language model's runs ({config.model_name}) train in one "
                       f"process (its devices may be several), not in {jax.process_count()}")
    self._ids: dict[str, Ragged] = {}

  @property
  def vocab_size(self) -> int:
    """V: the vocabulary's size, or model.vocab_cap."""
    cap = self.config.model.vocab_cap
    return len(self.vocab) if cap is None else cap

  @property
  def network(self) -> nets.ModelConfig:
    return self.config.model.network(self.config.train.dtype)

  def as_read(self, ragged: Ragged) -> Ragged:
    """Reviews as vocabulary ids -> as the network reads them (capped, and reversed if backward)."""
    model = self.config.model
    if model.vocab_cap is not None:
      ragged = nets.cap_ids(ragged, model.vocab_cap, len(self.vocab))
    return nets.reverse_each(ragged) if model.backward else ragged

  def review_ids(self, split: str) -> Ragged:
    """The reviews of 'train' (the labelled ones), 'dev', 'test' or 'unlabelled' as read."""
    if split not in self._ids:
      if split == "unlabelled":
        ids = []
        for record in read_unlabelled(self.config.data_dir, self.config.data.prepared_dir):
          try:
            ids.append(self.encode(record["text"])[1])
          except ValueError:  # a review without a word
            pass
        ragged = Ragged.from_sequences(ids)
      else:
        ragged = self.data.splits[split].sequences["tokens"]
        if split == "train":
          ragged = ragged.take(np.arange(len(ragged) - pseudo_labelled_count(self.data)))
      self._ids[split] = self.as_read(ragged)
    return self._ids[split]

  def labels(self, split: str) -> np.ndarray:
    """int32 (N,) 0/1 of a split's reviews (of 'train', the labelled ones)."""
    return self.data.splits[split].scalars["label"][:len(self.review_ids(split))].astype(np.int32)


# ---- pretraining


class WindowBatches:
  """The language model's training batches, epoch after epoch (lstm_lm.epoch_batches), each
  {'inputs', 'targets': int32 (B, L), 'weight': float32 (B,) ones}; `get_state`/`set_state`
  resume exactly (the epoch, and the batches of it already taken)."""

  def __init__(self, stream: np.ndarray, window: int, batch_size: int, seed: int):
    self.stream, self.window, self.batch_size, self.seed = stream, window, batch_size, seed
    self.epoch, self.position = 0, 0
    self._batches = self._epoch()

  def _epoch(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    return nets.epoch_batches(self.stream, self.window, self.batch_size, self.seed, self.epoch)

  def __iter__(self) -> WindowBatches:
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    for _ in range(2):
      try:
        inputs, targets = next(self._batches)
        self.position += 1
        return {"inputs": inputs, "targets": targets,
                "weight": np.ones(len(inputs), np.float32)}
      except StopIteration:
        self.epoch, self.position = self.epoch + 1, 0
        self._batches = self._epoch()
    raise RuntimeError(f"epoch {self.epoch} of the stream has no batch of {self.batch_size} "
                       f"windows")

  def get_state(self) -> dict[str, int]:
    return {"seed": self.seed, "epoch": self.epoch, "position": self.position}

  def set_state(self, state: dict[str, int]) -> None:
    if int(state["seed"]) != self.seed:
      raise ValueError(f"the data position was saved with seed {state['seed']}, this run's is "
                       f"{self.seed}")
    self.epoch, self.position = int(state["epoch"]), 0
    self._batches = self._epoch()
    for _ in range(int(state["position"])):
      next(self._batches)
      self.position += 1


class LanguageModelTask(_ReviewIds):
  """Pretraining lstm_lm.LanguageModel (lm_configs.LSTMLanguageModelConfig; module docstring)."""

  def stream(self, split: str) -> np.ndarray:
    """int32 (T,): 'train' the labelled training and the unlabelled reviews, else the split's."""
    parts = ("train", "unlabelled") if split == "train" else (split,)
    return nets.lm_stream([self.review_ids(part) for part in parts])

  @property
  def model(self) -> nets.LanguageModel:
    if self._model is None:
      self._model = nets.LanguageModel(self.vocab_size, self.network,
                                       self.config.model.output_dropout)
    return self._model

  def train_batches(self) -> WindowBatches:
    tc = self.config.train
    return WindowBatches(self.stream("train"), self.config.model.window, tc.batch_size, tc.seed)

  @property
  def steps_per_epoch(self) -> int:
    """The whole batches of windows from offset 0 (an epoch at another offset may have one
    fewer)."""
    if self._steps_per_epoch is None:
      stream, window = self.stream("train"), self.config.model.window
      count = len(nets.lm_windows(stream, window, 0)[0]) // self.config.train.batch_size
      if count < 1:
        raise ValueError(f"the training stream's {len(stream):,} tokens fill no batch of "
                         f"{self.config.train.batch_size} windows of {window}")
      self._steps_per_epoch = count
    return self._steps_per_epoch

  def eval_batches(self, split: str) -> Iterator[dict[str, np.ndarray]]:
    """The split's windows from offset 0, batched; the last batch filled with weight-0 rows."""
    tc = self.config.train
    size, window = tc.eval_batch_size or tc.batch_size, self.config.model.window
    stream = self.stream(split)
    if len(stream) < window + 1:
      raise ValueError(f"{split}'s reviews hold {len(stream)} tokens, too few for one window of "
                       f"{window} + 1: choose a shorter model.window")
    inputs, targets = nets.lm_windows(stream, window, 0)
    for start in range(0, len(inputs), size):
      rows = np.arange(start, min(start + size, len(inputs)))
      weight = np.zeros(size, np.float32)
      weight[:len(rows)] = 1.0
      rows = np.concatenate([rows, np.full(size - len(rows), rows[0])])
      yield {"inputs": inputs[rows], "targets": targets[rows], "weight": weight}

  def example_batch(self) -> dict[str, np.ndarray]:
    size, window = self.config.train.batch_size, self.config.model.window
    return {"inputs": np.zeros((size, window), np.int32),
            "targets": np.zeros((size, window), np.int32), "weight": np.ones(size, np.float32)}

  def init(self, rng: jax.Array, batch) -> Any:
    return self.model.init(rng, jnp.asarray(batch["inputs"]))["params"]

  def loss(self, params, batch, rng):
    """The mean next-token cross-entropy of the batch's windows (training batches are all whole
    windows; an evaluation's filler rows weigh 0 in the metric)."""
    logits = self.model.apply({"params": params}, batch["inputs"], deterministic=rng is None,
                              rngs={} if rng is None else {"dropout": rng})  # (B, L, V)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])  # (B, L)
    return nll.mean(), {"loss": steps.weighted_sum(nll, batch["weight"])}

  def extra_metric_names(self, split: str) -> tuple[str, ...]:
    del split
    return ("perplexity",)

  def extra_eval(self, params, split: str, metrics) -> dict[str, float]:
    del params, split
    return {"perplexity": float(np.exp(metrics["loss"]))}

  def predict(self, params, texts: Sequence[str]) -> list[Prediction]:
    raise ValueError("this is a language model run (lstm_lm): it does not classify reviews; "
                     "fine-tune it with --model lstm_lm_classifier --model.init_from DIR")

  def attention_maps(self, params, prediction: Prediction) -> dict[str, np.ndarray]:
    return self.predict(params, [prediction.text])  # raises: nothing to show

  def on_train_end(self, params, workdir: str) -> None:
    del params, workdir  # no classifier to draw


# ---- fine-tuning


def pooling_shares(outputs: jax.Array, lengths: jax.Array) -> jax.Array:
  """How much of the pooled z = [h_n, max_t h_t, mean_t h_t] (3H,) each real step decides:
  the last step all of h_n, each step the features of the max it attains (the first step
  attaining one), every step 1/n of the mean; float32 (B, L), each row summing to 1.

  Args:
    outputs: (B, L, H) the LSTM's outputs; lengths: int (B,) >= 1.
  """
  batch, width, hidden = outputs.shape
  real = jnp.arange(width)[None, :] < lengths[:, None]  # (B, L)
  masked = jnp.where(real[:, :, None], outputs.astype(jnp.float32), -jnp.inf)
  winners = jax.nn.one_hot(jnp.argmax(masked, axis=1), width, axis=1)  # (B, L, H)
  shares = winners.sum(-1) + real * (hidden / lengths[:, None])  # (B, L)
  shares = shares.at[jnp.arange(batch), lengths - 1].add(hidden)
  return shares / (3.0 * hidden)


class ClassifierTask(_ReviewIds):
  """Fine-tuning lstm_lm.Classifier (lm_configs.LSTMClassifierConfig; module docstring)."""

  @property
  def model(self) -> nets.Classifier:
    if self._model is None:
      self._model = nets.Classifier(self.vocab_size, self.network, self.config.model.dropout)
    return self._model

  # -- data

  def batcher(self, split: str, batch_size: int, *, both_views: bool = False) -> Batcher:
    """The split's reviews as read (head and tail with model.head), each batch's 'row' its
    reviews' places; with `both_views` also 'first', each review's first read_len ids."""
    model = self.config.model
    ids = self.review_ids(split)
    read = ids if model.head is None else nets.head_and_tail(ids, model.read_len, model.head)
    sequences = {"tokens": read, **({"first": ids} if both_views else {})}
    return Batcher(sequences, {"label": self.labels(split),
                               "row": np.arange(len(ids), dtype=np.int64)},
                   boundaries=model.bucket_widths(), batch_size=batch_size,
                   length_keys={"first": None} if both_views else None, process_index=0,
                   process_count=1)

  def _flagged(self) -> bool:
    """Whether the batches say which epoch trains adversarially (model.adversarial_from > 1)."""
    return bool(self.config.model.adversarial) and self.config.model.adversarial_from > 1

  def train_batches(self):
    tc = self.config.train
    batches = self.batcher("train", tc.batch_size).train_batches(tc.seed)
    if not self._flagged():
      return batches
    return AdversarialEpochs(batches, self.steps_per_epoch, self.config.model.adversarial_from)

  @property
  def steps_per_epoch(self) -> int:
    """The reviews over the batch size (an epoch of steps, not of the batcher's plan)."""
    if self._steps_per_epoch is None:
      count = len(self.review_ids("train")) // self.config.train.batch_size
      if count < 1:
        raise ValueError(f"{len(self.review_ids('train'))} training reviews fill no batch of "
                         f"{self.config.train.batch_size}")
      self._steps_per_epoch = count
    return self._steps_per_epoch

  def eval_batches(self, split: str):
    tc = self.config.train
    return self.batcher(split, tc.eval_batch_size or tc.batch_size,
                        both_views=self.config.model.also_first).eval_batches()

  def example_batch(self) -> dict[str, np.ndarray]:
    size, width = self.config.train.batch_size, self.config.model.read_len
    batch = {"tokens": np.full((size, width), UNK_ID, np.int32),
             "tokens_len": np.ones(size, np.int32), "label": np.zeros(size, np.int32),
             "row": np.arange(size, dtype=np.int64), "weight": np.ones(size, np.float32)}
    if self._flagged():
      batch["adversarial"] = np.zeros(size, np.float32)
    if self.config.model.also_first:  # what evaluation batches hold (the check of best_metric)
      batch["first"] = batch["tokens"].copy()
    return batch

  # -- model

  def init(self, rng: jax.Array, batch) -> Any:
    params = self.model.init(rng, jnp.asarray(batch["tokens"]),
                             jnp.asarray(batch["tokens_len"]))["params"]
    init_from = self.config.model.init_from
    if init_from is None:
      return params
    trunk = self._pretrained_trunk(init_from)
    if jax.tree_util.tree_map(jnp.shape, trunk) != jax.tree_util.tree_map(jnp.shape,
                                                                          params["trunk"]):
      raise ValueError(f"model.init_from: {init_from}'s language model does not fit this "
                       f"classifier: pretrain and fine-tune with the same model settings")
    return {**params, "trunk": trunk}

  def _pretrained_trunk(self, workdir: str) -> Any:
    """The trunk of the language model run in `workdir` (its last parameters, what pretraining
    ends with), after checking that it reads the reviews as this run does; loaded once."""
    if getattr(self, "_trunk", None) is None:
      from experiments import runs  # pylint: disable=g-import-not-at-top (runs builds tasks)
      run = runs.load_init_from(workdir, "sentiment", "latest",
                                f"`python -m experiments train sentiment --model lstm_lm "
                                f"--workdir {workdir}` (same --data-dir and data options)",
                                task_class=LanguageModelTask,
                                kind="a language model run (lstm_lm)", vocab=self.vocab)
      for name in ("embed_dim", "hidden_size", "num_layers", "vocab_cap", "backward"):
        theirs, ours = getattr(run.config.model, name), getattr(self.config.model, name)
        if theirs != ours:
          raise ValueError(f"model.init_from: {workdir} was pretrained with model.{name} "
                           f"{theirs}, this run has {ours}; give the same")
      self._trunk = run.params["trunk"]
    return self._trunk

  def _logits(self, params, tokens, lengths, rng=None, perturbation=None):
    return self.model.apply({"params": params}, tokens, lengths, deterministic=rng is None,
                            perturbation=perturbation, rngs={} if rng is None else {"dropout": rng})

  def _objective(self, params, batch, rng, perturbation=None):
    """The weighted mean cross-entropy (as lstm_lm.classifier_train_step's), and the metrics;
    with model.weight_drop, at the recurrent weights dropped by fold_in(rng, 1)'s mask."""
    params = nets.drop_connect(params, jax.random.fold_in(rng, 1), self.config.model.weight_drop)
    logits = self._logits(params, batch["tokens"], batch["tokens_len"], rng, perturbation)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])  # (B,)
    weight = batch["weight"]
    correct = (jnp.argmax(logits, axis=-1) == batch["label"]).astype(jnp.float32)
    metrics = {"loss": steps.weighted_sum(losses, weight),
               "accuracy": steps.weighted_sum(correct, weight)}
    return jnp.sum(losses * weight) / jnp.maximum(jnp.sum(weight), 1.0), metrics

  def loss(self, params, batch, rng):
    if rng is not None:
      return self._objective(params, batch, rng)
    logits = self._logits(params, batch["tokens"], batch["tokens_len"])
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
    correct = (jnp.argmax(logits, axis=-1) == batch["label"]).astype(jnp.float32)
    loss_pair = steps.weighted_sum(losses, batch["weight"])
    return (loss_pair[0] / jnp.maximum(loss_pair[1], 1.0),
            {"loss": loss_pair, "accuracy": steps.weighted_sum(correct, batch["weight"])})

  def loss_and_grads(self, params, batch, rng):
    """A plain step's, or with model.adversarial also the loss at the embedded words moved by
    lstm_lm.adversarial_perturbation of the clean loss's gradient with respect to them: the
    objective is the sum, its gradient the sum of both passes' (lstm_lm.classifier_train_step)."""
    epsilon = self.config.model.adversarial
    if not epsilon:
      return jax.value_and_grad(self._objective, has_aux=True)(params, batch, rng)

    def adversarial(params):
      zeros = jnp.zeros((*batch["tokens"].shape, self.network.embed_dim), jnp.float32)
      (loss, metrics), (grads, towards) = jax.value_and_grad(
          self._objective, argnums=(0, 3), has_aux=True)(params, batch, rng, zeros)
      perturbation = jax.lax.stop_gradient(nets.adversarial_perturbation(towards, epsilon))
      (moved, _), more = jax.value_and_grad(self._objective, has_aux=True)(
          params, batch, rng, perturbation)
      grads = jax.tree_util.tree_map(jnp.add, grads, more)
      one = jnp.ones((), jnp.float32)
      return (loss + moved, {**metrics, "adversarial_loss": (moved, one)}), grads

    if not self._flagged():
      return adversarial(params)

    def plain(params):
      (loss, metrics), grads = jax.value_and_grad(self._objective, has_aux=True)(params, batch,
                                                                                 rng)
      zero = jnp.zeros((), jnp.float32)
      return (loss, {**metrics, "adversarial_loss": (zero, zero)}), grads

    return jax.lax.cond(batch["adversarial"][0] > 0, adversarial, plain, params)

  def eval_metrics(self, params, batch):
    if not self.config.model.also_first:
      return self.loss(params, batch, None)[1]
    logits = self._logits(params, batch["tokens"], batch["tokens_len"])  # (B, 2)
    first = self._logits(params, batch["first"], batch["tokens_len"])
    log_odds = ((logits[:, 1] - logits[:, 0]) + (first[:, 1] - first[:, 0])) / 2  # (B,)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
    correct = ((log_odds > 0) == (batch["label"] == 1)).astype(jnp.float32)
    return {"loss": steps.weighted_sum(losses, batch["weight"]),
            "accuracy": steps.weighted_sum(correct, batch["weight"])}

  # -- prediction

  def _read_positions(self, count: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The positions (in the review's order) of the words read, in reading order; with
    also_first and a long review, also those of its first read_len words."""
    model = self.config.model
    order = np.arange(count)[::-1] if model.backward else np.arange(count)
    if count <= model.read_len:
      return order, None
    first = order[:model.read_len]
    if model.head is None:
      return first, None
    read = np.concatenate([order[:model.head], order[count - (model.read_len - model.head):]])
    return read, first if model.also_first else None

  def _forward_shares(self, params, tokens, lengths):
    """(log-odds (B,), pooling shares (B, L)) of padded reviews."""
    capture = lambda module, method: module.name == "trunk" and method == "__call__"
    logits, state = self.model.apply({"params": params}, tokens, lengths,
                                     capture_intermediates=capture)
    outputs, _ = state["intermediates"]["trunk"]["__call__"][0]
    return logits[:, 1] - logits[:, 0], pooling_shares(outputs, lengths)

  def predict(self, params, texts: Sequence[str]) -> list[Prediction]:
    """Classifies each text by its log-odds (with also_first, of a long review the mean of both
    views'); a word's weight is its share of the pooled features (`pooling_shares`)."""
    if not hasattr(self, "_jit_shares"):
      self._jit_shares = jax.jit(self._forward_shares)
    encoded = [self.encode(text) for text in texts]  # a ValueError for a text without a word
    capped = self.as_read(Ragged.from_sequences([ids for _, ids in encoded]))
    if self.config.model.backward:  # as_read reversed them: positions index the text's order
      capped = nets.reverse_each(capped)
    out = []
    for row, (text, (words, _)) in enumerate(zip(texts, encoded)):
      read, first = self._read_positions(len(words))
      ids = capped[row]
      log_odds, shares = self._score(params, ids[read])
      if first is not None:
        log_odds = (log_odds + self._score(params, ids[first])[0]) / 2
      order = np.argsort(read)  # the words read, in the text's order
      label = int(log_odds > 0)
      probability = float(1.0 / (1.0 + np.exp(-abs(log_odds))))
      weights = shares[order].astype(np.float32)
      out.append(Prediction(text, [words[p] for p in read[order]],
                            [int(ids[p]) == UNK_ID for p in read[order]], label, probability,
                            weights, weights))
    return out

  def _score(self, params, ids: np.ndarray) -> tuple[float, np.ndarray]:
    """(log-odds, shares (n,)) of one review's ids as read, padded to its bucket's width."""
    widths = self.config.model.bucket_widths()
    width = next(w for w in widths if w >= len(ids))
    tokens = np.zeros((1, width), np.int32)
    tokens[0, :len(ids)] = ids
    log_odds, shares = self._jit_shares(params, tokens, np.array([len(ids)], np.int32))
    return float(log_odds[0]), np.asarray(shares)[0, :len(ids)]

  def attention_maps(self, params, prediction: Prediction) -> dict[str, np.ndarray]:
    """{'pooling': float32 (1, 1, 1, n)}: each word's share of the pooled features."""
    del params
    return {"pooling": np.asarray(prediction.word_weights, np.float32)[None, None, None, :]}


class AdversarialEpochs:
  """The training batches with 'adversarial' float32 (B,): 1 in the epochs (of `per_epoch`
  steps, from 1) from `first` on, else 0; resumable as the batches it wraps."""

  def __init__(self, batches, per_epoch: int, first: int):
    self.batches, self.per_epoch, self.first, self.taken = batches, per_epoch, first, 0

  def __iter__(self) -> AdversarialEpochs:
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    batch = next(self.batches)
    on = self.taken // self.per_epoch + 1 >= self.first
    self.taken += 1
    return {**batch, "adversarial": np.full(len(batch["weight"]), float(on), np.float32)}

  def get_state(self) -> dict[str, Any]:
    return {**self.batches.get_state(), "taken": self.taken}

  def set_state(self, state: dict[str, Any]) -> None:
    self.batches.set_state({k: v for k, v in state.items() if k != "taken"})
    self.taken = int(state["taken"])


def make_task(config: Config, **kwargs) -> SentimentTask:
  """The task of a sentiment run: the language model's, its classifier's, or SentimentTask."""
  if isinstance(config.model, lm_configs.LSTMLanguageModelConfig):
    return LanguageModelTask(config, **kwargs)
  if isinstance(config.model, lm_configs.LSTMClassifierConfig):
    return ClassifierTask(config, **kwargs)
  return SentimentTask(config, **kwargs)
