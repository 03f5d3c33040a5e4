"""The model configs of the sequence-to-sequence experiments: typed hyperparameters, each with a
`build(src_vocab_size, tgt_vocab_size, dtype, param_dtype)` that returns a models.Translator.

  BahdanauConfig     d2l's seq2seq with additive attention (translation).
  TransformerConfig  the Transformer encoder-decoder (translation and couplets).
  LuongConfig        the couplet chapter's LSTM seq2seq with input feeding and Luong attention.
  PlainConfig        d2l's encoder-decoder without attention (the baseline of d2l's attention
                     chapter).

Every config also says whether the model wants one vocabulary for source and target
(`shared_vocab`), how much label smoothing its loss uses (`label_smoothing`) and how the loss
reduces the masked token cross-entropies (`loss_reduction`, loss.REDUCTIONS: 'token_mean', the
mean over the batch's target tokens, or 'sequence_sum', each sequence's sum averaged over the
batch as the Paddle couplet chapter). A config.json saved before `loss_reduction` existed trained
with 'token_mean' (OLD_RUN_VALUES, experiments/config.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Literal

from experiments.seq2seq import models

LossReduction = Literal["token_mean", "sequence_sum"]
_OLD_RUN_VALUES = {"loss_reduction": "token_mean"}  # runs saved before the setting existed

@dataclasses.dataclass
class BahdanauConfig:
  """d2l's seq2seq with Bahdanau attention (see models.BahdanauTranslator).

  Attributes:
    embed_dim: token embedding width (source and target).
    hidden_size: LSTM width of the encoder and decoder, and the additive attention's width.
    num_layers: LSTM layers in the encoder and in the decoder.
    dropout_rate: between LSTM layers and on the attention weights.
    label_smoothing: the share of the target probability spread uniformly over the vocabulary.
    loss_reduction: 'token_mean' or 'sequence_sum' (see the module docstring).
    encode_padding: the encoder runs over the padding too, as d2l's (its final state, which
      starts the decoder, comes after the padding; zoo.seq2seq.Seq2Seq); False: it stops at each
      source's length. Runs saved before the setting existed stopped (OLD_RUN_VALUES).
    fused_loss: training applies the output layer inside the loss (see TransformerConfig); runs
      saved before the setting existed computed the logits whole (OLD_RUN_VALUES).
  """
  embed_dim: int = 256
  hidden_size: int = 512
  num_layers: int = 2
  dropout_rate: float = 0.2
  label_smoothing: float = 0.0
  loss_reduction: LossReduction = "token_mean"
  encode_padding: bool = False
  fused_loss: bool = True

  OLD_RUN_VALUES: ClassVar[dict[str, Any]] = {**_OLD_RUN_VALUES, "encode_padding": False,
                                              "fused_loss": False}

  shared_vocab = False  # a joint English+French vocabulary is never needed

  def build(self, src_vocab_size: int, tgt_vocab_size: int, dtype: Any,
            param_dtype: Any) -> models.Translator:
    return models.BahdanauTranslator(
        src_vocab_size, tgt_vocab_size, embed_dim=self.embed_dim, hidden_size=self.hidden_size,
        num_layers=self.num_layers, dropout_rate=self.dropout_rate, dtype=dtype,
        param_dtype=param_dtype, encode_padding=self.encode_padding)


@dataclasses.dataclass
class TransformerConfig:
  """The Transformer encoder-decoder (see models.TransformerTranslator, zoo.transformer).

  Attributes:
    model_dim: D.
    num_heads: H.
    ffn_hidden: the position-wise FFN's inner width.
    num_encoder_layers, num_decoder_layers: blocks per stack.
    dropout_rate: on embeddings + positions, sublayer outputs and inside the FFN.
    attention_dropout_rate: on the attention weights; None: dropout_rate.
    normalize_before: pre-norm (True, the default) or post-norm (False, Vaswani et al.).
    share_embeddings: one table for source and target embeddings and the output layer, over a
      joint English+French vocabulary (Vaswani et al.'s weight sharing).
    tie_output: the output layer is the transposed target embedding (implied by
      share_embeddings).
    label_smoothing: the share of the target probability spread uniformly over the vocabulary.
    implementation: 'auto' (the default: the fused attention on a GPU where it applies, 'vmap'
      elsewhere), 'vmap' or 'fused' (zoo.MultiHeadAttention); heatmaps always use 'vmap', which
      has the same parameters. A run saved before 'auto' became the default keeps the 'vmap' its
      config.json names; one saved before the setting existed ran with 'vmap' (OLD_RUN_VALUES).
    loss_reduction: 'token_mean' or 'sequence_sum' (see the module docstring).
    fused_loss: training applies the output layer inside the loss, a chunk of positions at a
      time with their gradients in the same pass (fused_loss.py): the same loss and gradients up
      to float rounding, without the passes over the whole (B, T, V) logits (docs/BENCHMARKS.md
      has its ratio). Runs saved before the setting existed computed the logits whole
      (OLD_RUN_VALUES).
  """
  model_dim: int = 256
  num_heads: int = 8
  ffn_hidden: int = 1024
  num_encoder_layers: int = 6
  num_decoder_layers: int = 6
  dropout_rate: float = 0.1
  attention_dropout_rate: float | None = None
  normalize_before: bool = True
  share_embeddings: bool = False
  tie_output: bool = False
  label_smoothing: float = 0.1
  implementation: Literal["vmap", "fused", "auto"] = "auto"
  loss_reduction: LossReduction = "token_mean"
  fused_loss: bool = True

  OLD_RUN_VALUES: ClassVar[dict[str, Any]] = {"implementation": "vmap", "fused_loss": False,
                                              **_OLD_RUN_VALUES}

  @property
  def shared_vocab(self) -> bool:
    return self.share_embeddings

  def build(self, src_vocab_size: int, tgt_vocab_size: int, dtype: Any,
            param_dtype: Any) -> models.Translator:
    return models.TransformerTranslator(
        src_vocab_size, tgt_vocab_size, model_dim=self.model_dim, num_heads=self.num_heads,
        ffn_hidden=self.ffn_hidden, num_encoder_layers=self.num_encoder_layers,
        num_decoder_layers=self.num_decoder_layers, dropout_rate=self.dropout_rate,
        attention_dropout_rate=self.attention_dropout_rate,
        normalize_before=self.normalize_before, share_embeddings=self.share_embeddings,
        tie_output=self.tie_output or self.share_embeddings, implementation=self.implementation,
        dtype=dtype, param_dtype=param_dtype)


@dataclasses.dataclass
class LuongConfig:
  """The Paddle couplet chapter's LSTM seq2seq with input feeding (models.LuongTranslator).

  Attributes:
    embed_dim: character embedding width (encoder and decoder each have their own table).
    hidden_size: LSTM width of the encoder and decoder; also the attention's width.
    num_layers: LSTM layers in the encoder and in the decoder.
    dropout_rate: between LSTM layers and on the decoder's top output.
    output_activation: 'none' as the chapter, or 'tanh' (Luong et al.'s attentional vector).
    label_smoothing: the share of the target probability spread over the vocabulary.
    loss_reduction: 'token_mean' or 'sequence_sum' (the chapter's; see the module docstring).
    fused_loss: training applies the output layer inside the loss (see TransformerConfig); runs
      saved before the setting existed computed the logits whole (OLD_RUN_VALUES).
  """
  embed_dim: int = 256
  hidden_size: int = 256
  num_layers: int = 2
  dropout_rate: float = 0.2
  output_activation: Literal["none", "tanh"] = "none"
  label_smoothing: float = 0.0
  loss_reduction: LossReduction = "token_mean"
  fused_loss: bool = True

  OLD_RUN_VALUES: ClassVar[dict[str, Any]] = {**_OLD_RUN_VALUES, "fused_loss": False}

  shared_vocab = False  # couplets share a vocabulary because their data does, not the model

  def build(self, src_vocab_size: int, tgt_vocab_size: int, dtype: Any,
            param_dtype: Any) -> models.Translator:
    return models.LuongTranslator(src_vocab_size, tgt_vocab_size, embed_dim=self.embed_dim,
                               hidden_size=self.hidden_size, num_layers=self.num_layers,
                               dropout_rate=self.dropout_rate,
                               output_activation=self.output_activation, dtype=dtype,
                               param_dtype=param_dtype)


@dataclasses.dataclass
class PlainConfig(BahdanauConfig):
  """d2l's encoder-decoder without attention (models.PlainTranslator): an embedding and a
  multi-layer LSTM encoder whose final state starts the decoder, and whose top layer's final h is
  joined to the embedding at every decoder step (d2l 10.7, with LSTMs in place of its GRUs, as
  BahdanauConfig). The same fields as BahdanauConfig, so `seq2seq_cpu` and `bahdanau_cpu` differ
  in the decoder alone; hidden_size is the context's width too. OLD_RUN_VALUES: BahdanauConfig's.
  """

  def build(self, src_vocab_size: int, tgt_vocab_size: int, dtype: Any,
            param_dtype: Any) -> models.Translator:
    return models.PlainTranslator(
        src_vocab_size, tgt_vocab_size, embed_dim=self.embed_dim, hidden_size=self.hidden_size,
        num_layers=self.num_layers, dropout_rate=self.dropout_rate, dtype=dtype,
        param_dtype=param_dtype, encode_padding=self.encode_padding)


def decoding_defaults(configs: dict[str, Callable[[], Any]]) -> str:
  """One sentence naming each named run's beam and length penalty (its `data.beam_size` and
  `data.length_penalty`), for the --help of the decoding commands."""
  runs = []
  for name, make in configs.items():
    data = make().data
    runs.append(f"{name} beam {data.beam_size}, length penalty {data.length_penalty:g}")
  return ("Without --beam-size and --length-penalty, decoding uses the run's own data.beam_size "
          "and data.length_penalty (its config.json); the named runs': " + "; ".join(runs) + ".")
