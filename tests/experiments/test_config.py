"""Configs, overrides, optimizers and schedules (no training here)."""

from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments import config as config_lib
from experiments.config import Config
from experiments.config import OptimizerConfig
from experiments.train_state import TrainState
from experiments.train_state import make_optimizer
from experiments.train_state import make_schedule


@dataclasses.dataclass
class _Model:
  width: int = 12
  dropout: float = 0.1
  heads: tuple[int, ...] = (4,)
  score: Literal["dot", "additive"] = "dot"
  tied: bool = False
  max_len: int | None = None


def _config():
  return Config(experiment="x", model_name="m", model=_Model())


def test_override_dotted_and_bare_keys_parse_to_field_types():
  cfg = config_lib.override(_config(), [
      "optimizer.learning_rate=3e-4", "batch_size=96", "model.dropout=0", "heads=4,8",
      "score=additive", "tied=yes", "max_len=256", "grad_clip_norm=5", "num_steps=1e3",
      "epochs=7"])
  assert cfg.train.num_epochs == 7
  assert cfg.optimizer.learning_rate == 3e-4 and isinstance(cfg.optimizer.learning_rate, float)
  assert cfg.train.batch_size == 96 and isinstance(cfg.train.batch_size, int)
  assert cfg.model.dropout == 0.0 and isinstance(cfg.model.dropout, float)
  assert cfg.model.heads == (4, 8)
  assert cfg.model.score == "additive"
  assert cfg.model.tied is True
  assert cfg.model.max_len == 256
  assert cfg.optimizer.grad_clip_norm == 5.0
  assert cfg.train.num_steps == 1000
  # The original is untouched (overrides work on a deep copy).
  assert _config().model.dropout == 0.1
  none = config_lib.override(cfg, ["max_len=none", "optimizer.grad_clip_norm=null"])
  assert none.model.max_len is None and none.optimizer.grad_clip_norm is None
  assert config_lib.override(cfg, ["lr=0.25"]).optimizer.learning_rate == 0.25


def test_unknown_key_lists_the_valid_keys():
  with pytest.raises(ValueError, match=r"unknown config key 'optimizer\.lr'; valid keys are: "
                     r".*train\.batch_size.*optimizer\.learning_rate.*model\.width"):
    config_lib.override(_config(), ["optimizer.lr=1e-3"])
  with pytest.raises(ValueError,
                     match=r"unknown config key 'widht' \(did you mean model\.width\?\)"):
    config_lib.override(_config(), ["widht=3"])


def test_ambiguous_and_malformed_and_badly_typed_overrides():
  @dataclasses.dataclass
  class Data:
    seed: int = 1

  with pytest.raises(ValueError, match=r"'seed' is ambiguous.*train\.seed, data\.seed"):
    config_lib.override(Config(data=Data()), ["seed=3"])
  with pytest.raises(ValueError, match="must look like key=value"):
    config_lib.override(_config(), ["learning_rate"])
  with pytest.raises(ValueError, match=r"train\.batch_size: expected int, got 'many'"):
    config_lib.override(_config(), ["batch_size=many"])
  with pytest.raises(ValueError, match=r"train\.batch_size: expected int, got '2\.5'"):
    config_lib.override(_config(), ["batch_size=2.5"])
  with pytest.raises(ValueError, match=r"model\.score: 'bilinear' is not one of dot, additive"):
    config_lib.override(_config(), ["score=bilinear"])
  with pytest.raises(ValueError, match="expected a boolean"):
    config_lib.override(_config(), ["tied=maybe"])


def test_dict_round_trip_and_unknown_saved_key():
  cfg = config_lib.override(_config(), ["heads=2,3", "dtype=bfloat16", "learning_rate=0.5"])
  back = config_lib.update_from_dict(_config(), config_lib.to_dict(cfg))
  assert back == cfg
  assert back.compute_dtype == jnp.bfloat16 and back.storage_dtype == jnp.float32
  with pytest.raises(ValueError, match=r"unknown config key 'train\.batchsize'"):
    config_lib.update_from_dict(_config(), {"train": {"batchsize": 3}})
  text = config_lib.describe(cfg)
  assert "model.heads = (2, 3)" in text and "optimizer.learning_rate = 0.5" in text


@pytest.mark.parametrize("schedule,expected", [
    # warm-up 0 -> 1e-2 over 4 steps, then the decay; checked at steps 0, 2, 4, 9, 14.
    ("constant", [0.0, 5e-3, 1e-2, 1e-2, 1e-2]),
    ("cosine", [0.0, 5e-3, 1e-2, 1e-2 * (1 + np.cos(np.pi * 5 / 10)) / 2, 0.0]),
    ("rsqrt", [0.0, 5e-3, 1e-2, 1e-2 * np.sqrt(4 / 9), 1e-2 * np.sqrt(4 / 14)]),
])
def test_schedules_exact(schedule, expected):
  cfg = OptimizerConfig(learning_rate=1e-2, schedule=schedule, warmup_steps=4)
  fn = make_schedule(cfg, total_steps=14)
  got = [float(fn(s)) for s in (0, 2, 4, 9, 14)]
  np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)


def test_optimizers_clip_and_decay():
  params = {"w": jnp.full((3,), 2.0)}
  grads = {"w": jnp.array([30.0, 40.0, 0.0])}  # global norm 50
  # SGD with clipping at 5: the update is -lr * g * 5 / 50.
  tx, _ = make_optimizer(OptimizerConfig(name="sgd", learning_rate=0.1, grad_clip_norm=5.0), 10)
  updates, _ = tx.update(grads, tx.init(params), params)
  np.testing.assert_allclose(updates["w"], [-0.3, -0.4, 0.0], rtol=1e-6)
  # AdamW: the first Adam step is -lr * sign(g), plus decoupled decay -lr * wd * w.
  tx, _ = make_optimizer(OptimizerConfig(name="adamw", learning_rate=0.1, weight_decay=0.5), 10)
  updates, _ = tx.update(grads, tx.init(params), params)
  np.testing.assert_allclose(updates["w"], [-0.1 - 0.1, -0.1 - 0.1, -0.1], rtol=1e-5)
  with pytest.raises(ValueError, match="grad_clip_norm must be positive"):
    make_optimizer(OptimizerConfig(grad_clip_norm=0.0), 10)


def test_train_state_create_and_step_rng():
  tx = optax.adam(1e-3)
  state = TrainState.create({"w": jnp.ones((3, 5))}, tx, jax.random.key(7))
  assert int(state.step) == 0
  a = jax.random.key_data(state.step_rng())
  b = jax.random.key_data(state.replace(step=state.step + 1).step_rng())
  assert not np.array_equal(a, b)
  np.testing.assert_array_equal(a, jax.random.key_data(jax.random.fold_in(jax.random.key(7), 0)))
