"""Transformer blocks, stacks and a token-level encoder-decoder (Vaswani et al.; d2l and Paddle).

  PositionwiseFFN            Dense(hidden) -> activation -> dropout -> Dense(D), at every position.
  EncoderBlock               self-attention and FFN, each wrapped in residual + LayerNorm.
  DecoderBlock               masked self-attention (with a key/value cache when decoding),
                             cross-attention over the encoder outputs, FFN.
  TransformerEncoder/Decoder N blocks over already-embedded inputs (B, L, D).
  Transformer                embeddings * sqrt(D) + sinusoidal positions, encoder, decoder, logits;
                             `decode_step` for greedy/beam search (zoo.search).

Every block comes in post-norm form, x = LN(x + dropout(f(x))) (the original Transformer, d2l's
AddNorm), or pre-norm form, x = x + dropout(f(LN(x))) (`normalize_before=True`, Paddle's name), in
which case a stack ends with a final LayerNorm. Masks are built once at the top (True = may attend)
and passed down unchanged. Attention weights are sown into the 'intermediates' collection as
'self_attention_weights' and 'cross_attention_weights' (B, H, Q, K) when that collection is mutable
and implementation is 'vmap' or 'auto' (the fused path does not compute weights).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence, cast

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoo import batching
from zoo import checks
from zoo import masking
from zoo import positional
from zoo.multihead import MultiHeadAttention

Dtype = Any
PyTree = Any
# DecoderBlock / TransformerDecoder x when projecting enc_outputs only
_PROJECT_SOURCE: Any = object()


class PositionwiseFFN(nn.Module):
  """The same two-layer network applied at every position.

  Attributes:
    hidden: the inner width (Vaswani: 4 * D).
    dropout_rate: dropout after the activation (Paddle's act_dropout).
    activation: the nonlinearity (ReLU by default).
    out_features: the output width; default the input width D.
    dtype: the dtype of the computation; None (the default): the promoted type of the inputs and
      parameters (flax's Dense).
    param_dtype: the dtype parameters are stored in.
  """
  hidden: int
  dropout_rate: float = 0.0
  activation: Callable[[jax.Array], jax.Array] = nn.relu
  out_features: int | None = None
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
    """x (..., D) -> (..., out_features or D)."""
    checks.floating(x, "x")
    checks.min_rank(x, 1, "x")
    dense = lambda features, name: nn.Dense(features, dtype=self.dtype,
                                            param_dtype=self.param_dtype, name=name)
    h = self.activation(dense(self.hidden, "dense_in")(x))  # (..., hidden)
    h = nn.Dropout(self.dropout_rate)(h, deterministic=deterministic)
    return dense(self.out_features or x.shape[-1], "dense_out")(h)


def _check_block_input(x: jax.Array, name: str) -> None:
  checks.rank(x, 3, name)
  checks.floating(x, name)


def _block_lead(x: jax.Array, decode: bool = False) -> tuple[int, ...]:
  """The batch axes of a block's input x (*batch, L, D); exactly (B,) when decoding."""
  if decode:
    _check_block_input(x, "x")
    return x.shape[:1]
  lead = batching.leading_shape(x, 2, "x")
  checks.floating(x, "x")
  return lead


def padding_mask(valid_lens: jax.Array | None, mask: jax.Array | None, lead: tuple[int, ...],
                 num_heads: int, num_q: int, num_k: int) -> jax.Array | None:
  """The zoo's rule (zoo.masking.key_mask) for a block's `valid_lens=` and `mask=`, folded.

  Args:
    valid_lens: None or int (*lead,) (or (*lead, Q)), the valid keys of each example (row).
    mask: None or bool broadcastable to (*lead, H, Q, K), True = may attend.
    lead: the batch axes.
    num_heads: H.
    num_q: Q.
    num_k: K.

  Returns:
    bool broadcastable to the folded scores (B, H, Q, K), B = prod(lead); None for neither.
  """
  valid_lens = batching.fold_lengths(valid_lens, lead, (num_q,), "valid_lens")
  mask = batching.fold_mask(mask, lead, (num_heads, num_q, num_k), "mask",
                            "the scores (*batch, H, Q, K) =")
  batch = math.prod(lead)
  return masking.key_mask(valid_lens, mask, (batch, num_heads, num_q, num_k), heads=True)


class _Sublayers(nn.Module):
  """Hyperparameters shared by the blocks and stacks (keyword-only), and the residual wiring.

  Attributes:
    num_heads: H.
    ffn_hidden: the inner width of the position-wise FFN.
    dropout_rate: dropout on each sublayer's output before the residual sum, and after the FFN's
      activation.
    attention_dropout_rate: dropout on the attention weights; None means dropout_rate.
    activation_dropout_rate: dropout after the FFN's activation (Paddle's act_dropout); None
      means dropout_rate.
    normalize_before: pre-norm (True) or post-norm (False, the original Transformer).
    activation: the FFN's nonlinearity.
    qkv_features: H * Dh of every attention; default D.
    num_kv_heads: key/value heads of the self-attention and cross-attention (grouped-query).
    implementation: 'auto' (the default), 'vmap' or 'fused' (see MultiHeadAttention).
    layer_norm_epsilon: LayerNorm's epsilon (1e-5, as PyTorch and Paddle).
    dtype: the dtype of the computation and of the residual stream; None (the default): the
      promoted type of the inputs and param_dtype (flax's rule). LayerNorm statistics and the
      attention softmax are computed in float32 whatever the dtype.
    param_dtype: the dtype parameters are stored in.
  """
  _: dataclasses.KW_ONLY
  num_heads: int
  ffn_hidden: int
  dropout_rate: float = 0.1
  attention_dropout_rate: float | None = None
  activation_dropout_rate: float | None = None
  normalize_before: bool = False
  activation: Callable[[jax.Array], jax.Array] = nn.relu
  qkv_features: int | None = None
  num_kv_heads: int | None = None
  implementation: str = "auto"
  layer_norm_epsilon: float = 1e-5
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32

  def _sublayer_fields(self) -> dict[str, Any]:
    """The shared hyperparameters, to build blocks with."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(_Sublayers)
            if f.name not in ("parent", "name")}

  def _stream_dtype(self, x: jax.Array) -> Dtype:
    """The residual stream's dtype: `dtype`, or (None) the promoted type of x and param_dtype."""
    return self.dtype if self.dtype is not None else jnp.promote_types(x.dtype, self.param_dtype)

  def _layer_norm(self, name: str) -> nn.LayerNorm:
    return nn.LayerNorm(epsilon=self.layer_norm_epsilon, dtype=self.dtype,
                        param_dtype=self.param_dtype, name=name)

  def _residual(self, name: str, x: jax.Array, sublayer: Callable[[jax.Array], jax.Array],
                deterministic: bool) -> jax.Array:
    """Post-norm LN(x + dropout(f(x))) or pre-norm x + dropout(f(LN(x))); x (B, L, D)."""
    norm = self._layer_norm(f"{name}_norm")
    drop = lambda h: nn.Dropout(self.dropout_rate)(h, deterministic=deterministic)
    if self.normalize_before:
      return x + drop(sublayer(norm(x)))
    return norm(x + drop(sublayer(x)))

  def _mha(self, name: str) -> MultiHeadAttention:
    rate = self.dropout_rate if self.attention_dropout_rate is None else self.attention_dropout_rate
    return MultiHeadAttention(num_heads=self.num_heads, qkv_features=self.qkv_features,
                              dropout_rate=rate, num_kv_heads=self.num_kv_heads,
                              implementation=self.implementation, dtype=self.dtype,
                              param_dtype=self.param_dtype, name=name)

  def _attention(self, name: str, queries: jax.Array, keys: jax.Array | None,
                 mask: jax.Array | None, deterministic: bool, decode: bool = False,
                 key_value: tuple[jax.Array, jax.Array] | None = None) -> jax.Array:
    """Multi-head attention queries (B, Q, D) over keys (B, K, D) (None: self), or over keys and
    values projected before (`key_value`); sows the weights."""
    mha = self._mha(name)
    # 'auto' runs the vmapped path whenever weights are asked for.
    sow = self.implementation != "fused" and self.is_mutable_collection("intermediates")
    result = mha(queries, keys, mask=mask, deterministic=deterministic, return_weights=sow,
                 decode=decode, key_value=key_value)
    if not sow:
      return cast(jax.Array, result)
    out, weights = result
    self.sow("intermediates", f"{name}_weights", weights)
    return out

  def _ffn(self, x: jax.Array, deterministic: bool) -> jax.Array:
    rate = (self.dropout_rate if self.activation_dropout_rate is None
            else self.activation_dropout_rate)
    ffn = PositionwiseFFN(self.ffn_hidden, dropout_rate=rate,
                          activation=self.activation, dtype=self.dtype,
                          param_dtype=self.param_dtype, name="ffn")
    return ffn(x, deterministic=deterministic)


class EncoderBlock(_Sublayers):
  """Self-attention then FFN, each with residual + LayerNorm (post- or pre-norm).

  Built with keyword arguments only (see _Sublayers for all of them), e.g.
  `EncoderBlock(num_heads=4, ffn_hidden=48, normalize_before=True)`.
  """

  @nn.compact
  def __call__(self, x: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None, deterministic: bool = True) -> jax.Array:
    """Encodes x.

    Args:
      x: float (*batch, L, D), any leading batch shape, none included.
      valid_lens: int (*batch,) (or (*batch, L), one per query position): the valid positions;
        later ones are padding, never attended to.
      mask: bool broadcastable to (*batch, H, L, L), True = may attend (e.g. key padding
        (B, 1, 1, L)). Given both, a key may be attended iff both allow it
        (zoo.masking.key_mask).
      deterministic: False applies dropout.

    Returns:
      (*batch, L, D) in `dtype`.
    """
    lead = _block_lead(x)
    length = x.shape[-2]
    mask = padding_mask(valid_lens, mask, lead, self.num_heads, length, length)
    x = jnp.asarray(batching.fold(x, lead), self._stream_dtype(x))  # the residual stream
    attend = lambda h: self._attention("self_attention", h, None, mask, deterministic)
    x = self._residual("self_attention", x, attend, deterministic)
    x = self._residual("ffn", x, lambda h: self._ffn(h, deterministic), deterministic)
    return batching.unfold(x, lead)


class DecoderBlock(_Sublayers):
  """Masked self-attention, cross-attention over the encoder outputs, FFN; each with residual +
  LayerNorm (post- or pre-norm). Keyword arguments only (see _Sublayers)."""

  @nn.compact
  def __call__(self, x: jax.Array, enc_outputs: jax.Array, *,
               valid_lens: jax.Array | None = None, mask: jax.Array | None = None,
               self_mask: jax.Array | None = None, deterministic: bool = True,
               decode: bool = False,
               cross_key_value: tuple[jax.Array, jax.Array] | None = None) -> jax.Array:
    """Decodes x given the encoder outputs.

    Args:
      x: float (*batch, T, D), the embedded target positions; any leading batch shape, none
        included, except when decoding (exactly (B, T, D)).
      enc_outputs: float (*batch, S, D), the padded sequence the cross-attention reads.
      valid_lens: int (*batch,), the valid source positions (later ones are padding).
      mask: bool broadcastable to (*batch, H, T, S), the cross-attention's mask, True = may
        attend. Given both, a source position may be attended iff both allow it
        (zoo.masking.key_mask).
      self_mask: bool broadcastable to (*batch, H, T, T), the self-attention's mask, normally
        causal; None when decoding with the cache, which masks causally itself.
      deterministic: False applies dropout.
      decode: use and update the self-attention's key/value cache (see MultiHeadAttention).
      cross_key_value: the cross-attention's keys and values of enc_outputs from
        `project_source` (each (B, S, Hkv, Dh)), so that a decoding step does not project the same
        encoder outputs again; None projects them here.

    Returns:
      (*batch, T, D) in `dtype`.
    """
    if x is _PROJECT_SOURCE:
      _check_block_input(enc_outputs, "enc_outputs")
      return self._mha("cross_attention").project_key_value(  # type: ignore[return-value]
          jnp.asarray(enc_outputs, self.dtype))  # project_source's result, through __call__
    lead = _block_lead(x, decode)
    batching.same_leading(enc_outputs, "enc_outputs", 2, lead, "x")
    checks.floating(enc_outputs, "enc_outputs")
    length, src_len = x.shape[-2], enc_outputs.shape[-2]
    cross_mask = padding_mask(valid_lens, mask, lead, self.num_heads, length, src_len)
    if not decode:  # when decoding, the keys are the whole cache (checked by MultiHeadAttention)
      self_mask = batching.fold_mask(self_mask, lead, (self.num_heads, length, length),
                                     "self_mask", "the scores (*batch, H, T, T) =")
    x = jnp.asarray(batching.fold(x, lead), self._stream_dtype(x))  # the residual stream
    enc_outputs = batching.fold(enc_outputs, lead)
    attend_self = lambda h: self._attention("self_attention", h, None, self_mask, deterministic,
                                            decode)
    attend_source = lambda h: self._attention("cross_attention", h, enc_outputs, cross_mask,
                                              deterministic, key_value=cross_key_value)
    x = self._residual("self_attention", x, attend_self, deterministic)
    x = self._residual("cross_attention", x, attend_source, deterministic)
    x = self._residual("ffn", x, lambda h: self._ffn(h, deterministic), deterministic)
    return batching.unfold(x, lead)

  def project_source(self, enc_outputs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The cross-attention's keys and values of float enc_outputs (B, S, D): (key, value), each
    (B, S, Hkv, Dh), for `cross_key_value`."""
    return cast(tuple[jax.Array, jax.Array], self(_PROJECT_SOURCE, enc_outputs))


class TransformerEncoder(_Sublayers):
  """`num_layers` EncoderBlocks (named layers_0, ...) over embedded inputs, plus a final LayerNorm
  in pre-norm form. `TransformerEncoder(num_layers, num_heads=..., ffn_hidden=..., ...)`."""
  num_layers: int

  @nn.compact
  def __call__(self, x: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None, deterministic: bool = True) -> jax.Array:
    """x (*batch, L, D), valid_lens and mask as in EncoderBlock -> (*batch, L, D); the mask is
    built once here and passed down to every block."""
    lead = _block_lead(x)
    length = x.shape[-2]
    mask = padding_mask(valid_lens, mask, lead, self.num_heads, length, length)
    x = batching.fold(x, lead)  # (B, L, D)
    for i in range(self.num_layers):
      x = EncoderBlock(**self._sublayer_fields(), name=f"layers_{i}")(
          x, mask=mask, deterministic=deterministic)
    x = self._layer_norm("final_norm")(x) if self.normalize_before else x
    return batching.unfold(x, lead)


class TransformerDecoder(_Sublayers):
  """`num_layers` DecoderBlocks (named layers_0, ...) over embedded targets, plus a final LayerNorm
  in pre-norm form. `TransformerDecoder(num_layers, num_heads=..., ffn_hidden=..., ...)`."""
  num_layers: int

  @nn.compact
  def __call__(self, x: jax.Array, enc_outputs: jax.Array, *,
               valid_lens: jax.Array | None = None, mask: jax.Array | None = None,
               self_mask: jax.Array | None = None, deterministic: bool = True,
               decode: bool = False,
               cross_key_values: Sequence[tuple[jax.Array, jax.Array]] | None = None
               ) -> jax.Array:
    """x (*batch, T, D), enc_outputs (*batch, S, D) -> (*batch, T, D); arguments as in
    DecoderBlock (the cross-attention's mask is built once here from valid_lens and mask), with
    `cross_key_values` one layer's cross_key_value per layer (from `project_sources`)."""
    blocks = [DecoderBlock(**self._sublayer_fields(), name=f"layers_{i}")
              for i in range(self.num_layers)]
    if x is _PROJECT_SOURCE:
      sources = tuple(block.project_source(enc_outputs) for block in blocks)
      return sources  # type: ignore[return-value]  # project_sources' result, through __call__
    if cross_key_values is not None and len(cross_key_values) != self.num_layers:
      raise ValueError(f"cross_key_values: expected one (key, value) per layer ({self.num_layers}),"
                       f" got {len(cross_key_values)}")
    lead = _block_lead(x, decode)
    batching.same_leading(enc_outputs, "enc_outputs", 2, lead, "x")
    length, src_len = x.shape[-2], enc_outputs.shape[-2]
    mask = padding_mask(valid_lens, mask, lead, self.num_heads, length, src_len)
    if not decode:
      self_mask = batching.fold_mask(self_mask, lead, (self.num_heads, length, length),
                                     "self_mask", "the scores (*batch, H, T, T) =")
    x, enc_outputs = batching.fold(x, lead), batching.fold(enc_outputs, lead)
    for i, block in enumerate(blocks):
      x = block(x, enc_outputs, mask=mask, self_mask=self_mask, deterministic=deterministic,
                decode=decode,
                cross_key_value=None if cross_key_values is None else cross_key_values[i])
    x = self._layer_norm("final_norm")(x) if self.normalize_before else x
    return batching.unfold(x, lead)

  def project_sources(self, enc_outputs: jax.Array) -> tuple[tuple[jax.Array, jax.Array], ...]:
    """Every layer's cross-attention keys and values of enc_outputs (B, S, D), for
    `cross_key_values`: one (key, value) per layer, each (B, S, Hkv, Dh)."""
    return cast(tuple[tuple[jax.Array, jax.Array], ...], self(_PROJECT_SOURCE, enc_outputs))


class Transformer(_Sublayers):
  """Token-level Transformer encoder-decoder for sequence to sequence tasks.

  `Transformer(src_vocab_size, tgt_vocab_size, model_dim=..., num_heads=..., ffn_hidden=..., ...)`
  with the block hyperparameters of _Sublayers as keywords.

  Attributes:
    src_vocab_size: source vocabulary size.
    tgt_vocab_size: V, target vocabulary size.
    model_dim: D.
    num_encoder_layers: encoder blocks.
    num_decoder_layers: decoder blocks.
    share_embeddings: one embedding table for source and target (needs equal vocabularies).
    tie_output: the output projection is the transposed target embedding (no bias).
    max_len: the longest position the sinusoidal encoding is checked for.
  """
  src_vocab_size: int
  tgt_vocab_size: int
  _: dataclasses.KW_ONLY
  model_dim: int
  num_encoder_layers: int = 6
  num_decoder_layers: int = 6
  share_embeddings: bool = False
  tie_output: bool = False
  max_len: int = 1000

  def setup(self):
    if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
      raise ValueError(f"share_embeddings needs src_vocab_size == tgt_vocab_size, got "
                       f"{self.src_vocab_size} and {self.tgt_vocab_size}")
    embed = lambda size, name: nn.Embed(size, self.model_dim, dtype=self.dtype,
                                        param_dtype=self.param_dtype, name=name)
    self.src_embed = embed(self.src_vocab_size, "src_embed")
    self.tgt_embed = (self.src_embed if self.share_embeddings
                      else embed(self.tgt_vocab_size, "tgt_embed"))
    self.positions = positional.SinusoidalPositionEncoding(
        dropout_rate=self.dropout_rate, max_len=self.max_len, dtype=self.dtype)
    fields = self._sublayer_fields()
    self.encoder = TransformerEncoder(self.num_encoder_layers, **fields)
    self.decoder = TransformerDecoder(self.num_decoder_layers, **fields)
    if not self.tie_output:
      self.output = nn.Dense(self.tgt_vocab_size, dtype=self.dtype, param_dtype=self.param_dtype)

  def _embed(self, table: nn.Embed, tokens: jax.Array, offset: int | jax.Array,
             deterministic: bool, name: str) -> jax.Array:
    """tokens int (B, L) -> (B, L, D): embedding * sqrt(D) + position encoding, dropout."""
    checks.rank(tokens, 2, name)
    checks.integer(tokens, name)
    x = table(tokens)  # (B, L, D)
    x = x * jnp.asarray(math.sqrt(self.model_dim), x.dtype)
    return self.positions(x, offset=offset, deterministic=deterministic)

  def _logits(self, hidden: jax.Array) -> jax.Array:
    """(B, T, D) -> (B, T, V)."""
    return self.tgt_embed.attend(hidden) if self.tie_output else self.output(hidden)

  @staticmethod
  def _source_mask(src_valid_lens: jax.Array | None, source: jax.Array,
                   source_name: str) -> jax.Array | None:
    """src_valid_lens int (B,) -> bool (B, 1, 1, S) for source (B, S, ...), or None."""
    if src_valid_lens is None:
      return None
    checks.integer(src_valid_lens, "src_valid_lens")
    checks.rank(src_valid_lens, 1, "src_valid_lens")
    checks.equal_dim(src_valid_lens, "src_valid_lens", 0, source, source_name, 0)
    return masking.key_padding_mask(src_valid_lens, source.shape[1])

  def encode(self, src_tokens: jax.Array, src_valid_lens: jax.Array | None = None, *,
             deterministic: bool = True) -> jax.Array:
    """src_tokens int (B, S), src_valid_lens int (B,) or None -> enc_outputs (B, S, D)."""
    x = self._embed(self.src_embed, src_tokens, 0, deterministic, "src_tokens")  # (B, S, D)
    mask = self._source_mask(src_valid_lens, src_tokens, "src_tokens")  # (B, 1, 1, S)
    return self.encoder(x, mask=mask, deterministic=deterministic)

  def decode(self, tgt_tokens: jax.Array, enc_outputs: jax.Array,
             src_valid_lens: jax.Array | None = None, *, deterministic: bool = True) -> jax.Array:
    """Teacher forcing: every target position at once, causally masked.

    Args:
      tgt_tokens: int (B, T), the decoder inputs (bos, y_1, ..., y_{T-1}).
      enc_outputs: (B, S, D).
      src_valid_lens: int (B,) or None, the valid source positions.
      deterministic: False applies dropout.

    Returns:
      logits (B, T, V).
    """
    return self._logits(self.decode_hidden(tgt_tokens, enc_outputs, src_valid_lens,
                                           deterministic=deterministic))

  def decode_hidden(self, tgt_tokens: jax.Array, enc_outputs: jax.Array,
                    src_valid_lens: jax.Array | None = None, *,
                    deterministic: bool = True) -> jax.Array:
    """`decode` without the output layer: the decoder's last states (B, T, D)."""
    x = self._embed(self.tgt_embed, tgt_tokens, 0, deterministic, "tgt_tokens")  # (B, T, D)
    causal = masking.causal_mask(tgt_tokens.shape[1])[None, None]  # (1, 1, T, T)
    cross = self._source_mask(src_valid_lens, enc_outputs, "enc_outputs")  # (B, 1, 1, S)
    return self.decoder(x, enc_outputs, self_mask=causal, mask=cross,
                        deterministic=deterministic)

  def __call__(self, src_tokens: jax.Array, tgt_tokens: jax.Array,
               src_valid_lens: jax.Array | None = None, *, deterministic: bool = True) -> jax.Array:
    """src_tokens int (B, S), tgt_tokens int (B, T), src_valid_lens (B,) -> logits (B, T, V)."""
    enc_outputs = self.encode(src_tokens, src_valid_lens, deterministic=deterministic)
    return self.decode(tgt_tokens, enc_outputs, src_valid_lens, deterministic=deterministic)

  def hidden_and_output_layer(self, src_tokens: jax.Array, tgt_tokens: jax.Array,
                              src_valid_lens: jax.Array | None = None, *,
                              deterministic: bool = True
                              ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """`__call__` stopped before the output layer, for a loss that applies it itself.

    Returns:
      (hidden (B, T, D), kernel (D, V), bias (V,) or None): the logits are
      hidden @ kernel + bias, computed in this module's dtype (with tie_output the kernel is the
      transposed target embedding and there is no bias).
    """
    enc_outputs = self.encode(src_tokens, src_valid_lens, deterministic=deterministic)
    hidden = self.decode_hidden(tgt_tokens, enc_outputs, src_valid_lens,
                                deterministic=deterministic)
    if self.tie_output:
      return hidden, self.tgt_embed.embedding.T, None
    if self.is_initializing():
      self._logits(hidden)  # creates the output layer's parameters
    layer = self.output.variables["params"]
    return hidden, layer["kernel"], layer["bias"]

  # Incremental decoding (the decoding contract of zoo.search): the decoder's key/value cache is
  # part of `state`, so a step is a pure function of (state, tokens) with the parameters closed
  # over: `lambda s, t: model.apply(variables, s, t, method=Transformer.decode_step)`.

  def init_decode_state(self, src_tokens: jax.Array, src_valid_lens: jax.Array | None = None, *,
                        max_len: int) -> PyTree:
    """Encodes the source and makes an empty cache for `max_len` target positions.

    Args:
      src_tokens: int (N, S).
      src_valid_lens: int (N,) or None (all S positions valid).
      max_len: the most target positions that will be decoded.

    Returns:
      state: {'enc_outputs' (N, S, D), 'src_valid_lens' int32 (N,), 'cross_key_values' (each
      decoder layer's cross-attention keys and values of enc_outputs, projected once here rather
      than at every step: ((N, S, Hkv, Dh), (N, S, Hkv, Dh)) per layer), 'cache' (each layer's
      cached_key/cached_value (N, max_len, Hkv, Dh) and cache_index ()), 'position' int32 ()}.
      Rank-0 leaves are shared by all rows, as the decoding contract requires.
    """
    enc_outputs = self.encode(src_tokens, src_valid_lens)  # (N, S, D)
    batch, src_len = src_tokens.shape
    if src_valid_lens is None:
      src_valid_lens = jnp.full((batch,), src_len, jnp.int32)
    decoder = self.decoder.clone(parent=None)
    targets = jax.ShapeDtypeStruct((batch, max_len, self.model_dim), enc_outputs.dtype)
    shapes = jax.eval_shape(  # the cache the decoder creates for inputs of length max_len
        lambda x, enc: decoder.init(jax.random.key(0), x, enc, decode=True)["cache"],
        targets, enc_outputs)
    cache = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    cross_key_values = decoder.apply({"params": self.decoder.variables["params"]}, enc_outputs,
                                     method=TransformerDecoder.project_sources)
    return {"enc_outputs": enc_outputs, "src_valid_lens": jnp.asarray(src_valid_lens, jnp.int32),
            "cross_key_values": cross_key_values, "cache": cache,
            "position": jnp.array(0, jnp.int32)}

  def prefill(self, state: PyTree, tokens: jax.Array) -> tuple[jax.Array, PyTree]:
    """Appends T >= 1 target tokens to the decoding state (a prompt of any length, or one step).

    Args:
      state: from init_decode_state or an earlier call.
      tokens: int (N, T), the next decoder inputs.

    Returns:
      (logits (N, T, V) for the next token after each of them, the new state).
    """
    x = self._embed(self.tgt_embed, tokens, state["position"], True, "tokens")  # (N, T, D)
    enc_outputs = state["enc_outputs"]
    cross = masking.key_padding_mask(state["src_valid_lens"], enc_outputs.shape[1])  # (N,1,1,S)
    decoder = self.decoder.clone(parent=None)
    hidden, updated = decoder.apply(
        {"params": self.decoder.variables["params"], "cache": state["cache"]}, x, enc_outputs,
        mask=cross, decode=True, cross_key_values=state.get("cross_key_values"),
        mutable=["cache"])
    new_state = dict(state, cache=updated["cache"], position=state["position"] + tokens.shape[1])
    return self._logits(hidden), new_state

  def decode_step(self, state: PyTree, tokens: jax.Array) -> tuple[jax.Array, PyTree]:
    """One decoding step: tokens int (N,), the previous outputs -> (logits (N, V), new state)."""
    checks.rank(tokens, 1, "tokens")
    logits, state = self.prefill(state, tokens[:, None])  # (N, 1, V)
    return logits[:, 0], state
