"""The benchmark models written in PyTorch (an optional dependency: `pip install torch`).

Twins of benchmarks/models.py, written the way a PyTorch user would (nn.LSTM over packed sequences,
which runs cuDNN on a GPU; F.scaled_dot_product_attention, which picks flash or memory-efficient
kernels), loading the JAX models' weights through `models.classifier_to_torch`,
`models.transformer_to_torch`, and for the named translation runs' own modules
`models.zoo_transformer_to_torch` and `models.bahdanau_to_torch`. `check_*` compare the forward outputs with the JAX models' on the
same weights; the training benchmark runs them before it times anything.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import zoo

_MIN = float(np.finfo(np.float32).min)


class TorchBiLSTMAttention(nn.Module):
  """tokens (B, L) int64, lengths (B,) -> logits (B, 2); see models.BiLSTMAttentionClassifier."""

  def __init__(self, vocab: int, embed: int, hidden: int, layers: int = 1):
    super().__init__()
    width = 2 * hidden
    self.embed = nn.Embedding(vocab, embed)
    self.lstm = nn.LSTM(embed, hidden, num_layers=layers, bidirectional=True, batch_first=True)
    self.pool_query = nn.Parameter(torch.zeros(1, width))
    self.pool_w_q = nn.Parameter(torch.zeros(width, width))
    self.pool_w_k = nn.Parameter(torch.zeros(width, width))
    self.pool_v = nn.Parameter(torch.zeros(width))
    self.out = nn.Linear(width, 2)

  def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    steps = tokens.shape[1]
    x = self.embed(tokens)  # (B, L, E)
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                               enforce_sorted=False)
    outputs, _ = self.lstm(packed)
    outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True,
                                                  total_length=steps)  # (B, L, 2H)
    hidden = torch.tanh(self.pool_query @ self.pool_w_q + outputs @ self.pool_w_k)  # (B, L, A)
    scores = hidden @ self.pool_v  # (B, L)
    valid = torch.arange(steps, device=tokens.device)[None, :] < lengths[:, None]
    weights = torch.softmax(scores.masked_fill(~valid, _MIN), dim=-1)  # (B, L)
    context = torch.einsum("bl,bld->bd", weights, outputs)  # (B, 2H)
    return self.out(context)


class TorchMHA(nn.Module):
  """Multi-head attention with four Linear layers and F.scaled_dot_product_attention."""

  def __init__(self, width: int, heads: int):
    super().__init__()
    self.heads = heads
    self.query, self.key, self.value, self.out = (nn.Linear(width, width) for _ in range(4))

  def forward(self, xq, xkv, mask=None):
    """xq (B, Q, D), xkv (B, K, D), mask bool broadcastable to (B, H, Q, K) True = attend."""
    def split(x):  # (B, L, D) -> (B, H, L, Dh)
      return x.view(x.shape[0], x.shape[1], self.heads, -1).transpose(1, 2)
    out = F.scaled_dot_product_attention(split(self.query(xq)), split(self.key(xkv)),
                                         split(self.value(xkv)), attn_mask=mask)
    return self.out(out.transpose(1, 2).reshape(xq.shape))  # (B, Q, D)


class _FeedForward(nn.Module):
  """Linear, ReLU, Linear; `names` are the two layers' names in the state dict."""

  def __init__(self, width: int, hidden: int, names: tuple[str, str] = ("dense1", "dense2")):
    super().__init__()
    self.names = names
    for name, (fan_in, fan_out) in zip(names, ((width, hidden), (hidden, width))):
      self.add_module(name, nn.Linear(fan_in, fan_out))

  def forward(self, x):
    first, second = (getattr(self, name) for name in self.names)
    return second(torch.relu(first(x)))


class _EncoderBlock(nn.Module):

  def __init__(self, width, heads, ffn):
    super().__init__()
    self.self_attention = TorchMHA(width, heads)
    self.norm1, self.norm2 = nn.LayerNorm(width, eps=1e-6), nn.LayerNorm(width, eps=1e-6)
    self.ffn = _FeedForward(width, ffn)

  def forward(self, x, key_mask):
    x = self.norm1(x + self.self_attention(x, x, key_mask))
    return self.norm2(x + self.ffn(x))


class _DecoderBlock(nn.Module):

  def __init__(self, width, heads, ffn):
    super().__init__()
    self.self_attention = TorchMHA(width, heads)
    self.cross_attention = TorchMHA(width, heads)
    self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(width, eps=1e-6) for _ in range(3))
    self.ffn = _FeedForward(width, ffn)

  def forward(self, y, enc, causal, key_mask):
    y = self.norm1(y + self.self_attention(y, y, causal))
    y = self.norm2(y + self.cross_attention(y, enc, key_mask))
    return self.norm3(y + self.ffn(y))


class _Embedded(nn.Module):
  """The inputs of both Transformer twins: token embeddings * sqrt(D) + the sinusoidal table, the
  source key mask and the causal mask."""

  def __init__(self, src_vocab: int, tgt_vocab: int, width: int, max_len: int):
    super().__init__()
    self.width = width
    self.src_embed = nn.Embedding(src_vocab, width)
    self.tgt_embed = nn.Embedding(tgt_vocab, width)
    table = np.array(zoo.sinusoidal_encoding(max_len, width))  # (max_len, D)
    self.register_buffer("positions", torch.from_numpy(table), persistent=False)

  def embed(self, table: nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
    """tokens (B, L) -> (B, L, D)."""
    return table(tokens) * math.sqrt(self.width) + self.positions[:tokens.shape[1]]

  @staticmethod
  def masks(src, src_lens, tgt) -> tuple[torch.Tensor, torch.Tensor]:
    """The source key mask (B, 1, 1, S) and the causal mask (T, T), True = attend."""
    key_mask = (torch.arange(src.shape[1], device=src.device)[None, :]
                < src_lens[:, None])[:, None, None, :]
    steps = tgt.shape[1]
    return key_mask, torch.ones(steps, steps, dtype=torch.bool, device=tgt.device).tril()


class TorchTransformer(_Embedded):
  """(src (B, S), src_lens (B,), tgt (B, T)) -> logits (B, T, V); see models.Transformer."""

  def __init__(self, src_vocab, tgt_vocab, width, heads, ffn, layers, max_len=256):
    super().__init__(src_vocab, tgt_vocab, width, max_len)
    self.encoder = nn.ModuleList(_EncoderBlock(width, heads, ffn) for _ in range(layers))
    self.decoder = nn.ModuleList(_DecoderBlock(width, heads, ffn) for _ in range(layers))
    self.out = nn.Linear(width, tgt_vocab)

  def forward(self, src, src_lens, tgt):
    key_mask, causal = self.masks(src, src_lens, tgt)
    x = self.embed(self.src_embed, src)
    for block in self.encoder:
      x = block(x, key_mask)
    y = self.embed(self.tgt_embed, tgt)
    for block in self.decoder:
      y = block(y, x, causal, key_mask)
    return self.out(y)


class _ZooBlock(nn.Module):
  """zoo.transformer's EncoderBlock (cross=False) or DecoderBlock (cross=True), no dropout."""

  def __init__(self, width: int, heads: int, ffn: int, cross: bool, pre_norm: bool, eps: float):
    super().__init__()
    self.pre_norm = pre_norm
    self.self_attention = TorchMHA(width, heads)
    self.self_attention_norm = nn.LayerNorm(width, eps=eps)
    if cross:
      self.cross_attention = TorchMHA(width, heads)
      self.cross_attention_norm = nn.LayerNorm(width, eps=eps)
    self.ffn = _FeedForward(width, ffn, names=("dense_in", "dense_out"))
    self.ffn_norm = nn.LayerNorm(width, eps=eps)

  def _residual(self, norm, x, sublayer):
    return x + sublayer(norm(x)) if self.pre_norm else norm(x + sublayer(x))

  def forward(self, x, mask, enc=None, enc_mask=None):
    x = self._residual(self.self_attention_norm, x, lambda h: self.self_attention(h, h, mask))
    if enc is not None:
      x = self._residual(self.cross_attention_norm, x,
                         lambda h: self.cross_attention(h, enc, enc_mask))
    return self._residual(self.ffn_norm, x, self.ffn)


class _ZooStack(nn.Module):

  def __init__(self, layers: int, final_norm: bool, width: int, **block):
    super().__init__()
    self.layers = nn.ModuleList(_ZooBlock(width, **block) for _ in range(layers))
    self.final_norm = nn.LayerNorm(width, eps=block["eps"]) if final_norm else None

  def forward(self, x, mask, enc=None, enc_mask=None):
    for block in self.layers:
      x = block(x, mask, enc, enc_mask)
    return x if self.final_norm is None else self.final_norm(x)


class TorchZooTransformer(_Embedded):
  """(src (B, S), src_lens (B,), tgt (B, T)) -> logits (B, T, V): zoo.transformer.Transformer
  with separate embeddings and an untied output layer (the translation runs' model), pre-norm
  (with a final LayerNorm per stack) or post-norm."""

  def __init__(self, src_vocab: int, tgt_vocab: int, width: int, heads: int, ffn: int,
               encoder_layers: int, decoder_layers: int, pre_norm: bool = True,
               eps: float = 1e-5, max_len: int = 256):
    super().__init__(src_vocab, tgt_vocab, width, max_len)
    block = dict(heads=heads, ffn=ffn, pre_norm=pre_norm, eps=eps)
    self.encoder = _ZooStack(encoder_layers, pre_norm, width, cross=False, **block)
    self.decoder = _ZooStack(decoder_layers, pre_norm, width, cross=True, **block)
    self.output = nn.Linear(width, tgt_vocab)

  def forward(self, src, src_lens, tgt):
    key_mask, causal = self.masks(src, src_lens, tgt)
    x = self.encoder(self.embed(self.src_embed, src), key_mask)
    return self.output(self.decoder(self.embed(self.tgt_embed, tgt), causal, x, key_mask))


class TorchBahdanau(nn.Module):
  """(src (B, S), src_lens (B,), tgt (B, T)) -> logits (B, T, V): d2l's Seq2SeqAttentionDecoder
  over its Seq2SeqEncoder, with LSTMs as zoo.seq2seq.bahdanau_seq2seq (d2l has GRUs), written as
  d2l writes it: the encoder over packed sequences, the decoder one nn.LSTM call per target step,
  its top layer's previous h querying the encoder outputs with additive attention (d2l's masked
  softmax), the context joining the step's embedding as the bottom layer's input."""

  def __init__(self, src_vocab: int, tgt_vocab: int, embed: int, hidden: int, layers: int = 1):
    super().__init__()
    self.enc_embedding = nn.Embedding(src_vocab, embed)
    self.encoder = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
    self.dec_embedding = nn.Embedding(tgt_vocab, embed)
    self.decoder = nn.LSTM(hidden + embed, hidden, num_layers=layers, batch_first=True)
    self.W_q = nn.Linear(hidden, hidden, bias=False)
    self.W_k = nn.Linear(hidden, hidden, bias=False)
    self.w_v = nn.Linear(hidden, 1, bias=False)
    self.dense = nn.Linear(hidden, tgt_vocab)

  def forward(self, src, src_lens, tgt):
    steps = src.shape[1]
    packed = nn.utils.rnn.pack_padded_sequence(self.enc_embedding(src), src_lens.cpu(),
                                               batch_first=True, enforce_sorted=False)
    outputs, state = self.encoder(packed)  # state: (h, c), each (layers, B, H), batch order
    outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True,
                                                  total_length=steps)  # (B, S, H)
    keys = self.W_k(outputs)  # (B, S, H)
    valid = torch.arange(steps, device=src.device)[None, :] < src_lens[:, None]  # (B, S)
    embedded = self.dec_embedding(tgt)  # (B, T, E)
    tops = []
    for t in range(tgt.shape[1]):
      query = self.W_q(state[0][-1])  # (B, H)
      scores = self.w_v(torch.tanh(query[:, None, :] + keys))[..., 0]  # (B, S)
      weights = torch.softmax(scores.masked_fill(~valid, -1e6), dim=-1)
      context = torch.bmm(weights[:, None, :], outputs)[:, 0]  # (B, H)
      top, state = self.decoder(torch.cat([context, embedded[:, t]], dim=-1)[:, None], state)
      tops.append(top[:, 0])
    return self.dense(torch.stack(tops, dim=1))  # (B, T, V)


def load(module: nn.Module, state: dict[str, np.ndarray]) -> nn.Module:
  """Loads numpy arrays into the module (every parameter must be given, shapes must match)."""
  tensors = {k: torch.from_numpy(np.array(v, np.float32)) for k, v in state.items()}
  module.load_state_dict(tensors, strict=True)
  return module


def to_tensors(batch: dict[str, np.ndarray], device: Any) -> dict[str, torch.Tensor]:
  """numpy int32 batch -> int64 tensors on `device` (lengths stay where pack_padded needs them)."""
  return {k: torch.from_numpy(v.astype(np.int64)).to(device) for k, v in batch.items()}


def max_difference(torch_out: torch.Tensor, jax_out: Any) -> float:
  """The largest absolute difference between the two models' outputs."""
  return float(np.max(np.abs(torch_out.detach().cpu().numpy() - np.asarray(jax_out))))
