"""Pure training and evaluation steps, and the arithmetic of metric pairs.

Nothing here prints, saves or reads from the device: these functions are traced once by `jax.jit`
(see `parallel.DataParallel`) and run as one XLA program per step.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from experiments.task import Batch, Metrics, Task
from experiments.train_state import TrainState

# Sentinel of `first_bad_step` while every loss so far was finite.
NO_BAD_STEP = -1


def weighted_sum(values: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
  """A metric pair (total, count) from per-example (or per-token) values and weights.

  Args:
    values: float (B, ...) values, e.g. per-example losses or 0/1 correctness.
    weights: float (B, ...) of the same shape, or (B,) broadcast over the trailing axes.

  Returns:
    (sum(values * weights), sum(weights broadcast to values)), both float32 scalars.
  """
  values = jnp.asarray(values, jnp.float32)
  weights = jnp.asarray(weights, jnp.float32)
  weights = weights.reshape(weights.shape + (1,) * (values.ndim - weights.ndim))  # (B, 1, ...)
  weights = jnp.broadcast_to(weights, values.shape)
  return jnp.sum(values * weights), jnp.sum(weights)


def add_metrics(a: Metrics, b: Metrics) -> Metrics:
  """Adds two metric dicts pair by pair (the union of their names)."""
  out = dict(a)
  for name, (total, count) in b.items():
    if name in out:
      out[name] = (out[name][0] + total, out[name][1] + count)
    else:
      out[name] = (total, count)
  return out


def zeros_like_metrics(metrics: Metrics) -> Metrics:
  return jax.tree.map(jnp.zeros_like, metrics)


def means(metrics) -> dict[str, float]:
  """Host-side total / count per metric (NaN where the count is 0). Reads from the device."""
  fetched = jax.device_get(metrics)
  return {name: float(total) / float(count) if float(count) else float("nan")
          for name, (total, count) in fetched.items()}


def make_train_step(task: Task, tx: optax.GradientTransformation,
                    schedule: optax.Schedule | None = None
                    ) -> Callable[[TrainState, Batch], tuple[TrainState, Metrics]]:
  """Returns the pure `train_step(state, batch) -> (state, metrics)`.

  The step draws its dropout key as `fold_in(state.rng, state.step)` (or, for a task with
  RNG_CHAIN, splits the carried key: `TrainState.split_rng`), differentiates `task.loss` (by
  `task.loss_and_grads`),
  applies the optimizer and returns the task's metric pairs plus 'grad_norm', 'learning_rate' and
  'objective' (the scalar that was differentiated; NaN or inf there is what the NaN guard watches),
  each as a (value, 1) pair so that summing over steps gives their mean.
  """

  chain = getattr(task, "RNG_CHAIN", False)

  def train_step(state: TrainState, batch: Batch) -> tuple[TrainState, Metrics]:
    carried, rng = state.split_rng() if chain else (state.rng, state.step_rng())
    (loss, metrics), grads = task.loss_and_grads(state.params, batch, rng)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    one = jnp.ones((), jnp.float32)
    metrics = dict(metrics)
    metrics["objective"] = (jnp.asarray(loss, jnp.float32), one)
    metrics["grad_norm"] = (optax.tree.norm(grads).astype(jnp.float32), one)
    if schedule is not None:
      metrics["learning_rate"] = (jnp.asarray(schedule(state.step), jnp.float32), one)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state,
                              rng=carried)
    return new_state, metrics

  return train_step


def make_eval_step(task: Task) -> Callable[[Any, Batch], Metrics]:
  """Returns the pure `eval_step(params, batch) -> metrics` (the task's deterministic metrics)."""

  def eval_step(params, batch: Batch) -> Metrics:
    return dict(task.eval_metrics(params, batch))

  return eval_step


def init_accumulator(example: Metrics) -> dict[str, Any]:
  """The running sums the training loop keeps on the device between two logs.

  'metrics' are summed pairs; 'first_bad_step' is the first step whose objective or gradient norm
  was not finite (NO_BAD_STEP while none was), 'bad_value' that step's objective.
  """
  return {"metrics": zeros_like_metrics(example),
          "first_bad_step": jnp.full((), NO_BAD_STEP, jnp.int32),
          "bad_value": jnp.zeros((), jnp.float32)}


def accumulate(acc: dict[str, Any], metrics: Metrics, step: jax.Array) -> dict[str, Any]:
  """Adds one step's metrics to the running sums and remembers the first non-finite step."""
  value = metrics["objective"][0]
  finite = jnp.isfinite(value) & jnp.isfinite(metrics["grad_norm"][0])
  first = (acc["first_bad_step"] == NO_BAD_STEP) & ~finite
  return {"metrics": add_metrics(acc["metrics"], metrics),
          "first_bad_step": jnp.where(first, step.astype(jnp.int32), acc["first_bad_step"]),
          "bad_value": jnp.where(first, value, acc["bad_value"])}


def make_loop_step(train_step: Callable) -> Callable:
  """Fuses a train step with the accumulation, so the loop dispatches one program per step.

  Returns `loop_step(state, acc, batch) -> (state, acc)`; the step number recorded for a bad loss is
  the 1-based number of the update (state.step after it).
  """

  def loop_step(state: TrainState, acc: dict[str, Any], batch: Batch):
    state, metrics = train_step(state, batch)
    return state, accumulate(acc, metrics, state.step)

  return loop_step
