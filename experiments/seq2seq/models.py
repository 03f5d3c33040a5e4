"""The sequence-to-sequence models behind one small interface, so tasks, decoding and plots need
no branches on the model family.

  BahdanauTranslator     zoo.bahdanau_seq2seq: embedding, multi-layer LSTM encoder, LSTM decoder
                         with additive (Bahdanau) attention (d2l 11.4).
  LuongTranslator        zoo.luong_seq2seq: the Paddle couplet chapter's LSTM encoder-decoder with
                         input feeding and Luong attention (input_proj of the encoder outputs, dot
                         score with the top LSTM output, output_proj of [context; output]); the
                         decoder starts from the encoder's final state.
  TransformerTranslator  zoo.transformer.Transformer: token embeddings * sqrt(D) + sinusoidal
                         positions, encoder-decoder stacks (pre-norm or post-norm), cached
                         incremental decoding.
  PlainTranslator        zoo.plain_seq2seq: d2l's encoder-decoder without attention (d2l 10.7's
                         Seq2SeqEncoder and Seq2SeqDecoder, LSTMs in place of its GRUs): the
                         encoder's final state starts the decoder, and its top layer's final h is
                         the context joined to the embedding at every step. No cross-attention
                         (`has_attention` False: `cross_attention` raises NoAttentionError).

Each wraps a Flax module and exposes pure functions of (params, arrays), safe to jit:
  init(rng, src, src_len, tgt_in)                  -> params
  logits(params, src, src_len, tgt_in, rng=None)   -> (B, T, V) teacher-forced; dropout if rng
  cross_attention(params, src, src_len, tgt_in)    -> (B, T, S) source-target weights (the
                                                      Transformer's: last decoder layer, mean
                                                      over heads); NoAttentionError for a model
                                                      without attention (`has_attention` False)
  attention_maps(params, src, src_len, tgt_in)     -> {name: (B, layers, H, Q, K)}: every
                                                      attention, every layer and head
  init_decode_state(params, src, src_len, max_len) -> the zoo.search state (leading axis B)
  decode_step(params, state, tokens (N,))          -> (logits (N, V), state)

Shapes: B batch, S source length, T target length, V target vocabulary, N search rows.
"""

from __future__ import annotations

import abc
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoo import seq2seq
from zoo.transformer import Transformer

Params = Any


class NoAttentionError(ValueError):
  """Asked for the cross-attention weights of a model that has none (PlainTranslator)."""


def _dropout_rngs(rng: jax.Array | None) -> dict[str, jax.Array]:
  return {} if rng is None else {"dropout": rng}


class Translator(abc.ABC):
  """A sequence-to-sequence Flax module and the pure functions the tasks and decoders call."""

  # Whether `cross_attention` has weights to give (heatmaps and reports check it first).
  has_attention = True

  def __init__(self, module: nn.Module):
    self.module = module

  # Equal modules make equal translators, so jitted functions that take a translator as a static
  # argument compile once for every task built from the same config.
  def __eq__(self, other) -> bool:
    return type(other) is type(self) and other.module == self.module

  def __hash__(self) -> int:
    return hash((type(self), self.module))

  @abc.abstractmethod
  def init(self, rng: jax.Array, src: jax.Array, src_len: jax.Array,
           tgt_in: jax.Array) -> Params:
    """Parameters for int (B, S) sources with lengths (B,) and int (B, T) decoder inputs."""

  @abc.abstractmethod
  def logits(self, params: Params, src: jax.Array, src_len: jax.Array, tgt_in: jax.Array,
             rng: jax.Array | None = None) -> jax.Array:
    """Teacher forcing: next-token logits (B, T, V) after each decoder input; dropout if rng."""

  def hidden_and_output_layer(self, params: Params, src: jax.Array, src_len: jax.Array,
                              tgt_in: jax.Array, rng: jax.Array | None = None
                              ) -> tuple[jax.Array, jax.Array, jax.Array | None] | None:
    """`logits` stopped before the output layer: (hidden (B, T, D), kernel (D, V), bias (V,) or
    None), whose hidden @ kernel + bias are the logits, for a loss that applies the output layer
    itself (fused_loss.py); None where the model has no such single output layer."""
    del params, src, src_len, tgt_in, rng
    return None

  @abc.abstractmethod
  def cross_attention(self, params: Params, src: jax.Array, src_len: jax.Array,
                      tgt_in: jax.Array) -> jax.Array:
    """float (B, T, S): the weights over the source while predicting each target position.

    Raises:
      NoAttentionError: the model has no cross-attention (`has_attention` False).
    """

  def attention_maps(self, params: Params, src: jax.Array, src_len: jax.Array,
                     tgt_in: jax.Array) -> dict[str, jax.Array]:
    """Every attention of the model under teacher forcing, float32 (B, layers, H, Q, K) each:
    here the one source-target attention, 'cross_attention' (B, 1, 1, T, S); models with more
    (the Transformer's self-attention, its every layer and head) override this."""
    weights = self.cross_attention(params, src, src_len, tgt_in)  # (B, T, S)
    return {"cross_attention": weights.astype(jnp.float32)[:, None, None]}

  @abc.abstractmethod
  def init_decode_state(self, params: Params, src: jax.Array, src_len: jax.Array,
                        max_len: int) -> Any:
    """The search state before the first target token, for up to `max_len` target tokens."""

  @abc.abstractmethod
  def decode_step(self, params: Params, state: Any, tokens: jax.Array) -> tuple[jax.Array, Any]:
    """One step of the zoo.search contract: tokens int (N,) -> (logits (N, V), new state)."""


class BahdanauTranslator(Translator):
  """d2l's seq2seq with Bahdanau attention (zoo.seq2seq.Seq2Seq with a BahdanauDecoder);
  encode_padding: the encoder reads the padding too, as d2l's (zoo.seq2seq.Seq2Seq)."""

  def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, embed_dim: int,
               hidden_size: int, num_layers: int, dropout_rate: float, dtype: Any = jnp.float32,
               param_dtype: Any = jnp.float32, encode_padding: bool = False):
    super().__init__(seq2seq.bahdanau_seq2seq(src_vocab_size, tgt_vocab_size, embed_dim,
                                              hidden_size, num_layers, dropout_rate, dtype,
                                              param_dtype, encode_padding))

  def init(self, rng, src, src_len, tgt_in):
    return self.module.init({"params": rng}, src, src_len, tgt_in)["params"]

  def _forward(self, params, src, src_len, tgt_in, rng=None):
    return self.module.apply({"params": params}, src, src_len, tgt_in,
                             deterministic=rng is None, rngs=_dropout_rngs(rng))

  def logits(self, params, src, src_len, tgt_in, rng=None):
    return self._forward(params, src, src_len, tgt_in, rng)[0]

  def hidden_and_output_layer(self, params, src, src_len, tgt_in, rng=None):
    return self.module.apply({"params": params}, src, src_len, tgt_in,
                             deterministic=rng is None, rngs=_dropout_rngs(rng),
                             method=seq2seq.Seq2Seq.hidden_and_output_layer)

  def cross_attention(self, params, src, src_len, tgt_in):
    return self._forward(params, src, src_len, tgt_in)[1]  # (B, T, S)

  def init_decode_state(self, params, src, src_len, max_len):
    del max_len  # the recurrent state does not grow with the output
    return self.module.apply({"params": params}, src, src_len,
                             method=seq2seq.Seq2Seq.init_decode_state)

  def decode_step(self, params, state, tokens):
    return self.module.apply({"params": params}, state, tokens,
                             method=seq2seq.Seq2Seq.decode_step)


class TransformerTranslator(Translator):
  """The Transformer encoder-decoder (zoo.transformer.Transformer); keyword arguments are its
  fields (model_dim, num_heads, ffn_hidden, num_encoder_layers, normalize_before, ...)."""

  def __init__(self, src_vocab_size: int, tgt_vocab_size: int, **fields):
    super().__init__(Transformer(src_vocab_size, tgt_vocab_size, **fields))

  def init(self, rng, src, src_len, tgt_in):
    return self.module.init({"params": rng}, src, tgt_in, src_len)["params"]

  def logits(self, params, src, src_len, tgt_in, rng=None):
    return self.module.apply({"params": params}, src, tgt_in, src_len, deterministic=rng is None,
                             rngs=_dropout_rngs(rng))

  def hidden_and_output_layer(self, params, src, src_len, tgt_in, rng=None):
    return self.module.apply({"params": params}, src, tgt_in, src_len, deterministic=rng is None,
                             rngs=_dropout_rngs(rng), method=Transformer.hidden_and_output_layer)

  def _sown(self, params, src, src_len, tgt_in) -> dict[str, Any]:
    """The weights every attention sows under teacher forcing ('intermediates')."""
    # The fused path computes no weights; 'vmap' does, with the same parameters.
    module = self.module.clone(implementation="vmap")
    _, variables = module.apply({"params": params}, src, tgt_in, src_len,
                                mutable=["intermediates"])
    return variables["intermediates"]

  def cross_attention(self, params, src, src_len, tgt_in):
    last = f"layers_{self.module.num_decoder_layers - 1}"
    sown = self._sown(params, src, src_len, tgt_in)
    weights = sown["decoder"][last]["cross_attention_weights"][0]  # (B, H, T, S)
    return jnp.mean(weights.astype(jnp.float32), axis=1)  # (B, H, T, S) -> (B, T, S)

  def attention_maps(self, params, src, src_len, tgt_in):
    """'encoder_self_attention' (B, layers, H, S, S), 'decoder_self_attention' (B, layers, H, T,
    T) and 'cross_attention' (B, layers, H, T, S): every layer and head."""
    sown = self._sown(params, src, src_len, tgt_in)

    def stack(stack_name: str, count: int, weights_name: str) -> jax.Array:
      layers = [sown[stack_name][f"layers_{i}"][weights_name][0] for i in range(count)]
      return jnp.stack(layers, axis=1).astype(jnp.float32)  # (B, layers, H, Q, K)

    m = self.module
    return {"encoder_self_attention": stack("encoder", m.num_encoder_layers,
                                            "self_attention_weights"),
            "decoder_self_attention": stack("decoder", m.num_decoder_layers,
                                            "self_attention_weights"),
            "cross_attention": stack("decoder", m.num_decoder_layers, "cross_attention_weights")}

  def init_decode_state(self, params, src, src_len, max_len):
    return self.module.apply({"params": params}, src, src_len, max_len=max_len,
                             method=Transformer.init_decode_state)

  def decode_step(self, params, state, tokens):
    return self.module.apply({"params": params}, state, tokens, method=Transformer.decode_step)


class LuongTranslator(BahdanauTranslator):
  """zoo.luong_seq2seq behind the Translator interface.

  The teacher-forcing, attention and decoding functions are those of any zoo.seq2seq.Seq2Seq, so
  they are inherited from BahdanauTranslator; only the module differs.

  Args:
    src_vocab_size, tgt_vocab_size: the source and target vocabulary sizes.
    embed_dim, hidden_size, num_layers, dropout_rate: as zoo.luong_seq2seq (the couplet chapter:
      256, 256, 2, 0.2).
    output_activation: 'none' (the chapter: the attentional vector is output_proj's result) or
      'tanh' (Luong et al.).
    dtype, param_dtype: computation and storage dtypes.
  """

  OUTPUT_ACTIVATIONS = {"none": None, "tanh": jnp.tanh}

  def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, embed_dim: int,
               hidden_size: int, num_layers: int, dropout_rate: float,
               output_activation: str = "none", dtype: Any = jnp.float32,
               param_dtype: Any = jnp.float32):
    if output_activation not in self.OUTPUT_ACTIVATIONS:
      raise ValueError(f"output_activation must be one of {sorted(self.OUTPUT_ACTIVATIONS)}, got "
                       f"{output_activation!r}")
    Translator.__init__(self, seq2seq.luong_seq2seq(
        src_vocab_size, tgt_vocab_size, embed_dim, hidden_size, num_layers, dropout_rate, dtype,
        param_dtype, output_activation=self.OUTPUT_ACTIVATIONS[output_activation]))



class PlainTranslator(BahdanauTranslator):
  """d2l's attention-free encoder-decoder (zoo.plain_seq2seq) behind the Translator interface.

  The chapter's comparison: the same encoder as BahdanauTranslator's, but the decoder sees the
  source only through the encoder's final state (its start and its fixed context), never the
  encoder's outputs. Teacher forcing and decoding are those of any zoo.seq2seq.Seq2Seq
  (inherited); `cross_attention` raises NoAttentionError and `attention_maps` is empty.
  """

  has_attention = False

  def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, embed_dim: int,
               hidden_size: int, num_layers: int, dropout_rate: float, dtype: Any = jnp.float32,
               param_dtype: Any = jnp.float32, encode_padding: bool = False):
    Translator.__init__(self, seq2seq.plain_seq2seq(
        src_vocab_size, tgt_vocab_size, embed_dim, hidden_size, num_layers, dropout_rate, dtype,
        param_dtype, encode_padding))

  def cross_attention(self, params, src, src_len, tgt_in):
    raise NoAttentionError(
        "the attention-free encoder-decoder (PlainTranslator, e.g. the named runs seq2seq_d2l "
        "and seq2seq_cpu) has no cross-attention weights: its decoder reads the encoder's final "
        "state only, so there is no heatmap to draw")

  def attention_maps(self, params, src, src_len, tgt_in):
    """{}: the model has no attention of any kind."""
    del params, src, src_len, tgt_in
    return {}
