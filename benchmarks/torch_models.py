"""The benchmark models written in PyTorch (an optional dependency: `pip install torch`).

Twins of benchmarks/models.py, written the way a PyTorch user would (nn.LSTM over packed sequences,
which runs cuDNN on a GPU; F.scaled_dot_product_attention, which picks flash or memory-efficient
kernels), loading the JAX models' weights through `models.classifier_to_torch`,
`models.transformer_to_torch`, and for the named translation runs' own modules
`models.zoo_transformer_to_torch` and `models.bahdanau_to_torch`. `check_*` compare the forward
outputs with the JAX models' on the same weights; the training benchmark runs them before it times
anything. `CachedDecoder`, `torch_greedy_search` and `torch_beam_search` decode with
TorchZooTransformer one position per step over a key/value cache, with zoo.greedy_search's and
zoo.beam_search's exact rules (the decoding benchmark's PyTorch twin of zoo's cached decoding).
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
  """(src (B, S), src_lens (B,), tgt (B, T)) -> logits (B, T, V): zoo.transformer.Transformer,
  pre-norm (with a final LayerNorm per stack) or post-norm; with separate embeddings and an untied
  output layer (the translation runs' model), or with `shared=True` one embedding table for both
  sides that is also the output layer, without bias (share_embeddings and tie_output, the couplet
  runs' model)."""

  def __init__(self, src_vocab: int, tgt_vocab: int, width: int, heads: int, ffn: int,
               encoder_layers: int, decoder_layers: int, pre_norm: bool = True,
               eps: float = 1e-5, max_len: int = 256, shared: bool = False):
    super().__init__(src_vocab, tgt_vocab, width, max_len)
    if shared and src_vocab != tgt_vocab:
      raise ValueError(f"shared=True needs src_vocab == tgt_vocab, got {src_vocab} and {tgt_vocab}")
    block = dict(heads=heads, ffn=ffn, pre_norm=pre_norm, eps=eps)
    self.encoder = _ZooStack(encoder_layers, pre_norm, width, cross=False, **block)
    self.decoder = _ZooStack(decoder_layers, pre_norm, width, cross=True, **block)
    self.shared = shared
    if shared:
      self.tgt_embed = self.src_embed  # one table (the state dict names it under both keys)
    else:
      self.output = nn.Linear(width, tgt_vocab)

  def logits(self, hidden: torch.Tensor) -> torch.Tensor:
    """Decoder outputs (B, T, D) -> (B, T, V)."""
    return F.linear(hidden, self.tgt_embed.weight) if self.shared else self.output(hidden)

  def forward(self, src, src_lens, tgt):
    key_mask, causal = self.masks(src, src_lens, tgt)
    x = self.encoder(self.embed(self.src_embed, src), key_mask)
    return self.logits(self.decoder(self.embed(self.tgt_embed, tgt), causal, x, key_mask))



# ------------------------------------------------------------------------------------------------
# Cached (incremental) decoding of TorchZooTransformer and zoo's two searches over it.


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
  """(N, L, D) -> (N, H, L, Dh)."""
  return x.view(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
  """(N, H, L, Dh) -> (N, L, D)."""
  return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)


class CachedDecoder:
  """TorchZooTransformer decoding one target position per step with a key/value cache.

  The source is encoded once, and each decoder layer's cross-attention keys and values (N, H, S,
  Dh) are projected once, here. Each step embeds the new token at its position (embedding *
  sqrt(D) + sinusoid row t, as `_Embedded.embed`), and each decoder block attends with the one
  new query to its cached self-attention keys and values (this step's appended), then to the
  source, then runs its FFN: the math of `_ZooBlock` (pre- or post-norm) on one position.

  The self-attention cache is a preallocated (N, H, max_len, Dh) buffer per layer and tensor,
  written in place at position t (against torch.cat per step, beam 4 at the decoding suite's CPU
  sizes on one thread: 1.39 s against 1.49 s at max_len 128, 233 ms against 236 ms at 24).

  Attributes:
    model: the TorchZooTransformer (inference only).
    rows: N = B * repeats; row b * repeats + r is copy r of source sentence b (beam search's
      layout, zoo.search).
  """

  def __init__(self, model: TorchZooTransformer, src: torch.Tensor, src_lens: torch.Tensor,
               max_len: int, repeats: int = 1):
    """src (B, S) int64, src_lens (B,) int64; max_len: the most target positions decoded."""
    if max_len > model.positions.shape[0]:
      raise ValueError(f"max_len {max_len} exceeds the model's {model.positions.shape[0]} "
                       f"sinusoid rows (TorchZooTransformer(max_len=...))")
    self.model, self.max_len, self.position = model, max_len, 0
    key_mask, _ = model.masks(src, src_lens, src[:, :1])  # (B, 1, 1, S)
    enc = model.encoder(model.embed(model.src_embed, src), key_mask)  # (B, S, D)
    self.rows = src.shape[0] * repeats
    self.key_mask = key_mask.repeat_interleave(repeats, dim=0)  # (N, 1, 1, S)
    self.cross = [self._project(block.cross_attention, enc, repeats)
                  for block in model.decoder.layers]  # per layer (keys, values) (N, H, S, Dh)
    width = model.width
    heads = model.decoder.layers[0].self_attention.heads
    shape = (self.rows, heads, max_len, width // heads)
    self.keys = [enc.new_zeros(shape) for _ in model.decoder.layers]
    self.values = [enc.new_zeros(shape) for _ in model.decoder.layers]

  @staticmethod
  def _project(attention: TorchMHA, enc: torch.Tensor, repeats: int):
    """The keys and values (B * repeats, H, S, Dh) of one cross-attention layer."""
    keys = _split_heads(attention.key(enc), attention.heads)
    values = _split_heads(attention.value(enc), attention.heads)
    return keys.repeat_interleave(repeats, dim=0), values.repeat_interleave(repeats, dim=0)

  def _self_attend(self, layer: int, h: torch.Tensor) -> torch.Tensor:
    """h (N, 1, D) at position t: appends its key and value to the cache, attends to [0, t]."""
    attention, t = self.model.decoder.layers[layer].self_attention, self.position
    keys, values = self.keys[layer], self.values[layer]
    keys[:, :, t] = attention.key(h)[:, 0].view(self.rows, attention.heads, -1)
    values[:, :, t] = attention.value(h)[:, 0].view(self.rows, attention.heads, -1)
    out = F.scaled_dot_product_attention(_split_heads(attention.query(h), attention.heads),
                                         keys[:, :, :t + 1], values[:, :, :t + 1])
    return attention.out(_merge_heads(out))  # (N, 1, D)

  def _cross_attend(self, layer: int, h: torch.Tensor) -> torch.Tensor:
    """h (N, 1, D) -> (N, 1, D) attending to the source's projected keys and values."""
    attention = self.model.decoder.layers[layer].cross_attention
    keys, values = self.cross[layer]
    out = F.scaled_dot_product_attention(_split_heads(attention.query(h), attention.heads),
                                         keys, values, attn_mask=self.key_mask)
    return attention.out(_merge_heads(out))

  def step(self, tokens: torch.Tensor) -> torch.Tensor:
    """tokens (N,) int64, the previous outputs -> logits (N, V) of the next position."""
    if self.position >= self.max_len:
      raise ValueError(f"the cache holds {self.max_len} positions; all are decoded")
    model = self.model
    y = (model.tgt_embed(tokens) * math.sqrt(model.width)
         + model.positions[self.position])[:, None]  # (N, 1, D)
    for layer, block in enumerate(model.decoder.layers):
      y = block._residual(block.self_attention_norm, y,  # pylint: disable=protected-access
                          lambda h, layer=layer: self._self_attend(layer, h))
      y = block._residual(block.cross_attention_norm, y,  # pylint: disable=protected-access
                          lambda h, layer=layer: self._cross_attend(layer, h))
      y = block._residual(block.ffn_norm, y, block.ffn)  # pylint: disable=protected-access
    if model.decoder.final_norm is not None:
      y = model.decoder.final_norm(y)
    self.position += 1
    return model.logits(y[:, 0])  # (N, V)

  def reorder(self, rows: torch.Tensor) -> None:
    """Row i of the cache becomes old row rows[i] (rows (N,) int64): the surviving beams'."""
    filled = self.position
    for cache in (self.keys, self.values):
      for buffer in cache:
        buffer[:, :, :filled] = buffer[:, :, :filled].index_select(0, rows)


def _log_probs(decoder: CachedDecoder, tokens: torch.Tensor) -> torch.Tensor:
  """One step's float32 log-probabilities (N, V)."""
  return F.log_softmax(decoder.step(tokens).float(), dim=-1)


def _as_numpy(tokens, lengths, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  return (tokens.cpu().numpy().astype(np.int32), lengths.cpu().numpy().astype(np.int32),
          scores.cpu().numpy().astype(np.float32))


def torch_greedy_search(model: TorchZooTransformer, src: torch.Tensor, src_lens: torch.Tensor, *,
                        bos_id: int, eos_id: int, max_len: int) -> zoo.Decoded:
  """zoo.greedy_search (zoo/search.py `_greedy`) over the cached decoder, in PyTorch.

  src (B, S) int64, src_lens (B,) int64 -> zoo.Decoded of numpy arrays: tokens int32 (B, T)
  (eos at `lengths`, 0 after it), lengths int32 (B,) (T without eos), scores float32 (B,) (the
  summed log-probabilities, eos included). Stops once every row has emitted eos.
  """
  with torch.inference_mode():
    decoder = CachedDecoder(model, src, src_lens, max_len)
    batch, device = src.shape[0], src.device
    prev = torch.full((batch,), bos_id, dtype=torch.long, device=device)
    tokens = torch.zeros(batch, max_len, dtype=torch.long, device=device)
    lengths = torch.full((batch,), max_len, dtype=torch.long, device=device)
    scores = torch.zeros(batch, device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    for t in range(max_len):
      log_probs = _log_probs(decoder, prev)  # (B, V)
      choice = log_probs.argmax(dim=-1)  # (B,), the first of equal maxima as jnp.argmax
      prev = torch.where(finished, 0, choice)
      tokens[:, t] = prev
      scores += torch.where(finished, 0.0, log_probs.gather(1, choice[:, None])[:, 0])
      ends_now = ~finished & (choice == eos_id)
      lengths = torch.where(ends_now, t, lengths)
      finished |= ends_now
      if bool(finished.all()):
        break
    return zoo.Decoded(*_as_numpy(tokens, lengths, scores))


def _top_k(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
  """The k largest of each row of x (R, M), best first: (values (R, k), indices (R, k)).

  As jax.lax.top_k: equal values rank by the lower index. torch.topk orders ties arbitrarily, so
  its k are reordered by (value, index), and a row where the k-th value also lies beyond the k
  (a tie across the cut, e.g. of -inf) falls back to a stable sort of the whole row.
  """
  values, indices = x.topk(k, dim=-1)
  if bool(((x >= values[:, -1:]).sum(dim=-1) > k).any()):
    values, indices = x.sort(dim=-1, descending=True, stable=True)
    return values[:, :k], indices[:, :k]
  indices, order = indices.sort(dim=-1)
  values, order = values.gather(1, order).sort(dim=-1, descending=True, stable=True)
  return values, indices.gather(1, order)


def _gather_beams(x: torch.Tensor, beams: torch.Tensor) -> torch.Tensor:
  """x (B, W, ...) reordered along the beam axis by beams int64 (B, W') -> (B, W', ...)."""
  index = beams.view(beams.shape + (1,) * (x.ndim - 2)).expand(beams.shape + x.shape[2:])
  return x.gather(1, index)


def _length_normalizer(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
  """GNMT's ((5 + L) / 6) ** alpha, float32."""
  return ((5.0 + lengths.float()) / 6.0) ** alpha


def _with_column(tokens: torch.Tensor, t: int, column: torch.Tensor) -> torch.Tensor:
  """tokens (B, W, T) (a fresh tensor, written in place) with position t set to column (B, W)."""
  tokens[:, :, t] = column
  return tokens


def torch_beam_search(model: TorchZooTransformer, src: torch.Tensor, src_lens: torch.Tensor, *,
                      beam_size: int, bos_id: int, eos_id: int, max_len: int,
                      length_penalty: float = 0.0) -> zoo.Beams:
  """zoo.beam_search (zoo/search.py `_beam`) over the cached decoder, in PyTorch.

  Alive and finished lists of W = beam_size hypotheses per source sentence; only beam 0 is alive
  at first. Each step the W best of the W * V extensions (ties to the lower flat index) that end
  (eos, or the last position) are merged into the finished list (old entries first, so ties keep
  them; length-penalized score log_prob / ((5 + L) / 6) ** length_penalty), the W best that do
  not end with eos stay alive and the cache rows follow them (index_select). A sentence stops
  once no alive hypothesis can beat its worst finished one, the loop once all have.

  src (B, S) int64, src_lens (B,) int64 -> zoo.Beams of numpy arrays, best first: tokens int32
  (B, W, T), lengths int32 (B, W), scores float32 (B, W).
  """
  with torch.inference_mode():
    width, total = beam_size, max_len
    batch, device = src.shape[0], src.device
    decoder = CachedDecoder(model, src, src_lens, max_len, repeats=width)
    offsets = torch.arange(batch, device=device)[:, None] * width  # (B, 1)
    last = torch.full((batch * width,), bos_id, dtype=torch.long, device=device)
    alive_tokens = torch.zeros(batch, width, total, dtype=torch.long, device=device)
    alive_scores = torch.full((batch, width), -math.inf, device=device)
    alive_scores[:, 0] = 0.0
    fin_tokens = torch.zeros_like(alive_tokens)
    fin_lengths = torch.zeros(batch, width, dtype=torch.long, device=device)
    fin_scores = torch.full((batch, width), -math.inf, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for t in range(total):
      log_probs = _log_probs(decoder, last)  # (B * W, V)
      vocab = log_probs.shape[-1]
      candidates = alive_scores[..., None] + log_probs.view(batch, width, vocab)  # (B, W, V)

      # The W best extensions; those that end compete for the finished list.
      top_scores, top_index = _top_k(candidates.view(batch, width * vocab), width)  # (B, W)
      top_beam, top_token = top_index // vocab, top_index % vocab
      top_tokens = _with_column(_gather_beams(alive_tokens, top_beam), t, top_token)
      top_ends_eos = top_token == eos_id
      top_lengths = torch.where(top_ends_eos, t, t + 1)
      top_final = torch.where(top_ends_eos | (t == total - 1),
                              top_scores / _length_normalizer(top_lengths, length_penalty),
                              -math.inf)
      merged, pick = torch.cat([fin_scores, top_final], dim=1).sort(dim=1, descending=True,
                                                                    stable=True)
      pick, keep = pick[:, :width], done[:, None]  # a finished sentence is frozen
      fin_tokens = torch.where(keep[..., None], fin_tokens,
                               _gather_beams(torch.cat([fin_tokens, top_tokens], dim=1), pick))
      fin_lengths = torch.where(keep, fin_lengths,
                                torch.cat([fin_lengths, top_lengths], dim=1).gather(1, pick))
      fin_scores = torch.where(keep, fin_scores, merged[:, :width])

      # The W best extensions that do not end with eos stay alive; the cache follows them.
      candidates[:, :, eos_id] = -math.inf
      alive_scores, alive_index = _top_k(candidates.view(batch, width * vocab), width)
      alive_beam, last = alive_index // vocab, (alive_index % vocab).view(-1)
      alive_tokens = _with_column(_gather_beams(alive_tokens, alive_beam), t,
                                  last.view(batch, width))
      decoder.reorder((offsets + alive_beam).view(-1))

      # Alive hypotheses end with a length in [t + 1, T]: the largest normalizer bounds them.
      normalizer = torch.maximum(_length_normalizer(torch.tensor(t + 1), length_penalty),
                                 _length_normalizer(torch.tensor(total), length_penalty))
      done |= (fin_scores[:, -1] >= alive_scores[:, 0] / normalizer.to(device)) | (t == total - 1)
      if bool(done.all()):
        break
    return zoo.Beams(*_as_numpy(fin_tokens, fin_lengths, fin_scores))

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
