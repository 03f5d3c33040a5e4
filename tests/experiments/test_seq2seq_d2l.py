"""The attention-free translator against an independent numpy re-statement of d2l's model.

d2l 10.7's Seq2SeqEncoder and Seq2SeqDecoder, written here from the chapter's equations in
PyTorch's parameter layout (Linear weights (out, in), RNN weight_ih (4H, in) over
[embedding; context], separate bias_ih and bias_hh), with the change this project makes to every
d2l recurrent model: an LSTM where d2l has a GRU (gates i, f, g, o as torch.nn.LSTM). The encoder
(the same as in test_bahdanau_d2l.py, whose numpy helpers this file reuses) is an embedding and a
stacked LSTM; its final state starts the decoder, and its top layer's final h is the context
joined to the token embedding at every decoder step; a dense layer maps the top output to logits.
There is no attention.

The model's parameters are converted to that layout (every one replaced by random values first,
so none is zero or symmetric), and both compute teacher-forced logits for odd, all-different
sizes, with full-length and padded sources; the step-by-step decoding path gives the same logits.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import cli
from experiments import config as config_lib
from experiments import trainer
from experiments.checkpoints import Checkpoints
from experiments.console import ListConsole
from experiments.seq2seq.configs import PlainConfig
from experiments.translation import configs as translation_configs
from experiments.translation import task as translation_task
from experiments.seq2seq.models import NoAttentionError, PlainTranslator
from test_bahdanau_d2l import _lstm_stack_step, d2l_encoder

# The encoder helpers read these sizes from test_bahdanau_d2l; the decoder's are this file's own.
from test_bahdanau_d2l import B, EMBED, H, LAYERS, S, V_SRC  # noqa: I001

T, V_TGT = 5, 17  # odd target sizes, all different from the rest


def d2l_plain_decoder(d2l, tgt_in, state):
  """Seq2SeqDecoder.forward: logits (B, T, V) from the encoder's final state."""
  embedded = d2l["dec_embedding"][tgt_in]  # (B, T, E)
  context = state[-1][0]  # (B, H): the encoder's top layer's final h, at every step
  outputs = []
  for t in range(T):
    x = np.concatenate([embedded[:, t], context], axis=-1)  # (B, E + H), d2l's order
    top, state = _lstm_stack_step(d2l["dec_rnn"], x, state)
    outputs.append(top)
  outputs = np.stack(outputs, axis=1)  # (B, T, H)
  return outputs @ d2l["dense_weight"].T + d2l["dense_bias"]


def _torch_layout(params, rng):
  """zoo's parameters as d2l's PyTorch modules hold them; each LSTM layer's one bias is split
  into a random bias_ih and the bias_hh that completes it."""

  def rnn(lstm):
    layers = []
    for l in range(LAYERS):
      p = lstm[f"layers_{l}"]
      bias_ih = rng.normal(size=4 * H)
      layers.append({"weight_ih": p["input"]["kernel"][:, 0].T,  # (4H, in)
                     "weight_hh": p["hidden_kernel"][0].T, "bias_ih": bias_ih,
                     "bias_hh": p["input"]["bias"][0] - bias_ih})
    return layers

  enc, dec = params["encoder"], params["decoder"]
  return {"enc_embedding": enc["embedding"]["embedding"], "enc_rnn": rnn(enc["lstm"]),
          "dec_embedding": dec["embedding"]["embedding"], "dec_rnn": rnn(dec["lstm"]),
          "dense_weight": dec["output"]["kernel"].T, "dense_bias": dec["output"]["bias"]}


@pytest.fixture(scope="module")
def model_and_params():
  model = PlainConfig(embed_dim=EMBED, hidden_size=H, num_layers=LAYERS,
                      dropout_rate=0.3).build(V_SRC, V_TGT, jnp.float32, jnp.float32)
  assert isinstance(model, PlainTranslator) and not model.has_attention
  shapes = model.init(jax.random.key(0), jnp.zeros((B, S), jnp.int32), jnp.full((B,), S),
                      jnp.zeros((B, T), jnp.int32))
  # The bottom decoder layer reads [embedding; context]: E + H inputs.
  assert shapes["decoder"]["lstm"]["layers_0"]["input"]["kernel"].shape == (EMBED + H, 1, 4 * H)
  rng = np.random.default_rng(13)
  params = jax.tree.map(lambda x: rng.normal(scale=0.5, size=x.shape).astype(np.float32), shapes)
  return model, params


def _inputs(src_len):
  rng = np.random.default_rng(7)
  src_len = np.array(src_len, np.int32)
  src = rng.integers(1, V_SRC, size=(B, S)).astype(np.int32)
  src[np.arange(S)[None, :] >= src_len[:, None]] = 0  # padding
  tgt_in = rng.integers(1, V_TGT, size=(B, T)).astype(np.int32)
  return src, src_len, tgt_in


@pytest.mark.parametrize("src_len, encode_padding", [([S, S, S], False), ([S, 4, 1], False),
                                                     ([S, 4, 1], True)],
                         ids=["full", "padded", "padded-encoder-reads-padding"])
def test_logits_match_d2l(model_and_params, src_len, encode_padding):
  """With encode_padding the encoder runs over all S positions, as d2l's does: its final state
  comes after the padding."""
  model, params = model_and_params
  if encode_padding:
    model = PlainConfig(embed_dim=EMBED, hidden_size=H, num_layers=LAYERS, dropout_rate=0.3,
                        encode_padding=True).build(V_SRC, V_TGT, jnp.float32, jnp.float32)
  src, src_len, tgt_in = _inputs(src_len)
  logits = np.asarray(jax.jit(model.logits)(params, src, src_len, tgt_in))  # (B, T, V)

  d2l = _torch_layout(jax.tree.map(lambda x: np.asarray(x, np.float64), params),
                      np.random.default_rng(5))
  read = np.full(B, S) if encode_padding else src_len  # what the numpy encoder runs over
  _, state = d2l_encoder(d2l, src, read)
  expected = d2l_plain_decoder(d2l, tgt_in, state)
  assert logits.shape == (B, T, V_TGT)
  np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=1e-5)
  assert np.abs(expected).max() > 0.5  # a comparison of values, not of zeros


def test_decoding_steps_give_the_teacher_forced_logits(model_and_params):
  model, params = model_and_params
  src, src_len, tgt_in = _inputs([S, 4, 1])
  expected = np.asarray(model.logits(params, src, src_len, tgt_in))
  state = model.init_decode_state(params, src, src_len, T)
  steps = []
  for t in range(T):
    step_logits, state = model.decode_step(params, state, jnp.asarray(tgt_in[:, t]))
    steps.append(np.asarray(step_logits))
  np.testing.assert_allclose(np.stack(steps, axis=1), expected, atol=1e-5, rtol=1e-5)


def test_no_cross_attention_is_a_clear_error(model_and_params):
  model, params = model_and_params
  src, src_len, tgt_in = _inputs([S, S, S])
  with pytest.raises(NoAttentionError, match="no cross-attention"):
    model.cross_attention(params, src, src_len, tgt_in)
  assert model.attention_maps(params, src, src_len, tgt_in) == {}


# ---- the model in the translation experiment: no heatmaps, a clear --heatmap refusal, d2l's data


def _d2l_words_run(name: str) -> config_lib.Config:
  """A named run cut to a few steps of d2l's words of the shipped sample's first lines."""
  cfg = translation_configs.CONFIGS[name]()
  cfg.experiment, cfg.model_name = "translation", name
  return config_lib.override(cfg, ["--data.first_pairs", "200", "--data.min_freq", "1",
                                   "--model.embed_dim", "8", "--model.hidden_size", "8",
                                   "--data.test_bleu_examples", "20"])


def test_first_pairs_are_the_files_first_lines_as_d2l_reads_them(tmp_path):
  fra = tmp_path / "fra.txt"
  fra.write_text("Go.\tVa !\nHi.\tSalut !\n\nno tab here\nRun!\tCours !\tCC-BY\nWow!\tÇa alors !\n",
                 encoding="utf-8")
  # d2l counts lines (the blank one and the one without a tab too) and keeps those with a tab.
  assert translation_task.read_first_pairs(str(fra), 5) == [
      {"en": "Go.", "fr": "Va !"}, {"en": "Hi.", "fr": "Salut !"}, {"en": "Run!", "fr": "Cours !"}]
  with pytest.raises(ValueError, match="first_pairs"):
    translation_task.read_first_pairs(str(fra), 0)


def test_a_run_without_attention_draws_no_heatmap_and_refuses_heatmap_clearly(tmp_path):
  cfg = _d2l_words_run("seq2seq_d2l")
  task = translation_task.TranslationTask(cfg)
  assert not task.model.has_attention
  data = task.data
  assert all(data.num_examples(split) == data.num_examples("train") for split in ("dev", "test"))
  first = translation_task.read_first_pairs(None, 200)  # the shipped sample's first lines
  assert data.sources("test")[0] == first[0]["en"] and data.num_examples("train") == len(first)
  params = jax.jit(task.init)(jax.random.key(0), task.example_batch())
  with pytest.raises(NoAttentionError, match="no heatmap"):
    task.attention(params, [4, 2], [5])
  workdir = tmp_path / "run"
  workdir.mkdir()
  task.on_train_end(params, str(workdir))  # test translations and examples, no heatmaps
  with open(workdir / translation_task.EXAMPLES_FILE, encoding="utf-8") as f:
    examples = json.load(f)
  assert set(examples["greedy"]) == set(translation_task.D2L_SENTENCES)
  assert "chapter" not in examples  # only bahdanau_d2l's chapter printed outputs
  assert not list(workdir.glob("attention*.png"))

  saved = config_lib.to_dict(task.config)
  with open(workdir / trainer.CONFIG_FILE, "w", encoding="utf-8") as f:
    json.dump(saved, f)
  ckpts = Checkpoints(str(workdir), best_metric="dev/loss", best_mode="min", asynchronous=False)
  ckpts.save_best(1, params, {"dev/loss": 1.0})
  ckpts.close()
  task.save_artifacts(str(workdir))
  console = ListConsole()
  png = str(tmp_path / "heat.png")
  assert cli.main(["translate", "Go.", "--workdir", str(workdir), "--heatmap", png],
                  console) == 2
  assert not os.path.exists(png)
  assert cli.main(["translate", "Go.", "--workdir", str(workdir)], console) == 0
  assert len(console.lines) == 1


def test_the_d2l_runs_differ_only_by_the_decoder_and_seq2seq_cpu_is_bahdanau_cpus_budget():
  d2l_attention, d2l_plain = (translation_configs.CONFIGS[n]() for n in ("bahdanau_d2l",
                                                                           "seq2seq_d2l"))
  assert (d2l_attention.train, d2l_attention.optimizer, d2l_attention.data) == (
      d2l_plain.train, d2l_plain.optimizer, d2l_plain.data)
  assert d2l_plain.data.first_pairs == 1000 and d2l_plain.data.min_freq == 3
  assert d2l_plain.train.num_epochs == 500 and d2l_plain.train.batch_size == 64
  assert d2l_plain.optimizer.grad_clip_norm == pytest.approx(5 * 9 / 64)
  assert d2l_plain.model.encode_padding and d2l_plain.model.loss_reduction == "sequence_sum"
  assert isinstance(d2l_plain.model, PlainConfig)
  assert (d2l_plain.model.embed_dim, d2l_plain.model.hidden_size, d2l_plain.model.num_layers,
          d2l_plain.model.dropout_rate) == (32, 32, 2, 0.0)
  cpu_attention, cpu_plain = (translation_configs.CONFIGS[n]() for n in ("bahdanau_cpu",
                                                                         "seq2seq_cpu"))
  assert (cpu_attention.train, cpu_attention.optimizer, cpu_attention.data) == (
      cpu_plain.train, cpu_plain.optimizer, cpu_plain.data)
  assert dataclasses.asdict(cpu_plain.model) == dataclasses.asdict(cpu_attention.model)


def test_a_saved_config_without_the_new_settings_loads_as_it_ran():
  """bahdanau_d2l reads the padding with the summed loss; a config.json saved before either
  setting existed trained without them (OLD_RUN_VALUES), whatever the named run says now."""
  named = translation_configs.CONFIGS["bahdanau_d2l"]()
  assert named.model.encode_padding and named.model.loss_reduction == "sequence_sum"
  saved = config_lib.to_dict(named)
  for key in ("encode_padding", "loss_reduction"):
    del saved["model"][key]
  loaded = config_lib.update_from_dict(named, saved)
  assert not loaded.model.encode_padding and loaded.model.loss_reduction == "token_mean"
