"""The BiLSTM classifiers' two initializations: flax's defaults and the nndl chapter's (Paddle's)."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import config as config_lib
from experiments.sentiment import configs
from experiments.sentiment import inits
from experiments.sentiment import models

# Odd, all-different sizes; a vocabulary large enough that the embedding's spread is measurable.
V, E, H, B, L = 3001, 24, 10, 3, 7


def _params(model_cls, init: str, **kwargs):
  encoder = models.BiLSTMEncoder(V, E, H, init=init)
  model = model_cls(encoder, **kwargs)
  tokens = jnp.arange(B * L, dtype=jnp.int32).reshape(B, L) % V
  lengths = jnp.array([L, 4, 1], jnp.int32)
  return model.init(jax.random.PRNGKey(3), tokens, lengths)["params"]


def _uniform_spread(x: np.ndarray, limit: float) -> None:
  """x lies in [-limit, limit) and fills it: its extremes are near the bounds and its standard
  deviation is that of the uniform distribution, limit / sqrt(3), within 4 standard errors (the
  relative standard error of a uniform sample's deviation is about 0.45 / sqrt(n))."""
  x = np.asarray(x).ravel()
  n = x.size
  assert np.all(np.abs(x) <= limit)
  assert np.max(np.abs(x)) > (1 - 6 / n) * limit  # fails with probability e^-6 for n draws
  np.testing.assert_allclose(np.std(x), limit / math.sqrt(3), rtol=1.8 / math.sqrt(n))


def test_paddle_init_draws_each_parameter_as_paddle_would():
  params = _params(models.BiLSTMAttentionPool, "paddle", score="additive")
  encoder, lstm = params["encoder"], params["encoder"]["bilstm"]["layers_0"]
  _uniform_spread(encoder["embed"]["embedding"], math.sqrt(6 / (V + E)))
  _uniform_spread(lstm["input"]["kernel"], 1 / math.sqrt(H))
  _uniform_spread(lstm["hidden_kernel"], 1 / math.sqrt(H))
  # One bias for Paddle's two: the sum of two uniforms on +-1/sqrt(H), spread sqrt(2) times wider.
  bias = np.asarray(lstm["input"]["bias"]).ravel()
  assert np.all(np.abs(bias) <= 2 / math.sqrt(H)) and np.max(np.abs(bias)) > 1 / math.sqrt(H)
  np.testing.assert_allclose(np.std(bias), math.sqrt(2 / 3) / math.sqrt(H), rtol=0.2)
  _uniform_spread(params["pool"]["query"], 0.5)
  width = 2 * H
  _uniform_spread(params["pool"]["scorer"]["w_k"], math.sqrt(6 / (width + width)))
  _uniform_spread(params["pool"]["scorer"]["v"], math.sqrt(6 / (width + 1)))
  head = params["head"]["out"]
  _uniform_spread(head["kernel"], math.sqrt(6 / (width + 2)))
  np.testing.assert_array_equal(head["bias"], 0.0)


def test_paddle_init_reaches_the_self_attention_projections():
  params = _params(models.BiLSTMSelfAttention, "paddle", num_heads=4)
  query = np.asarray(params["attention"]["query"]["kernel"])  # (2H, heads, head_dim)
  _uniform_spread(query, math.sqrt(6 / (2 * H + 2 * H)))


def test_flax_init_is_flax_and_zoo_defaults():
  """'flax' draws what the modules draw when no initializer is given (the runs measured before the
  setting existed): embedding std 1/sqrt(E), LeCun-normal W_ih, orthogonal W_hh, zero biases."""
  params = _params(models.BiLSTMAttentionPool, "flax", score="dot")
  lstm = params["encoder"]["bilstm"]["layers_0"]
  np.testing.assert_allclose(np.std(params["encoder"]["embed"]["embedding"]), 1 / math.sqrt(E),
                             rtol=0.05)
  np.testing.assert_allclose(np.std(lstm["input"]["kernel"]), 1 / math.sqrt(E), rtol=0.1)
  for direction in np.asarray(lstm["hidden_kernel"]):  # (H, 4H), orthonormal rows
    np.testing.assert_allclose(direction @ direction.T, np.eye(H), atol=1e-5)
  np.testing.assert_array_equal(lstm["input"]["bias"], 0.0)
  np.testing.assert_array_equal(params["head"]["out"]["bias"], 0.0)
  assert np.max(np.abs(params["encoder"]["embed"]["embedding"])) > 3 / math.sqrt(E)  # normal tails


BILSTM_RUNS = [name for name, run in configs.CONFIGS.items()
               if isinstance(run().model, configs.BiLSTMMeanConfig)]


def test_bilstm_runs_start_as_the_chapter_did_and_can_start_as_flax():
  assert {"bilstm_mean", "bilstm_attn_dot", "bilstm_mha", "bilstm_attn_dot_nndl"} <= set(BILSTM_RUNS)
  for name in BILSTM_RUNS:
    assert configs.CONFIGS[name]().model.init == "paddle", name
    cfg = config_lib.override(configs.CONFIGS[name](), ["--model.init", "flax"])
    assert cfg.model.build(V, jnp.float32, jnp.float32).encoder.init == "flax"


def test_runs_saved_before_the_setting_load_with_flax_init():
  """A config.json without model.init ran with flax's initializers (the setting did not exist)."""
  cfg = configs.CONFIGS["bilstm_attn_dot"]()
  saved = config_lib.to_dict(cfg)
  del saved["model"]["init"]
  assert config_lib.update_from_dict(configs.CONFIGS["bilstm_attn_dot"](), saved).model.init == "flax"
  saved["model"]["init"] = "paddle"
  assert config_lib.update_from_dict(cfg, saved).model.init == "paddle"


def test_unknown_init_names_the_choices():
  with pytest.raises(ValueError, match="unknown initialization 'torch'.*flax, paddle"):
    inits.named("torch")
  with pytest.raises(ValueError, match="init"):
    config_lib.override(configs.CONFIGS["bilstm_mean"](), ["--model.init", "torch"])


def test_ablation_names_take_single_parts_from_the_other_initialization():
  """'paddle+flax_embedding': the chapter's draws everywhere but flax's embedding table; and the
  converse, the chapter's table in flax's initialization."""
  params = _params(models.BiLSTMAttentionPool, "paddle+flax_embedding", score="additive")
  np.testing.assert_allclose(np.std(params["encoder"]["embed"]["embedding"]), 1 / math.sqrt(E),
                             rtol=0.05)
  _uniform_spread(params["encoder"]["bilstm"]["layers_0"]["hidden_kernel"], 1 / math.sqrt(H))
  _uniform_spread(params["pool"]["query"], 0.5)
  params = _params(models.BiLSTMAttentionPool, "flax+paddle_embedding", score="dot")
  _uniform_spread(params["encoder"]["embed"]["embedding"], math.sqrt(6 / (V + E)))
  np.testing.assert_array_equal(params["encoder"]["bilstm"]["layers_0"]["input"]["bias"], 0.0)
  both = inits.named("flax+paddle_lstm+paddle_dense_kernel")
  assert (both.lstm, both.dense_kernel) == (inits.PADDLE.lstm, inits.PADDLE.dense_kernel)
  assert (both.embedding, both.query) == (inits.FLAX.embedding, inits.FLAX.query)
  cfg = config_lib.override(configs.CONFIGS["bilstm_attn_dot"](),
                            ["--model.init", "paddle+flax_embedding"])
  assert cfg.model.build(V, jnp.float32, jnp.float32).encoder.init == "paddle+flax_embedding"


@pytest.mark.parametrize("name, message", [
    ("paddle+flax_emb", "'flax_emb' is not <source>_<part> with a source of flax, paddle, "
                        "gluon and a "
                        "part of embedding, lstm, dense_kernel, query"),
    ("paddle+torch_lstm", "'torch_lstm' is not <source>_<part>"),
    ("paddle+paddle_lstm", "'paddle_lstm' takes from the base 'paddle' itself"),
    ("flax+paddle_lstm+paddle_lstm", "'paddle_lstm' takes 'lstm' twice"),
    ("flax+", "'' is not <source>_<part>"),
])
def test_bad_ablation_names_say_what_is_wrong(name, message):
  with pytest.raises(ValueError, match=re.escape(f"initialization {name!r}: {message}")):
    inits.named(name)
