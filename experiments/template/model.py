"""The template's Flax module: embeddings, attention pooling with a learned query, a classifier."""

from __future__ import annotations

import flax.linen as nn
import jax

from zoo import AttentionPooling


class PoolingClassifier(nn.Module):
  """logits = W pool(E[tokens]) + b, pooled with the softmax of each word's score against a learned
  query over the valid words.

  Attributes:
    vocab_size: V.
    embed_dim: D.
    score: the scoring function of the pooling (zoo.SCORE_NAMES).
    num_classes: C.
  """
  vocab_size: int
  embed_dim: int
  score: str
  num_classes: int = 2

  @nn.compact
  def __call__(self, tokens: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
    """tokens int (B, L), lengths int (B,) -> (logits (B, C), pooling weights (B, L))."""
    x = nn.Embed(self.vocab_size, self.embed_dim)(tokens)  # (B, L, D)
    pooled, weights = AttentionPooling(score=self.score)(x, valid_lens=lengths)  # (B, D), (B, L)
    return nn.Dense(self.num_classes)(pooled), weights
