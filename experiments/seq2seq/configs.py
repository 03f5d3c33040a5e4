"""The model configs of the sequence-to-sequence experiments: typed hyperparameters, each with a
`build(src_vocab_size, tgt_vocab_size, dtype, param_dtype)` that returns a models.Translator.

  BahdanauConfig     d2l's seq2seq with additive attention (translation).
  TransformerConfig  the Transformer encoder-decoder (translation and couplets).
  LuongConfig        the couplet chapter's LSTM seq2seq with input feeding and Luong attention.

Every config also says whether the model wants one vocabulary for source and target
(`shared_vocab`) and how much label smoothing its loss uses (`label_smoothing`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Literal

from experiments.seq2seq import models


@dataclasses.dataclass
class BahdanauConfig:
  """d2l's seq2seq with Bahdanau attention (see models.BahdanauTranslator).

  Attributes:
    embed_dim: token embedding width (source and target).
    hidden_size: LSTM width of the encoder and decoder, and the additive attention's width.
    num_layers: LSTM layers in the encoder and in the decoder.
    dropout_rate: between LSTM layers and on the attention weights.
    label_smoothing: the share of the target probability spread uniformly over the vocabulary.
  """
  embed_dim: int = 256
  hidden_size: int = 512
  num_layers: int = 2
  dropout_rate: float = 0.2
  label_smoothing: float = 0.0

  shared_vocab = False  # a joint English+French vocabulary is never needed

  def build(self, src_vocab_size: int, tgt_vocab_size: int, dtype: Any,
            param_dtype: Any) -> models.Translator:
    return models.BahdanauTranslator(
        src_vocab_size, tgt_vocab_size, embed_dim=self.embed_dim, hidden_size=self.hidden_size,
        num_layers=self.num_layers, dropout_rate=self.dropout_rate, dtype=dtype,
        param_dtype=param_dtype)


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
    implementation: 'vmap', 'fused' or 'auto' attention (zoo.MultiHeadAttention); heatmaps
      always use 'vmap', which has the same parameters.
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
  implementation: Literal["vmap", "fused", "auto"] = "vmap"

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
  """
  embed_dim: int = 256
  hidden_size: int = 256
  num_layers: int = 2
  dropout_rate: float = 0.2
  output_activation: Literal["none", "tanh"] = "none"
  label_smoothing: float = 0.0

  shared_vocab = False  # couplets share a vocabulary because their data does, not the model

  def build(self, src_vocab_size: int, tgt_vocab_size: int, dtype: Any,
            param_dtype: Any) -> models.Translator:
    return models.LuongTranslator(src_vocab_size, tgt_vocab_size, embed_dim=self.embed_dim,
                               hidden_size=self.hidden_size, num_layers=self.num_layers,
                               dropout_rate=self.dropout_rate,
                               output_activation=self.output_activation, dtype=dtype,
                               param_dtype=param_dtype)


def decoding_defaults(configs: dict[str, Callable[[], Any]]) -> str:
  """One sentence naming each named run's beam and length penalty (its `data.beam_size` and
  `data.length_penalty`), for the --help of the decoding commands."""
  runs = []
  for name, make in configs.items():
    data = make().data
    runs.append(f"{name} beam {data.beam_size}, length penalty {data.length_penalty:g}")
  return ("Without --beam-size and --length-penalty, decoding uses the run's own data.beam_size "
          "and data.length_penalty (its config.json); the named runs': " + "; ".join(runs) + ".")
