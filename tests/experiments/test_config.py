"""Configs, overrides, optimizers and schedules (no training here)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

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


def test_override_parses_each_dotted_path_to_its_field_type():
  cfg = config_lib.override(_config(), [
      "--optimizer.learning_rate=3e-4", "--train.batch_size", "96", "--model.dropout=0",
      "--model.heads", "4", "8", "--model.score=additive", "--model.tied=True",
      "--model.max_len=256", "--optimizer.grad_clip_norm", "5", "--train.num_epochs=7"])
  assert cfg.train.num_epochs == 7
  assert cfg.optimizer.learning_rate == 3e-4 and isinstance(cfg.optimizer.learning_rate, float)
  assert cfg.train.batch_size == 96 and isinstance(cfg.train.batch_size, int)
  assert cfg.model.dropout == 0.0 and isinstance(cfg.model.dropout, float)
  assert cfg.model.heads == (4, 8)
  assert cfg.model.score == "additive"
  assert cfg.model.tied is True
  assert cfg.model.max_len == 256
  assert cfg.optimizer.grad_clip_norm == 5.0
  # Everything not named keeps its value, and the original is untouched (a deep copy).
  assert cfg.model.width == 12 and cfg.train.seed == 0
  assert _config().model.dropout == 0.1 and _config().model.heads == (4,)
  none = config_lib.override(cfg, ["--model.max_len", "None", "--optimizer.grad_clip_norm=None"])
  assert none.model.max_len is None and none.optimizer.grad_clip_norm is None
  assert config_lib.override(cfg, []) == cfg


def test_unknown_field_names_the_closest_one():
  with pytest.raises(config_lib.ConfigError,
                     match=r"Unrecognized options: --optimizer\.learning_rat=1e-3\n"
                     r"Perhaps you meant:\n--optimizer\.learning_rate FLOAT"):
    config_lib.override(_config(), ["--optimizer.learning_rat=1e-3"])
  with pytest.raises(config_lib.ConfigError, match=r"--model\.width INT"):
    config_lib.override(_config(), ["--model.widht=3"])
  with pytest.raises(config_lib.ConfigError, match=r"Unrecognized options: learning_rate"):
    config_lib.override(_config(), ["learning_rate"])


def test_badly_typed_values_and_choices_name_the_field():
  @dataclasses.dataclass
  class Data:
    seed: int = 1

  # The same field name in two sections is two settings, each by its own path.
  both = config_lib.override(Config(data=Data()), ["--train.seed=3", "--data.seed=5"])
  assert (both.train.seed, both.data.seed) == (3, 5)
  with pytest.raises(ValueError, match=r"Error parsing --train\.batch_size: invalid literal for "
                     r"int\(\) with base 10: 'many'"):
    config_lib.override(_config(), ["--train.batch_size=many"])
  with pytest.raises(ValueError, match=r"--train\.batch_size: invalid literal .* '2\.5'"):
    config_lib.override(_config(), ["--train.batch_size=2.5"])
  with pytest.raises(ValueError, match=r"invalid choice 'bilinear' for argument '--model\.score'\. "
                     r"Expected one of\s+\('dot', 'additive'\)"):
    config_lib.override(_config(), ["--model.score=bilinear"])
  with pytest.raises(ValueError, match=r"invalid choice 'maybe' for argument '--model\.tied'"):
    config_lib.override(_config(), ["--model.tied=maybe"])
  with pytest.raises(ValueError, match=r"--model\.heads"):
    config_lib.override(_config(), ["--model.heads", "two"])


def test_dict_round_trip_and_unknown_saved_key():
  cfg = config_lib.override(_config(), ["--model.heads", "2", "3", "--train.dtype=bfloat16",
                                        "--optimizer.learning_rate=0.5"])
  back = config_lib.update_from_dict(_config(), config_lib.to_dict(cfg))
  assert back == cfg
  assert back.compute_dtype == jnp.bfloat16 and back.storage_dtype == jnp.float32
  with pytest.raises(ValueError, match=r"unknown config keys \['batchsize'\] in train; its fields "
                     r"are: seed, batch_size"):
    config_lib.update_from_dict(_config(), {"train": {"batchsize": 3}})
  with pytest.raises(ValueError, match=r"model: .*score"):
    config_lib.update_from_dict(_config(), {"model": {"score": "bilinear"}})
  with pytest.raises(ValueError, match=r"train: .*batch_size"):
    config_lib.update_from_dict(_config(), {"train": {"batch_size": "many"}})
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


def test_saved_configs_load_under_renamed_keys():
  @dataclasses.dataclass
  class Data:
    boundaries: tuple[int, ...] | None = None
    max_size: int | None = None

  cfg = Config(experiment="x", model_name="m", data=Data())
  old = {"data": {"buckets": [8, 16], "max_vocab": 300}, "train": {"batch_size": 7}}
  loaded = config_lib.update_from_dict(cfg, old)
  assert loaded.data == Data(boundaries=(8, 16), max_size=300) and loaded.train.batch_size == 7
  assert config_lib.with_current_names(old) == {"data": {"boundaries": [8, 16], "max_size": 300},
                                                "train": {"batch_size": 7}}
  assert old["data"] == {"buckets": [8, 16], "max_vocab": 300}  # the argument is not changed


def test_saved_configs_without_an_added_key_load_with_its_old_run_value():
  @dataclasses.dataclass
  class Data:
    OLD_RUN_VALUES: ClassVar[dict[str, Any]] = {"protocol": "before"}
    protocol: str = "now"
    max_len: int = 9

  cfg = Config(experiment="x", model_name="m", data=Data(), model=_Model())
  assert config_lib.update_from_dict(cfg, {"data": {"max_len": 5}}).data == Data("before", 5)
  assert config_lib.update_from_dict(cfg, {"data": {"protocol": "now"}}).data == Data("now", 9)
  assert config_lib.update_from_dict(cfg, config_lib.to_dict(cfg)) == cfg
  # Only the section that names it; a config.json without the section keeps the named run's.
  assert config_lib.update_from_dict(cfg, {"model": {"width": 7}}).data == Data("now", 9)
  assert config_lib.override(cfg, ["--data.max_len=3"]).data == Data("now", 3)


def test_saved_configs_without_an_added_setting_mean_what_they_meant_then():
  @dataclasses.dataclass
  class Data:
    tokenizer: str = "subwords"
    vocab_size: int = 8000
    OLD_RUN_VALUES: ClassVar[dict] = {"tokenizer": "words"}

  cfg = Config(experiment="x", model_name="m", data=Data())
  assert config_lib.update_from_dict(cfg, {"data": {}}).data == Data("words", 8000)
  assert config_lib.update_from_dict(cfg, {"train": {"seed": 3}}).data == Data("subwords", 8000)
  assert config_lib.update_from_dict(cfg, {"data": {"tokenizer": "subwords", "vocab_size": 977}}
                                     ).data == Data("subwords", 977)
  assert config_lib.update_from_dict(cfg, config_lib.to_dict(cfg)).data == cfg.data
  assert "OLD_RUN_VALUES" not in config_lib.to_dict(cfg)["data"]


def _with_steps(num_steps):
  cfg = _config()
  cfg.train.num_steps = num_steps
  return cfg


@pytest.mark.parametrize("args, steps, epochs", [
    (["--train.num_epochs", "3"], None, 3),                                  # epochs alone win
    (["--train.num_steps=9", "--train.num_epochs=3"], None, 3),              # the later wins
    (["--train.num_epochs=3", "--train.num_steps=9"], 9, 3),
    (["--train.num_steps", "None"], None, 2),
    (["--train.batch_size=4"], 6500, 2),                                     # the run's own
])
def test_the_later_of_num_epochs_and_num_steps_wins_over_the_named_run(args, steps, epochs):
  cfg = config_lib.override(_with_steps(6500), args)
  assert (cfg.train.num_steps, cfg.train.num_epochs) == (steps, epochs)


@pytest.mark.parametrize("args, message", [
    (["--optimizer.weight_decay=0.1"], "--optimizer.weight_decay has no effect: only adamw decays "
     "weights (optimizer.name = 'adam')"),
    (["--optimizer.momentum", "0.9"], "--optimizer.momentum has no effect: only sgd uses momentum"),
    (["--optimizer.name=sgd", "--optimizer.b2=0.98"], "--optimizer.b2 has no effect: only adam "
     "and adamw use it"),
    (["--optimizer.decay_steps=100"], "--optimizer.decay_steps has no effect: only the cosine "
     "schedule uses it (optimizer.schedule = 'constant')"),
])
def test_an_override_without_effect_is_refused_naming_why(args, message):
  with pytest.raises(config_lib.ConfigError) as info:
    config_lib.override(_config(), args)
  assert message in str(info.value)


def test_overrides_that_take_effect_together_are_accepted():
  cfg = config_lib.override(_config(), ["--optimizer.name=adamw", "--optimizer.weight_decay=0.1",
                                        "--optimizer.schedule", "cosine",
                                        "--optimizer.min_lr_ratio=0.1"])
  assert (cfg.optimizer.weight_decay, cfg.optimizer.min_lr_ratio) == (0.1, 0.1)
  assert config_lib.ignored_settings(cfg)["optimizer.momentum"]  # not given: no error
