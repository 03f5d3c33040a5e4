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

The runs `python -m experiments train sentiment --model lstm_lm` and `--model
lstm_lm_classifier` train them on the engine (lm_tasks.py, lm_configs.py): Adam on gradients
clipped to a global norm, the learning rate warmed up linearly and then decayed along a cosine to
a tenth of its peak at the last step (optimizer.schedule 'cosine_to_last'). This file holds the
networks and the pure functions on the reviews' ids they read; `save_member` writes the member
files that ensemble.py and blend.py read.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Iterator, Mapping, Sequence

import flax.linen as nn
from flax import traverse_util
import jax
import jax.numpy as jnp
import numpy as np

from pipelines.batching import Ragged
from pipelines.vocab import EOS_ID
from pipelines.vocab import SPECIALS
from pipelines.vocab import UNK_ID
import zoo

Params = Any
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


# ---- the reviews' ids


def cap_ids(ragged: Ragged, size: int, vocab_size: int) -> Ragged:
  """The sequences with every id from `size` on replaced by UNK_ID: the vocabulary (of
  `vocab_size` ids) cut to its first `size` ids, which the pipeline's vocabularies rank by
  frequency (after the specials), so to the size - 4 most frequent words."""
  if not len(SPECIALS) < size <= vocab_size:
    raise ValueError(f"vocabulary cap: expected {len(SPECIALS) + 1} to {vocab_size} "
                     f"(the reviews' vocabulary), got {size}")
  return Ragged(np.where(ragged.flat < size, ragged.flat, UNK_ID), ragged.lengths)


def reverse_each(ragged: Ragged) -> Ragged:
  """The sequences with each one's ids in reverse order."""
  starts = np.repeat(ragged.starts, ragged.lengths)  # (T,) each id's sequence's start
  ends = np.repeat(ragged.starts + ragged.lengths, ragged.lengths)
  return Ragged(ragged.flat[starts + ends - 1 - np.arange(len(ragged.flat))], ragged.lengths)


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
