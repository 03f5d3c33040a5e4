"""The named runs of the sentence-pair matching experiment: one function per run, returning its Config.

Every run trains from scratch on AFQMC's questions as characters (pipelines.text
.chinese_chars_tokenize; `--data.tokenizer subword` for SentencePiece pieces), each question cut
to its first 48 tokens, the vocabulary counted over the training split only. The project's dev and
test splits are carved from CLUE's train.json (CLUE's dev.json is read as dev where a user has it;
pipelines/builders/question_pairs.py). Dev is evaluated at every epoch's end; the parameters with
the best dev ROC AUC are kept and used for the test figures (results.json names the metric). AUC,
not accuracy, picks them: with 69% of the pairs negative, dev accuracy at the argmax stays at the
majority class's for epochs while the ranking improves (the first ESIM runs' records, RESULTS.md).
Beside the argmax's figures every evaluation reports those at the threshold of highest dev
accuracy ('threshold', 'tuned_accuracy', 'tuned_f1', 'tuned_macro_f1'; chosen on dev only).

    python -m experiments train matching --model esim --data-dir ../shared/data/afqmc \
        --workdir runs/matching-esim

Without --data-dir a run uses the AFQMC sample shipped with the package. Results (test accuracy,
positive-class F1, macro-F1, ROC AUC, with the machine and wall time) are in docs/RESULTS.md,
"Sentence-pair matching".
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import flax.linen as nn

from experiments import config as config_lib
from experiments.matching import models


@dataclasses.dataclass
class MatchingDataConfig:
  """How question pairs become batches (options of pipelines.tasks.MatchingData, same names).

  Attributes:
    max_len: each question keeps its first max_len tokens.
    boundaries: the padded widths of a question (ascending, the last == max_len); None: max_len/4,
      /2, 3/4 and max_len. The packed pair [CLS] a [SEP] b [SEP] is 2 * width + 3 wide.
    tokenizer: 'chars' (one token per Chinese character, ASCII words and numbers whole) or
      'subword' (a SentencePiece model trained on the training questions).
    min_freq: characters seen fewer times in the training questions are unknown ('chars').
    max_size: the most frequent characters kept (None: all with min_freq).
    subword_vocab_size: the SentencePiece vocabulary size ('subword').
    pair_order: 'as_given', or 'both': training also sees every pair swapped (b, a).
    prepared_dir: where prepared datasets are stored (None: $ZOO_DATA_DIR or
      ~/.cache/attention_zoo).
  """
  max_len: int = 48
  boundaries: tuple[int, ...] | None = None
  tokenizer: Literal["chars", "subword"] = "chars"
  min_freq: int = 2
  max_size: int | None = None
  subword_vocab_size: int = 4000
  pair_order: Literal["as_given", "both"] = "as_given"
  prepared_dir: str | None = None


# Every model config has `build(vocab_size, dtype, param_dtype) -> nn.Module`.


@dataclasses.dataclass
class TransformerConfig:
  """models.PairTransformer: embed_dim, num_layers, num_heads, ffn_hidden, dropout_rate.

  init_from: the directory of a pretraining run (`--model transformer_mlm`, same data options):
  its embeddings and encoder (best checkpoint) replace the freshly drawn ones before the first
  step; the pooler and the output layer start fresh. None: everything from scratch.
  """
  embed_dim: int = 128
  num_layers: int = 2
  num_heads: int = 4
  ffn_hidden: int = 256
  dropout_rate: float = 0.1
  init_from: str | None = None

  def build(self, vocab_size: int, dtype: Any, param_dtype: Any, max_len: int) -> nn.Module:
    return models.PairTransformer(vocab_size, self.embed_dim, self.num_layers, self.num_heads,
                                  self.ffn_hidden, self.dropout_rate, max_len=max_len,
                                  dtype=dtype, param_dtype=param_dtype)


@dataclasses.dataclass
class PretrainConfig(TransformerConfig):
  """PairTransformer trained as a masked language model (task.PretrainTask) on the training pairs
  and the unlabelled ones (CLUE's test.json), labels unread: mask_rate of the sentences' tokens
  are chosen, 80% of those become the mask token (unk), 10% a random token, 10% stay."""
  mask_rate: float = 0.15

  def __post_init__(self):
    if not 0 < self.mask_rate < 1:
      raise ValueError(f"mask_rate must lie in (0, 1), got {self.mask_rate}")


@dataclasses.dataclass
class DecomposableConfig:
  """models.DecomposableAttention: embed_dim, hidden, dropout_rate."""
  embed_dim: int = 128
  hidden: int = 200
  dropout_rate: float = 0.2

  def build(self, vocab_size: int, dtype: Any, param_dtype: Any, max_len: int) -> nn.Module:
    del max_len  # no positions
    return models.DecomposableAttention(vocab_size, self.embed_dim, self.hidden,
                                        self.dropout_rate, dtype, param_dtype)


@dataclasses.dataclass
class ESIMConfig:
  """models.ESIM: embed_dim, hidden_size (per LSTM direction), dropout_rate."""
  embed_dim: int = 128
  hidden_size: int = 128
  dropout_rate: float = 0.3

  def build(self, vocab_size: int, dtype: Any, param_dtype: Any, max_len: int) -> nn.Module:
    del max_len  # the LSTMs read any length
    return models.ESIM(vocab_size, self.embed_dim, self.hidden_size, self.dropout_rate, dtype,
                       param_dtype)


@dataclasses.dataclass
class SiameseConfig:
  """models.SiameseBiLSTM: embed_dim, hidden_size (per LSTM direction), score, dropout_rate."""
  embed_dim: int = 128
  hidden_size: int = 128
  score: str = "dot"
  dropout_rate: float = 0.2

  def build(self, vocab_size: int, dtype: Any, param_dtype: Any, max_len: int) -> nn.Module:
    del max_len
    return models.SiameseBiLSTM(vocab_size, self.embed_dim, self.hidden_size, self.score,
                                self.dropout_rate, dtype, param_dtype)


@dataclasses.dataclass
class OverlapConfig:
  """overlap.py's lexical-overlap baseline (overlap.OverlapTask, fitted without gradient steps):
  liblinear's C values tried, the best by dev AUC kept."""
  costs: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)

  def __post_init__(self):
    if not self.costs or any(c <= 0 for c in self.costs):
      raise ValueError(f"model.costs must be positive values, at least one, got {self.costs}")


def _recipe(model: Any, *, num_epochs: int, learning_rate: float, batch_size: int = 64,
            warmup_steps: int = 0, schedule: str = "constant",
            weight_decay: float = 0.0) -> config_lib.Config:
  """What every run shares: dev ROC AUC at each epoch's end picks the kept parameters."""
  return config_lib.Config(
      train=config_lib.TrainConfig(batch_size=batch_size, num_epochs=num_epochs, log_every=50,
                                   best_metric="dev/auc", best_mode="max"),
      optimizer=config_lib.OptimizerConfig(
          name="adamw" if weight_decay else "adam", learning_rate=learning_rate,
          weight_decay=weight_decay, schedule=schedule, warmup_steps=warmup_steps,
          grad_clip_norm=1.0),
      model=model, data=MatchingDataConfig())


def transformer() -> config_lib.Config:
  """The nndl practice's model: a 2-block pre-norm Transformer encoder (D 128, 4 heads, FFN 256)
  over [CLS] a [SEP] b [SEP] with token, position and segment embeddings, classified from [CLS];
  AdamW 5e-4 (weight decay 0.01), 500 warmup steps then cosine decay, batch 64, 10 epochs."""
  return _recipe(TransformerConfig(), num_epochs=10, learning_rate=5e-4, warmup_steps=500,
                 schedule="cosine", weight_decay=0.01)


def transformer_mlm() -> config_lib.Config:
  """Self-supervised pretraining of the `transformer` model's embeddings and encoder as a masked
  language model on the pairs of the training split and CLUE's unlabelled test.json (no label is
  read; dev's masked-token loss picks the checkpoint): AdamW 1e-3, 500 warmup steps then cosine
  decay, batch 128, 5 epochs. Start a classifier from it with `transformer_pretrained`."""
  config = _recipe(PretrainConfig(), num_epochs=5, learning_rate=1e-3, batch_size=128,
                   warmup_steps=500, schedule="cosine", weight_decay=0.01)
  config.train.best_metric, config.train.best_mode = "dev/loss", "min"
  return config


def transformer_pretrained() -> config_lib.Config:
  """`transformer` started from the `transformer_mlm` run in runs/matching-transformer_mlm
  (--model.init_from DIR for another), fine-tuned with AdamW 2e-4, 300 warmup steps then cosine
  decay, batch 64, 6 epochs."""
  config = _recipe(TransformerConfig(init_from="runs/matching-transformer_mlm"), num_epochs=6,
                   learning_rate=2e-4, warmup_steps=300, schedule="cosine", weight_decay=0.01)
  return config


def decomposable() -> config_lib.Config:
  """Decomposable attention (Parikh et al., 2016) on characters: E 128, F/G/H of 200 units,
  dropout 0.2, Adam 1e-3, batch 64, 6 epochs."""
  return _recipe(DecomposableConfig(), num_epochs=6, learning_rate=1e-3)


def esim() -> config_lib.Config:
  """ESIM (Chen et al., 2017) on characters: E 128, BiLSTMs of 128 per direction, dropout 0.2,
  Adam 1e-3, batch 64, 6 epochs."""
  return _recipe(ESIMConfig(dropout_rate=0.2), num_epochs=6, learning_rate=1e-3)


def siamese() -> config_lib.Config:
  """The sentiment chapter's BiLSTM (128 per direction) with dot attention pooling, applied to
  each question; [u; v; |u - v|; u * v] -> 128 ReLU -> dense; Adam 1e-3, batch 64, 6 epochs."""
  return _recipe(SiameseConfig(), num_epochs=6, learning_rate=1e-3)


def overlap() -> config_lib.Config:
  """The yardstick: logistic regression on lexical-overlap features of the pair (overlap.py), no
  neural network, C in 0.1, 0.3, 1, 3 by dev AUC; the data as the neural runs read it."""
  return config_lib.Config(model=OverlapConfig(), data=MatchingDataConfig())


CONFIGS = {"transformer": transformer, "transformer_mlm": transformer_mlm,
           "transformer_pretrained": transformer_pretrained, "decomposable": decomposable,
           "esim": esim, "siamese": siamese, "overlap": overlap}
DEFAULT_MODEL = "esim"


# ---- transformer_nndl: the nndl chapter's practice recipe (section 8.3), on LCQMC


@dataclasses.dataclass
class NNDLDataConfig(MatchingDataConfig):
  """MatchingDataConfig with the chapter's vocabulary and batch order.

  Attributes (beyond MatchingDataConfig's):
    vocab_file: the path of bert-base-chinese's vocab.txt: its 21,128 tokens are the vocabulary
      ([PAD] id 0, [UNK], [CLS], [SEP]; pipelines.vocab.read_bert_vocab). None (the file is not
      at hand): the vocabulary is built from the training split's characters instead (min_freq,
      max_size), so the embedding table is smaller than the chapter's.
    shuffle: False: training batches are consecutive pairs in the data's order, the same every
      epoch, each side padded to the batch's longest sentence (a boundary at every width) and
      the packed pair to twice that plus 3; True: shuffled, length-bucketed batches.
  """
  vocab_file: str | None = None
  shuffle: bool = False


@dataclasses.dataclass
class NNDLTransformerConfig(TransformerConfig):
  """models.PairTransformer as the chapter builds it: post-norm blocks (normalize_before False),
  dropout_rate on the embeddings and on each sublayer's output, attention_dropout_rate on the
  attention weights, activation_dropout_rate after the FFN's ReLU, a learned position table of
  max_positions, and the [CLS] vector straight into the output layer (pooler False,
  head_dropout_rate 0)."""
  embed_dim: int = 768
  num_layers: int = 1
  num_heads: int = 4
  ffn_hidden: int = 3072
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  activation_dropout_rate: float = 0.0
  max_positions: int = 512
  normalize_before: bool = False
  pooler: bool = False
  head_dropout_rate: float = 0.0

  def build(self, vocab_size: int, dtype: Any, param_dtype: Any, max_len: int) -> nn.Module:
    if max_len > self.max_positions:
      raise ValueError(f"model.max_positions {self.max_positions} is shorter than the longest "
                       f"packed pair ({max_len} = 2 * data.max_len + 3); lower data.max_len")
    return models.PairTransformer(
        vocab_size, self.embed_dim, self.num_layers, self.num_heads, self.ffn_hidden,
        self.dropout_rate, attention_dropout_rate=self.attention_dropout_rate,
        activation_dropout_rate=self.activation_dropout_rate, max_len=self.max_positions,
        normalize_before=self.normalize_before, pooler=self.pooler,
        head_dropout_rate=self.head_dropout_rate, dtype=dtype, param_dtype=param_dtype)


NNDL_MAX_LEN = 254  # per sentence: the packed pair, 2 * 254 + 3 = 511, fits the 512 positions


def transformer_nndl() -> config_lib.Config:
  """The nndl chapter's practice on LCQMC (`python -m pipelines download lcqmc`, then
  `--data-dir data/lcqmc`): characters through bert-base-chinese's vocabulary
  (--data.vocab_file PATH; without it, the training split's characters), [CLS] a [SEP] b [SEP]
  with segments 0/1, batches of 32 in order padded to their longest; a post-norm Transformer
  encoder of 1 block (--model.num_layers for the chapter's exercise; it reports test accuracy
  0.727 with 2), width 768, 4 heads, FFN 3,072, dropout 0.1 (0 after the activation), learned
  positions up to 512, the [CLS] vector into a linear classifier; AdamW 5e-5, weight decay 0,
  3 epochs, dev accuracy every 500 steps, the best dev accuracy's parameters kept."""
  return config_lib.Config(
      train=config_lib.TrainConfig(batch_size=32, num_epochs=3, eval_every=500, log_every=50,
                                   best_metric="dev/accuracy", best_mode="max"),
      optimizer=config_lib.OptimizerConfig(name="adamw", learning_rate=5e-5, weight_decay=0.0),
      model=NNDLTransformerConfig(),
      data=NNDLDataConfig(max_len=NNDL_MAX_LEN, boundaries=tuple(range(1, NNDL_MAX_LEN + 1))))


CONFIGS["transformer_nndl"] = transformer_nndl
