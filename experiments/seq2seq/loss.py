"""The teacher-forced loss of the sequence-to-sequence experiments: masked token cross-entropy.

Two reductions (REDUCTIONS; a model config's `loss_reduction`):
  'token_mean'    the mean over the real target tokens of the batch (the project's default);
  'sequence_sum'  each sequence's summed cross-entropy, averaged over the batch's real sequences
                  (the Paddle couplet chapter's: sum over time, mean over the batch). Longer
                  sequences weigh more, and the loss (and its gradient) is about the mean target
                  length times the token mean.

Shapes: B batch, T target length, V target vocabulary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from experiments import steps
from experiments.task import Metrics


def token_losses(logits: jax.Array, targets: jax.Array,
                 label_smoothing: float = 0.0) -> tuple[jax.Array, jax.Array]:
  """Per-token cross-entropies, computed in float32.

  Args:
    logits: float (B, T, V).
    targets: int (B, T) target ids.
    label_smoothing: eps: the target distribution is (1 - eps) on the target plus eps / V on every
      token.

  Returns:
    (objective (B, T), nll (B, T)): the label-smoothed cross-entropy that training minimises, and
    the plain negative log-likelihood of the target (the same when eps == 0).
  """
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)  # (B, T, V)
  nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # (B, T)
  if not label_smoothing:
    return nll, nll
  uniform = -jnp.mean(log_probs, axis=-1)  # (B, T): cross-entropy against the uniform target
  return (1.0 - label_smoothing) * nll + label_smoothing * uniform, nll


def target_weights(lengths: jax.Array, width: int, weight: jax.Array) -> jax.Array:
  """float32 (B, T): the example's weight on its first lengths[b] positions, 0 on padding."""
  positions = jnp.arange(width)[None, :]  # (1, T)
  return (positions < lengths[:, None]).astype(jnp.float32) * weight[:, None].astype(jnp.float32)


REDUCTIONS = ("token_mean", "sequence_sum")


def sequence_loss(logits: jax.Array, targets: jax.Array, lengths: jax.Array, weight: jax.Array,
                  label_smoothing: float = 0.0,
                  reduction: str = "token_mean") -> tuple[jax.Array, Metrics]:
  """Masked sequence cross-entropy, reduced per token or per sequence.

  Args:
    logits: float (B, T, V).
    targets: int (B, T), padded with anything (padding positions weigh nothing).
    lengths: int (B,), real target tokens per row (eos included).
    weight: float (B,), 1 for real examples and 0 for filler rows.
    label_smoothing: see token_losses.
    reduction: 'token_mean' (sum of the weighted objective / real tokens) or 'sequence_sum'
      (sum of the weighted objective / real sequences, i.e. the sum of weight).

  Returns:
    (loss, metrics): the reduced objective, and metric pairs 'loss' (objective; (total, tokens)
    or, with 'sequence_sum', (total, sequences), so its logged mean is the loss being reduced),
    'nll' (plain cross-entropy) and 'token_accuracy' (argmax == target), each (total, tokens).

  Raises:
    ValueError: reduction is not one of REDUCTIONS.
  """
  if reduction not in REDUCTIONS:
    raise ValueError(f"reduction: expected one of {list(REDUCTIONS)}, got {reduction!r}")
  objective, nll = token_losses(logits, targets, label_smoothing)
  weights = target_weights(lengths, targets.shape[1], weight)  # (B, T)
  correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
  metrics = sequence_metrics(objective, nll, correct, weights, weight, reduction)
  total, count = metrics["loss"]
  return total / jnp.maximum(count, 1.0), metrics


def sequence_metrics(objective: jax.Array, nll: jax.Array, correct: jax.Array,
                     weights: jax.Array, weight: jax.Array, reduction: str) -> Metrics:
  """The metric pairs of sequence_loss from per-token values.

  Args:
    objective, nll, correct: float (B, T) per token: the objective, the plain cross-entropy, and
      1.0 where the argmax is the target.
    weights: float (B, T), target_weights.
    weight: float (B,), 1 for real examples and 0 for filler rows.
    reduction: as sequence_loss; 'sequence_sum' counts the loss per sequence.

  Returns:
    {'loss', 'nll', 'token_accuracy'}: (total, count) pairs (see sequence_loss).
  """
  loss_pair = steps.weighted_sum(objective, weights)
  if reduction == "sequence_sum":
    loss_pair = (loss_pair[0], jnp.sum(weight.astype(jnp.float32)))
  return {"loss": loss_pair, "nll": steps.weighted_sum(nll, weights),
          "token_accuracy": steps.weighted_sum(correct, weights)}
