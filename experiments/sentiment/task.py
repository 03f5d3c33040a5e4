"""The IMDB sentiment task: data, model, loss and metrics for the engine, and prediction.

Batches come from pipelines.tasks.SentimentData ('tokens' int32 (B, L), 'lengths' (B,), 'label'
(B,), 'weight' (B,), and 'bigrams' int32 (B, L) when config.data.bigrams); the model is built from
`config.model` (see configs.py) with the vocabulary sizes of the data. The data is opened on first
use, so a task built only to predict (with the vocabularies a run saved as its artifacts) never
reads or tokenizes IMDB.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
import tqdm

from experiments import plots
from experiments import steps
from experiments.config import Config
from experiments.task import Task
from experiments.task import pipeline_options
from experiments.sentiment import models
from pipelines import datasets
from pipelines import text as text_lib
from pipelines.batching import Batcher
from pipelines.tasks import SentimentData
from pipelines.tasks import SentimentOptions
from pipelines.tasks import read_records
from pipelines.tasks.common import quarter_boundaries
from pipelines.vocab import UNK_ID, Vocab

LABELS = ("negative", "positive")
HEATMAP_FILE = "attention.png"
DEMO_SENTENCE = "this great science fiction film is really awesome"


def read_unlabelled(source: str | None, prepared_dir: str | None) -> list[dict]:
  """IMDB's 'unsupervised' split ({'text', 'id'} records, text as str) from `source` (None: the
  shipped sample), prepared in `prepared_dir`."""
  records = read_records(datasets.load("imdb", "unsupervised", source=source,
                                       data_dir=prepared_dir))
  return [{**record, "text": record["text"].decode("utf-8") if isinstance(record["text"], bytes)
           else str(record["text"])} for record in records]


def pseudo_labelled_count(data) -> int:
  """How many of the training split's reviews are a self-training student's pseudo-labelled
  ones: they come after IMDB's labelled reviews (0 for any other run)."""
  return data.report.get("train", {}).get("pseudo_labelled", {}).get("kept", 0)


@dataclasses.dataclass
class Prediction:
  """The model's verdict on one text.

  Attributes:
    text: the input text.
    words: the tokens the model read (after the tokenizer, cut to max_len).
    unknown: per word, whether it is outside the vocabulary (read as <unk>).
    label: the predicted class, 0 negative or 1 positive.
    probability: the predicted class's probability.
    word_weights: (n,) one attention weight per word, summing to 1 (None: a model without
      attention, fitted.py's).
    attention: the model's weights for the heatmap: (n,) for pooling models, (n, n) (queries x
      keys, mean over heads) for self-attention models (None: a model without attention).
  """
  text: str
  words: list[str]
  unknown: list[bool]
  label: int
  probability: float
  word_weights: np.ndarray | None
  attention: np.ndarray | None

  @property
  def label_name(self) -> str:
    return LABELS[self.label]


class SentimentTask(Task):
  """Binary sentiment classification of IMDB reviews.

  Args:
    config: the run's Config (model: a configs.*Config with `build`, data: SentimentDataConfig).
    data: already loaded SentimentData (None: loaded from config.data_dir when first needed).
    artifacts: {'vocab': Vocab, 'bigram_vocab': Vocab} to use instead of the data's (a run's saved
      copies; the bigram vocabulary only with config.data.bigrams).
  """

  ARTIFACTS = {"vocab": "vocab.json", "bigram_vocab": "bigram_vocab.json"}
  # Whether its predictions carry word weights and attention (fitted.py's models: none).
  has_attention = True

  def __init__(self, config: Config, *, data: SentimentData | None = None,
               artifacts: dict[str, Vocab] | None = None):
    super().__init__(config, data=data, artifacts=artifacts)
    if config.data.bigrams and not getattr(config.model, "reads_bigrams", False):
      raise ValueError(f"data.bigrams is set, but the model {config.model_name or ''} "
                       f"({type(config.model).__name__}) does not read bigrams: set "
                       f"data.bigrams=false, or use a BiLSTM model or ngram_attn")
    self._model = None
    self._forward = jax.jit(self.forward)

  # -- data and vocabularies -----------------------------------------------------------------------

  def load_data(self) -> SentimentData:
    """The prepared IMDB splits (the shipped sample when config.data_dir is None)."""
    d = self.config.data
    return SentimentData.load(source=self.config.data_dir, data_dir=d.prepared_dir,
                              **pipeline_options(d, SentimentOptions))

  def artifacts_from_data(self) -> dict[str, Vocab | None]:
    bigrams = None
    if self.config.data.bigrams:
      bigrams = self.data.bigram_vocab
      if bigrams is None:
        raise ValueError("config.data.bigrams is set, but the data given to the task were loaded "
                         "without bigrams (load them with SentimentData.load(..., bigrams=True))")
    return {"vocab": self.data.vocab, "bigram_vocab": bigrams}

  @property
  def vocab(self) -> Vocab:
    return self.artifact("vocab")

  @property
  def bigram_vocab(self) -> Vocab | None:
    """The bigram vocabulary (None unless config.data.bigrams)."""
    return self.artifact("bigram_vocab") if self.config.data.bigrams else None

  def example_batch(self) -> dict[str, np.ndarray]:
    """A full-width batch of one-token reviews: shapes for `init`, without reading the data."""
    size = self.config.train.batch_size
    batch = {"tokens": np.full((size, self.config.data.max_len), UNK_ID, np.int32),
             "lengths": np.ones(size, np.int32), "label": np.zeros(size, np.int32),
             "weight": np.ones(size, np.float32)}
    if self.config.data.bigrams:
      batch["bigrams"] = batch["tokens"].copy()
    return batch

  # -- model -----------------------------------------------------------------------------------------

  @property
  def model(self):
    if self._model is None:
      bigrams = self.bigram_vocab  # None unless data.bigrams, checked against the model in __init__
      extra = {} if bigrams is None else {"bigram_vocab_size": len(bigrams)}
      self._model = self.config.model.build(len(self.vocab), self.config.compute_dtype,
                                            self.config.storage_dtype, **extra)
    return self._model

  def init(self, rng: jax.Array, batch) -> Any:
    bigrams = batch.get("bigrams")
    return self.model.init({"params": rng}, jnp.asarray(batch["tokens"]),
                           jnp.asarray(batch["lengths"]),
                           **({} if bigrams is None else {"bigrams": jnp.asarray(bigrams)})
                           )["params"]

  def forward(self, params, tokens: jax.Array, lengths: jax.Array,
              rng: jax.Array | None = None,
              bigrams: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """(logits float32 (B, 2), attention weights (B, L) or (B, L, L)); dropout when rng is given.

    `bigrams` (B, L): the word-bigram ids, for a model built with the bigram vocabulary.
    """
    rngs = {} if rng is None else {"dropout": rng}
    extra = {} if bigrams is None else {"bigrams": bigrams}
    # 'intermediates' is where zoo's Transformer blocks sow their weights (TransformerClassifier).
    outputs, _ = self.model.apply({"params": params}, tokens, lengths, deterministic=rng is None,
                                  rngs=rngs, mutable=["intermediates"], **extra)
    return outputs

  def loss(self, params, batch, rng):
    logits, _ = self.forward(params, batch["tokens"], batch["lengths"], rng,
                             batch.get("bigrams"))  # (B, 2)
    labels = batch["label"]
    per_example = optax.softmax_cross_entropy_with_integer_labels(logits, labels)  # (B,)
    correct = (jnp.argmax(logits, axis=-1) == labels).astype(jnp.float32)  # (B,)
    loss_pair = steps.weighted_sum(per_example, batch["weight"])
    metrics = {"loss": loss_pair, "accuracy": steps.weighted_sum(correct, batch["weight"])}
    return loss_pair[0] / jnp.maximum(loss_pair[1], 1.0), metrics

  # -- prediction ------------------------------------------------------------------------------------

  def encode(self, text: str) -> tuple[list[str], list[int]]:
    """The review's tokens (cut to max_len) and their ids; a ValueError for a text with no token."""
    words = text_lib.imdb_tokenize(text)[:self.config.data.max_len]
    if not words:
      raise ValueError(f"the text {text!r} has no words to classify")
    return words, self.vocab.encode(words)

  def predict(self, params, texts: Sequence[str]) -> list[Prediction]:
    """Classifies each text; returns its label, probability and attention weights."""
    encoded = [self.encode(t) for t in texts]
    width = self._bucket_width(max(len(ids) for _, ids in encoded))
    tokens = np.zeros((len(texts), width), np.int32)  # (N, W), padded with pad = 0
    bigrams = None if self.bigram_vocab is None else np.zeros_like(tokens)  # (N, W)
    for row, (words, ids) in enumerate(encoded):
      tokens[row, :len(ids)] = ids
      if bigrams is not None:
        bigrams[row, :len(ids)] = self.bigram_vocab.encode(text_lib.word_bigrams(words))
    lengths = np.array([len(ids) for _, ids in encoded], np.int32)
    logits, weights = self._forward(params, tokens, lengths, None, bigrams)
    probs = np.asarray(jax.nn.softmax(logits, axis=-1))  # (N, 2)
    per_word = np.asarray(models.word_weights(weights, lengths))  # (N, W)
    weights = np.asarray(weights, np.float32)
    out = []
    for row, (text, (words, ids)) in enumerate(zip(texts, encoded)):
      n = len(words)
      label = int(np.argmax(probs[row]))
      attention = weights[row, :n] if weights.ndim == 2 else weights[row, :n, :n]
      out.append(Prediction(text, words, [i == UNK_ID for i in ids], label,
                            float(probs[row, label]), per_word[row, :n], attention))
    return out

  def _bucket_width(self, length: int) -> int:
    """The padded width of `length` words: its length bucket's, as evaluation batches are padded,
    so that prediction compiles a few shapes, not one per length."""
    bounds = self.config.data.boundaries or quarter_boundaries(self.config.data.max_len)
    return next((b for b in sorted(bounds) if b >= length), length)

  def attention_maps(self, params, prediction: Prediction) -> dict[str, np.ndarray]:
    """Every attention of the model over one prediction's n words, without padding.

    Returns:
      {'pooling': float32 (1, 1, 1, n)} for the pooling models (one query: the learned pooling
      query, or mean pooling's uniform weights), or {'self_attention': float32 (layers, H, n, n)}
      for the self-attention models: every layer's and head's weights, queries x keys (the
      heatmap's picture is their last layer's mean over heads).
    """
    words = prediction.words
    n = len(words)
    tokens = np.zeros((1, self._bucket_width(n)), np.int32)  # (1, W), padded with pad = 0
    tokens[0, :n] = self.vocab.encode(words)
    bigrams = None
    if self.bigram_vocab is not None:
      bigrams = np.zeros_like(tokens)  # (1, W)
      bigrams[0, :n] = self.bigram_vocab.encode(text_lib.word_bigrams(words))
    maps = self._attention_maps(params, tokens, np.asarray([n], np.int32), bigrams)
    return {name: np.asarray(w, np.float32)[0, ..., :n] if name == "pooling"
            else np.asarray(w, np.float32)[0, :, :, :n, :n] for name, w in maps.items()}

  @functools.partial(jax.jit, static_argnums=0)
  def _attention_maps(self, params, tokens: jax.Array, lengths: jax.Array,
                      bigrams: jax.Array | None) -> dict[str, jax.Array]:
    """tokens (B, L) -> {'pooling': (B, 1, 1, 1, L)} or {'self_attention': (B, layers, H, L, L)}."""
    extra = {} if bigrams is None else {"bigrams": bigrams}
    # The Transformer's blocks sow their weights; the one zoo.MultiHeadAttention of the other
    # self-attention models (named 'attention') has its output (values, weights) captured.
    capture = lambda module, method: module.name == "attention" and method == "__call__"
    (_, weights), state = self.model.apply({"params": params}, tokens, lengths,
                                           deterministic=True, mutable=["intermediates"],
                                           capture_intermediates=capture, **extra)
    sown = state.get("intermediates", {})
    if "encoder" in sown:  # TransformerClassifier: one entry per block
      blocks = sorted(sown["encoder"], key=lambda name: int(name.rsplit("_", 1)[1]))
      layers = [sown["encoder"][name]["self_attention_weights"][-1] for name in blocks]
    elif "attention" in sown:  # BiLSTMSelfAttention, SANet: (B, H, L, L) from return_weights
      layers = [sown["attention"]["__call__"][-1][1]]
    else:
      return {"pooling": weights.astype(jnp.float32)[:, None, None, None, :]}
    return {"self_attention": jnp.stack(layers, axis=1).astype(jnp.float32)}

  def probabilities(self, params, texts: Sequence[str], batch_size: int = 256,
                    progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The class probabilities of many texts, batched by length (as evaluation batches are).

    Args:
      params: the model's parameters.
      texts: the texts; those without a word (after the tokenizer) cannot be classified.
      batch_size: texts per forward pass.
      progress: show a progress bar on stderr.

    Returns:
      (rows int64 (K,): the positions in `texts` of the K texts with words, ascending;
       probabilities float32 (K, 2): their class probabilities, in the order of `rows`).
    """
    max_len = self.config.data.max_len
    words = [text_lib.imdb_tokenize(text)[:max_len] for text in texts]
    rows = np.array([i for i, w in enumerate(words) if w], np.int64)
    if not len(rows):
      return rows, np.zeros((0, 2), np.float32)
    sequences = {"tokens": [self.vocab.encode(words[i]) for i in rows]}
    if self.bigram_vocab is not None:
      sequences["bigrams"] = [self.bigram_vocab.encode(text_lib.word_bigrams(words[i]))
                              for i in rows]
    logits = self._batched_logits(params, sequences, batch_size, progress)  # (K, 2)
    return rows, np.asarray(jax.nn.softmax(logits, axis=-1), np.float32)

  def split_logits(self, params, split: str, batch_size: int = 256,
                   progress: bool = False) -> np.ndarray:
    """The logits float32 (N, 2) of every example of one of the data's splits, in its order.

    Args:
      params: the model's parameters.
      split: 'train', 'dev' or 'test' of `self.data` (whose labels are
        `self.data.splits[split].scalars['label']`, row for row).
      batch_size: examples per forward pass.
      progress: show a progress bar on stderr.
    """
    if split not in self.data.splits:
      raise ValueError(f"split must be one of {sorted(self.data.splits)}, got {split!r}")
    sequences = self.data.splits[split].sequences
    if self.config.data.bigrams and "bigrams" not in sequences:
      raise ValueError("config.data.bigrams is set, but the data's splits have no bigrams")
    return self._batched_logits(params, {name: sequences[name] for name in
                                         (("tokens", "bigrams") if self.config.data.bigrams
                                          else ("tokens",))}, batch_size, progress)

  def _batched_logits(self, params, sequences: dict[str, Any], batch_size: int,
                      progress: bool) -> np.ndarray:
    """Logits float32 (N, 2) of N id sequences ({'tokens'[, 'bigrams']}), batched by length."""
    count = len(sequences["tokens"])
    bounds = self.config.data.boundaries or quarter_boundaries(self.config.data.max_len)
    batcher = Batcher(sequences, {"index": np.arange(count)}, boundaries=bounds,
                      batch_size=batch_size, length_keys={"tokens": "lengths", "bigrams": None},
                      process_index=0, process_count=1)
    out = np.zeros((count, 2), np.float32)
    batches = batcher.eval_batches()
    if progress:
      batches = tqdm.tqdm(batches, total=batcher.num_eval_batches(), desc="classifying",
                          unit="batch", file=sys.stderr)
    for batch in batches:
      logits, _ = self._forward(params, batch["tokens"], batch["lengths"], None,
                                batch.get("bigrams"))  # (b, 2)
      real = batch["weight"] > 0
      out[batch["index"][real]] = np.asarray(logits, np.float32)[real]
    return out

  def draw_heatmap(self, prediction: Prediction, path: str) -> str:
    """Saves the prediction's attention as a PNG heatmap with the words on the axes."""
    title = (f"{self.config.model_name or 'sentiment'}: {prediction.label_name} "
             f"({prediction.probability:.3f})")
    if prediction.attention.ndim == 1:
      return plots.plot_attention(prediction.attention, prediction.words, None, path, title=title,
                                  xlabel="words (pooling weight)")
    return plots.plot_attention(prediction.attention, prediction.words, prediction.words, path,
                                title=title + ", mean over heads", xlabel="keys",
                                ylabel="queries")

  def on_train_end(self, params, workdir: str) -> None:
    """Draws the attention heatmap of a demo sentence into the run's directory."""
    prediction = self.predict(jax.device_get(params), [DEMO_SENTENCE])[0]
    self.draw_heatmap(prediction, os.path.join(workdir, HEATMAP_FILE))
