"""The JAX models the training and decoding benchmarks time, built from zoo modules.

They mirror the experiments' models (IMDB BiLSTM + attention pooling; a Vaswani-style translation
Transformer) without depending on the experiment code, and have twins in PyTorch
(benchmarks/torch_models.py) that take the same weights (`*_to_torch`) and give the same outputs.
The named translation runs' own modules (zoo.transformer.Transformer, zoo.seq2seq's Bahdanau
model; benchmarks/translation_runs.py) are converted by `zoo_transformer_to_torch` and
`bahdanau_to_torch`.

  BiLSTMAttentionClassifier  tokens -> Embed -> BiLSTM (zoo, scan or cuDNN) -> zoo.AttentionPooling
                             (additive) -> Dense(2)
  Transformer                post-LayerNorm encoder-decoder: embeddings * sqrt(D) + sinusoidal
                             positions, zoo.MultiHeadAttention everywhere, ReLU feed-forward,
                             untied output projection; `decode_step` runs one target position
                             with the key/value cache, `recompute_step` reruns the whole prefix.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import zoo
from zoo import fast_paths

Dtype = Any


@dataclasses.dataclass(frozen=True)
class ClassifierSize:
  """Sizes of the IMDB BiLSTM + attention benchmark (the seed protocol's: batch 128, 256 tokens)."""
  batch: int = 128
  length: int = 256
  vocab: int = 20000
  embed: int = 128
  hidden: int = 128
  layers: int = 1


@dataclasses.dataclass(frozen=True)
class TransformerSize:
  """Sizes of the translation Transformer benchmark (the experiments' width, heads and FFN; fewer
  layers and a smaller batch on the CPU)."""
  batch: int = 64
  src_len: int = 24
  tgt_len: int = 24
  vocab: int = 8000
  width: int = 256
  heads: int = 8
  ffn: int = 1024
  layers: int = 2


class BiLSTMAttentionClassifier(nn.Module):
  """IMDB sentiment: token ids (B, L) and lengths (B,) -> logits (B, 2).

  Attributes:
    vocab_size: V.
    embed_dim: E.
    hidden_size: H per direction (the LSTM outputs are 2H wide).
    num_layers: stacked BiLSTM layers.
    lstm_implementation: 'scan' (zoo.LSTM), 'cudnn' or 'auto' (zoo.fast_paths.FastLSTM).
    dtype: computation dtype.
  """
  vocab_size: int
  embed_dim: int
  hidden_size: int
  num_layers: int = 1
  lstm_implementation: str = "scan"
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array) -> jax.Array:
    x = nn.Embed(self.vocab_size, self.embed_dim, dtype=self.dtype, name="embed")(tokens)  # (B, L, E)
    outputs, _ = fast_paths.FastLSTM(self.hidden_size, num_layers=self.num_layers,
                                     bidirectional=True, dtype=self.dtype,
                                     implementation=self.lstm_implementation,
                                     name="lstm")(x, valid_lens=lengths)  # (B, L, 2H)
    context, _ = zoo.AttentionPooling(score="additive", dtype=self.dtype,
                                      name="pool")(outputs, valid_lens=lengths)  # (B, 2H)
    return nn.Dense(2, dtype=jnp.float32, name="out")(context)  # (B, 2)


class _FeedForward(nn.Module):
  hidden: int
  dtype: Dtype

  @nn.compact
  def __call__(self, x):
    h = nn.relu(nn.Dense(self.hidden, dtype=self.dtype, name="dense1")(x))
    return nn.Dense(x.shape[-1], dtype=self.dtype, name="dense2")(h)


def _layer_norm(name: str) -> nn.LayerNorm:
  return nn.LayerNorm(epsilon=1e-6, name=name)


class _EncoderBlock(nn.Module):
  heads: int
  ffn: int
  dtype: Dtype
  attention: str

  @nn.compact
  def __call__(self, x, src_lens):
    attended = zoo.MultiHeadAttention(self.heads, implementation=self.attention, dtype=self.dtype,
                                      name="self_attention")(x, valid_lens=src_lens)
    x = _layer_norm("norm1")(x + attended)
    return _layer_norm("norm2")(x + _FeedForward(self.ffn, self.dtype, name="ffn")(x))


class _DecoderBlock(nn.Module):
  heads: int
  ffn: int
  dtype: Dtype
  attention: str

  @nn.compact
  def __call__(self, y, enc, src_lens, *, decode: bool):
    # Teacher forcing: a causal mask; decoding: the cache's own causal mask.
    mask = None if decode else zoo.causal_mask(y.shape[1])[None, None]  # (1, 1, T, T)
    attended = zoo.MultiHeadAttention(self.heads, implementation=self.attention, dtype=self.dtype,
                                      name="self_attention")(y, mask=mask, decode=decode)
    y = _layer_norm("norm1")(y + attended)
    crossed = zoo.MultiHeadAttention(self.heads, implementation=self.attention, dtype=self.dtype,
                                     name="cross_attention")(y, enc, valid_lens=src_lens)
    y = _layer_norm("norm2")(y + crossed)
    return _layer_norm("norm3")(y + _FeedForward(self.ffn, self.dtype, name="ffn")(y))


class _StepCounter(nn.Module):
  """The decoder's position in the 'cache' collection (an int32 scalar shared by all rows)."""

  @nn.compact
  def __call__(self, steps: int) -> jax.Array:
    """Returns the position of the first of `steps` new positions and advances by `steps` (the
    call that creates the cache returns 0 and does not advance, like the attention caches)."""
    created = self.has_variable("cache", "position")
    position = self.variable("cache", "position", lambda: jnp.array(0, jnp.int32))
    offset = position.value
    if created:
      position.value = offset + steps
    return offset


class Transformer(nn.Module):
  """Encoder-decoder Transformer for translation (post-LayerNorm, as in Vaswani et al. and d2l).

  Attributes:
    src_vocab: source vocabulary size.
    tgt_vocab: target vocabulary size V.
    width: D.
    heads: H.
    ffn: the feed-forward hidden width.
    layers: encoder blocks = decoder blocks.
    max_len: the longest sequence (position encodings and the decoding cache).
    attention: zoo.MultiHeadAttention's implementation ('vmap' or 'fused').
    dtype: computation dtype.
  """
  src_vocab: int
  tgt_vocab: int
  width: int
  heads: int
  ffn: int
  layers: int
  max_len: int = 256
  attention: str = "vmap"
  dtype: Dtype = jnp.float32

  def setup(self):
    self.src_embed = nn.Embed(self.src_vocab, self.width, dtype=self.dtype)
    self.tgt_embed = nn.Embed(self.tgt_vocab, self.width, dtype=self.dtype)
    self.positions = zoo.SinusoidalPositionEncoding(max_len=self.max_len, dtype=self.dtype)
    self.encoder = [_EncoderBlock(self.heads, self.ffn, self.dtype, self.attention)
                    for _ in range(self.layers)]
    self.decoder = [_DecoderBlock(self.heads, self.ffn, self.dtype, self.attention)
                    for _ in range(self.layers)]
    self.out = nn.Dense(self.tgt_vocab, dtype=jnp.float32)
    self.step_counter = _StepCounter()

  def encode(self, src: jax.Array, src_lens: jax.Array) -> jax.Array:
    """src (B, S) int, src_lens (B,) -> encoder outputs (B, S, D)."""
    x = self.positions(self.src_embed(src) * math.sqrt(self.width))
    for block in self.encoder:
      x = block(x, src_lens)
    return x

  def decode(self, tgt: jax.Array, enc: jax.Array, src_lens: jax.Array, *,
             decode: bool = False) -> jax.Array:
    """Target tokens (B, T) (shifted right, starting with bos) -> logits float32 (B, T, V).

    With decode=True the tokens are the next T positions after those already in the cache
    ('cache' collection, mutable); the call that creates the cache takes the full-length input.
    """
    offset = self.step_counter(tgt.shape[1]) if decode else 0
    y = self.positions(self.tgt_embed(tgt) * math.sqrt(self.width), offset=offset)
    for block in self.decoder:
      y = block(y, enc, src_lens, decode=decode)
    return self.out(y)

  def __call__(self, src: jax.Array, src_lens: jax.Array, tgt: jax.Array) -> jax.Array:
    """Teacher-forced logits (B, T, V)."""
    return self.decode(tgt, self.encode(src, src_lens), src_lens)


def classifier_inputs(size: ClassifierSize, seed: int = 0) -> dict[str, np.ndarray]:
  """A fixed batch: token ids (B, L) padded with 0 after random lengths in [L/4, L], labels."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(max(1, size.length // 4), size.length + 1, size.batch).astype(np.int32)
  lengths[0] = size.length  # the padded width is used
  tokens = rng.integers(4, size.vocab, (size.batch, size.length)).astype(np.int32)
  tokens[np.arange(size.length)[None, :] >= lengths[:, None]] = 0
  labels = rng.integers(0, 2, size.batch).astype(np.int32)
  return dict(tokens=tokens, lengths=lengths, labels=labels)


def translation_inputs(size: Any, seed: int = 0) -> dict[str, np.ndarray]:
  """A fixed batch of source ids, decoder inputs (bos first) and labels, with lengths.

  size: its batch, src_len, tgt_len and vocab are used (TransformerSize or
  translation_runs.RunBatch). Lengths are uniform in [len // 2, len], the first row's full.
  """
  rng = np.random.default_rng(seed)

  def padded(length):
    lens = rng.integers(max(1, length // 2), length + 1, size.batch).astype(np.int32)
    lens[0] = length
    ids = rng.integers(4, size.vocab, (size.batch, length)).astype(np.int32)
    ids[np.arange(length)[None, :] >= lens[:, None]] = 0
    return ids, lens

  src, src_lens = padded(size.src_len)
  labels, tgt_lens = padded(size.tgt_len)
  tgt_in = np.concatenate([np.full((size.batch, 1), 2, np.int32), labels[:, :-1]], axis=1)
  return dict(src=src, src_lens=src_lens, tgt_in=tgt_in, labels=labels, tgt_lens=tgt_lens)


# ------------------------------------------------------------------------------------------------
# Weight conversion to PyTorch's layout (numpy arrays; benchmarks/torch_models.py loads them).


def _linear(dense: dict[str, Any]) -> dict[str, np.ndarray]:
  """flax Dense {'kernel': (I, O), 'bias': (O,)} -> torch Linear {'weight': (O, I), 'bias'}."""
  return {"weight": np.asarray(dense["kernel"]).T, "bias": np.asarray(dense["bias"])}


def _mha(p: dict[str, Any]) -> dict[str, np.ndarray]:
  """zoo/flax MHA parameters -> four torch Linear layers q, k, v, out (H x Dh flattened)."""
  state = {}
  for name in ("query", "key", "value"):
    kernel = np.asarray(p[name]["kernel"])  # (D, H, Dh)
    state[f"{name}.weight"] = kernel.reshape(kernel.shape[0], -1).T  # (H*Dh, D)
    state[f"{name}.bias"] = np.asarray(p[name]["bias"]).reshape(-1)  # (H*Dh,)
  out = np.asarray(p["out"]["kernel"])  # (H, Dh, D)
  state["out.weight"] = out.reshape(-1, out.shape[-1]).T  # (D, H*Dh)
  state["out.bias"] = np.asarray(p["out"]["bias"])
  return state


def _prefixed(prefix: str, state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  return {f"{prefix}.{k}": v for k, v in state.items()}


def _norm(p: dict[str, Any]) -> dict[str, np.ndarray]:
  return {"weight": np.asarray(p["scale"]), "bias": np.asarray(p["bias"])}


def lstm_to_torch(params: dict[str, Any]) -> dict[str, np.ndarray]:
  """zoo.LSTM parameters -> torch.nn.LSTM's state dict (weight_ih_l{k}[_reverse], ...)."""
  state = {}
  for layer in range(len(params)):
    p = params[f"layers_{layer}"]
    kernel, bias = np.asarray(p["input"]["kernel"]), np.asarray(p["input"]["bias"])
    for direction in range(kernel.shape[1]):
      suffix = f"_l{layer}" + ("_reverse" if direction else "")
      state[f"weight_ih{suffix}"] = kernel[:, direction, :].T  # (4H, D_in)
      state[f"weight_hh{suffix}"] = np.asarray(p["hidden_kernel"][direction]).T  # (4H, H)
      state[f"bias_ih{suffix}"] = bias[direction]
      state[f"bias_hh{suffix}"] = np.zeros_like(bias[direction])
  return state


def classifier_to_torch(params: dict[str, Any]) -> dict[str, np.ndarray]:
  """BiLSTMAttentionClassifier parameters -> TorchBiLSTMAttention's state dict."""
  pool = params["pool"]
  state = {"embed.weight": np.asarray(params["embed"]["embedding"]),
           "pool_query": np.asarray(pool["query"]),
           "pool_w_q": np.asarray(pool["scorer"]["w_q"]),
           "pool_w_k": np.asarray(pool["scorer"]["w_k"]),
           "pool_v": np.asarray(pool["scorer"]["v"])}
  state.update(_prefixed("lstm", lstm_to_torch(params["lstm"])))
  state.update(_prefixed("out", _linear(params["out"])))
  return state


def transformer_to_torch(params: dict[str, Any]) -> dict[str, np.ndarray]:
  """Transformer parameters -> TorchTransformer's state dict."""
  state = {"src_embed.weight": np.asarray(params["src_embed"]["embedding"]),
           "tgt_embed.weight": np.asarray(params["tgt_embed"]["embedding"])}
  state.update(_prefixed("out", _linear(params["out"])))
  for side in ("encoder", "decoder"):
    index = 0
    while f"{side}_{index}" in params:
      p, prefix = params[f"{side}_{index}"], f"{side}.{index}"
      for name in ("self_attention", "cross_attention"):
        if name in p:
          state.update(_prefixed(f"{prefix}.{name}", _mha(p[name])))
      for name in ("norm1", "norm2", "norm3"):
        if name in p:
          state.update(_prefixed(f"{prefix}.{name}", _norm(p[name])))
      state.update(_prefixed(f"{prefix}.ffn.dense1", _linear(p["ffn"]["dense1"])))
      state.update(_prefixed(f"{prefix}.ffn.dense2", _linear(p["ffn"]["dense2"])))
      index += 1
  return state


def zoo_transformer_to_torch(params: dict[str, Any]) -> dict[str, np.ndarray]:
  """zoo.transformer.Transformer parameters -> TorchZooTransformer's state dict (the same names,
  nn.Linear layout): separate source and target embeddings with an untied output layer, or one
  shared table that is also the output layer (share_embeddings and tie_output; TorchZooTransformer
  with shared=True, whose state dict holds the table under both embedding keys)."""
  separate = "output" in params and "tgt_embed" in params
  shared = "output" not in params and "tgt_embed" not in params
  if not (separate or shared):
    raise ValueError("zoo_transformer_to_torch converts Transformers with separate embeddings and "
                     "an untied output layer, or with share_embeddings=True and tie_output=True; "
                     f"got top-level parameters {sorted(params)}")
  source = np.asarray(params["src_embed"]["embedding"])
  state = {"src_embed.weight": source,
           "tgt_embed.weight": (np.asarray(params["tgt_embed"]["embedding"]) if separate
                                else source)}
  if separate:
    state.update(_prefixed("output", _linear(params["output"])))
  for side in ("encoder", "decoder"):
    stack = params[side]
    if "final_norm" in stack:
      state.update(_prefixed(f"{side}.final_norm", _norm(stack["final_norm"])))
    index = 0
    while f"layers_{index}" in stack:
      p, prefix = stack[f"layers_{index}"], f"{side}.layers.{index}"
      for name in ("self_attention", "cross_attention"):
        if name in p:
          state.update(_prefixed(f"{prefix}.{name}", _mha(p[name])))
          state.update(_prefixed(f"{prefix}.{name}_norm", _norm(p[f"{name}_norm"])))
      state.update(_prefixed(f"{prefix}.ffn.dense_in", _linear(p["ffn"]["dense_in"])))
      state.update(_prefixed(f"{prefix}.ffn.dense_out", _linear(p["ffn"]["dense_out"])))
      state.update(_prefixed(f"{prefix}.ffn_norm", _norm(p["ffn_norm"])))
      index += 1
  return state


def bahdanau_to_torch(params: dict[str, Any]) -> dict[str, np.ndarray]:
  """zoo.seq2seq.bahdanau_seq2seq parameters -> TorchBahdanau's state dict.

  The decoder's bottom LSTM layer reads [context; embedding]: its weight_ih is the context's
  gate kernel and the embedding's side by side (4H, H + E).
  """
  enc, dec = params["encoder"], params["decoder"]
  scorer = dec["attention"]["scorer"]
  state = {"enc_embedding.weight": np.asarray(enc["embedding"]["embedding"]),
           "dec_embedding.weight": np.asarray(dec["embedding"]["embedding"]),
           "W_q.weight": np.asarray(scorer["w_q"]).T,  # (H, H): query = h W_q^T
           "W_k.weight": np.asarray(scorer["w_k"]).T,
           "w_v.weight": np.asarray(scorer["v"])[None, :]}  # (1, H)
  state.update(_prefixed("encoder", lstm_to_torch(enc["lstm"])))
  decoder = lstm_to_torch(dec["lstm"])
  context_gates = np.asarray(dec["context_gates"]["kernel"]).T  # (4H, H)
  decoder["weight_ih_l0"] = np.concatenate([context_gates, decoder["weight_ih_l0"]], axis=1)
  state.update(_prefixed("decoder", decoder))
  state.update(_prefixed("dense", _linear(dec["output"])))
  return state
