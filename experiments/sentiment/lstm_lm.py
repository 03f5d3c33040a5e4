"""An LSTM language model pretrained on IMDB's own reviews, then fine-tuned as a sentiment
classifier: the LM-LSTM of Dai and Le (2015, "Semi-supervised sequence learning"), with the
concatenated pooling of Howard and Ruder (2018, ULMFiT). A member of the ensemble (ensemble.py,
`--member`), and a model of its own.

Pretraining, without labels, on the labelled training reviews and IMDB's 50,000 unlabelled ones
(never dev's or test's), each followed by eos and all concatenated into one stream of ids, cut
into windows of L tokens at an offset drawn for each epoch:

  e_t      = worddrop(E[x_t])                                  (De,)  E: (V, De); a dropped word's
                                                                      whole vector is zero
  h_t      = LSTM(e_1 .. e_t)                                  (H,)   zoo.LSTM, from a zero state
                                                                      at each window's start
  logits_t = (W dropout(h_t) + b) E^T + c                      (V,)   the output layer tied to
                                                                      the input embedding
  loss     = mean over the window's t of -log softmax(logits_t)[x_{t+1}]

Fine-tuning, on the labelled training reviews (dev chooses the epoch), embedding and LSTM
initialised from the language model:

  h_1 .. h_n = LSTM(worddrop(E[x_1 .. x_n]))      the review's n tokens (at most max_len: a
                                                  longer one's first, or with `--head` its
                                                  first head and last max_len - head)
  z          = [h_n, max_t h_t, mean_t h_t]       (3H,)
  logits     = V dropout(z) + v                   (2,)

With `--adversarial EPS`, adversarial training on the embedded words (Miyato et al. 2017, after
Goodfellow et al. 2015): each step adds to the loss the loss at the review's embedded words
e = worddrop(E[x]) (n, De) moved by

  r_adv = EPS g / ||g||_2,   g = d loss / d e   (the norm over all n x De entries of the review)

a second forward and backward pass a step.

With `--weight-drop P`, DropConnect on the LSTM's recurrent weights while fine-tuning (Wan et al.
2013; the weight drop of Merity et al. 2018's AWD-LSTM, which ULMFiT fine-tunes with): each step
trains with W_hh * m / (1 - P), m a 0/1 mask with P(m = 0) = P per entry, drawn once a step (the
same mask at every time step and for every review of the batch); scoring uses W_hh itself.

Both use Adam on gradients clipped to a global norm, the learning rate warmed up linearly and then
decayed along a cosine to a tenth of its peak.

This file imports nothing of experiments/ (only jax, flax, optax, numpy, zoo and pipelines), so a
machine with no more than those runs it by path, e.g. a GPU machine:

  PYTHONPATH=. python3 experiments/sentiment/lstm_lm.py pretrain --reviews R.npz --out DIR ...
  PYTHONPATH=. python3 experiments/sentiment/lstm_lm.py finetune --reviews R.npz \
      --pretrained DIR/lm.npz --out DIR --seeds 0 1 2 ...

where R.npz is `python -m experiments.sentiment.export_reviews`'s file (its docstring has the
format). `pretrain` writes lm.npz (the parameters) and lm.json (settings, losses, held-out
perplexity), and with `--checkpoint-every N` keeps an Orbax checkpoint in OUT/checkpoints every N
steps, from which the same command resumes. `finetune` writes classifier-seedS.npz (dev's and
test's log-odds of 'positive' with IMDB's record indices, what ensemble.py's `--member` reads)
and classifier-seedS.json. With `--backward`, both read every review from its last word to its
first (ULMFiT's backward model; its classifier reads a review's last max_len words).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Any, Callable, Iterator, Mapping, Sequence

import flax.linen as nn
from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np
import optax

from pipelines.batching import Batcher
from pipelines.batching import Ragged
from pipelines.vocab import EOS_ID
from pipelines.vocab import SPECIALS
from pipelines.vocab import UNK_ID
import zoo

Params = Any
REVIEW_SPLITS = ("train", "dev", "test", "unlabelled")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """The network both stages share.

  Attributes:
    embed_dim: De, the word vectors' width (also the tied output layer's).
    hidden_size: H, the LSTM's state width.
    num_layers: stacked LSTM layers.
    word_dropout: the share of words whose whole input vector is dropped.
    dtype: 'float32' or 'bfloat16': the matmuls' dtype (parameters, LSTM gates and losses stay
      float32).
  """
  embed_dim: int = 256
  hidden_size: int = 1024
  num_layers: int = 1
  word_dropout: float = 0.1
  dtype: str = "float32"


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
  """Language-model pretraining.

  Attributes:
    window: L, the tokens of one training window.
    batch_size: windows per step.
    epochs: passes over the stream (fractions allowed); sets the steps unless `steps` does.
    steps: the optimizer steps (None: from `epochs`).
    time_budget_s: if set, the steps are cut, once the first steps are timed, to what fits this
      many seconds of training (the record says so); the cosine decays over the steps kept.
    output_dropout: dropout on the LSTM's outputs before the output layer.
    lr, warmup_steps, clip: the peak learning rate, its linear warm-up, the gradients' norm cap.
    seed: initialisation, dropout and the windows' offsets and order.
    log_every: the steps between the train loss's log lines (and its curve's points).
  """
  window: int = 256
  batch_size: int = 128
  epochs: float = 10.0
  steps: int | None = None
  time_budget_s: float | None = None
  output_dropout: float = 0.2
  lr: float = 2e-3
  warmup_steps: int = 200
  clip: float = 1.0
  seed: int = 0
  log_every: int = 100


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
  """Classifier fine-tuning.

  Attributes:
    epochs: passes over the labelled training reviews; dev's best epoch is kept.
    batch_size: reviews per step.
    max_len: a review's tokens kept (its first ones, unless `head` is given).
    widths: the padded widths of the length buckets (the last is max_len).
    dropout: dropout on the pooled features z.
    lr, warmup_fraction, clip: the peak learning rate, the share of the steps warming up to it,
      the gradients' norm cap.
    seed: the output layer's initialisation (and the trunk's, unpretrained), dropout, batch order.
    head: None, or of a review longer than max_len its first `head` tokens and its last
      max_len - head are kept (Sun et al. 2019's head+tail truncation; a review's end often
      holds its verdict).
    also_first: with `head`, a review longer than max_len is scored (for dev's choice of epoch
      and for test) by the mean of two log-odds: of its head and tail, and of its first max_len
      tokens, a second pass over the long reviews alone.
    adversarial: 0, or the L2 norm of each review's adversarial perturbation of its embedded
      words (`adversarial_perturbation`; Miyato et al. 2017's epsilon): each step's loss is the
      clean loss plus the loss at the perturbed embeddings (twice a plain step's work).
    adversarial_from: with `adversarial`, the first epoch (from 1) trained adversarially; the
      epochs before it are plain (a plain epoch costs about half an adversarial one).
    weight_drop: 0, or the share of the LSTM's recurrent weights (every `hidden_kernel`) dropped
      at each step (`drop_connect`; scoring uses them all).
  """
  epochs: int = 4
  batch_size: int = 64
  max_len: int = 512
  widths: tuple[int, ...] = (128, 256, 384, 512)
  dropout: float = 0.5
  lr: float = 5e-4
  warmup_fraction: float = 0.1
  clip: float = 1.0
  seed: int = 0
  head: int | None = None
  also_first: bool = False
  adversarial: float = 0.0
  adversarial_from: int = 1
  weight_drop: float = 0.0


# ---- reviews


@dataclasses.dataclass(frozen=True)
class Reviews:
  """The reviews of `export_reviews`' file: ids of the run's vocabulary, per split.

  Attributes:
    vocab_size: V.
    ids: split -> Ragged of token ids ('train', 'dev', 'test', 'unlabelled').
    labels: split -> int32 (N,) 0/1 for 'train', 'dev', 'test'.
    index: split -> int64 (N,), each review's index in IMDB's own split, for 'dev' and 'test'.
    source: what the file was exported from (a dict).
  """
  vocab_size: int
  ids: Mapping[str, Ragged]
  labels: Mapping[str, np.ndarray]
  index: Mapping[str, np.ndarray]
  source: Mapping[str, Any]


def load_reviews(path: str) -> Reviews:
  """Reads and checks an exported reviews file; a ValueError names what is missing or wrong."""
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no reviews file at {path}: write one with "
                            f"`python -m experiments.sentiment.export_reviews`")
  try:
    data = np.load(path)
    arrays = {key: data[key] for key in data.files}
  except Exception as e:  # a truncated or foreign file
    raise ValueError(f"{path} is not a readable .npz reviews file ({e})") from e
  wanted = ["vocab_size", "source"] + [f"{split}_{part}" for split in REVIEW_SPLITS
                                       for part in ("ids", "lengths")]
  wanted += [f"{split}_labels" for split in ("train", "dev", "test")]
  wanted += [f"{split}_index" for split in ("dev", "test")]
  missing = [key for key in wanted if key not in arrays]
  if missing:
    raise ValueError(f"{path} lacks {missing}: not a file of export_reviews")
  vocab_size = int(arrays["vocab_size"])
  ids = {}
  for split in REVIEW_SPLITS:
    flat, lengths = arrays[f"{split}_ids"].astype(np.int32), arrays[f"{split}_lengths"]
    if lengths.sum() != len(flat) or (lengths < 1).any():
      raise ValueError(f"{path}: {split}_lengths do not cut {split}_ids into non-empty reviews")
    if len(flat) and (flat.min() < 0 or flat.max() >= vocab_size):
      raise ValueError(f"{path}: {split}_ids outside the vocabulary [0, {vocab_size})")
    ids[split] = Ragged(flat, lengths.astype(np.int64))
  labels = {split: arrays[f"{split}_labels"].astype(np.int32) for split in ("train", "dev", "test")}
  for split, values in labels.items():
    if len(values) != len(ids[split]) or not np.isin(values, (0, 1)).all():
      raise ValueError(f"{path}: {split}_labels must hold one 0/1 label per review")
  index = {split: arrays[f"{split}_index"].astype(np.int64) for split in ("dev", "test")}
  for split, values in index.items():
    if len(values) != len(ids[split]):
      raise ValueError(f"{path}: {split}_index must hold one index per review")
  return Reviews(vocab_size, ids, labels, index, json.loads(str(arrays["source"])))


def cap_vocabulary(reviews: Reviews, size: int) -> Reviews:
  """The reviews with every id from `size` on replaced by UNK_ID: the vocabulary cut to its first
  `size` ids, which the pipeline's vocabularies rank by frequency (after the specials), so to the
  size - 4 most frequent words. A smaller output layer makes pretraining cheaper."""
  if not len(SPECIALS) < size <= reviews.vocab_size:
    raise ValueError(f"vocabulary cap: expected {len(SPECIALS) + 1} to {reviews.vocab_size} "
                     f"(the reviews' vocabulary), got {size}")
  ids = {split: Ragged(np.where(ragged.flat < size, ragged.flat, UNK_ID), ragged.lengths)
         for split, ragged in reviews.ids.items()}
  return dataclasses.replace(reviews, vocab_size=size, ids=ids,
                             source={**reviews.source, "vocab_cap": size})


def reverse_reviews(reviews: Reviews) -> Reviews:
  """The reviews with each one's ids in reverse order, for a model that reads them backward (the
  backward half of ULMFiT's pair): its language model predicts each word from the words after
  it, and its classifier reads a review's last max_len words, the verdict first. The record says
  so, so a backward language model is only fine-tuned on reversed reviews."""
  ids = {}
  for split, ragged in reviews.ids.items():
    starts = np.repeat(ragged.starts, ragged.lengths)  # (T,) each id's review's start
    ends = np.repeat(ragged.starts + ragged.lengths, ragged.lengths)
    ids[split] = Ragged(ragged.flat[starts + ends - 1 - np.arange(len(ragged.flat))],
                        ragged.lengths)
  return dataclasses.replace(reviews, ids=ids, source={**reviews.source, "reversed": True})


def head_and_tail(ragged: Ragged, max_len: int, head: int) -> Ragged:
  """Each sequence longer than `max_len` cut to its first `head` and its last max_len - head
  ids (in order); shorter ones kept whole. (Sun et al. 2019 found IMDB's BERT classifier best
  with the first 128 and the last 382 of 510 tokens.)"""
  if not 0 <= head <= max_len:
    raise ValueError(f"head: expected 0 to max_len ({max_len}) tokens, got {head}")
  lengths = ragged.lengths.astype(np.int64)
  at = np.arange(len(ragged.flat)) - np.repeat(ragged.starts, lengths)  # (T,) place in its review
  n = np.repeat(lengths, lengths)  # (T,) its review's length
  keep = (n <= max_len) | (at < head) | (at >= n - (max_len - head))
  return Ragged(ragged.flat[keep], np.minimum(lengths, max_len))


def lm_stream(reviews: Sequence[Ragged]) -> np.ndarray:
  """The reviews of every Ragged, each followed by EOS_ID, as one int32 stream (T,)."""
  parts = []
  for ragged in reviews:
    ends = np.cumsum(ragged.lengths)
    parts.append(np.insert(ragged.flat.astype(np.int32), ends, EOS_ID))
  return np.concatenate(parts)


def lm_windows(stream: np.ndarray, window: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
  """The stream from `offset` cut into (inputs, targets), each int32 (N, window): targets are the
  inputs shifted one token on; the tail that fills no whole window is left out."""
  if not 0 <= offset < window:
    raise ValueError(f"offset: expected 0 <= offset < window = {window}, got {offset}")
  count = (len(stream) - offset - 1) // window
  if count < 1:
    raise ValueError(f"a stream of {len(stream)} tokens fills no window of {window} + 1 tokens")
  end = offset + count * window
  return (stream[offset:end].reshape(count, window),
          stream[offset + 1:end + 1].reshape(count, window))


def epoch_batches(stream: np.ndarray, window: int, batch_size: int, seed: int,
                  epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """One epoch's (inputs, targets) batches, each (batch_size, window): windows at an offset, in
  an order, both drawn from (seed, epoch); the windows that fill no whole batch are left out."""
  rng = np.random.default_rng([seed, epoch])
  # An offset that leaves at least one window (a stream shorter than 2 windows has fewer offsets).
  offset = int(rng.integers(max(min(window, len(stream) - window), 1)))
  inputs, targets = lm_windows(stream, window, offset)
  order = rng.permutation(len(inputs))
  for start in range(0, len(order) - batch_size + 1, batch_size):
    rows = order[start:start + batch_size]
    yield inputs[rows], targets[rows]


def warmup_cosine(step: int, total: int, peak: float, warmup: int) -> float:
  """The learning rate of step `step` (0-based) of `total`: linear from peak/warmup up to the peak
  over `warmup` steps, then a cosine from the peak down to peak/10 at the last step."""
  if step < warmup:
    return peak * (step + 1) / warmup
  progress = (step - warmup) / max(total - warmup - 1, 1)
  return peak * (0.1 + 0.9 * 0.5 * (1.0 + np.cos(np.pi * min(progress, 1.0))))


# ---- models


def concat_pool(outputs: jax.Array, last: jax.Array, lengths: jax.Array) -> jax.Array:
  """[last state, max over time, mean over time] of each sequence's real steps.

  Args:
    outputs: (B, L, H), the LSTM's outputs (padded steps ignored).
    last: (B, H), the state after each sequence's last real token.
    lengths: int (B,), real steps per sequence, each >= 1.

  Returns:
    float32 (B, 3H).
  """
  outputs = outputs.astype(jnp.float32)
  return jnp.concatenate([last.astype(jnp.float32), zoo.masked_max_pool(outputs, lengths),
                          zoo.masked_mean_pool(outputs, lengths)], axis=-1)


class Trunk(nn.Module):
  """Embedding, word dropout and the LSTM, shared by both stages (see the module docstring)."""
  vocab_size: int
  config: ModelConfig

  def setup(self):
    c = self.config
    self.embed = nn.Embed(self.vocab_size, c.embed_dim, dtype=DTYPES[c.dtype])
    self.word_dropout = nn.Dropout(c.word_dropout, broadcast_dims=(2,))
    self.lstm = zoo.LSTM(c.hidden_size, c.num_layers, dtype=DTYPES[c.dtype])

  def __call__(self, tokens: jax.Array, lengths: jax.Array | None, deterministic: bool,
               perturbation: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """tokens int (B, L) -> (outputs (B, L, H), top layer's final h (B, H)); `perturbation`
    (B, L, De), if given, is added to the embedded words after the word dropout."""
    x = self.word_dropout(self.embed(tokens), deterministic=deterministic)  # (B, L, De)
    if perturbation is not None:
      x = x + perturbation.astype(x.dtype)
    outputs, finals = self.lstm(x, valid_lens=lengths)
    return outputs, finals[-1].h


class LanguageModel(nn.Module):
  """The pretraining network: logits of the next token at every step, output tied to input."""
  vocab_size: int
  config: ModelConfig
  output_dropout: float = 0.2

  def setup(self):
    self.trunk = Trunk(self.vocab_size, self.config)
    self.dropout = nn.Dropout(self.output_dropout)
    self.project = nn.Dense(self.config.embed_dim, dtype=DTYPES[self.config.dtype])
    self.output_bias = self.param("output_bias", nn.initializers.zeros_init(),
                                  (self.vocab_size,))

  def __call__(self, tokens: jax.Array, deterministic: bool = True) -> jax.Array:
    """tokens int (B, L) -> float32 logits (B, L, V)."""
    outputs, _ = self.trunk(tokens, None, deterministic)  # (B, L, H)
    query = self.project(self.dropout(outputs, deterministic=deterministic))  # (B, L, De)
    table = self.trunk.embed.variables["params"]["embedding"]  # (V, De), the input embedding
    logits = jnp.einsum("bld,vd->blv", query, table.astype(query.dtype),
                        preferred_element_type=jnp.float32)  # float32 even from bfloat16
    return logits + self.output_bias


class Classifier(nn.Module):
  """The fine-tuned network: two logits (negative, positive) per review."""
  vocab_size: int
  config: ModelConfig
  dropout: float = 0.5

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array, deterministic: bool = True,
               perturbation: jax.Array | None = None) -> jax.Array:
    """tokens int (B, L), lengths int (B,) >= 1 -> float32 logits (B, 2); `perturbation`
    (B, L, De) moves the embedded words (adversarial training)."""
    outputs, last = Trunk(self.vocab_size, self.config, name="trunk")(tokens, lengths,
                                                                       deterministic, perturbation)
    pooled = concat_pool(outputs, last, lengths)  # (B, 3H)
    pooled = nn.Dropout(self.dropout)(pooled, deterministic=deterministic)
    return nn.Dense(2, name="head")(pooled)


def lm_loss(logits: jax.Array, targets: jax.Array) -> jax.Array:
  """Mean next-token cross-entropy in nats: logits (B, L, V), targets int (B, L) -> ()."""
  return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def optimizer_for(clip: float) -> optax.GradientTransformation:
  """Adam's direction after clipping the gradients' global norm to `clip`; each step's learning
  rate scales it (the steps below), so that a schedule decided while training needs no rebuild."""
  return optax.chain(optax.clip_by_global_norm(clip), optax.scale_by_adam())


def _apply(params: Params, updates: Params, lr: jax.Array) -> Params:
  return jax.tree_util.tree_map(lambda p, u: p - lr * u, params, updates)


def lm_train_step(model: LanguageModel, optimizer: optax.GradientTransformation) -> Callable:
  """The pretraining's jitted step: (params, opt_state, inputs (B, L), targets (B, L), dropout
  key, lr) -> (params, opt_state, mean loss)."""
  @jax.jit
  def step(params, opt_state, inputs, targets, key, lr):
    def loss_fn(params):
      logits = model.apply({"params": params}, inputs, deterministic=False,
                           rngs={"dropout": key})
      return lm_loss(logits, targets)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return _apply(params, updates, lr), opt_state, loss
  return step


def adversarial_perturbation(gradient: jax.Array, epsilon: float) -> jax.Array:
  """Each review's gradient (B, L, De) scaled to L2 norm `epsilon` over its L x De entries
  (Miyato et al. 2017's r_adv); a review with a zero gradient (a batch's filler row) gets zeros.

  The gradient is first divided by its largest entry, so that tiny float32 gradients square
  without underflow.
  """
  gradient = gradient.astype(jnp.float32)
  largest = jnp.max(jnp.abs(gradient), axis=(1, 2), keepdims=True)  # (B, 1, 1)
  unit = gradient / jnp.where(largest > 0, largest, 1.0)
  norm = jnp.sqrt(jnp.sum(unit * unit, axis=(1, 2), keepdims=True))  # (B, 1, 1), >= 1 or 0
  return epsilon * unit / jnp.where(norm > 0, norm, 1.0)


def drop_connect(params: Params, key: jax.Array, rate: float,
                 name: str = "hidden_kernel") -> Params:
  """`params` with every leaf called `name` (the LSTM's W_hh, (n, H, 4H) a layer) DropConnect-ed:
  each entry zeroed with probability `rate` and the others scaled by 1 / (1 - rate), so that the
  expectation is the weights themselves; one mask a leaf (leaf i's from fold_in(key, i)), the
  other leaves as they are. rate 0 returns `params` itself."""
  if not 0.0 <= rate < 1.0:
    raise ValueError(f"weight drop: expected a rate in [0, 1), got {rate}")
  if rate == 0.0:
    return params
  flat = traverse_util.flatten_dict(params)
  dropped, count = {}, 0
  for path, value in flat.items():
    if path[-1] == name:
      keep = jax.random.bernoulli(jax.random.fold_in(key, count), 1.0 - rate, value.shape)
      value = jnp.where(keep, value / (1.0 - rate), 0.0).astype(value.dtype)
      count += 1
    dropped[path] = value
  if not count:
    raise ValueError(f"weight drop: no parameter called {name!r} in the model")
  return traverse_util.unflatten_dict(dropped)


def classifier_train_step(model: Classifier, optimizer: optax.GradientTransformation,
                          adversarial: float = 0.0, weight_drop: float = 0.0) -> Callable:
  """The fine-tuning's jitted step: (params, opt_state, tokens (B, L), lengths (B,), label (B,),
  weight (B,), dropout key, lr) -> (params, opt_state, losses): 'loss', the cross-entropy averaged
  over the real rows (weight 1; a batch's filler rows weigh 0), and with `adversarial` > 0 also
  'adversarial_loss', the same at the embedded words moved by `adversarial_perturbation` of the
  loss's gradient with respect to them; the parameters then follow the gradient of the sum (the
  same dropout masks in both passes). With `weight_drop` > 0 the LSTM's recurrent weights are
  DropConnect-ed (`drop_connect`, its mask from fold_in(key, 1), the same in both passes); the
  other dropouts' masks are those of a step without it."""
  embed_dim = model.config.embed_dim

  @jax.jit
  def step(params, opt_state, tokens, lengths, label, weight, key, lr):
    def loss_fn(params, perturbation):
      params = drop_connect(params, jax.random.fold_in(key, 1), weight_drop)
      logits = model.apply({"params": params}, tokens, lengths, deterministic=False,
                           perturbation=perturbation, rngs={"dropout": key})
      losses = optax.softmax_cross_entropy_with_integer_labels(logits, label)
      return jnp.sum(losses * weight) / jnp.maximum(jnp.sum(weight), 1.0)
    if not adversarial:
      loss, grads = jax.value_and_grad(loss_fn)(params, None)
      losses = {"loss": loss}
    else:
      zeros = jnp.zeros((*tokens.shape, embed_dim), jnp.float32)  # (B, L, De)
      loss, (grads, towards) = jax.value_and_grad(loss_fn, argnums=(0, 1))(params, zeros)
      perturbation = jax.lax.stop_gradient(adversarial_perturbation(towards, adversarial))
      adversarial_loss, more = jax.value_and_grad(loss_fn)(params, perturbation)
      grads = jax.tree_util.tree_map(jnp.add, grads, more)
      losses = {"loss": loss, "adversarial_loss": adversarial_loss}
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return _apply(params, updates, lr), opt_state, losses
  return step


# ---- pretraining


def pretrain(reviews: Reviews, model_config: ModelConfig, config: PretrainConfig,
             log: Callable[[str], None] = lambda _: None, checkpoint_dir: str | None = None,
             checkpoint_every: int | None = None) -> tuple[Params, dict[str, Any]]:
  """Trains the language model on the training and unlabelled reviews (module docstring).

  With `checkpoint_dir`, an Orbax checkpoint of the parameters, the optimizer's state, the dropout
  key and the position in the stream is kept there every `checkpoint_every` steps (a multiple of
  config.log_every), and a call that finds one resumes from it: its steps are those the
  uninterrupted run would have taken, to the bit on the same machine.

  Returns:
    (the LanguageModel's parameters, a record: settings, steps, the train loss along the way, the
     held-out loss and perplexity on dev's reviews, seconds).
  """
  stream = lm_stream([reviews.ids["train"], reviews.ids["unlabelled"]])  # (T,)
  held_out = lm_stream([reviews.ids["dev"]])
  if len(held_out) < config.window + 1:
    raise ValueError(f"dev's reviews hold {len(held_out)} tokens, too few for one held-out "
                     f"window of {config.window} + 1: choose a shorter --window")
  model = LanguageModel(reviews.vocab_size, model_config, config.output_dropout)
  per_epoch = len(lm_windows(stream, config.window, 0)[0]) // config.batch_size
  if per_epoch < 1:
    raise ValueError(f"the stream's {len(stream):,} tokens fill no batch of {config.batch_size} "
                     f"windows of {config.window}")
  total = config.steps if config.steps is not None else max(int(config.epochs * per_epoch), 1)
  planned = total
  key = jax.random.PRNGKey(config.seed)
  init_key, dropout_key = jax.random.split(key)
  params = model.init(init_key, jnp.ones((1, 8), jnp.int32))["params"]
  optimizer = optimizer_for(config.clip)
  opt_state = optimizer.init(params)

  step = lm_train_step(model, optimizer)

  @jax.jit
  def eval_loss(params, inputs, targets):  # summed nats, (B, L) each
    logits = model.apply({"params": params}, inputs)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).sum()

  def held_out_loss(params) -> float:
    inputs, targets = lm_windows(held_out, config.window, 0)
    total_nats = 0.0
    for start in range(0, len(inputs), config.batch_size):
      total_nats += float(eval_loss(params, inputs[start:start + config.batch_size],
                                    targets[start:start + config.batch_size]))
    return total_nats / inputs.size

  log(f"pretraining on {len(stream):,} tokens ({per_epoch} steps of {config.batch_size} x "
      f"{config.window} an epoch), {total} steps planned")
  identity = {"model": dataclasses.asdict(model_config), "pretraining": dataclasses.asdict(config),
              "vocab_size": reviews.vocab_size, "source": dict(reviews.source)}
  checkpoints = _Checkpoints(checkpoint_dir, checkpoint_every, config.log_every, identity)
  curve, losses, done, epoch, skip, before, timed_from = [], [], 0, 0, 0, 0.0, None
  resumed = checkpoints.restore({"params": params, "opt_state": opt_state,
                                 "dropout_key": dropout_key})
  if resumed is not None:
    state, meta = resumed
    params, opt_state, dropout_key = state["params"], state["opt_state"], state["dropout_key"]
    done, total, epoch, skip = meta["done"], meta["total"], meta["epoch"], meta["position"]
    curve, before = meta["curve"], meta["seconds"]
    log(f"resumed from {checkpoint_dir} at step {done}/{total}")
  started = time.perf_counter() - before
  while done < total:
    for position, (inputs, targets) in enumerate(epoch_batches(
        stream, config.window, config.batch_size, config.seed, epoch)):
      if position < skip:  # taken before the checkpoint this call resumed from
        continue
      if done == total:
        break
      dropout_key, key = jax.random.split(dropout_key)
      lr = warmup_cosine(done, total, config.lr, config.warmup_steps)
      params, opt_state, loss = step(params, opt_state, inputs, targets, key, lr)
      losses.append(loss)
      done += 1
      if config.time_budget_s is not None and done in (3, 23):
        # Time steps 4..23 (the first ones compile), then keep the steps the budget allows.
        loss.block_until_ready()
        if done == 3:
          timed_from = time.perf_counter()
        else:
          seconds_per_step = (time.perf_counter() - timed_from) / 20
          spent = time.perf_counter() - started
          fits = done + int((config.time_budget_s - spent) / seconds_per_step)
          total = max(min(total, fits), done)
          log(f"{seconds_per_step * 1e3:.1f} ms a step: {total} steps fit "
              f"{config.time_budget_s:.0f} s")
      if done % config.log_every == 0 or done == total:
        mean = float(jnp.mean(jnp.stack(losses)))
        losses = []
        curve.append({"step": done, "train_loss": round(mean, 4),
                      "seconds": round(time.perf_counter() - started, 1)})
        log(f"step {done}/{total}: train loss {mean:.4f}  lr {lr:.2e}  "
            f"{curve[-1]['seconds']:.0f} s")
      if checkpoints.due(done) and done < total:
        checkpoints.save({"params": params, "opt_state": opt_state, "dropout_key": dropout_key},
                         {"done": done, "total": total, "epoch": epoch, "position": position + 1,
                          "curve": curve, "seconds": time.perf_counter() - started})
    skip = 0
    epoch += 1
  train_s = time.perf_counter() - started
  held = held_out_loss(params)
  record = {
      "model": dataclasses.asdict(model_config), "pretraining": dataclasses.asdict(config),
      "vocab_size": reviews.vocab_size, "stream_tokens": int(len(stream)),
      "held_out_tokens": int(len(held_out)), "steps_per_epoch": per_epoch,
      "steps_planned": planned, "steps": done, "epochs": round(done / per_epoch, 3),
      "curve": curve, "held_out_loss": round(held, 4),
      "held_out_perplexity": round(float(np.exp(held)), 2),
      "train_seconds": round(train_s, 1), "device": jax.devices()[0].device_kind,
      "source": dict(reviews.source),
  }
  log(f"pretrained {done} steps ({record['epochs']} epochs) in {train_s:.0f} s; held-out "
      f"perplexity {record['held_out_perplexity']}")
  return params, record


class _Checkpoints:
  """pretrain's Orbax checkpoints (the latest one kept), or nothing when `folder` is None."""

  def __init__(self, folder: str | None, every: int | None, log_every: int,
               identity: Mapping[str, Any]):
    self.every, self.identity, self.manager = every, json.loads(json.dumps(identity)), None
    if folder is None:
      return
    if every is None or every < 1 or every % log_every:
      raise ValueError(f"checkpoint_every: expected a positive multiple of log_every "
                       f"({log_every}), got {every}")
    import orbax.checkpoint as ocp  # pylint: disable=import-outside-toplevel
    self.ocp = ocp
    self.manager = ocp.CheckpointManager(
        os.path.abspath(folder), item_names=("state", "meta"),
        options=ocp.CheckpointManagerOptions(max_to_keep=1, enable_async_checkpointing=False))

  def due(self, done: int) -> bool:
    return self.manager is not None and done % self.every == 0

  def save(self, state: Params, meta: Mapping[str, Any]) -> None:
    self.manager.save(meta["done"], args=self.ocp.args.Composite(
        state=self.ocp.args.StandardSave(state),
        meta=self.ocp.args.JsonSave({**meta, "identity": self.identity})))
    self.manager.wait_until_finished()

  def restore(self, like: Params) -> tuple[Params, dict[str, Any]] | None:
    """(state shaped as `like`, meta) of the latest checkpoint, or None; a ValueError if it was
    written by a run of other settings or reviews."""
    if self.manager is None or self.manager.latest_step() is None:
      return None
    step = self.manager.latest_step()
    meta = self.manager.restore(step, args=self.ocp.args.Composite(
        meta=self.ocp.args.JsonRestore()))["meta"]
    if meta["identity"] != self.identity:
      raise ValueError(f"the checkpoint in {self.manager.directory} is of a run with other "
                       f"settings or reviews ({meta['identity']}); remove it to start afresh")
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), like)
    state = self.manager.restore(step, args=self.ocp.args.Composite(
        state=self.ocp.args.StandardRestore(abstract)))["state"]
    return state, meta


def save_params(path: str, params: Params, record: Mapping[str, Any]) -> None:
  """The parameters (flattened, '/'-joined names) and the record (as JSON) in one .npz."""
  flat = {"/".join(k): np.asarray(v) for k, v in traverse_util.flatten_dict(params).items()}
  tmp = f"{path}.tmp{os.getpid()}.npz"
  np.savez(tmp, record=json.dumps(dict(record)), **flat)
  os.replace(tmp, path)


def load_params(path: str) -> tuple[Params, dict[str, Any]]:
  """(parameters, record) of `save_params`'s file."""
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no pretrained language model at {path}: write one with "
                            f"`lstm_lm.py pretrain`")
  data = np.load(path)
  if "record" not in data.files:
    raise ValueError(f"{path} is not a file of lstm_lm.py pretrain (no record)")
  flat = {tuple(k.split("/")): jnp.asarray(data[k]) for k in data.files if k != "record"}
  return traverse_util.unflatten_dict(flat), json.loads(str(data["record"]))


# ---- fine-tuning


def _classifier_batcher(ids: Ragged, labels: np.ndarray, config: FinetuneConfig,
                        head: int | None = None) -> Batcher:
  """The reviews `ids` (N,) cut to config.max_len: their first ids, or with `head` their head
  and tail; each batch's 'row' is its reviews' places in `ids`."""
  widths = tuple(w for w in config.widths if w < config.max_len) + (config.max_len,)
  if head is not None:
    ids = head_and_tail(ids, config.max_len, head)
  return Batcher({"tokens": ids}, {"label": labels, "row": np.arange(len(ids), dtype=np.int64)},
                 boundaries=widths, batch_size=config.batch_size, process_index=0,
                 process_count=1)


def finetune(reviews: Reviews, model_config: ModelConfig, config: FinetuneConfig,
             trunk: Params | None, log: Callable[[str], None] = lambda _: None
             ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
  """Trains the classifier on the labelled training reviews, the trunk from `trunk` (a
  LanguageModel's params['trunk']; None: from scratch), and keeps dev's best epoch.

  Returns:
    (a record: per epoch the train loss and dev accuracy, the chosen epoch, dev's and test's
     accuracy, seconds; 'dev' and 'test' -> float64 (N,) log-odds of 'positive' at that epoch,
     and with also_first 'SPLIT_long_rows' -> (N_long,) the long reviews' rows and
     'SPLIT_long_head_and_tail' and 'SPLIT_long_first' -> (N_long,) either view's log-odds).
  """
  if config.also_first and config.head is None:
    raise ValueError("also_first: scores a second view beside the head and tail; give head too")
  if not config.adversarial >= 0:
    raise ValueError(f"adversarial: expected a perturbation norm >= 0 (0: none), "
                     f"got {config.adversarial}")
  if config.adversarial and not 1 <= config.adversarial_from <= config.epochs:
    raise ValueError(f"adversarial_from: expected an epoch from 1 to {config.epochs} (the "
                     f"epochs), got {config.adversarial_from}")
  if not 0.0 <= config.weight_drop < 1.0:
    raise ValueError(f"weight_drop: expected a share of the recurrent weights in [0, 1), "
                     f"got {config.weight_drop}")
  model = Classifier(reviews.vocab_size, model_config, config.dropout)
  train = _classifier_batcher(reviews.ids["train"], reviews.labels["train"], config, config.head)
  scored = {split: _classifier_batcher(reviews.ids[split], reviews.labels[split], config,
                                       config.head) for split in ("dev", "test")}
  long = {split: np.flatnonzero(reviews.ids[split].lengths > config.max_len)  # (N_long,) rows
          for split in ("dev", "test")} if config.also_first else {}
  firsts = {split: _classifier_batcher(reviews.ids[split].take(rows),
                                       reviews.labels[split][rows], config)
            for split, rows in long.items()}
  per_epoch = train.num_examples // config.batch_size
  total = config.epochs * per_epoch
  warmup = max(int(config.warmup_fraction * total), 1)
  init_key, dropout_key = jax.random.split(jax.random.PRNGKey(config.seed))
  params = model.init(init_key, jnp.ones((1, 8), jnp.int32), jnp.full((1,), 8))["params"]
  if trunk is not None:
    mine = jax.tree_util.tree_structure(params["trunk"])
    if jax.tree_util.tree_structure(trunk) != mine or any(
        a.shape != b.shape for a, b in zip(jax.tree_util.tree_leaves(trunk),
                                           jax.tree_util.tree_leaves(params["trunk"]))):
      raise ValueError("the pretrained trunk's parameters do not fit this classifier: pretrain "
                       "and fine-tune with the same model settings and vocabulary")
    params = {**params, "trunk": trunk}
  optimizer = optimizer_for(config.clip)
  opt_state = optimizer.init(params)

  plain_step = classifier_train_step(model, optimizer, 0.0, config.weight_drop)
  adversarial_step = (classifier_train_step(model, optimizer, config.adversarial,
                                            config.weight_drop)
                      if config.adversarial else plain_step)

  @jax.jit
  def log_odds(params, tokens, lengths):
    logits = model.apply({"params": params}, tokens, lengths)
    return logits[:, 1] - logits[:, 0]

  def score_view(params, batcher: Batcher) -> np.ndarray:
    out = np.zeros(batcher.num_examples)
    for batch in batcher.eval_batches():
      real = batch["weight"] > 0
      values = np.asarray(log_odds(params, batch["tokens"], batch["tokens_len"]))
      out[batch["row"][real]] = values[real]
    return out

  def score(params, split: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(N,) log-odds of `split`'s reviews, and with also_first the long reviews' (N_long,)
    log-odds of either view."""
    out = score_view(params, scored[split])
    if split not in firsts:
      return out, {}
    views = {"head_and_tail": out[long[split]], "first": score_view(params, firsts[split])}
    out[long[split]] = (views["head_and_tail"] + views["first"]) / 2
    return out, views

  started, epochs, best, chosen, done = time.perf_counter(), [], -1.0, 0, 0
  best_params, kept, views = params, {}, {}
  batches = train.train_batches(config.seed)
  for epoch in range(config.epochs):
    losses = []  # per step {'loss': (), and with adversarial 'adversarial_loss': ()}
    step = adversarial_step if epoch + 1 >= config.adversarial_from else plain_step
    for _ in range(per_epoch):
      batch = next(batches)
      dropout_key, key = jax.random.split(dropout_key)
      lr = warmup_cosine(done, total, config.lr, warmup)
      params, opt_state, step_losses = step(params, opt_state, batch["tokens"],
                                            batch["tokens_len"], batch["label"], batch["weight"],
                                            key, lr)
      losses.append(step_losses)
      done += 1
    means = {name: round(float(jnp.mean(jnp.stack([row[name] for row in losses]))), 4)
             for name in losses[0]}
    dev, dev_views = score(params, "dev")
    dev_accuracy = float(np.mean((dev > 0) == (reviews.labels["dev"] == 1)))
    epochs.append({"epoch": epoch + 1, "train_loss": means["loss"],
                   **({"adversarial_loss": means["adversarial_loss"]}
                      if "adversarial_loss" in means else {}),
                   "dev_accuracy": dev_accuracy,
                   "seconds": round(time.perf_counter() - started, 1)})
    adversarial = (f" (adversarial {means['adversarial_loss']:.4f})"
                   if "adversarial_loss" in means else "")
    log(f"fine-tuning epoch {epoch + 1}: train loss {means['loss']:.4f}{adversarial}  dev "
        f"{dev_accuracy:.4f}  {epochs[-1]['seconds']:.0f} s")
    if dev_accuracy > best:  # the first of the best
      best, chosen, best_params = dev_accuracy, epoch + 1, params
      kept["dev"], views["dev"] = dev, dev_views
  kept["test"], views["test"] = score(best_params, "test")  # once, for the chosen epoch alone

  def accuracy(values: np.ndarray, split: str, rows: np.ndarray | slice = slice(None)) -> float:
    return float(np.mean((values > 0) == (reviews.labels[split][rows] == 1)))

  accuracies = {f"{split}_accuracy": accuracy(kept[split], split) for split in ("dev", "test")}
  if config.also_first:  # the long reviews' accuracy by either view and by their mean
    for split, rows in long.items():
      kept[f"{split}_long_rows"] = rows
      kept.update({f"{split}_long_{view}": values for view, values in views[split].items()})
    accuracies["long_reviews"] = {split: {
        "count": len(rows), **{view: accuracy(views[split][view], split, rows)
                               for view in ("head_and_tail", "first")},
        "mean": accuracy(kept[split][rows], split, rows)} for split, rows in long.items()}
  record = {"model": dataclasses.asdict(model_config), "finetuning": dataclasses.asdict(config),
            "pretrained": trunk is not None, "epochs": epochs, "chosen_epoch": chosen,
            **accuracies, "seconds": round(time.perf_counter() - started, 1),
            "device": jax.devices()[0].device_kind, "source": dict(reviews.source)}
  return record, kept


def save_member(path: str, index: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray],
                log_odds: Mapping[str, np.ndarray], record: Mapping[str, Any]) -> None:
  """What ensemble.py's `--member` and blend.py read (the one writer of that format, which
  `ensemble.py --save-members` uses too): dev's and test's log-odds (split -> (N,)) with IMDB's
  record `index` and `labels` (split -> (N,)), and the record as JSON; `log_odds`' other arrays
  (finetune's views) are kept beside them. Written whole or not at all."""
  tmp = f"{path}.tmp{os.getpid()}.npz"
  np.savez(tmp, record=json.dumps(dict(record)),
           **{f"{split}_{part}": np.asarray(values[split]) for split in ("dev", "test")
              for part, values in (("log_odds", log_odds), ("index", index),
                                   ("labels", labels))},
           **{name: values for name, values in log_odds.items() if name not in ("dev", "test")})
  os.replace(tmp, path)


# ---- command line


def _model_config(args: argparse.Namespace) -> ModelConfig:
  return ModelConfig(args.embed_dim, args.hidden_size, args.num_layers, args.word_dropout,
                     args.dtype)


def _add_model_flags(parser: argparse.ArgumentParser) -> None:
  d = ModelConfig()
  parser.add_argument("--vocab-cap", type=int, default=None,
                      help="keep the vocabulary's first N ids (its N - 4 most frequent words), "
                           "the rest as unk (default: all)")
  parser.add_argument("--backward", action="store_true",
                      help="read every review from its last word to its first (the reviews "
                           "reversed; a backward model is only fine-tuned from a backward one)")
  parser.add_argument("--embed-dim", type=int, default=d.embed_dim)
  parser.add_argument("--hidden-size", type=int, default=d.hidden_size)
  parser.add_argument("--num-layers", type=int, default=d.num_layers)
  parser.add_argument("--word-dropout", type=float, default=d.word_dropout)
  parser.add_argument("--dtype", choices=sorted(DTYPES), default=d.dtype)


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="lstm_lm.py", description=__doc__.split("\n\n")[0])
  commands = parser.add_subparsers(dest="command", required=True)
  p = commands.add_parser("pretrain", help="pretrain the language model")
  p.add_argument("--reviews", required=True, help="export_reviews' .npz file")
  p.add_argument("--out", required=True, help="the folder for lm.npz and lm.json")
  _add_model_flags(p)
  d = PretrainConfig()
  p.add_argument("--window", type=int, default=d.window)
  p.add_argument("--batch-size", type=int, default=d.batch_size)
  p.add_argument("--epochs", type=float, default=d.epochs)
  p.add_argument("--steps", type=int, default=None)
  p.add_argument("--time-budget-s", type=float, default=None)
  p.add_argument("--output-dropout", type=float, default=d.output_dropout)
  p.add_argument("--lr", type=float, default=d.lr)
  p.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
  p.add_argument("--seed", type=int, default=d.seed)
  p.add_argument("--log-every", type=int, default=d.log_every)
  p.add_argument("--checkpoint-every", type=int, default=None,
                 help="keep an Orbax checkpoint in OUT/checkpoints every N steps (a multiple of "
                      "--log-every), from which the same command resumes (default: none)")
  f = commands.add_parser("finetune", help="fine-tune classifiers, one per seed")
  f.add_argument("--reviews", required=True, help="export_reviews' .npz file")
  f.add_argument("--pretrained", help="pretrain's lm.npz (left out: the trunk from scratch)")
  f.add_argument("--out", required=True, help="the folder for classifier-seedS.{npz,json}")
  f.add_argument("--seeds", type=int, nargs="+", default=[0])
  _add_model_flags(f)
  d = FinetuneConfig()
  f.add_argument("--epochs", type=int, default=d.epochs)
  f.add_argument("--batch-size", type=int, default=d.batch_size)
  f.add_argument("--max-len", type=int, default=d.max_len)
  f.add_argument("--widths", type=int, nargs="+", default=list(d.widths),
                 help="the length buckets' padded widths (those under --max-len are kept)")
  f.add_argument("--dropout", type=float, default=d.dropout)
  f.add_argument("--lr", type=float, default=d.lr)
  f.add_argument("--deadline-s", type=float, default=None,
                 help="start no further seed once this many seconds have passed")
  f.add_argument("--head", type=int, default=None,
                 help="of a review longer than --max-len keep its first HEAD tokens and its last "
                      "max-len - HEAD (default: its first max-len)")
  f.add_argument("--also-first", action="store_true",
                 help="with --head, score a review longer than --max-len by the mean log-odds of "
                      "its head and tail and of its first max-len tokens")
  f.add_argument("--adversarial", type=float, default=d.adversarial, metavar="EPS",
                 help="adversarial training (Miyato et al. 2017): add the loss at each review's "
                      "embedded words moved by L2 norm EPS along the loss's gradient; twice a "
                      "step's work (default: 0, none)")
  f.add_argument("--adversarial-from", type=int, default=d.adversarial_from, metavar="EPOCH",
                 help="with --adversarial, train plainly before this epoch (from 1) and "
                      "adversarially from it (default: 1, every epoch)")
  f.add_argument("--weight-drop", type=float, default=d.weight_drop, metavar="P",
                 help="DropConnect on the LSTM's recurrent weights while fine-tuning (AWD-LSTM's "
                      "weight drop): each step drops this share of W_hh's entries (default: 0)")
  return parser


def _log(message: str) -> None:
  print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  command = " ".join(["lstm_lm.py", *argv])  # what the records say made them
  parser = _parser()
  args = parser.parse_args(argv)
  try:
    return _run(args, command)
  except (FileNotFoundError, ValueError) as error:  # a missing or wrong file, a bad setting
    parser.error(str(error))
    raise  # unreachable: parser.error exits


def _run(args: argparse.Namespace, command: str) -> int:
  started = time.perf_counter()
  reviews = load_reviews(args.reviews)
  if args.vocab_cap is not None:
    reviews = cap_vocabulary(reviews, args.vocab_cap)
  if args.backward:
    reviews = reverse_reviews(reviews)
  os.makedirs(args.out, exist_ok=True)
  model_config = _model_config(args)
  if args.command == "pretrain":
    config = PretrainConfig(args.window, args.batch_size, args.epochs, args.steps,
                            args.time_budget_s, args.output_dropout, args.lr, args.warmup_steps,
                            seed=args.seed, log_every=args.log_every)
    params, record = pretrain(
        reviews, model_config, config, _log, checkpoint_every=args.checkpoint_every,
        checkpoint_dir=(os.path.join(args.out, "checkpoints") if args.checkpoint_every else None))
    record["command"] = command
    save_params(os.path.join(args.out, "lm.npz"), params, record)
    with open(os.path.join(args.out, "lm.json"), "w") as f:
      json.dump(record, f, indent=1)
    return 0
  trunk, pretrained = None, None
  if args.pretrained:
    params, pretrained = load_params(args.pretrained)
    if pretrained["model"] != dataclasses.asdict(model_config):
      raise SystemExit(f"lstm_lm.py: {args.pretrained} was pretrained with {pretrained['model']}, "
                       f"not this command's {dataclasses.asdict(model_config)}")
    if pretrained["vocab_size"] != reviews.vocab_size:
      raise SystemExit(f"lstm_lm.py: {args.pretrained} was pretrained on a vocabulary of "
                       f"{pretrained['vocab_size']:,} ids, this command's reviews have "
                       f"{reviews.vocab_size:,}: give --vocab-cap as pretraining did")
    if pretrained["source"].get("reversed", False) != args.backward:
      wrote, reads = ("forward", "backward") if args.backward else ("backward", "forward")
      raise SystemExit(f"lstm_lm.py: {args.pretrained} reads the reviews {wrote}, this command "
                       f"{reads}: give --backward to both commands or to neither")
    if pretrained["source"] != dict(reviews.source):
      raise SystemExit(f"lstm_lm.py: {args.pretrained} was pretrained on the reviews of "
                       f"{pretrained['source']}, not on {args.reviews}'s {dict(reviews.source)}: "
                       f"its word ids would mean other words")
    trunk = params["trunk"]
  for seed in args.seeds:
    if args.deadline_s is not None and time.perf_counter() - started > args.deadline_s:
      _log(f"seed {seed} not started: {args.deadline_s:.0f} s passed")
      break
    config = FinetuneConfig(args.epochs, args.batch_size, args.max_len, tuple(args.widths),
                            dropout=args.dropout, lr=args.lr, seed=seed, head=args.head,
                            also_first=args.also_first, adversarial=args.adversarial,
                            adversarial_from=args.adversarial_from,
                            weight_drop=args.weight_drop)
    record, log_odds = finetune(reviews, model_config, config, trunk, _log)
    record["command"] = command
    if pretrained is not None:
      record["pretrained_from"] = {"file": args.pretrained, "steps": pretrained["steps"],
                                   "held_out_perplexity": pretrained["held_out_perplexity"]}
    name = os.path.join(args.out, f"classifier-seed{seed}")
    save_member(f"{name}.npz", reviews.index, reviews.labels, log_odds, record)
    with open(f"{name}.json", "w") as f:
      json.dump(record, f, indent=1)
    _log(f"seed {seed} ({'pretrained' if trunk is not None else 'from scratch'}): dev "
         f"{record['dev_accuracy']:.4f}  test {record['test_accuracy']:.4f}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
