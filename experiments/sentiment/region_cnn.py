"""Region embeddings learned from unlabelled reviews, and a one-layer CNN over them, as a sentiment
model of the ensemble (after Johnson and Zhang, 2015, "Semi-supervised convolutional neural
networks for text categorization via region embedding").

Pretraining, without labels, on the labelled training reviews and IMDB's unlabelled ones (a
"tv-embedding": a region's vector is trained to predict the words around it):

  r_t    = the p words centred at t (p odd; offsets -(p-1)/2 .. (p-1)/2 within the review)
  u_t    = relu(sum_{w in r_t} E_w + b)                                             (D,)
  c_t    = the words of the two regions of p words on either side of r_t, within the review, each
           kept with word2vec's subsampling probability min(1, sqrt(s / f_w)) (f_w: the word's
           share of all tokens), never pad, unk, bos or eos
  loss_t = sum_{w in c_t} softplus(-(U_w . u_t + c_w)) + sum_{k negatives n ~ unigram^0.75}
           softplus(U_n . u_t + c_n)                                     (negative sampling)

over positions t drawn uniformly from all the reviews' tokens. E, b are what the classifier keeps.

The classifier, on the labelled training reviews with E, b frozen:

  h_t    = relu(sum_{|j| <= q} W_{x_{t+j}} + sum_k A_k u_t^k + a)
                                                   (F,): the bag of the 2q+1 words at t, and the
                                                   region vector of each pretrained embedding k
                                                   (Johnson and Zhang combine several, of other
                                                   region widths; one is the default)
  z      = max over the review's positions t of h_t       (F,)
  logits = V dropout(z) + v                               (2,)

Adam with a cosine decay, the epoch with the best dev accuracy kept. `pretrain=False` leaves u out
(the supervised bag-of-words CNN alone, for comparison).
A pretrained embedding is a RegionEmbedding: E, b and the width p it was learned for.

Tokens are the pipeline's ids (pipelines.vocab: 0 pad, 1 unk, 2 bos, 3 eos); the pad id never
counts in a region.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Callable, Sequence

import flax.linen as nn
from flax import struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from pipelines.batching import Batcher
from pipelines.vocab import EOS_ID, PAD_ID

WIDTHS = (64, 128, 192, 256, 384, 512, 768, 1024)  # the classifier's padded widths (buckets)


@dataclasses.dataclass(frozen=True)
class RegionConfig:
  """The region embedding's and the CNN's settings (defaults: Johnson and Zhang's sizes, D 100 and
  F 1000, with the pretraining cut to fit the 2-core budget).

  Attributes:
    region: p, the pretrained region's width (odd).
    dim: D, the region vector's size.
    negatives: k, noise words per position.
    subsample: s, the subsampling threshold of the predicted words.
    pretrain_epochs: positions drawn, in passes over all the tokens (0: no pretraining).
    pretrain_batch: positions per step.
    pretrain_lr: Adam's rate, decayed linearly to a tenth.
    conv_region: 2q+1, the width of the classifier's bag of words (odd).
    features: F, the CNN's feature maps.
    epochs: passes over the labelled training reviews.
    batch_size: reviews per step.
    lr: Adam's peak rate (cosine decay to 0).
    dropout: on the pooled vector.
    max_len: reviews keep their first max_len tokens (at most the last of WIDTHS).
    seed: initializations, dropout, batch order and the pretraining's draws.
  """
  region: int = 5
  dim: int = 100
  negatives: int = 20
  subsample: float = 1e-4
  pretrain_epochs: float = 2.0
  pretrain_batch: int = 8192
  pretrain_lr: float = 3e-3
  conv_region: int = 3
  features: int = 1000
  epochs: int = 4
  batch_size: int = 32
  lr: float = 1e-3
  dropout: float = 0.5
  max_len: int = 1024
  seed: int = 0

  def __post_init__(self):
    for name in ("region", "conv_region"):
      if getattr(self, name) < 1 or getattr(self, name) % 2 == 0:
        raise ValueError(f"RegionConfig.{name} must be odd and positive, got "
                         f"{getattr(self, name)}")
    for name in ("dim", "negatives", "pretrain_batch", "features", "epochs", "batch_size"):
      if getattr(self, name) < 1:
        raise ValueError(f"RegionConfig.{name} must be at least 1, got {getattr(self, name)}")
    for name in ("pretrain_lr", "lr"):
      if not getattr(self, name) > 0:
        raise ValueError(f"RegionConfig.{name} must be positive, got {getattr(self, name)}")
    if self.pretrain_epochs < 0:
      raise ValueError(f"RegionConfig.pretrain_epochs must be >= 0, got {self.pretrain_epochs}")
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f"RegionConfig.dropout must be in [0, 1), got {self.dropout}")
    if not 1 <= self.max_len <= WIDTHS[-1]:
      raise ValueError(f"RegionConfig.max_len must be in [1, {WIDTHS[-1]}], got {self.max_len}")


# -- the math --------------------------------------------------------------------------------------

def centred(width: int) -> np.ndarray:
  """The offsets of a window of `width` (odd) words centred at 0: -(width-1)/2 .. (width-1)/2."""
  half = width // 2
  return np.arange(-half, half + 1)


def window_sum(x: jax.Array, width: int) -> jax.Array:
  """y[b, t] = sum of x[b, t + j] over the centred offsets j of `width`, zero outside the rows.

  Args:
    x: (B, L, F) per-position vectors (zero at padding).
    width: the odd window width.

  Returns:
    (B, L, F).
  """
  half = width // 2
  padded = jnp.pad(x, ((0, 0), (half, half), (0, 0)))
  length = x.shape[1]
  return sum(padded[:, half + j:half + j + length] for j in centred(width))


def region_vectors(table: jax.Array, bias: jax.Array, tokens: jax.Array, width: int) -> jax.Array:
  """u_t = relu(sum over the centred window of `width` of table[tokens] + bias), pad ids adding 0.

  Args:
    table: (V, D) region embedding E; bias: (D,).
    tokens: int (B, L), padded with PAD_ID.

  Returns:
    (B, L, D).
  """
  embedded = table[tokens] * (tokens != PAD_ID)[..., None].astype(table.dtype)  # (B, L, D)
  return jax.nn.relu(window_sum(embedded, width) + bias)


def bag_vectors(table: jax.Array, bias: jax.Array, regions: jax.Array) -> jax.Array:
  """relu(sum_j table[regions[:, j]] + bias) of regions given as rows of ids (pad ids add 0).

  Args:
    regions: int (N, p).

  Returns:
    (N, D): region_vectors of each row's centre, when a row is a review's window.
  """
  embedded = table[regions] * (regions != PAD_ID)[..., None].astype(table.dtype)  # (N, p, D)
  return jax.nn.relu(jnp.sum(embedded, axis=1) + bias)


def tv_loss(params: dict[str, jax.Array], regions: jax.Array, targets: jax.Array,
            target_mask: jax.Array, noise: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The pretraining's negative-sampling loss, summed over the words and averaged over positions.

  Args:
    params: 'embedding' (V, D), 'bias' (D,), 'output' (V, D), 'output_bias' (V,).
    regions: int (N, p), the region of each position.
    targets: int (N, 2p), the words of its two neighbouring regions.
    target_mask: float (N, 2p), 1 for a word that counts (within the review, kept).
    noise: int (N, k), the noise words.

  Returns:
    (loss, the share of counted target words scored above 0).
  """
  u = bag_vectors(params["embedding"], params["bias"], regions)  # (N, D)
  out, out_bias = params["output"], params["output_bias"]
  positive = jnp.einsum("nd,ntd->nt", u, out[targets]) + out_bias[targets]  # (N, 2p)
  negative = jnp.einsum("nd,nkd->nk", u, out[noise]) + out_bias[noise]  # (N, k)
  total = (jnp.sum(jax.nn.softplus(-positive) * target_mask)
           + jnp.sum(jax.nn.softplus(negative)))
  hit = jnp.sum((positive > 0) * target_mask) / jnp.maximum(jnp.sum(target_mask), 1.0)
  return total / regions.shape[0], hit


@struct.dataclass
class RegionEmbedding:
  """A pretrained region embedding: table E (V, D), bias b (D,), and its region width p (static
  under jit: each width compiles its own window sum)."""
  table: jax.Array
  bias: jax.Array
  region: int = struct.field(pytree_node=False)


class RegionCNN(nn.Module):
  """The classifier (module docstring): bag-of-words region features, plus A_k u_t^k from each
  frozen region embedding passed, relu, max over positions, dropout, dense to 2 logits. The
  first embedding's A is the parameter 'region', the k-th's (k >= 2) 'region_k'."""
  vocab_size: int
  features: int = 1000
  conv_region: int = 3
  dropout: float = 0.5

  @nn.compact
  def __call__(self, tokens: jax.Array, pretrained: Sequence[RegionEmbedding] = (), *,
               deterministic: bool = True) -> jax.Array:
    """tokens int (B, L) padded with PAD_ID; pretrained: the frozen embeddings (none: the
    bag-of-words CNN alone) -> logits (B, 2)."""
    valid = tokens != PAD_ID  # (B, L)
    words = nn.Embed(self.vocab_size, self.features,
                     embedding_init=nn.initializers.normal(0.01), name="words")(tokens)
    h = window_sum(words * valid[..., None], self.conv_region)  # (B, L, F)
    for k, embedding in enumerate(pretrained, start=1):
      table, bias = (jax.lax.stop_gradient(p) for p in (embedding.table, embedding.bias))
      u = region_vectors(table, bias, tokens, embedding.region)  # (B, L, D_k)
      name = "region" if k == 1 else f"region_{k}"
      h = h + nn.Dense(self.features, use_bias=False, name=name)(u)
    h = jax.nn.relu(h + self.param("bias", nn.initializers.zeros, (self.features,)))
    pooled = jnp.max(jnp.where(valid[..., None], h, 0.0), axis=1)  # (B, F); h >= 0
    pooled = nn.Dropout(self.dropout)(pooled, deterministic=deterministic)
    return nn.Dense(2, name="classifier")(pooled)


# -- pretraining ----------------------------------------------------------------------------------

class RegionSampler:
  """Draws pretraining positions (module docstring) from reviews of ids, with numpy.

  Args:
    reviews: the reviews, lists or 1-D arrays of ids.
    vocab_size: V.
    config: region, negatives, subsample, pretrain_batch.
    seed: numpy's generator seed.
  """

  def __init__(self, reviews: Sequence[Sequence[int]], vocab_size: int, config: RegionConfig,
               seed: int = 0):
    reviews = [np.asarray(r, np.int32) for r in reviews if len(r)]
    if not reviews:
      raise ValueError("RegionSampler: no review has a word")
    self.config = config
    ids = np.concatenate(reviews)
    if ids.min() < 0 or ids.max() >= vocab_size:
      raise ValueError(f"RegionSampler: ids must be in [0, {vocab_size}), got {ids.min()} .. "
                       f"{ids.max()}")
    self.tokens = int(ids.size)
    p = config.region
    self.edge = p + p // 2  # the farthest offset a position reads
    self.ids = np.pad(ids, self.edge)
    review_of = np.repeat(np.arange(len(reviews)), [len(r) for r in reviews])
    self.review_of = np.pad(review_of, self.edge, constant_values=-1)
    counts = np.bincount(ids, minlength=vocab_size).astype(np.float64)
    share = counts / counts.sum()
    self.keep = np.minimum(1.0, np.sqrt(config.subsample / np.maximum(share, 1e-12)))
    self.keep[:EOS_ID + 1] = 0.0  # pad, unk, bos, eos are never predicted
    noise = counts ** 0.75
    noise[:EOS_ID + 1] = 0.0
    if noise.sum() == 0:
      raise ValueError("RegionSampler: the reviews hold no word but pad, unk, bos and eos")
    self.noise_cdf = np.cumsum(noise / noise.sum())
    self.region_offsets = centred(p)
    self.target_offsets = np.concatenate([self.region_offsets - p, self.region_offsets + p])
    self.rng = np.random.default_rng(seed)

  def batch(self) -> tuple[np.ndarray, ...]:
    """(regions int32 (N, p), targets int32 (N, 2p), target_mask float32 (N, 2p),
    noise int32 (N, k)), N = pretrain_batch."""
    n, rng = self.config.pretrain_batch, self.rng
    t = rng.integers(0, self.tokens, n) + self.edge  # (N,) positions in the padded stream
    own = self.review_of[t][:, None]
    region_at = t[:, None] + self.region_offsets
    regions = np.where(self.review_of[region_at] == own, self.ids[region_at], PAD_ID)
    target_at = t[:, None] + self.target_offsets
    targets = self.ids[target_at]
    mask = (self.review_of[target_at] == own) & (rng.random(targets.shape) < self.keep[targets])
    noise = np.minimum(np.searchsorted(self.noise_cdf, rng.random((n, self.config.negatives))),
                       len(self.noise_cdf) - 1)
    return (regions.astype(np.int32), targets.astype(np.int32), mask.astype(np.float32),
            noise.astype(np.int32))


def pretrain(reviews: Sequence[Sequence[int]], vocab_size: int, config: RegionConfig,
             log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
  """Learns the region embedding on `reviews` (no labels).

  Returns:
    {'embedding': (V, D), 'bias': (D,), 'steps', 'first_loss' (the first step's), 'loss' (the
    last 100 steps' mean), 'seconds'}.
  """
  sampler = RegionSampler(reviews, vocab_size, config, config.seed)
  steps = max(1, int(round(config.pretrain_epochs * sampler.tokens / config.pretrain_batch)))
  key = jax.random.PRNGKey(config.seed)
  params = {"embedding": jax.random.normal(key, (vocab_size, config.dim)) * 0.1,
            "bias": jnp.zeros(config.dim), "output": jnp.zeros((vocab_size, config.dim)),
            "output_bias": jnp.zeros(vocab_size)}
  optimizer = optax.adam(optax.linear_schedule(config.pretrain_lr, config.pretrain_lr / 10,
                                               steps))
  state = optimizer.init(params)

  @jax.jit
  def step(params, state, *batch):
    (loss, hit), grads = jax.value_and_grad(tv_loss, has_aux=True)(params, *batch)
    updates, state = optimizer.update(grads, state, params)
    return optax.apply_updates(params, updates), state, loss, hit

  # The losses stay on the device until a log line needs them, so that numpy draws the next
  # batch while XLA computes the step.
  started, recent, first = time.perf_counter(), [], None
  for i in range(steps):
    params, state, loss, hit = step(params, state, *sampler.batch())
    recent = (recent + [loss])[-100:]
    if first is None:
      first = float(loss)
    if (i + 1) % 500 == 0 or i + 1 == steps:
      log(f"region embedding: step {i + 1}/{steps}  loss {float(jnp.mean(jnp.stack(recent))):.4f}"
          f"  neighbours scored > 0 {float(hit):.3f}  {time.perf_counter() - started:.0f} s")
  return {"embedding": params["embedding"], "bias": params["bias"], "steps": steps,
          "first_loss": first, "loss": float(jnp.mean(jnp.stack(recent))),
          "seconds": round(time.perf_counter() - started, 1)}


PRETRAINING_FIELDS = ("region", "dim", "negatives", "subsample", "pretrain_epochs",
                      "pretrain_batch", "pretrain_lr", "seed")
"""The RegionConfig fields that shape a pretrained embedding (saved with it)."""


def save_embedding(path: str, pretrained: dict[str, Any], config: RegionConfig) -> None:
  """Writes `pretrain`'s region embedding (E, b) and the settings it was learned with
  (PRETRAINING_FIELDS of `config`, as JSON) to `path` (.npz), for `load_embedding`."""
  settings = {name: getattr(config, name) for name in PRETRAINING_FIELDS}
  np.savez(path, embedding=np.asarray(pretrained["embedding"], np.float32),
           bias=np.asarray(pretrained["bias"], np.float32), region=config.region,
           steps=pretrained["steps"], loss=pretrained["loss"], settings=json.dumps(settings))


def load_embedding(path: str, vocab_size: int, region: int | None = None) -> RegionEmbedding:
  """The embedding saved by `save_embedding`, with the region width it was learned for.

  Args:
    path: the .npz file.
    vocab_size: the ids the classifier reads: the file's table must have a row for each.
    region: the width the caller needs (None: whichever the file holds).

  Raises:
    ValueError: naming the file, when it cannot be read, lacks an array, or was learned for
      another vocabulary size or (given `region`) another region width.
  """
  try:
    with np.load(path) as saved:
      arrays = {name: saved[name] for name in ("embedding", "bias", "region")}
  except (OSError, ValueError, KeyError) as error:
    raise ValueError(f"{path}: not a region embedding saved by region_cnn.save_embedding "
                     f"({error})") from None
  table, bias = arrays["embedding"], arrays["bias"]
  if table.ndim != 2 or table.shape[0] != vocab_size or bias.shape != (table.shape[1],):
    raise ValueError(f"{path}: the embedding is {table.shape} with bias {bias.shape}, but this "
                     f"run's vocabulary has {vocab_size} ids: it was pretrained on another run's "
                     f"data")
  if region is not None and int(arrays["region"]) != region:
    raise ValueError(f"{path}: pretrained with regions of {int(arrays['region'])} words, but "
                     f"the classifier reads regions of {region}")
  return RegionEmbedding(jnp.asarray(table), jnp.asarray(bias), int(arrays["region"]))


def embedding_record(path: str) -> dict[str, Any]:
  """What a file of `save_embedding` says of its own pretraining: its steps, last loss and
  settings (PRETRAINING_FIELDS; files written before the settings were saved give their region
  width and size only, read from the arrays)."""
  with np.load(path) as saved:
    table = saved["embedding"]
    record = {"steps": int(saved["steps"]), "loss": float(saved["loss"])}
    if "settings" in saved.files:
      record["settings"] = json.loads(str(saved["settings"]))
    else:
      record["settings"] = {"region": int(saved["region"]), "dim": int(table.shape[1])}
  return record


# -- the classifier -------------------------------------------------------------------------------

def _batcher(reviews: Sequence[Sequence[int]], labels: np.ndarray, batch_size: int,
             max_len: int) -> Batcher:
  widths = tuple(w for w in WIDTHS if w < max_len) + (max_len,)
  return Batcher({"tokens": [np.asarray(r[:max_len], np.int32) for r in reviews]},
                 {"label": np.asarray(labels, np.int32),
                  "index": np.arange(len(reviews), dtype=np.int32)},
                 boundaries=widths, batch_size=batch_size, process_index=0, process_count=1)


def fit_classifier(reviews: dict[str, Sequence[Sequence[int]]], labels: dict[str, np.ndarray],
                   vocab_size: int, config: RegionConfig,
                   pretrained: Sequence[RegionEmbedding] = (),
                   log: Callable[[str], None] = lambda _: None
                   ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
  """Trains RegionCNN on reviews['train'] and keeps the epoch with the best dev accuracy.

  Args:
    reviews, labels: 'train', 'dev' and any other splits to score ('test').
    pretrained: the frozen region embeddings (`pretrain`'s, or `load_embedding`'s); none for the
      bag-of-words CNN alone.

  Returns:
    (record: per epoch the train loss and dev accuracy, the chosen epoch, seconds;
     split -> log-odds of 'positive' float64 (N,) at the chosen epoch, for every split but train).
  """
  for split in ("train", "dev"):
    if split not in reviews or not len(reviews[split]):
      raise ValueError(f"fit_classifier needs reviews in the split {split!r}")
  pretrained = tuple(pretrained)
  model = RegionCNN(vocab_size, config.features, config.conv_region, config.dropout)
  train = _batcher(reviews["train"], labels["train"], config.batch_size, config.max_len)
  scored = {split: _batcher(reviews[split], labels[split], config.batch_size, config.max_len)
            for split in reviews if split != "train"}
  per_epoch = train.num_examples // config.batch_size
  key = jax.random.PRNGKey(config.seed)
  init_key, dropout_key = jax.random.split(key)
  params = model.init(init_key, jnp.ones((1, 8), jnp.int32), pretrained)["params"]
  optimizer = optax.adam(optax.cosine_decay_schedule(config.lr, config.epochs * per_epoch))
  state = optimizer.init(params)

  # The frozen table is an argument, not a closed-over constant that every compiled width would
  # embed.
  @jax.jit
  def step(params, state, tokens, label, weight, key, pretrained):
    def loss_fn(params):
      logits = model.apply({"params": params}, tokens, pretrained, deterministic=False,
                           rngs={"dropout": key})
      losses = optax.softmax_cross_entropy_with_integer_labels(logits, label)
      return jnp.sum(losses * weight) / jnp.maximum(jnp.sum(weight), 1.0)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, state = optimizer.update(grads, state, params)
    return optax.apply_updates(params, updates), state, loss

  @jax.jit
  def log_odds(params, tokens, pretrained):
    logits = model.apply({"params": params}, tokens, pretrained)
    return logits[:, 1] - logits[:, 0]

  def score(params, batcher):
    out = np.zeros(batcher.num_examples)
    for batch in batcher.eval_batches():
      real = batch["weight"] > 0
      out[batch["index"][real]] = np.asarray(log_odds(params, batch["tokens"], pretrained))[real]
    return out

  started, epochs, best, kept = time.perf_counter(), [], -1.0, {}
  batches = train.train_batches(config.seed)
  for epoch in range(config.epochs):
    losses = []
    for _ in range(per_epoch):
      batch = next(batches)
      dropout_key, key = jax.random.split(dropout_key)
      params, state, loss = step(params, state, batch["tokens"], batch["label"],
                                 batch["weight"], key, pretrained)
      losses.append(loss)  # read once per epoch: no wait for the device at each step
    dev = score(params, scored["dev"])
    dev_accuracy = float(np.mean((dev > 0) == (np.asarray(labels["dev"]) == 1)))
    train_loss = float(jnp.mean(jnp.stack(losses)))
    epochs.append({"epoch": epoch + 1, "train_loss": round(train_loss, 4),
                   "dev_accuracy": dev_accuracy,
                   "seconds": round(time.perf_counter() - started, 1)})
    log(f"region CNN epoch {epoch + 1}: train loss {epochs[-1]['train_loss']:.4f}  dev "
        f"{dev_accuracy:.4f}  {epochs[-1]['seconds']:.0f} s")
    if dev_accuracy > best:  # the first of the best
      best = dev_accuracy
      kept = {"dev": dev, **{split: score(params, batcher) for split, batcher in scored.items()
                             if split != "dev"}}
      chosen = epoch + 1
  record = {"epochs": epochs, "chosen_epoch": chosen, "pretrained": bool(pretrained),
            "embedding_regions": [embedding.region for embedding in pretrained],
            "seconds": round(time.perf_counter() - started, 1)}
  return record, kept
