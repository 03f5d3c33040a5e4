"""The pure train/eval steps and their sharded compilation, on the toy task."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import engine_toy
from experiments import config as config_lib
from experiments import steps
from experiments.parallel import DataParallel
from experiments.train_state import TrainState
from experiments.train_state import make_optimizer

engine_toy.enable_compilation_cache()


def _setup(overrides=(), devices=None):
  cfg = config_lib.override(engine_toy.toy_config(), overrides)
  task = engine_toy.ToyTask(cfg)
  tx, schedule = make_optimizer(cfg.optimizer, total_steps=10)
  batch = task.example_batch()
  params = jax.jit(task.init)(jax.random.key(0), batch)
  state = TrainState.create(params, tx, jax.random.key(1))
  dp = DataParallel(devices)
  step = dp.jit_train_step(steps.make_train_step(task, tx, schedule))
  return task, dp, state, step, batch


def test_one_step_changes_every_parameter_and_counts():
  task, dp, state, step, batch = _setup()
  before = jax.device_get(state.params)
  new, metrics = step(dp.replicate(state), dp.shard_batch(batch))
  assert int(new.step) == 1
  for path, old, now in zip(jax.tree_util.tree_leaves_with_path(before),
                            jax.tree.leaves(before), jax.tree.leaves(jax.device_get(new.params))):
    assert not np.array_equal(old, now), f"{jax.tree_util.keystr(path[0])} did not change"
  means = steps.means(metrics)
  assert set(means) == {"loss", "accuracy", "objective", "grad_norm", "learning_rate"}
  assert means["learning_rate"] == pytest.approx(1e-2)
  assert means["loss"] == pytest.approx(means["objective"], rel=1e-6)
  assert np.isfinite(means["grad_norm"]) and means["grad_norm"] > 0


def test_a_few_steps_lower_the_loss_with_one_compilation():
  task, dp, state, _, _ = _setup()
  tx, schedule = make_optimizer(task.config.optimizer, 10)

  @chex.assert_max_traces(n=1)
  def train_step(state, batch):
    return steps.make_train_step(task, tx, schedule)(state, batch)

  step = dp.jit_train_step(train_step)
  state = dp.replicate(state)
  it = task.train_batches()
  losses = []
  for _ in range(12):
    state, metrics = step(state, dp.shard_batch(next(it)))
    losses.append(steps.means(metrics)["loss"])
  # Batches differ, so compare the mean of the first and last few steps.
  assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.05, losses


def test_sharded_step_equals_single_device_step():
  assert jax.device_count() == 4, "tests/conftest.py should give 4 fake CPU devices"
  # Two identical initial states: each step donates (deletes) the state it is given.
  _, dp4, state4, step4, batch = _setup()
  _, dp1, state1, step1, _ = _setup(devices=jax.devices()[:1])
  new4, m4 = step4(dp4.replicate(state4), dp4.shard_batch(batch))
  new1, m1 = step1(dp1.replicate(state1), dp1.shard_batch(batch))
  assert new4.params["Dense_0"]["kernel"].sharding.num_devices == 4
  chex.assert_trees_all_close(jax.device_get(new4.params), jax.device_get(new1.params),
                              rtol=1e-5, atol=1e-7)
  chex.assert_trees_all_close(jax.device_get(new4.opt_state), jax.device_get(new1.opt_state),
                              rtol=1e-5, atol=1e-9)
  chex.assert_trees_all_close(steps.means(m4), steps.means(m1), rtol=1e-5)


def test_eval_metrics_are_exact_weighted_means_over_padded_batches():
  task, dp, state, _, _ = _setup()
  from experiments import trainer
  got = trainer.evaluate(task, state.params, "dev")
  # Reference: the same model on the 17 dev examples in one unpadded numpy pass.
  examples = task.splits["dev"]
  logits = np.asarray(task.logits(state.params, examples))
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  nll = -log_probs[np.arange(17), examples["label"]]
  assert got["loss"] == pytest.approx(nll.mean(), rel=1e-5)
  assert got["accuracy"] == pytest.approx((logits.argmax(-1) == examples["label"]).mean())
  total, count = steps.weighted_sum(jnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
                                    jnp.array([1.0, 0.0, 0.5]))
  assert float(total) == 1 + 2 + 2.5 + 3 and float(count) == 1 + 1 + 0.5 + 0.5


def test_bfloat16_compute_keeps_float32_parameters():
  task, dp, state, step, batch = _setup(["--train.dtype=bfloat16"])
  assert task.model.dtype == jnp.bfloat16
  new, metrics = step(dp.replicate(state), dp.shard_batch(batch))
  for leaf in jax.tree.leaves(new.params) + jax.tree.leaves(new.opt_state[0].mu):
    assert leaf.dtype == jnp.float32
  assert np.isfinite(steps.means(metrics)["loss"])


def test_batch_not_divisible_by_devices_is_a_clear_error():
  dp = DataParallel()
  with pytest.raises(ValueError, match=r"train.batch_size = 10 must be a multiple .* \(4\)"):
    dp.check_batch_size(10, "train.batch_size")
  with pytest.raises(ValueError, match=r"batch\['tokens'\] with shape \(6, 7\) cannot be split"):
    dp.shard_batch({"tokens": np.zeros((6, 7), np.int32)})
