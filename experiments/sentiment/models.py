"""Sentiment classifiers for IMDB, each assembled from zoo modules.

Every model maps token ids (B, L) and their lengths (B,) to `(logits, weights)`:

  logits   float32 (B, 2), class 0 negative, class 1 positive;
  weights  the attention to plot:
           (B, L) for the pooling models: how much each word contributes to the pooled vector
             (a distribution over the first lengths[b] words, zero on padding);
           (B, L, L) for the self-attention models: the last attention layer's weights averaged
             over heads (row i is how query word i spreads its attention; padded rows are zero).
`word_weights` turns either kind into one weight per word that sums to 1 over the real words.

Word bigrams: the BiLSTM models and NgramAttentionPool can also read, per word, the id of its
bigram with the word before it (pipelines SentimentData with bigrams=True: 'bigrams' (B, L),
aligned with the tokens); built with `bigram_vocab_size` > 0, they add a bigram embedding to each
word's embedding and must be called with `bigrams=`.

The models (the nndl chapter 8 comparison and the Gluon SANet post):
  BiLSTMMeanPool       embedding -> BiLSTM -> masked mean pooling -> dense
  BiLSTMAttentionPool  embedding -> BiLSTM (-> zoo.SimpleSelfAttention) -> zoo.AttentionPooling
                       (any score) -> dense
  BiLSTMSelfAttention  embedding -> BiLSTM -> zoo.MultiHeadAttention -> masked mean pooling -> dense
  SANet                embedding (+ sinusoidal positions) -> zoo.MultiHeadAttention -> masked mean
                       pooling over positions (or the Gluon post's mean over features) -> dropout
                       -> dense
  TransformerClassifier  embedding + positions -> Transformer encoder blocks -> masked mean
                       pooling -> dense
  NgramAttentionPool   word (+ bigram) embeddings (+ sinusoidal positions) -> zoo.AttentionPooling
                       -> dense: a bag of n-grams weighted by attention (fastText with a learned
                       pooling query); without bigrams, nndl's attention layer without the LSTM
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from experiments.sentiment import inits
import zoo
from zoo import checks

Dtype = Any
NUM_CLASSES = 2


def _check_inputs(tokens: jax.Array, lengths: jax.Array) -> None:
  checks.rank(tokens, 2, "tokens")
  checks.integer(tokens, "tokens")
  checks.rank(lengths, 1, "lengths")
  checks.integer(lengths, "lengths")
  checks.equal_dim(lengths, "lengths", 0, tokens, "tokens", 0)
  checks.lengths_in_range(lengths, "lengths", tokens.shape[1])


def mean_pool_weights(lengths: jax.Array, max_len: int) -> jax.Array:
  """The weights masked mean pooling gives each step: 1 / lengths[b] on the valid steps.

  Args:
    lengths: int (B,).
    max_len: L.

  Returns:
    float32 (B, L); all zeros for an example of length 0.
  """
  mask = zoo.sequence_mask(lengths, max_len).astype(jnp.float32)  # (B, L)
  return mask / jnp.maximum(lengths, 1).astype(jnp.float32)[:, None]


def word_weights(weights: jax.Array, lengths: jax.Array) -> jax.Array:
  """One attention weight per word, summing to 1 over the real words of each example.

  Pooling weights (B, L) are already that. For self-attention weights (B, L, L) followed by mean
  pooling over the query words, the pooled vector is sum_j (mean_i a_ij) v_j, so word j's share is
  the mean over the real query rows i of column j.

  Args:
    weights: (B, L) or (B, L, L), as returned by the models.
    lengths: int (B,).

  Returns:
    float32 (B, L), zero on padding.
  """
  weights = jnp.asarray(weights, jnp.float32)
  if weights.ndim == 2:
    return weights
  checks.rank(weights, 3, "weights")
  rows = mean_pool_weights(lengths, weights.shape[1])  # (B, Q): 1/len on real query rows
  return jnp.einsum("bq,bqk->bk", rows, weights)


def embed_words(module: nn.Module, tokens: jax.Array, bigrams: jax.Array | None,
                embedding_init: inits.Initializer = nn.linear.default_embed_init) -> jax.Array:
  """Token ids (B, L) -> embeddings (B, L, E), inside `module`'s compact call.

  `module` has vocab_size, embed_dim, bigram_vocab_size, dtype and param_dtype. The word embedding
  is its submodule 'embed'; with bigram_vocab_size > 0 each word's vector also gets the embedding
  of its bigram with the word before it (submodule 'bigram_embed'), and `bigrams` (B, L) is needed.
  Both tables start from `embedding_init` (flax's default unless given).
  """
  x = nn.Embed(module.vocab_size, module.embed_dim, dtype=module.dtype,
               param_dtype=module.param_dtype, embedding_init=embedding_init,
               name="embed")(tokens)  # (B, L, E)
  if not module.bigram_vocab_size:
    if bigrams is not None:
      raise ValueError("bigrams were given to a model built without bigram_vocab_size: build it "
                       "with the bigram vocabulary's size, or leave bigrams out")
    return x
  if bigrams is None:
    raise ValueError(f"this model reads word bigrams (bigram_vocab_size "
                     f"{module.bigram_vocab_size}): pass bigrams= (B, L), aligned with the tokens")
  checks.integer(bigrams, "bigrams")
  if bigrams.shape != tokens.shape:
    raise ValueError(f"bigrams {bigrams.shape} must have the shape of tokens {tokens.shape}")
  return x + nn.Embed(module.bigram_vocab_size, module.embed_dim, dtype=module.dtype,
                      param_dtype=module.param_dtype, embedding_init=embedding_init,
                      name="bigram_embed")(bigrams)  # (B, L, E)


class BiLSTMEncoder(nn.Module):
  """Token ids -> embeddings -> (multi-layer) BiLSTM outputs, zero at padded steps.

  Attributes:
    vocab_size: V.
    embed_dim: the embedding width E.
    hidden_size: H, the LSTM state width of each direction (outputs are 2H wide).
    num_layers: stacked BiLSTM layers.
    dropout_rate: dropout on the embeddings and between LSTM layers (training only).
    dtype, param_dtype: computation and storage dtypes.
    bigram_vocab_size: > 0 adds word-bigram embeddings (see embed_words).
    init: how the classifier's parameters start, a name of inits.named: 'flax' (flax's and zoo's
      defaults), 'paddle' (the nndl chapter's framework's; see experiments/sentiment/inits.py) or
      an ablation of the two ('paddle+flax_embedding').
      The classifiers built on this encoder read it for their own layers too.
  """
  vocab_size: int
  embed_dim: int = 128
  hidden_size: int = 128
  num_layers: int = 1
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32
  bigram_vocab_size: int = 0
  init: str = "flax"

  @property
  def initializers(self) -> inits.Initializers:
    return inits.named(self.init)

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array, *, bigrams: jax.Array | None = None,
               deterministic: bool = True) -> jax.Array:
    """tokens int (B, L), lengths int (B,), bigrams int (B, L) or None -> outputs (B, L, 2H)."""
    init = self.initializers
    x = embed_words(self, tokens, bigrams, init.embedding)  # (B, L, E)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    outputs, _ = zoo.BiLSTM(self.hidden_size, num_layers=self.num_layers,
                            dropout_rate=self.dropout_rate, dtype=self.dtype,
                            param_dtype=self.param_dtype,
                            initializers=init.lstm(self.hidden_size), name="bilstm")(
                                x, valid_lens=lengths, deterministic=deterministic)  # (B, L, 2H)
    return outputs


class _Head(nn.Module):
  """Dropout, then the dense layer to the class logits (float32)."""
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32
  kernel_init: inits.Initializer = nn.linear.default_kernel_init

  @nn.compact
  def __call__(self, pooled: jax.Array, *, deterministic: bool) -> jax.Array:
    """pooled (B, D) -> logits float32 (B, 2)."""
    pooled = nn.Dropout(self.dropout_rate)(pooled, deterministic=deterministic)
    logits = nn.Dense(NUM_CLASSES, dtype=self.dtype, param_dtype=self.param_dtype,
                      kernel_init=self.kernel_init, name="out")(pooled)
    return logits.astype(jnp.float32)


class _BiLSTMModel(nn.Module):
  """What the BiLSTM classifiers share: the encoder (token ids -> BiLSTM outputs) and the output
  layer, which applies the encoder's `dropout_rate` to the pooled vector and computes in its dtypes.

  Attributes:
    encoder: a BiLSTMEncoder (its parameters live under 'encoder').
  """
  encoder: BiLSTMEncoder

  def encode(self, tokens, lengths, bigrams, deterministic):
    _check_inputs(tokens, lengths)
    return self.encoder(tokens, lengths, bigrams=bigrams,
                        deterministic=deterministic)  # (B, L, 2H)

  def classify(self, pooled, deterministic):
    e = self.encoder
    return _Head(e.dropout_rate, e.dtype, e.param_dtype, e.initializers.dense_kernel, name="head")(
        pooled, deterministic=deterministic)  # (B, 2)


class BiLSTMMeanPool(_BiLSTMModel):
  """embedding -> BiLSTM -> masked mean pooling -> dense: the baseline without attention.

  `__call__(tokens (B, L), lengths (B,), *, bigrams=None, deterministic=True)
  -> (logits (B, 2), weights (B, L))`;
  the weights are the uniform 1 / length of mean pooling, so the heatmap of the baseline is flat.
  Built as `BiLSTMMeanPool(BiLSTMEncoder(vocab_size, ...))`, like the other BiLSTM classifiers.
  """

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array, *, bigrams: jax.Array | None = None,
               deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    outputs = self.encode(tokens, lengths, bigrams, deterministic)  # (B, L, 2H)
    pooled = zoo.masked_mean_pool(outputs, lengths)  # (B, 2H)
    return self.classify(pooled, deterministic), mean_pool_weights(lengths, tokens.shape[1])


class BiLSTMAttentionPool(_BiLSTMModel):
  """embedding -> BiLSTM -> attention pooling with a learned query -> dense (nndl 8.1).

  `__call__(tokens (B, L), lengths (B,), *, bigrams=None, deterministic=True)
  -> (logits (B, 2), weights (B, L))`.

  Attributes:
    score: the pooling score, one of zoo.SCORE_NAMES ('additive', 'dot', 'scaled_dot',
      'bilinear', 'concat', 'concat_linear').
    score_features: hidden size of the 'additive' / 'concat' scores (None: the BiLSTM width 2H).
    self_attention: put zoo.SimpleSelfAttention, softmax(X X^T) X over the real words with no
      parameters, between the BiLSTM and the pooling (an nndl chapter 8 exercise); the weights
      returned stay the pooling's.
  """
  score: str = "additive"
  score_features: int | None = None
  self_attention: bool = False

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array, *, bigrams: jax.Array | None = None,
               deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    outputs = self.encode(tokens, lengths, bigrams, deterministic)  # (B, L, 2H)
    if self.self_attention:
      outputs, _ = zoo.SimpleSelfAttention(dtype=self.encoder.dtype, name="self_attention")(
          outputs, valid_lens=lengths)  # (B, L, 2H), (B, L, L)
    init = self.encoder.initializers
    pooled, weights = zoo.AttentionPooling(
        score=self.score, features=self.score_features, dtype=self.encoder.dtype,
        param_dtype=self.encoder.param_dtype, query_init=init.query,
        kernel_init=init.dense_kernel, name="pool")(outputs, valid_lens=lengths)  # (B, 2H), (B, L)
    return self.classify(pooled, deterministic), weights.astype(jnp.float32)


class BiLSTMSelfAttention(_BiLSTMModel):
  """embedding -> BiLSTM -> multi-head self-attention -> masked mean pooling -> dense (nndl 8.2).

  `__call__(tokens (B, L), lengths (B,), *, bigrams=None, deterministic=True)
  -> (logits (B, 2), weights (B, L, L) averaged over heads)`.

  Attributes:
    num_heads: H; the 2H-wide BiLSTM outputs are split into num_heads heads.
    score: the per-head score (zoo.SCORE_NAMES); 'scaled_dot' by default.
    attention_dropout: dropout on the attention weights (training only).
    use_bias: whether the query, key, value and output projections have biases (the nndl chapter's
      have none).
  """
  num_heads: int = 8
  score: str = "scaled_dot"
  attention_dropout: float = 0.0
  use_bias: bool = True

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array, *, bigrams: jax.Array | None = None,
               deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    outputs = self.encode(tokens, lengths, bigrams, deterministic)  # (B, L, 2H)
    attended, weights = zoo.MultiHeadAttention(
        self.num_heads, score=self.score, dropout_rate=self.attention_dropout,
        use_bias=self.use_bias, dtype=self.encoder.dtype, param_dtype=self.encoder.param_dtype,
        kernel_init=self.encoder.initializers.dense_kernel, name="attention")(
            outputs, valid_lens=lengths, deterministic=deterministic,
            return_weights=True)  # (B, L, 2H), (B, H, L, L)
    pooled = zoo.masked_mean_pool(attended, lengths)  # (B, 2H)
    return self.classify(pooled, deterministic), _head_mean(weights, lengths)


def _head_mean(weights: jax.Array, lengths: jax.Array) -> jax.Array:
  """(B, H, Q, K) weights -> float32 (B, Q, K) averaged over heads, zero on padded query rows."""
  rows = zoo.sequence_mask(lengths, weights.shape[2])  # (B, Q)
  mean = jnp.mean(weights.astype(jnp.float32), axis=1)  # (B, Q, K)
  return jnp.where(rows[:, :, None], mean, 0.0)


def _add_positions(module: nn.Module, x: jax.Array) -> jax.Array:
  """x (B, L, D) scaled by sqrt(D) (so the embedding is not drowned by the unit-size sinusoids),
  plus the sinusoidal position encoding: (B, L, D)."""
  x = x * jnp.asarray(math.sqrt(x.shape[-1]), x.dtype)
  return zoo.SinusoidalPositionEncoding(max_len=max(x.shape[1], 1), dtype=module.dtype,
                                        name="positions")(x)


def _embed_with_positions(module: nn.Module, tokens, width: int, positions: bool,
                          dropout_rate: float, deterministic: bool,
                          embedding_init: inits.Initializer = nn.linear.default_embed_init):
  """Embeds tokens (B, L) into (B, L, D) (table drawn by `embedding_init`); with `positions`,
  `_add_positions`; then dropout."""
  x = nn.Embed(module.vocab_size, width, dtype=module.dtype, param_dtype=module.param_dtype,
               embedding_init=embedding_init, name="embed")(tokens)  # (B, L, D)
  if positions:
    x = _add_positions(module, x)
  return nn.Dropout(dropout_rate)(x, deterministic=deterministic)


SANET_POOLINGS = ("mean", "gluon_ncw")


class SANet(nn.Module):
  """A pure self-attention classifier (the Gluon SANet post): embedding, optional sinusoidal
  position encoding, multi-head self-attention, global average pooling, dropout, dense.

  `__call__(tokens (B, L), lengths (B,), *, deterministic=True)
  -> (logits (B, 2), weights (B, L, L) averaged over heads)`.

  Pooling: 'mean' averages the attended vectors (B, L, D) over the real positions into (B, D).
  'gluon_ncw' is what the post's GlobalAvgPool1D does to its (B, 100, 128) tensor in Gluon's NCW
  layout, which reads axis 1 as channels and averages axis 2: the mean over the D features of each
  position, (B, L), zero at padded positions and zero-padded to (B, max_len), so the dense layer
  weighs positions by where they stand in the review. The word weights of `word_weights` assume
  'mean' pooling; under 'gluon_ncw' they are the attention's, not each word's share of the logit.

  Attributes:
    vocab_size: V.
    embed_dim: D, the embedding width (and the attention's output width).
    num_heads: H (qkv_features must be divisible by H).
    position_encoding: add the sinusoidal position encoding to the (sqrt(D)-scaled) embeddings.
    dropout_rate: dropout on the embeddings and on the pooled vector.
    attention_dropout: dropout on the attention weights.
    qkv_features: H * Dh, the width of the queries, keys and values of all heads together (None:
      D); the post's heads project to Dh = 100 each (800 for 8 heads).
    use_bias: whether the query, key, value and output projections have biases.
    score: the per-head score (zoo.SCORE_NAMES).
    pooling: 'mean' or 'gluon_ncw' (above).
    max_len: the positions 'gluon_ncw' pooling feeds the dense layer (inputs may be shorter, never
      longer); unused by 'mean'.
    init_name: the parameters' initializers, a name of inits.named: 'flax' (flax's defaults),
      'gluon' (the post's Uniform(0.1)); the embedding, the attention's kernels and the output
      layer's. (Not `init`, the module's own method.)
    dtype, param_dtype: computation and storage dtypes.
  """
  vocab_size: int
  embed_dim: int = 128
  num_heads: int = 8
  position_encoding: bool = True
  dropout_rate: float = 0.1
  attention_dropout: float = 0.0
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32
  qkv_features: int | None = None
  use_bias: bool = True
  score: str = "scaled_dot"
  pooling: str = "mean"
  max_len: int = 256
  init_name: str = "flax"

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array, *,
               deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    _check_inputs(tokens, lengths)
    if self.pooling not in SANET_POOLINGS:
      raise ValueError(f"pooling: unknown {self.pooling!r}; known are {', '.join(SANET_POOLINGS)}")
    if self.pooling == "gluon_ncw" and tokens.shape[1] > self.max_len:
      raise ValueError(f"tokens: pooling 'gluon_ncw' feeds max_len={self.max_len} positions to the "
                       f"dense layer, got {tokens.shape[1]} (cut the reviews to max_len)")
    init = inits.named(self.init_name)
    x = _embed_with_positions(self, tokens, self.embed_dim, self.position_encoding,
                              self.dropout_rate, deterministic, init.embedding)  # (B, L, D)
    attended, weights = zoo.MultiHeadAttention(
        self.num_heads, qkv_features=self.qkv_features, score=self.score,
        dropout_rate=self.attention_dropout, use_bias=self.use_bias, dtype=self.dtype,
        param_dtype=self.param_dtype, kernel_init=init.dense_kernel, name="attention")(
            x, valid_lens=lengths, deterministic=deterministic,
            return_weights=True)  # (B, L, D), (B, H, L, L)
    if self.pooling == "mean":
      pooled = zoo.masked_mean_pool(attended, lengths)  # (B, D)
    else:
      real = zoo.sequence_mask(lengths, tokens.shape[1])  # (B, L)
      per_position = jnp.where(real, jnp.mean(attended, axis=-1), 0.0)  # (B, L)
      pooled = jnp.pad(per_position, ((0, 0), (0, self.max_len - tokens.shape[1])))  # (B, max_len)
    logits = _Head(self.dropout_rate, self.dtype, self.param_dtype, init.dense_kernel,
                   name="head")(pooled, deterministic=deterministic)
    return logits, _head_mean(weights, lengths)


class TransformerClassifier(nn.Module):
  """A Transformer-encoder classifier: embedding * sqrt(D) + sinusoidal positions, a
  zoo.TransformerEncoder over the real words (key padding mask), masked mean pooling, dense.

  `__call__(tokens (B, L), lengths (B,), *, deterministic=True)
  -> (logits (B, 2), weights (B, L, L): the last layer's self-attention, mean over heads)`.
  The weights are read from what the encoder sows into 'intermediates', so apply the model with
  `mutable=['intermediates']` (SentimentTask.forward does); any other apply raises a ValueError.

  Attributes:
    vocab_size: V.
    embed_dim: D.
    num_layers: encoder blocks.
    num_heads: H.
    ffn_hidden: the inner width of each block's feed-forward network.
    dropout_rate: dropout on the embeddings, inside the blocks and on the pooled vector.
    normalize_before: pre-norm blocks (True) or the original post-norm (False).
    dtype, param_dtype: computation and storage dtypes.
  """
  vocab_size: int
  embed_dim: int = 128
  num_layers: int = 2
  num_heads: int = 8
  ffn_hidden: int = 256
  dropout_rate: float = 0.1
  normalize_before: bool = True
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array, *,
               deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    _check_inputs(tokens, lengths)
    batch, steps = tokens.shape
    x = _embed_with_positions(self, tokens, self.embed_dim, True, self.dropout_rate,
                              deterministic)  # (B, L, D)
    encoder = zoo.TransformerEncoder(
        self.num_layers, num_heads=self.num_heads, ffn_hidden=self.ffn_hidden,
        dropout_rate=self.dropout_rate, normalize_before=self.normalize_before,
        dtype=self.dtype, param_dtype=self.param_dtype, name="encoder")
    encoded = encoder(x, mask=zoo.key_padding_mask(lengths, steps),
                      deterministic=deterministic)  # (B, L, D)
    pooled = zoo.masked_mean_pool(encoded, lengths)  # (B, D)
    logits = _Head(self.dropout_rate, self.dtype, self.param_dtype, name="head")(
        pooled, deterministic=deterministic)
    if self.is_initializing():
      return logits, jnp.zeros((batch, steps, steps), jnp.float32)
    if not self.is_mutable_collection("intermediates"):
      raise ValueError("TransformerClassifier returns the attention weights the encoder sows: "
                       "apply it with mutable=['intermediates']")
    last = encoder.variables["intermediates"][f"layers_{self.num_layers - 1}"]
    return logits, _head_mean(last["self_attention_weights"][-1], lengths)  # (B, L, L)


class NgramAttentionPool(nn.Module):
  """Word (+ bigram) embeddings -> dropout -> attention pooling with a learned query -> dense.

  A bag of n-grams, as fastText (Joulin et al. 2017), whose average is replaced by zoo's attention
  pooling, so the weights say which words (with their left neighbour) decided the label. With
  bigrams each position's vector is its word embedding plus its bigram embedding.

  `__call__(tokens (B, L), lengths (B,), *, bigrams=None, deterministic=True)
  -> (logits (B, 2), weights (B, L))`.

  Attributes:
    vocab_size: V.
    embed_dim: E.
    bigram_vocab_size: the bigram vocabulary (0: words only).
    score: the pooling score (zoo.SCORE_NAMES).
    score_features: hidden size of the 'additive' / 'concat' scores (None: E).
    dropout_rate: dropout on the embeddings and on the pooled vector.
    dtype, param_dtype: computation and storage dtypes.
    init_name: the parameters' initializers, a name of inits.named ('flax', 'paddle', 'gluon'):
      the embedding tables, the pooling query and score kernels, the output layer.
    position_encoding: add the sinusoidal position encoding to the (sqrt(E)-scaled) embeddings
      before the dropout.
  """
  vocab_size: int
  embed_dim: int = 64
  bigram_vocab_size: int = 0
  score: str = "additive"
  score_features: int | None = None
  dropout_rate: float = 0.0
  dtype: Dtype = jnp.float32
  param_dtype: Dtype = jnp.float32
  init_name: str = "flax"
  position_encoding: bool = False

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array, *, bigrams: jax.Array | None = None,
               deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    _check_inputs(tokens, lengths)
    init = inits.named(self.init_name)
    x = embed_words(self, tokens, bigrams, init.embedding)  # (B, L, E)
    if self.position_encoding:
      x = _add_positions(self, x)  # (B, L, E)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    pooled, weights = zoo.AttentionPooling(
        score=self.score, features=self.score_features, dtype=self.dtype,
        param_dtype=self.param_dtype, query_init=init.query, kernel_init=init.dense_kernel,
        name="pool")(x, valid_lens=lengths)  # (B, E), (B, L)
    logits = _Head(self.dropout_rate, self.dtype, self.param_dtype, init.dense_kernel,
                   name="head")(pooled, deterministic=deterministic)
    return logits, weights.astype(jnp.float32)
