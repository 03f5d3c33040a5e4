"""Sentence-pair classifiers (do two questions mean the same?), each assembled from zoo modules.

Every model is called on one batch of pipelines.tasks.MatchingData,

  a (B, La), a_len (B,)          the first question's ids
  b (B, Lb), b_len (B,)          the second question's ids
  pair (B, Lp), pair_len (B,)    [CLS] a [SEP] b [SEP] (the Transformer reads only these)
  segments (B, Lp)               0 on [CLS] a [SEP], 1 on b [SEP]

and returns `(logits float32 (B, 2), attention)`, class 1 = same meaning, where `attention` is a
dict of the weights a person would plot:

  PairTransformer     'self_attention' (B, layers, H, Lp, Lp): every layer's and head's weights
                      over the packed pair (its a-to-b block and its [CLS] row are what the
                      heatmaps show);
  DecomposableAttention, ESIM
                      'a_to_b' (B, La, Lb), 'b_to_a' (B, Lb, La): the soft alignment
                      (zoo.SoftAlignment), rows of padded positions all zero;
  SiameseBiLSTM       'a_pooling' (B, La), 'b_pooling' (B, Lb): each question's pooling weights.

The models (the nndl chapter's practice and the three classic designs it is compared against):
  PairTransformer        token + segment + position embeddings -> Transformer encoder over
                         [CLS] a [SEP] b [SEP] -> the [CLS] vector -> tanh pooler -> dense
  DecomposableAttention  Parikh et al. (2016): attend (soft alignment of F(a), F(b)), compare
                         (G on [a_i; beta_i]), aggregate (sums, then H) -> dense
  ESIM                   Chen et al. (2017): BiLSTM encoding, soft alignment, enhancement
                         [x; x~; x - x~; x * x~], projection, composition BiLSTM, mean and max
                         pooling of both sides -> tanh layer -> dense
  SiameseBiLSTM          the sentiment chapter's BiLSTM with attention pooling applied to each
                         question (shared weights) -> [u; v; |u - v|; u * v] -> dense
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

import zoo
from zoo import checks

Dtype = Any
NUM_CLASSES = 2
Batch = Mapping[str, jax.Array]


def check_sides(batch: Batch) -> None:
  """Checks a, a_len, b, b_len of a batch (names the field that is wrong)."""
  for ids, lens in (("a", "a_len"), ("b", "b_len")):
    checks.rank(batch[ids], 2, ids)
    checks.integer(batch[ids], ids)
    checks.sequence_lengths(batch[lens], lens, batch[ids], ids)
  checks.equal_dim(batch["a"], "a", 0, batch["b"], "b", 0)


def _pad_to(x: jax.Array, length: int) -> jax.Array:
  """Pads axis 1 of x (B, L, ...) with zeros to `length` steps."""
  pad = [(0, 0)] * x.ndim
  pad[1] = (0, length - x.shape[1])
  return jnp.pad(x, pad)


def run_on_both(fn, a: jax.Array, a_len: jax.Array, b: jax.Array, b_len: jax.Array):
  """Applies `fn(x (2B, L, ...), lengths (2B,))` to both sides at once (one scan instead of two
  for an LSTM): the sides are padded to one width L = max(La, Lb) and stacked on the batch axis.

  Returns:
    (fn's output for a, cut back to La steps, and for b, cut back to Lb steps); each output of fn
    must have the batch on axis 0 and the steps on axis 1.
  """
  width = max(a.shape[1], b.shape[1])
  both = jnp.concatenate([_pad_to(a, width), _pad_to(b, width)], axis=0)  # (2B, L, ...)
  out = fn(both, jnp.concatenate([a_len, b_len]))
  batch, a_steps, b_steps = a.shape[0], a.shape[1], b.shape[1]
  return (jax.tree.map(lambda y: y[:batch, :a_steps], out),
          jax.tree.map(lambda y: y[batch:, :b_steps], out))


class MLP(nn.Module):
  """Dense layers with an activation after each, dropout before each (Parikh et al.'s F, G, H).

  Attributes:
    features: the width of each layer.
    activation: 'relu' or 'tanh'.
    dropout_rate: dropout on each layer's input (training only).
    dtype, param_dtype: computation and storage dtypes.
  """
  features: tuple[int, ...]
  activation: str = "relu"
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
    """x (..., D) -> (..., features[-1])."""
    act = {"relu": nn.relu, "tanh": jnp.tanh}[self.activation]
    for i, width in enumerate(self.features):
      x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
      x = act(nn.Dense(width, dtype=self.dtype, param_dtype=self.param_dtype,
                       name=f"dense_{i}")(x))
    return x


class _Classifier(nn.Module):
  """Dropout, then the dense layer to the class logits (float32)."""
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, features: jax.Array, *, deterministic: bool) -> jax.Array:
    """features (B, F) -> logits float32 (B, 2)."""
    features = nn.Dropout(self.dropout_rate)(features, deterministic=deterministic)
    logits = nn.Dense(NUM_CLASSES, dtype=self.dtype, param_dtype=self.param_dtype,
                      name="out")(features)
    return logits.astype(jnp.float32)


class PairTransformer(nn.Module):
  """The nndl practice's model: a Transformer encoder over [CLS] a [SEP] b [SEP], classified from
  the [CLS] position.

  x_t = LayerNorm(E[token_t] + P[t] + S[segment_t]) with learned position and segment tables
  (BERT's embedding), dropout; zoo.TransformerEncoder with the key padding mask of pair_len;
  h = tanh(W_p x_[CLS] + b_p) (BERT's pooler; without `pooler`, h = x_[CLS] as the nndl chapter
  has it), dropout, dense to the logits.

  The weights of every layer come from what the encoder sows into 'intermediates', so apply the
  model with `mutable=['intermediates']` (MatchingTask.forward does); any other apply raises.
  Called with `mlm=True` it is the masked language model that pretraining trains instead: the
  parameters it shares with the classifier (embed, positions, segments, embed_norm, encoder) can
  start a classifier (configs.TransformerConfig.init_from).

  Attributes:
    vocab_size: V.
    embed_dim: D.
    num_layers: encoder blocks.
    num_heads: H.
    ffn_hidden: the inner width of each block's feed-forward network.
    dropout_rate: dropout on the embeddings, inside the blocks and on the pooled vector.
    attention_dropout_rate: dropout on the attention weights (None: dropout_rate).
    activation_dropout_rate: dropout after the FFN's activation (None: dropout_rate).
    max_len: positions the learned table holds (>= the longest packed pair).
    normalize_before: pre-norm blocks (True) or the original post-norm (False).
    pooler: the tanh pooler over the [CLS] vector (True), or the [CLS] vector itself (False).
    head_dropout_rate: dropout on the classifier's input (None: dropout_rate).
    dtype, param_dtype: computation and storage dtypes.
  """
  vocab_size: int
  embed_dim: int = 128
  num_layers: int = 2
  num_heads: int = 4
  ffn_hidden: int = 256
  dropout_rate: float = 0.1
  attention_dropout_rate: float | None = None
  activation_dropout_rate: float | None = None
  max_len: int = 128
  normalize_before: bool = True
  pooler: bool = True
  head_dropout_rate: float | None = None
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, batch: Batch, *, deterministic: bool = True, mlm: bool = False
               ) -> tuple[jax.Array, dict[str, jax.Array]] | jax.Array:
    """The logits and weights of a batch; with `mlm`, instead the masked-language-model logits
    float32 (B, Lp, V) of every position (a dense GELU layer, LayerNorm, then the transposed token
    embedding plus a bias: BERT's head), which pretraining trains (task.PretrainTask)."""
    pair, pair_len, segments = batch["pair"], batch["pair_len"], batch["segments"]
    checks.rank(pair, 2, "pair")
    checks.integer(pair, "pair")
    checks.sequence_lengths(pair_len, "pair_len", pair, "pair")
    size, steps = pair.shape
    embed = nn.Embed(self.vocab_size, self.embed_dim, dtype=self.dtype,
                     param_dtype=self.param_dtype,
                     embedding_init=nn.initializers.normal(stddev=0.02), name="embed")
    x = embed(pair)  # (B, Lp, D)
    x = zoo.LearnedPositionEmbedding(self.max_len, self.embed_dim, dtype=self.dtype,
                                     param_dtype=self.param_dtype, name="positions")(x)
    x = zoo.SegmentEmbedding(dtype=self.dtype, param_dtype=self.param_dtype,
                             name="segments")(x, segments)  # (B, Lp, D)
    x = nn.LayerNorm(dtype=self.dtype, param_dtype=self.param_dtype, name="embed_norm")(x)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    encoder = zoo.TransformerEncoder(
        self.num_layers, num_heads=self.num_heads, ffn_hidden=self.ffn_hidden,
        dropout_rate=self.dropout_rate, attention_dropout_rate=self.attention_dropout_rate,
        activation_dropout_rate=self.activation_dropout_rate,
        normalize_before=self.normalize_before, dtype=self.dtype, param_dtype=self.param_dtype,
        name="encoder")
    encoded = encoder(x, mask=zoo.key_padding_mask(pair_len, steps),
                      deterministic=deterministic)  # (B, Lp, D)
    if mlm:
      hidden = nn.gelu(nn.Dense(self.embed_dim, dtype=self.dtype, param_dtype=self.param_dtype,
                                name="mlm_transform")(encoded))
      hidden = nn.LayerNorm(dtype=self.dtype, param_dtype=self.param_dtype,
                            name="mlm_norm")(hidden)
      bias = self.param("mlm_bias", nn.initializers.zeros, (self.vocab_size,), self.param_dtype)
      return (embed.attend(hidden) + bias).astype(jnp.float32)  # (B, Lp, V)
    pooled = zoo.cls_pool(encoded)  # (B, D)
    if self.pooler:
      pooled = jnp.tanh(nn.Dense(self.embed_dim, dtype=self.dtype, param_dtype=self.param_dtype,
                                 name="pooler")(pooled))
    head_rate = self.dropout_rate if self.head_dropout_rate is None else self.head_dropout_rate
    logits = _Classifier(head_rate, self.dtype, self.param_dtype, name="head")(
        pooled, deterministic=deterministic)
    if self.is_initializing():
      shape = (size, self.num_layers, self.num_heads, steps, steps)
      return logits, {"self_attention": jnp.zeros(shape, jnp.float32)}
    if not self.is_mutable_collection("intermediates"):
      raise ValueError("PairTransformer returns the attention weights its encoder sows: apply it "
                       "with mutable=['intermediates']")
    sown = encoder.variables["intermediates"]
    weights = jnp.stack([sown[f"layers_{i}"]["self_attention_weights"][-1]
                         for i in range(self.num_layers)], axis=1)  # (B, layers, H, Lp, Lp)
    return logits, {"self_attention": weights.astype(jnp.float32)}


class DecomposableAttention(nn.Module):
  """Decomposable attention (Parikh et al., 2016): attend, compare, aggregate.

  a_i, b_j: embeddings projected to `hidden` (no bias, as the paper's "projection");
  attend:    e_ij = F(a_i) . F(b_j); beta_i = sum_j softmax_j(e_ij) b_j, alpha_j likewise
             (zoo.SoftAlignment on F(a), F(b) averaging a, b);
  compare:   v1_i = G([a_i; beta_i]), v2_j = G([b_j; alpha_j]);
  aggregate: v1 = sum of v1_i over a's valid positions, v2 likewise; H([v1; v2]) -> dense.
  F, G and H are two-layer ReLU networks with dropout before each layer.

  Attributes:
    vocab_size: V.
    embed_dim: E.
    hidden: the width of the projection and of F, G, H.
    dropout_rate: dropout before every layer of F, G, H and the output layer.
    dtype, param_dtype: computation and storage dtypes.
  """
  vocab_size: int
  embed_dim: int = 128
  hidden: int = 200
  dropout_rate: float = 0.2
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, batch: Batch, *, deterministic: bool = True
               ) -> tuple[jax.Array, dict[str, jax.Array]]:
    check_sides(batch)
    mlp = lambda name: MLP((self.hidden, self.hidden), "relu", self.dropout_rate, self.dtype,
                           self.param_dtype, name=name)
    embed = nn.Embed(self.vocab_size, self.embed_dim, dtype=self.dtype,
                     param_dtype=self.param_dtype, name="embed")
    project = nn.Dense(self.hidden, use_bias=False, dtype=self.dtype,
                       param_dtype=self.param_dtype, name="project")
    a = project(embed(batch["a"]))  # (B, La, D)
    b = project(embed(batch["b"]))  # (B, Lb, D)
    attend = mlp("attend")
    aligned = zoo.SoftAlignment(score="dot", dtype=self.dtype, param_dtype=self.param_dtype,
                                name="align")(
        attend(a, deterministic=deterministic), attend(b, deterministic=deterministic),
        valid_lens=(batch["a_len"], batch["b_len"]), a_values=a, b_values=b)
    compare = mlp("compare")
    v1 = compare(jnp.concatenate([a, aligned.b_for_a], -1), deterministic=deterministic)
    v2 = compare(jnp.concatenate([b, aligned.a_for_b], -1), deterministic=deterministic)
    v1 = _masked_sum(v1, batch["a_len"])  # (B, D)
    v2 = _masked_sum(v2, batch["b_len"])  # (B, D)
    features = mlp("aggregate")(jnp.concatenate([v1, v2], -1), deterministic=deterministic)
    logits = _Classifier(self.dropout_rate, self.dtype, self.param_dtype, name="head")(
        features, deterministic=deterministic)
    return logits, {"a_to_b": aligned.a_to_b.astype(jnp.float32),
                    "b_to_a": aligned.b_to_a.astype(jnp.float32)}


def _masked_sum(x: jax.Array, lengths: jax.Array) -> jax.Array:
  """The sum of the first lengths[b] steps of x (B, L, D) -> (B, D)."""
  mask = zoo.sequence_mask(lengths, x.shape[1])[..., None]  # (B, L, 1)
  return jnp.sum(jnp.where(mask, x, 0), axis=1)


class ESIM(nn.Module):
  """ESIM (Chen et al., 2017), the sequential model without tree-LSTMs.

  input encoding:  a_bar = BiLSTM(E[a]), b_bar = BiLSTM(E[b]) (shared), 2H wide;
  local inference: zoo.SoftAlignment (dot) -> a~ (aligned b for each a_i), b~;
                   m_a = [a_bar; a~; a_bar - a~; a_bar * a~] (8H), m_b likewise;
  composition:     F(m) = ReLU(W m + c) to H, dropout, v_a = BiLSTM(F(m_a)), v_b likewise;
  pooling:         [mean(v_a); max(v_a); mean(v_b); max(v_b)] (8H) over the valid steps;
  output:          tanh layer of H, dropout, dense to the logits.

  Attributes:
    vocab_size: V.
    embed_dim: E.
    hidden_size: H, the state width of each LSTM direction.
    dropout_rate: dropout on the embeddings, the projection and before both output layers.
    dtype, param_dtype: computation and storage dtypes.
  """
  vocab_size: int
  embed_dim: int = 128
  hidden_size: int = 128
  dropout_rate: float = 0.3
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, batch: Batch, *, deterministic: bool = True
               ) -> tuple[jax.Array, dict[str, jax.Array]]:
    check_sides(batch)
    a_len, b_len = batch["a_len"], batch["b_len"]
    drop = lambda x: nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    embed = nn.Embed(self.vocab_size, self.embed_dim, dtype=self.dtype,
                     param_dtype=self.param_dtype, name="embed")
    encode = zoo.BiLSTM(self.hidden_size, dtype=self.dtype, param_dtype=self.param_dtype,
                        name="encode")
    compose = zoo.BiLSTM(self.hidden_size, dtype=self.dtype, param_dtype=self.param_dtype,
                         name="compose")
    a_bar, b_bar = run_on_both(lambda x, n: encode(drop(embed(x)), valid_lens=n)[0],
                               batch["a"], a_len, batch["b"], b_len)  # (B, La, 2H), (B, Lb, 2H)
    aligned = zoo.SoftAlignment(score="dot", dtype=self.dtype, param_dtype=self.param_dtype,
                                name="align")(a_bar, b_bar, valid_lens=(a_len, b_len))
    enhance = lambda x, x_tilde: jnp.concatenate([x, x_tilde, x - x_tilde, x * x_tilde], -1)
    m_a = enhance(a_bar, aligned.b_for_a)  # (B, La, 8H)
    m_b = enhance(b_bar, aligned.a_for_b)  # (B, Lb, 8H)
    project = nn.Dense(self.hidden_size, dtype=self.dtype, param_dtype=self.param_dtype,
                       name="project")
    v_a, v_b = run_on_both(lambda m, n: compose(drop(nn.relu(project(m))), valid_lens=n)[0],
                           m_a, a_len, m_b, b_len)  # (B, La, 2H), (B, Lb, 2H)
    pooled = jnp.concatenate([zoo.masked_mean_pool(v_a, a_len), zoo.masked_max_pool(v_a, a_len),
                              zoo.masked_mean_pool(v_b, b_len), zoo.masked_max_pool(v_b, b_len)],
                             -1)  # (B, 8H)
    hidden = MLP((self.hidden_size,), "tanh", self.dropout_rate, self.dtype, self.param_dtype,
                 name="output")(pooled, deterministic=deterministic)
    logits = _Classifier(self.dropout_rate, self.dtype, self.param_dtype, name="head")(
        hidden, deterministic=deterministic)
    return logits, {"a_to_b": aligned.a_to_b.astype(jnp.float32),
                    "b_to_a": aligned.b_to_a.astype(jnp.float32)}


class SiameseBiLSTM(nn.Module):
  """The sentiment chapter's encoder applied to each question with shared weights, compared.

  u = AttentionPooling(BiLSTM(E[a])), v = the same for b (2H wide each);
  features = [u; v; |u - v|; u * v] (8H) (Conneau et al., 2017's pair features);
  ReLU layer of H, dropout, dense to the logits.

  Attributes:
    vocab_size: V.
    embed_dim: E.
    hidden_size: H, the state width of each LSTM direction.
    score: the pooling score, one of zoo.SCORE_NAMES.
    dropout_rate: dropout on the embeddings and before both output layers.
    dtype, param_dtype: computation and storage dtypes.
  """
  vocab_size: int
  embed_dim: int = 128
  hidden_size: int = 128
  score: str = "dot"
  dropout_rate: float = 0.2
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, batch: Batch, *, deterministic: bool = True
               ) -> tuple[jax.Array, dict[str, jax.Array]]:
    check_sides(batch)
    embed = nn.Embed(self.vocab_size, self.embed_dim, dtype=self.dtype,
                     param_dtype=self.param_dtype, name="embed")
    encode = zoo.BiLSTM(self.hidden_size, dtype=self.dtype, param_dtype=self.param_dtype,
                        name="encode")
    pool = zoo.AttentionPooling(score=self.score, dtype=self.dtype,
                                param_dtype=self.param_dtype, name="pool")

    def side(tokens, lengths):
      x = nn.Dropout(self.dropout_rate)(embed(tokens), deterministic=deterministic)
      outputs, _ = encode(x, valid_lens=lengths)  # (2B, L, 2H)
      pooled, weights = pool(outputs, valid_lens=lengths)  # (2B, 2H), (2B, L)
      return pooled[:, None, :], weights  # steps on axis 1 for run_on_both

    (u, a_weights), (v, b_weights) = run_on_both(side, batch["a"], batch["a_len"], batch["b"],
                                                 batch["b_len"])
    u, v = u[:, 0], v[:, 0]  # (B, 2H)
    features = jnp.concatenate([u, v, jnp.abs(u - v), u * v], -1)  # (B, 8H)
    hidden = MLP((self.hidden_size,), "relu", self.dropout_rate, self.dtype, self.param_dtype,
                 name="output")(features, deterministic=deterministic)
    logits = _Classifier(self.dropout_rate, self.dtype, self.param_dtype, name="head")(
        hidden, deterministic=deterministic)
    return logits, {"a_pooling": a_weights.astype(jnp.float32),
                    "b_pooling": b_weights.astype(jnp.float32)}

