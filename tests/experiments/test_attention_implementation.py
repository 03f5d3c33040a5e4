"""`implementation='auto'` is the default of every model built on zoo's multi-head attention.

'auto' runs the fused attention (jax.nn.dot_product_attention, cuDNN where it applies) on a GPU
when the score is scaled-dot and neither weights nor attention dropout are asked for, and the
vmapped per-head function everywhere else; the parameters are the same, so the choice is not part
of a checkpoint. Here: the named runs ask for 'auto'; a saved run keeps the implementation its
config.json names, and one saved before the setting existed loads with the 'vmap' it ran with; on
this CPU 'auto' computes exactly what 'vmap' does; with the platform choice made as on a GPU, a
training forward pass of the Transformer translator runs the fused path and a pass that collects
attention weights (heatmaps) runs the vmapped one.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from experiments import config as config_lib
from experiments import registry
from experiments.seq2seq import configs as seq2seq_configs
from experiments.seq2seq.models import TransformerTranslator
from zoo import fast_paths

B, S, T, V_SRC, V_TGT = 3, 7, 5, 13, 11
SIZES = dict(model_dim=16, num_heads=2, ffn_hidden=24, num_encoder_layers=2,
             num_decoder_layers=2, dropout_rate=0.0)


def _transformer_runs():
  """(experiment, model) of every named run whose model section has an `implementation`."""
  found = []
  for experiment in ("translation", "couplet"):
    for model in registry.get_experiment(experiment).configs:
      cfg = registry.get_config(experiment, model)
      if any(f.name == "implementation" for f in dataclasses.fields(cfg.model)):
        found.append((experiment, model))
  return found


def test_every_named_transformer_run_asks_for_auto():
  found = _transformer_runs()
  assert {("translation", "transformer"), ("translation", "transformer_cpu"),
          ("couplet", "transformer"), ("couplet", "transformer_cpu")} <= set(found)
  for experiment, model in found:
    assert registry.get_config(experiment, model).model.implementation == "auto", (experiment,
                                                                                   model)


def test_zoo_modules_default_to_auto():
  assert zoo.MultiHeadAttention(num_heads=2).implementation == "auto"
  assert zoo.EncoderBlock(num_heads=2, ffn_hidden=8).implementation == "auto"
  assert zoo.TransformerEncoder(2, num_heads=2, ffn_hidden=8).implementation == "auto"


def test_saved_runs_keep_the_implementation_they_were_trained_with():
  cfg = registry.get_config("translation", "transformer_cpu")
  saved = config_lib.to_dict(cfg)
  saved["model"]["implementation"] = "vmap"  # written while 'vmap' was the default
  assert config_lib.update_from_dict(cfg, saved).model.implementation == "vmap"
  del saved["model"]["implementation"]  # written before the setting existed: it ran 'vmap'
  assert config_lib.update_from_dict(cfg, saved).model.implementation == "vmap"
  assert config_lib.update_from_dict(cfg, config_lib.to_dict(cfg)).model.implementation == "auto"
  assert seq2seq_configs.TransformerConfig().implementation == "auto"


def _translators():
  return {name: TransformerTranslator(V_SRC, V_TGT, implementation=name, **SIZES)
          for name in ("auto", "vmap")}


def _batch():
  rng = np.random.default_rng(5)
  src = jnp.asarray(rng.integers(1, V_SRC, (B, S)), jnp.int32)
  src_len = jnp.asarray([S, 4, 2], jnp.int32)
  tgt_in = jnp.asarray(rng.integers(1, V_TGT, (B, T)), jnp.int32)
  return src, src_len, tgt_in


def test_auto_computes_what_vmap_computes_on_this_cpu():
  assert jax.default_backend() == "cpu"
  models = _translators()
  src, src_len, tgt_in = _batch()
  params = models["vmap"].init(jax.random.key(0), src, src_len, tgt_in)
  logits = {name: model.logits(params, src, src_len, tgt_in) for name, model in models.items()}
  assert logits["auto"].shape == (B, T, V_TGT)
  np.testing.assert_array_equal(np.asarray(logits["auto"]), np.asarray(logits["vmap"]))
  np.testing.assert_array_equal(
      np.asarray(models["auto"].cross_attention(params, src, src_len, tgt_in)),
      np.asarray(models["vmap"].cross_attention(params, src, src_len, tgt_in)))


def test_on_a_gpu_training_runs_fused_and_heatmaps_run_vmap(monkeypatch):
  chosen, real = [], fast_paths.multihead_implementation

  def as_on_a_gpu(**kwargs):
    chosen.append(real(**kwargs, backend="gpu"))
    return chosen[-1]

  monkeypatch.setattr(fast_paths, "multihead_implementation", as_on_a_gpu)
  model = _translators()["auto"]
  src, src_len, tgt_in = _batch()
  params = model.init(jax.random.key(1), src, src_len, tgt_in)
  chosen.clear()
  model.logits(params, src, src_len, tgt_in)  # what the train and eval steps run
  # encoder self-attention x 2, decoder self- and cross-attention x 2: 6 calls, all fused
  assert chosen == ["fused"] * 6
  chosen.clear()
  weights = model.cross_attention(params, src, src_len, tgt_in)  # heatmaps: weights are asked for
  assert chosen == [] and weights.shape == (B, T, S)  # cloned with 'vmap': no choice made
  np.testing.assert_allclose(np.asarray(weights.sum(-1)), 1.0, rtol=1e-5)


@pytest.mark.parametrize("dropout", [False, True])
def test_auto_chooses_vmap_for_dropout_even_on_a_gpu(dropout):
  expected = "vmap" if dropout else "fused"
  assert fast_paths.multihead_implementation(dropout=dropout, backend="gpu") == expected
  assert fast_paths.multihead_implementation(dropout=dropout, backend="cpu") == "vmap"
