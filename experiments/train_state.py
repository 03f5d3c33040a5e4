"""The training state pytree and the optax optimizer built from a config."""

from __future__ import annotations

from typing import Any, Callable

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments.config import OptimizerConfig


@flax.struct.dataclass
class TrainState:
  """Everything that changes during training, as one pytree (so it can be donated and saved).

  Attributes:
    step: int32 scalar, the number of optimizer updates applied so far.
    params: the model parameters.
    opt_state: the optax optimizer state.
    rng: a new-style PRNG key, fixed for the run; step s uses `jax.random.fold_in(rng, s)`, so the
      randomness of a step does not depend on how the run got there (resumes reproduce it).
  """
  step: jax.Array
  params: Any
  opt_state: Any
  rng: jax.Array

  @classmethod
  def create(cls, params, tx: optax.GradientTransformation, rng: jax.Array) -> TrainState:
    return cls(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params), rng=rng)

  def step_rng(self) -> jax.Array:
    """The key for the update that takes the state from `step` to `step + 1`."""
    return jax.random.fold_in(self.rng, self.step)

  def split_rng(self) -> tuple[jax.Array, jax.Array]:
    """(the key the next step carries, this step's key): the carried key split in two, for a
    task whose keys form a chain (Task.RNG_CHAIN); the carried key is saved with the state."""
    carried, key = jax.random.split(self.rng)
    return carried, key


def cosine_to_last_rates(peak: float, warmup: int, total: int, floor: float) -> np.ndarray:
  """The learning rate of each step s = 0 .. total - 1, float32 (total,): for s < warmup,
  peak * (s + 1) / warmup (the first step already moves), then

    peak * (floor + (1 - floor) * (1 + cos(pi * min(p, 1))) / 2),
    p = (s - warmup) / max(total - warmup - 1, 1),

  from the peak down to floor * peak at the last step; each rate computed in float64 and rounded
  once to float32."""
  rates = []
  for step in range(total):
    if step < warmup:
      rates.append(peak * (step + 1) / warmup)
    else:
      progress = (step - warmup) / max(total - warmup - 1, 1)
      rates.append(peak * (floor + (1.0 - floor) * 0.5 *
                           (1.0 + np.cos(np.pi * min(progress, 1.0)))))
  return np.asarray(rates, np.float64).astype(np.float32)


def warmup_steps(cfg: OptimizerConfig, total_steps: int) -> int:
  """The warm-up's steps: optimizer.warmup_steps, or its warmup_fraction of the run's steps."""
  if cfg.warmup_fraction is None:
    return cfg.warmup_steps
  if not 0.0 <= cfg.warmup_fraction <= 1.0:
    raise ValueError(f"optimizer.warmup_fraction must lie in [0, 1] (or be None), got "
                     f"{cfg.warmup_fraction}")
  return max(int(cfg.warmup_fraction * total_steps), 1)


def make_schedule(cfg: OptimizerConfig, total_steps: int) -> optax.Schedule:
  """The learning rate as a function of the step: linear warm-up, then the configured decay.

  Args:
    cfg: the optimizer config (learning_rate, schedule, warmup_steps or warmup_fraction,
      decay_steps, min_lr_ratio).
    total_steps: the length of the run; the default cosine decay ends there.

  Returns:
    An optax schedule, step -> learning rate (float32 scalar).
  """
  if cfg.warmup_steps < 0:
    raise ValueError(f"optimizer.warmup_steps must be >= 0, got {cfg.warmup_steps}")
  peak, warmup = cfg.learning_rate, warmup_steps(cfg, total_steps)
  if cfg.schedule == "cosine_to_last":
    table = jnp.asarray(cosine_to_last_rates(peak, warmup, total_steps, cfg.min_lr_ratio))
    return lambda count: table[jnp.minimum(count, total_steps - 1)]
  if cfg.schedule == "constant":
    after = optax.constant_schedule(peak)
  elif cfg.schedule == "cosine":
    decay = cfg.decay_steps if cfg.decay_steps is not None else max(total_steps - warmup, 1)
    after = optax.cosine_decay_schedule(peak, decay_steps=max(decay, 1), alpha=cfg.min_lr_ratio)
  elif cfg.schedule == "rsqrt":
    floor = max(warmup, 1)

    def after(count):  # `count` counts steps since the end of the warm-up.
      return peak * jnp.sqrt(floor / jnp.maximum(count + warmup, floor).astype(jnp.float32))
  else:
    raise ValueError(f"optimizer.schedule must be 'constant', 'cosine', 'rsqrt' or "
                     f"'cosine_to_last', got {cfg.schedule!r}")
  if warmup == 0:
    return after
  ramp = optax.linear_schedule(0.0, peak, transition_steps=warmup)
  return optax.join_schedules([ramp, after], boundaries=[warmup])


def make_optimizer(cfg: OptimizerConfig,
                   total_steps: int) -> tuple[optax.GradientTransformation, Callable]:
  """Builds the optax transformation described by `cfg`.

  Args:
    cfg: optimizer name, hyperparameters, gradient clipping and schedule.
    total_steps: the run's length (for the default cosine decay).

  Returns:
    (tx, schedule): the transformation (clipping by global norm first, when configured) and the
    learning-rate schedule it uses, so the trainer can log the rate of each step.
  """
  schedule = make_schedule(cfg, total_steps)
  if cfg.name == "adam":
    core = optax.adam(schedule, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
  elif cfg.name == "adamw":
    core = optax.adamw(schedule, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay)
  elif cfg.name == "sgd":
    core = optax.sgd(schedule, momentum=cfg.momentum or None)
  else:
    raise ValueError(f"optimizer.name must be 'adam', 'adamw' or 'sgd', got {cfg.name!r}")
  if cfg.grad_clip_norm is None:
    return core, schedule
  if cfg.grad_clip_norm <= 0:
    raise ValueError(f"optimizer.grad_clip_norm must be positive or None, got {cfg.grad_clip_norm}")
  return optax.chain(optax.clip_by_global_norm(cfg.grad_clip_norm), core), schedule


def make_init(task: Any, tx: optax.GradientTransformation) -> Callable[[jax.Array, Any],
                                                                        TrainState]:
  """`init(rng, batch) -> TrainState` for a task (experiments.task.Task): the parameters from one
  half of the seed key, the run's dropout key from the other."""

  def init(rng: jax.Array, batch: Any) -> TrainState:
    init_rng, run_rng = jax.random.split(rng)
    return TrainState.create(task.init(init_rng, batch), tx, run_rng)

  return init
