"""The sentence-pair matching task: data, model, loss and metrics for the engine, and prediction.

Batches come from pipelines.tasks.MatchingData ('a', 'a_len', 'b', 'b_len', 'pair', 'pair_len',
'segments', 'label', 'index', 'weight'; the package docstring of pipelines.tasks has the shapes);
the model is built from `config.model` (configs.py) with the size of the vocabulary. Prediction
needs only the vocabulary a run saved (its artifact), never the training data: `encode_pair`
tokenizes and packs a pair as the pipeline does.

Metrics: the loss and accuracy are summed batch by batch on the device; the F1 of the positive
class, the macro-F1 and the ROC AUC need every prediction of the split at once, so `extra_eval`
classifies the split again on the host and scores it with scikit-learn (metrics.py).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments import plots
from experiments import steps
from experiments.config import Config
from experiments.matching import metrics as metrics_lib
from experiments.task import Task
from experiments.task import pipeline_options
from pipelines import text as text_lib
from pipelines.batching import Batcher
from pipelines.batching import Ragged
from pipelines.tasks import AnyVocab
from pipelines.tasks.common import quarter_boundaries
from pipelines.tasks.matching import MatchingData
from pipelines.tasks.matching import MatchingOptions
from pipelines.tasks.matching import join_pairs
from pipelines.tasks.matching import pair_width
from pipelines.vocab import EOS_ID, UNK_ID

LABELS = ("different", "same")
HEATMAP_FILE = "attention.png"
DEMO_PAIR = ("花呗怎么还款", "怎么还花呗")
INPUT_FIELDS = ("a", "a_len", "b", "b_len", "pair", "pair_len", "segments")


@dataclasses.dataclass
class Prediction:
  """The model's verdict on one pair.

  Attributes:
    pair: the two input sentences.
    tokens: the tokens the model read of each (after the tokenizer, cut to max_len).
    unknown: per token of each side, whether it is outside the vocabulary.
    label: 1 same meaning, 0 not.
    probability: the probability of class 1 (same meaning), whatever the label.
    attention: the model's weights (models.py), for this pair only and without padding:
      'self_attention' (layers, H, n, n) over [CLS] a [SEP] b [SEP] (n = len(a) + len(b) + 3),
      'a_to_b' (len(a), len(b)) and 'b_to_a' (len(b), len(a)), or 'a_pooling' (len(a),) and
      'b_pooling' (len(b),).
  """
  pair: tuple[str, str]
  tokens: tuple[list[str], list[str]]
  unknown: tuple[list[bool], list[bool]]
  label: int
  probability: float
  attention: dict[str, np.ndarray]

  @property
  def label_probability(self) -> float:
    """The probability of the predicted label."""
    return self.probability if self.label == 1 else 1.0 - self.probability


def pack_pairs(a_ids: Sequence[Sequence[int]], b_ids: Sequence[Sequence[int]],
               a_width: int | None = None, b_width: int | None = None) -> dict[str, np.ndarray]:
  """The model inputs of N pairs of id sequences, as MatchingData's batches hold them.

  Args:
    a_ids, b_ids: the ids of each pair's two sentences (no specials).
    a_width, b_width: the padded widths La, Lb (None: the longest of each side).

  Returns:
    'a' int32 (N, La), 'a_len' (N,), 'b' (N, Lb), 'b_len' (N,), 'pair' (N, La + Lb + 3):
    [CLS] a [SEP] b [SEP] padded with 0, 'pair_len' (N,), 'segments' (N, La + Lb + 3).
  """
  a, b = Ragged.from_sequences(a_ids), Ragged.from_sequences(b_ids)
  pair, segments = join_pairs(a, b)  # the pipeline's packing, [CLS] = bos, [SEP] = eos
  a_width = int(a.lengths.max()) if a_width is None else a_width
  b_width = int(b.lengths.max()) if b_width is None else b_width
  rows = np.arange(len(a))
  out = {}
  for name, seqs, width in [("a", a, a_width), ("b", b, b_width),
                            ("pair", pair, a_width + b_width + 3)]:
    out[name], out[f"{name}_len"] = seqs.padded(rows, width)
  out["segments"], _ = segments.padded(rows, a_width + b_width + 3)
  return out


class MatchingTask(Task):
  """Binary classification of question pairs: do the two questions mean the same?

  Args:
    config: the run's Config (model: a configs.*Config with `build`, data: MatchingDataConfig).
    data: already loaded MatchingData (None: loaded from config.data_dir when first needed).
    artifacts: {'vocab': Vocab} or {'subwords': SubwordVocab} to use instead of the data's.
  """

  ARTIFACTS = {"vocab": "vocab.json", "subwords": "sentencepiece.model"}

  def __init__(self, config: Config, *, data: MatchingData | None = None,
               artifacts: dict[str, AnyVocab] | None = None):
    super().__init__(config, data=data, artifacts=artifacts)
    self._model = None
    self._forward = jax.jit(self.forward)

  # -- data and vocabulary ---------------------------------------------------------------------------

  def load_data(self) -> MatchingData:
    """The prepared question pairs (the shipped AFQMC sample when config.data_dir is None)."""
    d = self.config.data
    return MatchingData.load(source=self.config.data_dir, data_dir=d.prepared_dir,
                             **pipeline_options(d, MatchingOptions))

  @property
  def subwords(self) -> bool:
    return self.config.data.tokenizer == "subword"

  def artifacts_from_data(self) -> dict[str, AnyVocab | None]:
    return {"subwords" if self.subwords else "vocab": self.data.vocab}

  @property
  def vocab(self) -> AnyVocab:
    return self.artifact("subwords" if self.subwords else "vocab")

  def tokenize(self, text: str) -> list[str]:
    """The tokens of one question, as the pipeline makes them (not yet cut to max_len)."""
    if self.subwords:
      return self.vocab.tokenize(text)
    return text_lib.chinese_chars_tokenize(text)

  def encode_pair(self, first: str, second: str) -> tuple[list[str], list[str]]:
    """The tokens of both questions, each cut to max_len; a ValueError naming the empty one."""
    sides = []
    for name, text in (("first", first), ("second", second)):
      tokens = self.tokenize(text)[:self.config.data.max_len]
      if not tokens:
        raise ValueError(f"the {name} question {_excerpt(text)} has no tokens to compare")
      sides.append(tokens)
    return sides[0], sides[1]

  def example_batch(self) -> dict[str, np.ndarray]:
    """A full-width batch of one-token pairs: shapes for `init`, without reading the data."""
    size, width = self.config.train.batch_size, self.config.data.max_len
    batch = pack_pairs([[UNK_ID]] * size, [[UNK_ID]] * size, width, width)
    batch.update(label=np.zeros(size, np.int32), index=np.arange(size, dtype=np.int32),
                 weight=np.ones(size, np.float32))
    return batch

  # -- model ---------------------------------------------------------------------------------------

  @property
  def model(self):
    if self._model is None:
      self._model = self.config.model.build(len(self.vocab), self.config.compute_dtype,
                                            self.config.storage_dtype,
                                            max_len=2 * self.config.data.max_len + 3)
    return self._model

  def train_batches(self):
    """Shuffled, length-bucketed training batches; in the data's order where the data config
    has `shuffle` False (configs.NNDLDataConfig; the other runs' configs have no such field)."""
    tc = self.config.train
    return self.data.train_batches(tc.batch_size, tc.seed,
                                   shuffle=getattr(self.config.data, "shuffle", True))

  def init(self, rng: jax.Array, batch) -> Any:
    params = self.model.init({"params": rng}, _inputs(batch))["params"]
    init_from = getattr(self.config.model, "init_from", None)
    if init_from is None:
      return params
    return {**params, **self._pretrained(init_from)}

  def _pretrained(self, workdir: str) -> dict[str, Any]:
    """The parameters a classifier shares with the pretraining run in `workdir` (best
    checkpoint), after checking that both read the same vocabulary; loaded once."""
    if getattr(self, "_pretrained_params", None) is None:
      from experiments import runs  # pylint: disable=g-import-not-at-top (runs builds tasks)
      run = runs.load_init_from(workdir, "matching", "best",
                                f"`python -m experiments train matching --model transformer_mlm "
                                f"--workdir {workdir}` (same --data-dir)",
                                task_class=PretrainTask, kind="a pretraining run (transformer_mlm)",
                                vocab=self.vocab)
      shared = ("embed", "positions", "segments", "embed_norm", "encoder")
      self._pretrained_params = {name: run.params[name] for name in shared}
    return self._pretrained_params

  def forward(self, params, inputs: dict[str, jax.Array], rng: jax.Array | None = None
              ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(logits float32 (B, 2), attention dict (models.py)); dropout when rng is given."""
    rngs = {} if rng is None else {"dropout": rng}
    # 'intermediates' is where zoo's Transformer blocks sow their weights (PairTransformer).
    outputs, _ = self.model.apply({"params": params}, inputs, deterministic=rng is None,
                                  rngs=rngs, mutable=["intermediates"])
    return outputs

  def loss(self, params, batch, rng):
    logits, _ = self.forward(params, _inputs(batch), rng)  # (B, 2)
    labels = batch["label"]
    per_example = optax.softmax_cross_entropy_with_integer_labels(logits, labels)  # (B,)
    correct = (jnp.argmax(logits, axis=-1) == labels).astype(jnp.float32)  # (B,)
    loss_pair = steps.weighted_sum(per_example, batch["weight"])
    metrics = {"loss": loss_pair, "accuracy": steps.weighted_sum(correct, batch["weight"])}
    return loss_pair[0] / jnp.maximum(loss_pair[1], 1.0), metrics

  # -- evaluation beyond batch sums -------------------------------------------------------------------

  def extra_metric_names(self, split: str) -> tuple[str, ...]:
    del split
    return ("f1", "macro_f1", "auc", "threshold", "tuned_accuracy", "tuned_f1",
            "tuned_macro_f1")

  def split_probabilities(self, params, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(labels int64 (N,), p(class 1) float32 (N,)) of every pair of a data split, by index."""
    tc = self.config.train
    # Every row of the split, in every process (extra_eval must return the same everywhere).
    batches = self.data.eval_batches(split, tc.eval_batch_size or tc.batch_size,
                                     process_index=0, process_count=1)
    return self._probabilities(params, batches, self.data.num_examples(split))

  def _probabilities(self, params, batches: Iterable[dict[str, np.ndarray]], count: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    labels = np.full(count, -1, np.int64)
    prob = np.zeros(count, np.float32)
    for batch in batches:
      logits, _ = self._forward(params, _inputs(batch))  # (b, 2)
      real = batch["weight"] > 0
      index = batch["index"][real]
      prob[index] = np.asarray(jax.nn.softmax(logits, axis=-1))[real, 1]
      if "label" in batch:
        labels[index] = batch["label"][real]
    return labels, prob

  def extra_eval(self, params, split: str, metrics) -> dict[str, float]:
    """F1, macro-F1 and AUC at the argmax; then the threshold of highest accuracy on dev (for
    the same parameters) and the accuracy, F1 and macro-F1 of `split` with it ('tuned_*': on
    dev they are the figures the threshold was chosen by, on test a fair estimate)."""
    del metrics  # accuracy and loss are the engine's
    labels, prob = self.split_probabilities(params, split)
    dev_labels, dev_prob = (labels, prob) if split == "dev" else self.split_probabilities(
        params, "dev")
    threshold = metrics_lib.best_threshold(dev_labels, dev_prob)
    at_half = metrics_lib.binary_metrics(labels, prob)
    tuned = metrics_lib.binary_metrics(labels, prob, threshold)
    return {"f1": at_half["f1"], "macro_f1": at_half["macro_f1"], "auc": at_half["auc"],
            "threshold": threshold, "tuned_accuracy": tuned["accuracy"],
            "tuned_f1": tuned["f1"], "tuned_macro_f1": tuned["macro_f1"]}

  # -- prediction ------------------------------------------------------------------------------------

  def _pair_batches(self, encoded: list[tuple[list[int], list[int]]], batch_size: int):
    """Batches of the encoded pairs, bucketed and packed as the pipeline's batches are."""
    bounds = self.config.data.boundaries or quarter_boundaries(self.config.data.max_len)
    a = Ragged.from_sequences([a for a, _ in encoded])
    b = Ragged.from_sequences([b for _, b in encoded])
    pair, segments = join_pairs(a, b)  # [CLS] a [SEP] b [SEP] and its segment ids
    packed_bounds = tuple(pair_width(width) for width in bounds)
    batcher = Batcher(
        {"a": a, "b": b, "pair": pair, "segments": segments},
        {"index": np.arange(len(encoded), dtype=np.int32)},
        boundaries={"a": bounds, "b": bounds, "pair": packed_bounds, "segments": packed_bounds},
        batch_size=batch_size, length_keys=MatchingData.length_keys, process_index=0,
        process_count=1)
    return batcher.eval_batches()

  def probabilities(self, params, pairs: Sequence[tuple[str, str]],
                    batch_size: int = 256) -> np.ndarray:
    """p(same meaning) float32 (N,) of N pairs of questions (ValueError for an empty one)."""
    encoded = [tuple(self.vocab.encode(side) for side in self.encode_pair(*p)) for p in pairs]
    return self._probabilities(params, self._pair_batches(encoded, batch_size), len(pairs))[1]

  def predict(self, params, pairs: Sequence[tuple[str, str]]) -> list[Prediction]:
    """Classifies each pair; returns its label, probability and attention weights."""
    tokens = [self.encode_pair(first, second) for first, second in pairs]
    ids = [(self.vocab.encode(a), self.vocab.encode(b)) for a, b in tokens]
    # Each side padded to its length bucket's width (as evaluation batches are): a few compiled
    # shapes, not one per pair of lengths.
    bounds = sorted(self.config.data.boundaries or quarter_boundaries(self.config.data.max_len))
    a_width, b_width = (next(w for w in bounds if w >= max(len(side[i]) for side in ids))
                        for i in (0, 1))
    inputs = pack_pairs([a for a, _ in ids], [b for _, b in ids], a_width, b_width)
    logits, attention = self._forward(params, inputs)
    prob = np.asarray(jax.nn.softmax(logits, axis=-1))[:, 1]  # (N,)
    attention = {name: np.asarray(w, np.float32) for name, w in attention.items()}
    out = []
    for row, (pair, (a, b), (a_ids, b_ids)) in enumerate(zip(pairs, tokens, ids)):
      n_a, n_b = len(a), len(b)
      weights = {}
      for name, w in attention.items():
        if name == "self_attention":
          n = n_a + n_b + 3
          weights[name] = w[row, :, :, :n, :n]
        elif name in ("a_to_b", "b_to_a"):
          weights[name] = w[row, :n_a, :n_b] if name == "a_to_b" else w[row, :n_b, :n_a]
        else:
          weights[name] = w[row, :n_a] if name == "a_pooling" else w[row, :n_b]
      label = int(prob[row] >= 0.5)
      out.append(Prediction(tuple(pair), (a, b), ([i == UNK_ID for i in a_ids],
                                                  [i == UNK_ID for i in b_ids]),
                            label, float(prob[row]), weights))
    return out

  def draw_heatmap(self, prediction: Prediction, path: str, layer: int = -1,
                   head: int | None = None) -> str:
    """Saves the attention between the two questions as a PNG.

    Soft-alignment models: the a-to-b weights (rows: the first question). The Transformer: the
    a-to-b block of one layer's self-attention (one head, or the mean over heads when head is
    None), with the [CLS] row over the whole pair drawn above it. Siamese: each question's
    pooling weights.
    """
    a, b = prediction.tokens
    verdict = f"{LABELS[prediction.label]} (p(same) {prediction.probability:.3f})"
    name = self.config.model_name or "matching"
    weights = prediction.attention
    if "a_to_b" in weights:
      return plots.plot_attention(weights["a_to_b"], b, a, path, title=f"{name}: {verdict}",
                                  xlabel="second question", ylabel="first question")
    if "a_pooling" in weights:
      row = np.concatenate([weights["a_pooling"], [0.0], weights["b_pooling"]])  # "|" between
      return plots.plot_attention(row, a + ["|"] + b, None, path, title=f"{name}: {verdict}",
                                  xlabel="pooling weights: first | second question")
    layers = weights["self_attention"]  # (layers, H, n, n)
    layer_index = range(layers.shape[0])[layer]
    grid = layers[layer_index] if head is None else layers[layer_index, head:head + 1]
    grid = grid.mean(0)  # (n, n)
    n_a = len(a)
    packed = ["[CLS]", *a, "[SEP]", *b, "[SEP]"]
    block = grid[1:1 + n_a, n_a + 2:n_a + 2 + len(b)]  # a's rows over b's columns
    cls_row = grid[0]
    which = "mean over heads" if head is None else f"head {head}"
    return plots.plot_pair_attention(block, a, b, cls_row, packed, path,
                                     title=f"{name}: {verdict}; layer {layer_index}, {which}")

  def on_train_end(self, params, workdir: str) -> None:
    """Draws the attention of a demo pair into the run's directory."""
    prediction = self.predict(jax.device_get(params), [DEMO_PAIR])[0]
    self.draw_heatmap(prediction, os.path.join(workdir, HEATMAP_FILE))


def _inputs(batch) -> dict[str, Any]:
  """The model's fields of a batch."""
  return {name: batch[name] for name in INPUT_FIELDS}


def _excerpt(text: str, limit: int = 40) -> str:
  """A short quoted excerpt of a user's text for messages."""
  return repr(text if len(text) <= limit else text[:limit] + "...")


class PretrainTask(MatchingTask):
  """Masked-language-model pretraining of PairTransformer on question pairs (configs.
  transformer_mlm): its training batches are the training split's pairs and the unlabelled pairs
  (CLUE's test.json) together, labels unread; dev's masked-token loss and accuracy are evaluated.

  Each batch masks mask_rate of the positions that hold a sentence's token (not [CLS], [SEP],
  padding or unk): 80% of them become unk (the vocabulary has no mask token; unk is 0.1% of the
  characters), 10% a random regular token, 10% stay; the loss is the cross-entropy of the
  original token at exactly the chosen positions. Training draws the positions from the step's
  key; evaluation from a key of the batch's example indices, so dev figures are repeatable.
  """

  def init(self, rng: jax.Array, batch) -> Any:
    """The masked language model's parameters (no pooler or output layer)."""
    return self.model.init({"params": rng}, _inputs(batch), mlm=True)["params"]

  def train_batches(self):
    tc = self.config.train
    return self.data.pretraining_batcher(tc.batch_size).train_batches(tc.seed)

  def loss(self, params, batch, rng):
    mask_rate = self.config.model.mask_rate
    if rng is None:  # evaluation: the same positions every time for the same examples
      key = jax.random.fold_in(jax.random.key(0), jnp.sum(batch["index"]))
    else:
      key = rng
    pick_key, kind_key, token_key, dropout_key = jax.random.split(key, 4)
    pair = batch["pair"]  # (B, Lp)
    regular = (pair > EOS_ID) & (batch["weight"][:, None] > 0)  # sentence tokens, ids >= 4
    chosen = regular & (jax.random.uniform(pick_key, pair.shape) < mask_rate)  # (B, Lp)
    kind = jax.random.uniform(kind_key, pair.shape)
    random_tokens = jax.random.randint(token_key, pair.shape, EOS_ID + 1, len(self.vocab))
    corrupted = jnp.where(chosen & (kind < 0.8), UNK_ID,
                          jnp.where(chosen & (kind < 0.9), random_tokens, pair))
    inputs = dict(_inputs(batch), pair=corrupted.astype(pair.dtype))
    rngs = {} if rng is None else {"dropout": dropout_key}
    logits = self.model.apply({"params": params}, inputs, deterministic=rng is None, rngs=rngs,
                              mlm=True)  # (B, Lp, V)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, pair)  # (B, Lp)
    weight = chosen.astype(jnp.float32)
    correct = (jnp.argmax(logits, axis=-1) == pair).astype(jnp.float32)
    loss_pair = (jnp.sum(nll * weight), jnp.sum(weight))
    metrics = {"loss": loss_pair, "accuracy": (jnp.sum(correct * weight), jnp.sum(weight))}
    return loss_pair[0] / jnp.maximum(loss_pair[1], 1.0), metrics

  def extra_metric_names(self, split: str) -> tuple[str, ...]:
    del split
    return ()

  def extra_eval(self, params, split: str, metrics) -> dict[str, float]:
    del params, split, metrics
    return {}

  def predict(self, params, pairs):
    raise ValueError("this is a pretraining run (a masked language model): it does not classify "
                     "pairs; fine-tune it with --model transformer_pretrained --model.init_from "
                     "DIR")

  def on_train_end(self, params, workdir: str) -> None:
    del params, workdir  # no classifier to draw


def make_task(config: Config, **kwargs) -> MatchingTask:
  """The task of a run: PretrainTask for configs.PretrainConfig, else MatchingTask."""
  from experiments.matching import configs  # pylint: disable=g-import-not-at-top
  if isinstance(config.model, configs.PretrainConfig):
    return PretrainTask(config, **kwargs)
  return MatchingTask(config, **kwargs)
