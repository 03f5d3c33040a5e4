"""The two couplet models behind the translation experiment's `Translator` interface.

  LuongCouplet         the Paddle couplet chapter's model (zoo.luong_seq2seq): embedding, a
                       multi-layer LSTM encoder, an LSTM decoder with input feeding and Luong
                       attention (input_proj of the encoder outputs, dot score with the top LSTM
                       output, padding mask, output_proj of [context; output]); the decoder starts
                       from the encoder's final state.
  TransformerCouplet   zoo.transformer.Transformer over the shared couplet vocabulary (the
                       translation experiment's TransformerTranslator, re-exported).

Both expose init / logits / cross_attention / init_decode_state / decode_step as pure functions
of (params, arrays) (see experiments.translation.models), which is what the couplet task and
experiments.seq2seq_common.SearchDecoder call.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from experiments.translation.models import BahdanauTranslator
from experiments.translation.models import Translator
from experiments.translation.models import TransformerTranslator as TransformerCouplet
from zoo import seq2seq

__all__ = ["LuongCouplet", "TransformerCouplet", "Translator"]


class LuongCouplet(BahdanauTranslator):
  """zoo.luong_seq2seq behind the Translator interface.

  The teacher-forcing, attention and decoding functions are those of any zoo.seq2seq.Seq2Seq, so
  they are inherited from BahdanauTranslator; only the module differs.

  Args:
    src_vocab_size, tgt_vocab_size: the vocabularies of upper and lower lines (one shared
      vocabulary: the same size).
    embed_dim, hidden_size, num_layers, dropout_rate: as zoo.luong_seq2seq (the chapter: 256,
      256, 2, 0.2).
    output_activation: 'none' (the chapter: the attentional vector is output_proj's result) or
      'tanh' (Luong et al.).
    dtype, param_dtype: computation and storage dtypes.
  """

  def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, embed_dim: int,
               hidden_size: int, num_layers: int, dropout_rate: float,
               output_activation: str = "none", dtype: Any = jnp.float32,
               param_dtype: Any = jnp.float32):
    activations = {"none": None, "tanh": jnp.tanh}
    if output_activation not in activations:
      raise ValueError(f"output_activation must be one of {sorted(activations)}, got "
                       f"{output_activation!r}")
    Translator.__init__(self, seq2seq.luong_seq2seq(
        src_vocab_size, tgt_vocab_size, embed_dim, hidden_size, num_layers, dropout_rate, dtype,
        param_dtype, output_activation=activations[output_activation]))
