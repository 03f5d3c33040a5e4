"""The benchmark models: their conversion to PyTorch's layout, checked without PyTorch.

The PyTorch twins (benchmarks/torch_models.py) need torch, an optional dependency that CI does not
install (from PyPI it is a multi-gigabyte CUDA build). So here the state dicts that
`classifier_to_torch`, `transformer_to_torch`, `zoo_transformer_to_torch` and `bahdanau_to_torch`
produce are run through numpy re-statements of
what the PyTorch modules compute (nn.LSTM's equations over packed sequences, nn.Linear's x W^T + b,
F.scaled_dot_product_attention, nn.LayerNorm), and must give the JAX models' outputs. The training
benchmark itself compares the real PyTorch modules with the JAX models on the same weights before
it times them (and refuses to time a twin that disagrees). Also: cached and recomputed beam search
of the decoding benchmark return the same beams.
"""

from __future__ import annotations

import dataclasses
import time

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import common
from benchmarks import decoding
from benchmarks import models
from benchmarks import report
from benchmarks import training
from benchmarks import translation_runs
from experiments.couplet import configs as couplet_configs
from experiments.translation import configs

B, S, T, V, D, HEADS, FFN = 3, 5, 7, 11, 12, 4, 10


def _random_params(module, *args, scale=0.3, seed=0):
  """Random values of the module's parameter shapes (eval_shape: nothing is compiled)."""
  shapes = jax.eval_shape(module.init, jax.random.key(0), *args)["params"]
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda s: jnp.asarray(scale * rng.normal(size=s.shape), s.dtype), shapes)


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _softmax(x):
  e = np.exp(x - np.max(x, axis=-1, keepdims=True))
  return e / np.sum(e, axis=-1, keepdims=True)


def _lstm_direction(x, lengths, w_ih, w_hh, b_ih, b_hh, reverse):
  """nn.LSTM's equations over packed sequences, one direction: (B, L, D) -> (B, L, H)."""
  hidden = w_hh.shape[1]
  out = np.zeros(x.shape[:2] + (hidden,))
  for b in range(x.shape[0]):
    h, c = np.zeros(hidden), np.zeros(hidden)
    steps = range(lengths[b])
    for t in (reversed(steps) if reverse else steps):
      i, f, g, o = np.split(x[b, t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4)
      c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
      h = _sigmoid(o) * np.tanh(c)
      out[b, t] = h
  return out


def _numpy_classifier(state, tokens, lengths):
  x = state["embed.weight"][tokens]  # (B, L, E)
  outputs = np.concatenate([
      _lstm_direction(x, lengths, *(state[f"lstm.{n}_l0{s}"] for n in
                                    ("weight_ih", "weight_hh", "bias_ih", "bias_hh")), bool(s))
      for s in ("", "_reverse")], axis=-1)  # (B, L, 2H)
  hidden = np.tanh(state["pool_query"] @ state["pool_w_q"] + outputs @ state["pool_w_k"])
  scores = hidden @ state["pool_v"]  # (B, L)
  valid = np.arange(tokens.shape[1])[None, :] < lengths[:, None]
  weights = _softmax(np.where(valid, scores, -np.inf))
  context = np.einsum("bl,bld->bd", weights, outputs)
  return context @ state["out.weight"].T + state["out.bias"]


def test_classifier_state_dict_computes_the_jax_model():
  size = models.ClassifierSize(batch=B, length=T, vocab=V, embed=6, hidden=5)
  batch = models.classifier_inputs(size, seed=1)
  model = models.BiLSTMAttentionClassifier(V, 6, 5)
  params = _random_params(model, batch["tokens"], batch["lengths"])
  state = models.classifier_to_torch(params)
  want = _numpy_classifier(state, batch["tokens"], batch["lengths"])
  got = jax.jit(model.apply)({"params": params}, batch["tokens"], batch["lengths"])
  np.testing.assert_allclose(got, want, atol=1e-5)
  assert set(state) == {
      "embed.weight", "pool_query", "pool_w_q", "pool_w_k", "pool_v", "out.weight", "out.bias"} | {
          f"lstm.{n}_l0{s}" for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
          for s in ("", "_reverse")}


def _linear(state, prefix, x):
  return x @ state[f"{prefix}.weight"].T + state[f"{prefix}.bias"]


def _attention(state, prefix, xq, xkv, mask):
  """Four nn.Linear layers around scaled-dot attention; mask bool (B or 1, 1, Q, K)."""
  def heads(x):  # (B, L, D) -> (B, H, L, Dh)
    return x.reshape(x.shape[0], x.shape[1], HEADS, -1).transpose(0, 2, 1, 3)
  q, k, v = (heads(_linear(state, f"{prefix}.{n}", x))
             for n, x in (("query", xq), ("key", xkv), ("value", xkv)))
  scores = np.where(mask, q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]), -np.inf)
  out = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(xq.shape)
  return _linear(state, f"{prefix}.out", out)


def _norm(state, prefix, x, eps=1e-6):
  mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * state[f"{prefix}.weight"] + state[f"{prefix}.bias"]


def _ffn(state, prefix, x, names=("dense1", "dense2")):
  hidden = np.maximum(_linear(state, f"{prefix}.{names[0]}", x), 0)
  return _linear(state, f"{prefix}.{names[1]}", hidden)


def _numpy_transformer(state, src, src_lens, tgt, layers):
  key_mask = (np.arange(src.shape[1])[None, :] < src_lens[:, None])[:, None, None, :]
  causal = np.tril(np.ones((tgt.shape[1],) * 2, bool))[None, None]
  table = np.asarray(models.zoo.sinusoidal_encoding(max(src.shape[1], tgt.shape[1]), D))
  x = state["src_embed.weight"][src] * np.sqrt(D) + table[:src.shape[1]]
  for l in range(layers):
    p = f"encoder.{l}"
    x = _norm(state, f"{p}.norm1", x + _attention(state, f"{p}.self_attention", x, x, key_mask))
    x = _norm(state, f"{p}.norm2", x + _ffn(state, f"{p}.ffn", x))
  y = state["tgt_embed.weight"][tgt] * np.sqrt(D) + table[:tgt.shape[1]]
  for l in range(layers):
    p = f"decoder.{l}"
    y = _norm(state, f"{p}.norm1", y + _attention(state, f"{p}.self_attention", y, y, causal))
    y = _norm(state, f"{p}.norm2", y + _attention(state, f"{p}.cross_attention", y, x, key_mask))
    y = _norm(state, f"{p}.norm3", y + _ffn(state, f"{p}.ffn", y))
  return _linear(state, "out", y)


def test_transformer_state_dict_computes_the_jax_model():
  layers = 2
  size = models.TransformerSize(batch=B, src_len=S, tgt_len=T, vocab=V, width=D, heads=HEADS,
                                ffn=FFN, layers=layers)
  batch = models.translation_inputs(size, seed=2)
  model = models.Transformer(V, V, D, HEADS, FFN, layers, max_len=T)
  inputs = (batch["src"], batch["src_lens"], batch["tgt_in"])
  params = _random_params(model, *inputs, scale=0.2)
  state = models.transformer_to_torch(params)
  assert len(state) == 2 + 2 + layers * (8 + 4 + 4) + layers * (2 * 8 + 6 + 4)
  want = _numpy_transformer(state, *inputs, layers)
  got = jax.jit(model.apply)({"params": params}, *inputs)
  np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)


def test_cached_and_recomputed_beam_search_agree():
  size = models.TransformerSize(batch=B, src_len=S, tgt_len=6, vocab=13, width=8, heads=2,
                                ffn=10, layers=1)
  batch = models.translation_inputs(size, seed=3)
  model = decoding.build_model(size, max_len=6)
  src, src_lens = jnp.asarray(batch["src"]), jnp.asarray(batch["src_lens"])
  params = _random_params(model, src, jnp.asarray(batch["tgt_in"]), src_lens, scale=1.0, seed=5)
  # An eos bias that makes some hypotheses end early while others run all max_len steps
  # through the cache.
  params["output"]["bias"] = jnp.zeros(13).at[decoding.EOS].set(0.5)
  cached, recompute = decoding.translators(model, beam=2, max_len=6)
  got, want = cached(params, src, src_lens), recompute(params, src, src_lens)
  np.testing.assert_array_equal(got.tokens, want.tokens)
  np.testing.assert_array_equal(got.lengths, want.lengths)
  np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5)
  lengths = np.asarray(want.lengths)
  assert np.any(lengths == 6) and np.any(lengths < 6)


def test_cached_and_recomputed_greedy_search_agree():
  size = models.TransformerSize(batch=B, src_len=S, tgt_len=7, vocab=13, width=8, heads=2,
                                ffn=10, layers=1)
  batch = models.translation_inputs(size, seed=4)
  model = decoding.build_model(size, max_len=7)
  src, src_lens = jnp.asarray(batch["src"]), jnp.asarray(batch["src_lens"])
  params = _random_params(model, src, jnp.asarray(batch["tgt_in"]), src_lens, scale=1.0, seed=6)
  params["output"]["bias"] = jnp.zeros(13).at[decoding.EOS].set(0.8)
  cached, recompute = decoding.translators(model, beam=1, max_len=7, search_name="greedy")
  got, want = cached(params, src, src_lens), recompute(params, src, src_lens)
  assert got.tokens.shape == (B, 7)
  np.testing.assert_array_equal(got.tokens, want.tokens)
  np.testing.assert_array_equal(got.lengths, want.lengths)
  np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5)
  with pytest.raises(ValueError, match="search_name: unknown 'sample'"):
    decoding.translators(model, beam=1, max_len=7, search_name="sample")


def test_the_decoding_suite_times_greedy_and_beam_and_renders_old_results():
  suite = decoding.run(common.QUICK)
  assert [(r["search"], r["max_len"]) for r in suite["rows"]] == [("greedy", 8), ("beam", 8)]
  for row in suite["rows"]:
    assert row["same_tokens"] and row["cached"]["seconds"] > 0 and row["speedup"] > 0
    assert row["cached"]["ms_per_step"] == pytest.approx(1e3 * row["cached"]["seconds"] / 8)
    if training.torch_available():  # the PyTorch twin; CI, without torch, checks its absence
      assert row["torch"]["same_tokens"], row["torch"]
      assert row["torch"]["reference"] in decoding.TORCH_VARIANTS and row["torch"]["speedup"] > 0
    else:
      assert "torch" not in row and "torch_cached" not in row
  text = decoding.markdown(suite)
  assert "| greedy | 8 |" in text and "| beam 2 | 8 |" in text
  # The result benchmarks/results/cpu.json held before greedy and 128 tokens were measured.
  model = dict(batch=64, ffn=1024, heads=8, layers=2, src_len=24, tgt_len=24, vocab=8000,
               width=256)
  old = {"max_score_gap": 1.52587890625e-05, "mean_length": 24.0, "reference": "recompute",
         "results": {"cached": {"error": None, "seconds": 5.9282745190012065,
                                "sentences_per_s": 1.3494651731053502,
                                "speedup": 1.797400908451138},
                     "recompute": {"error": None, "seconds": 10.655486006000501,
                                   "sentences_per_s": 0.750786965089617, "speedup": 1.0}},
         "same_tokens": True, "size": {"beam": 4, "max_len": 24, "model": model, "sentences": 8}}
  text = decoding.markdown(old)
  assert "| `cached` | 5,928 | 1.35 | 1.80x |" in text and "beam 4, max_len 24" in text


def _decoding_row(search, **torch_fields):
  """A row of the decoding suite (cached 10 ms, recompute 50 ms) with the given PyTorch fields."""
  timed = lambda seconds: dict(seconds=seconds, error=None, sentences_per_s=8 / seconds,
                               ms_per_step=1e3 * seconds / 24)
  return dict(search=search, max_len=24, same_tokens=True, max_score_gap=1.5e-5, mean_length=24.0,
              cached=timed(0.01), recompute=timed(0.05), speedup=5.0,
              **{k: timed(v) if k in decoding.TORCH_VARIANTS and isinstance(v, float) else v
                 for k, v in torch_fields.items()})


def test_decoding_markdown_with_and_without_the_pytorch_twin():
  model = dict(batch=64, ffn=1024, heads=8, layers=2, src_len=24, tgt_len=24, vocab=8000,
               width=256)
  size = {"beam": 4, "lengths": [24], "model": model, "sentences": 8}
  not_timed = "not timed: decodes other tokens than zoo's cached search (1 of 32 outputs differ)"
  disagreeing = dict(seconds=None, error=not_timed, sentences_per_s=None, ms_per_step=None)
  rows = [
      _decoding_row("greedy", torch_cached=0.03, torch_cached_1thread=0.02,
                    torch=dict(same_tokens=True, max_score_gap=2e-5, error=None,
                               reference="torch_cached_1thread", speedup=2.0)),
      _decoding_row("beam", torch_cached=disagreeing, torch_cached_1thread=disagreeing,
                    torch=dict(same_tokens=False, max_score_gap=0.5, error=not_timed,
                               reference=None, speedup=None))]
  # Two rounds in a row (python -m benchmarks --rounds 2): every round's ratio is shown.
  second = dict(rows[0], torch=dict(rows[0]["torch"], speedup=1.8))
  text = decoding.markdown(report.merge_rounds([
      dict(size=size, reference="recompute", rows=rows),
      dict(size=size, reference="recompute", rows=[second, rows[1]])]))
  assert ("| PyTorch cached ms / batch | JAX cached vs PyTorch cached | PyTorch same tokens | "
          "PyTorch score gap |") in text
  assert ("| greedy | 24 | 24.0 | 10 | 50 | 0.417 | 2.08 | 5.00x | yes | 1.5e-05 | "
          "20 (1 thread) | 2.00x / 1.80x | yes | 2.0e-05 |") in text
  assert f"| beam 4 | 24 | 24.0 | 10 | 50 | 0.417 | 2.08 | 5.00x | yes | 1.5e-05 | " \
      f"{not_timed} | n/a | NO | 5.0e-01 |" in text
  # Rows measured without torch (or before the twin): the old table, and a row among twins: n/a.
  old = decoding.markdown(dict(size=size, reference="recompute", rows=[_decoding_row("greedy")]))
  assert "PyTorch cached" not in old and "No PyTorch columns" in old
  assert "| greedy | 24 | 24.0 | 10 | 50 | 0.417 | 2.08 | 5.00x | yes | 1.5e-05 |\n" in (
      old + "\n")
  mixed = decoding.markdown(dict(size=size, reference="recompute",
                                 rows=[_decoding_row("greedy"), rows[0]]))
  assert "| 5.00x | yes | 1.5e-05 | n/a | n/a | n/a | n/a |" in mixed


def test_the_decoding_suite_times_only_a_twin_that_decodes_zoos_tokens(monkeypatch):
  """_compare with stand-ins for the PyTorch runs (no torch needed): an agreeing twin is timed
  with its faster variant as the reference; one that decodes other tokens, or fails, is not."""
  size = decoding.DecodingSize(sentences=B, beam=2, lengths=(6,), model=models.TransformerSize(
      batch=B, src_len=S, tgt_len=6, vocab=13, width=8, heads=2, ffn=10, layers=1))
  batch = models.translation_inputs(size.model, seed=3)
  model = decoding.build_model(size.model, max_len=6)
  src, src_lens = jnp.asarray(batch["src"]), jnp.asarray(batch["src_lens"])
  params = _random_params(model, src, jnp.asarray(batch["tgt_in"]), src_lens, scale=1.0, seed=5)
  cached, _ = decoding.translators(model, size.beam, 6, "greedy")
  want = jax.tree.map(np.asarray, cached(params, src, src_lens))
  other = want._replace(tokens=want.tokens.copy())
  other.tokens[1, 0] += 1
  calls = {"slow": 0, "fast": 0}

  def twin(name, out, seconds=0.0):
    def run():
      calls[name] = calls.get(name, 0) + 1
      time.sleep(seconds)
      return out
    return run

  def compare(runs):
    monkeypatch.setattr(decoding, "_torch_runs", lambda *args: runs)
    return decoding._compare(model, params, src, src_lens, size, "greedy", 6, common.QUICK,
                             twin=object())

  row = compare({"torch_cached": twin("slow", want, 0.01),
                 "torch_cached_1thread": twin("fast", want)})
  assert row["torch"] == dict(same_tokens=True, max_score_gap=0.0, error=None,
                              reference="torch_cached_1thread", speedup=pytest.approx(
                                  row["torch_cached_1thread"]["seconds"]
                                  / row["cached"]["seconds"]))
  assert calls["slow"] > 1 and calls["fast"] > 1 and row["torch_cached"]["seconds"] >= 0.01

  calls.clear()
  row = compare({"torch_cached": twin("slow", other), "torch_cached_1thread": twin("fast", other)})
  assert calls == {"slow": 1}  # the check only
  assert not row["torch"]["same_tokens"] and row["torch"]["max_score_gap"] >= 0
  for name in decoding.TORCH_VARIANTS:
    assert row[name]["seconds"] is None
    assert row[name]["error"].startswith("not timed: decodes other tokens than zoo's cached search "
                                         "(1 of 3 outputs differ")
  assert row["torch"]["reference"] is None and row["torch"]["speedup"] is None
  assert row["cached"]["seconds"] > 0

  def broken():
    raise RuntimeError("no kernel\nmore detail")
  row = compare({"torch_cached": broken})
  assert row["torch_cached"]["error"] == "not timed: RuntimeError: no kernel"
  assert "torch_cached_1thread" not in row

  monkeypatch.setattr(training, "torch_available", lambda: False)
  assert decoding.torch_twin(size.model, 6, params, batch) is None


def _numpy_zoo_transformer(state, src, src_lens, tgt, encoder_layers, decoder_layers):
  """TorchZooTransformer, pre-norm: x + f(LN(x)) per sublayer, a final LayerNorm per stack."""
  key_mask = (np.arange(src.shape[1])[None, :] < src_lens[:, None])[:, None, None, :]
  causal = np.tril(np.ones((tgt.shape[1],) * 2, bool))[None, None]
  table = np.asarray(models.zoo.sinusoidal_encoding(max(src.shape[1], tgt.shape[1]), D))
  norm = lambda prefix, x: _norm(state, prefix, x, eps=1e-5)
  ffn = lambda prefix, x: _ffn(state, prefix, x, names=("dense_in", "dense_out"))

  def attend(prefix, x, kv, mask):
    return _attention(state, prefix, norm(f"{prefix}_norm", x), kv, mask)

  x = state["src_embed.weight"][src] * np.sqrt(D) + table[:src.shape[1]]
  for l in range(encoder_layers):
    p = f"encoder.layers.{l}"
    h = norm(f"{p}.self_attention_norm", x)
    x = x + _attention(state, f"{p}.self_attention", h, h, key_mask)
    x = x + ffn(f"{p}.ffn", norm(f"{p}.ffn_norm", x))
  x = norm("encoder.final_norm", x)
  y = state["tgt_embed.weight"][tgt] * np.sqrt(D) + table[:tgt.shape[1]]
  for l in range(decoder_layers):
    p = f"decoder.layers.{l}"
    h = norm(f"{p}.self_attention_norm", y)
    y = y + _attention(state, f"{p}.self_attention", h, h, causal)
    y = y + attend(f"{p}.cross_attention", y, x, key_mask)
    y = y + ffn(f"{p}.ffn", norm(f"{p}.ffn_norm", y))
  y = norm("decoder.final_norm", y)
  return _linear(state, "output", y) if "output.weight" in state else y @ state["tgt_embed.weight"].T


def test_zoo_transformer_state_dict_computes_the_translation_runs_model():
  config = configs.transformer_cpu().model
  config = type(config)(model_dim=D, num_heads=HEADS, ffn_hidden=FFN, num_encoder_layers=2,
                        num_decoder_layers=1, dropout_rate=0.0)
  assert config.normalize_before  # the runs' pre-norm Transformer
  size = translation_runs.RunBatch(batch=B, src_len=S, tgt_len=T, vocab=V)
  batch = models.translation_inputs(size, seed=4)
  model = translation_runs.RunModel(config.build(V, V, jnp.float32, jnp.float32))
  inputs = (batch["src"], batch["src_lens"], batch["tgt_in"])
  params = _random_params(model, *inputs, scale=0.3, seed=6)
  state = models.zoo_transformer_to_torch(params)
  # embeddings, output, two final norms; encoder blocks 8 + 2 + 4 + 2, decoder blocks 8 more + 2
  assert len(state) == 2 + 2 + 2 * 2 + 2 * 16 + 1 * 26
  want = _numpy_zoo_transformer(state, *inputs, encoder_layers=2, decoder_layers=1)
  got = jax.jit(model.apply)({"params": params}, *inputs)
  np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)
  assert np.abs(want).max() > 1


@pytest.mark.parametrize("name", ["transformer_cpu", "couplet_transformer_cpu", "bahdanau_cpu"])
def test_the_runs_fused_loss_is_the_whole_logits_loss(name):
  """translation_runs times each run's step with the output layer inside the loss, as the named
  runs train; it must be the loss (and gradients) of the whole-logits path beside it."""
  args = translation_runs.arguments(name, common.Settings(quick=True))
  assert set(args["modules"]) == {"jax", "jax_whole_logits"}
  fused, whole = args["modules"]["jax"], args["modules"]["jax_whole_logits"]
  assert fused.fused and not whole.fused
  batch = {k: jnp.asarray(v) for k, v in args["batch"].items()}
  params = _random_params(fused, batch["src"], batch["src_lens"], batch["tgt_in"], scale=0.3,
                          seed=2)
  loss, grads = jax.value_and_grad(args["jax_loss"](fused))(params, batch)
  ref_loss, ref_grads = jax.value_and_grad(args["jax_loss"](whole))(params, batch)
  np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
  chex.assert_trees_all_close(grads, ref_grads, rtol=1e-4, atol=1e-6)


def test_zoo_transformer_state_dict_computes_the_couplet_runs_model():
  """One table for both sides that is also the output layer (share_embeddings, tie_output)."""
  config = couplet_configs.transformer_cpu().model
  assert config.share_embeddings and config.tie_output and config.normalize_before
  config = dataclasses.replace(config, model_dim=D, num_heads=HEADS, ffn_hidden=FFN,
                               num_encoder_layers=1, num_decoder_layers=2, dropout_rate=0.0)
  size = translation_runs.RunBatch(batch=B, src_len=S, tgt_len=T, vocab=V)
  batch = models.translation_inputs(size, seed=5)
  model = translation_runs.RunModel(config.build(V, V, jnp.float32, jnp.float32))
  inputs = (batch["src"], batch["src_lens"], batch["tgt_in"])
  params = _random_params(model, *inputs, scale=0.3, seed=7)
  assert "tgt_embed" not in params and "output" not in params
  state = models.zoo_transformer_to_torch(params)
  assert state["tgt_embed.weight"] is state["src_embed.weight"]
  # both embedding keys, two final norms; encoder blocks 8 + 2 + 4 + 2, decoder blocks 8 more + 2
  assert len(state) == 2 + 2 * 2 + 1 * 16 + 2 * 26
  want = _numpy_zoo_transformer(state, *inputs, encoder_layers=1, decoder_layers=2)
  got = jax.jit(model.apply)({"params": params}, *inputs)
  np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)
  assert np.abs(want).max() > 1


def test_zoo_transformer_state_dict_refuses_a_half_shared_model():
  config = dataclasses.replace(configs.transformer_cpu().model, model_dim=D, num_heads=HEADS,
                               ffn_hidden=FFN, num_encoder_layers=1, num_decoder_layers=1,
                               dropout_rate=0.0, share_embeddings=False, tie_output=True)
  size = translation_runs.RunBatch(batch=B, src_len=S, tgt_len=T, vocab=V)
  batch = models.translation_inputs(size, seed=5)
  model = translation_runs.RunModel(config.build(V, V, jnp.float32, jnp.float32))
  params = _random_params(model, batch["src"], batch["src_lens"], batch["tgt_in"], scale=0.3,
                          seed=7)
  with pytest.raises(ValueError, match="share_embeddings=True and tie_output=True"):
    models.zoo_transformer_to_torch(params)


def _lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
  """nn.LSTM's cell (gates i, f, g, o): x (..., D), h and c (..., H) -> new (h, c)."""
  i, f, g, o = np.split(x @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=-1)
  c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
  return _sigmoid(o) * np.tanh(c), c


def _numpy_bahdanau(state, src, src_lens, tgt, layers):
  """TorchBahdanau: a stacked LSTM over packed sources (its final state starts the decoder), then
  per target step additive attention queried by the top layer's previous h, [context; embedding]
  into the decoder LSTM, and a dense layer."""
  weights_of = lambda side, l: [state[f"{side}.{n}_l{l}"]
                                for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
  batch, hidden = src.shape[0], state["W_q.weight"].shape[0]
  x = state["enc_embedding.weight"][src]  # (B, S, E)
  h, c = [np.zeros((batch, hidden)) for _ in range(layers)], [None] * layers
  for l in range(layers):  # layer by layer, each source over its own tokens only
    out, c[l] = np.zeros(x.shape[:2] + (hidden,)), np.zeros((batch, hidden))
    for b in range(batch):
      hb, cb = np.zeros(hidden), np.zeros(hidden)
      for t in range(src_lens[b]):
        hb, cb = _lstm_cell(x[b, t], hb, cb, *weights_of("encoder", l))
        out[b, t] = hb
      h[l][b], c[l][b] = hb, cb
    x = out
  keys = x @ state["W_k.weight"].T  # (B, S, H)
  valid = np.arange(src.shape[1])[None, :] < src_lens[:, None]
  embedded = state["dec_embedding.weight"][tgt]  # (B, T, E)
  tops = []
  for t in range(tgt.shape[1]):
    query = h[-1] @ state["W_q.weight"].T
    scores = (np.tanh(query[:, None, :] + keys) @ state["w_v.weight"].T)[..., 0]  # (B, S)
    attention = _softmax(np.where(valid, scores, -1e6))
    layer_in = np.concatenate([np.einsum("bs,bsh->bh", attention, x), embedded[:, t]], -1)
    for l in range(layers):
      h[l], c[l] = _lstm_cell(layer_in, h[l], c[l], *weights_of("decoder", l))
      layer_in = h[l]
    tops.append(h[-1])
  return np.stack(tops, 1) @ state["dense.weight"].T + state["dense.bias"]


def test_bahdanau_state_dict_computes_the_translation_runs_model():
  config = configs.bahdanau_cpu().model
  config = type(config)(embed_dim=6, hidden_size=5, num_layers=2, dropout_rate=0.0)
  size = translation_runs.RunBatch(batch=B, src_len=S, tgt_len=T, vocab=V)
  batch = models.translation_inputs(size, seed=7)
  assert len(set(batch["src_lens"].tolist())) > 1  # padded sources of different lengths
  model = translation_runs.RunModel(config.build(V, V, jnp.float32, jnp.float32))
  inputs = (batch["src"], batch["src_lens"], batch["tgt_in"])
  params = _random_params(model, *inputs, scale=0.5, seed=8)
  state = models.bahdanau_to_torch(params)
  assert state["decoder.weight_ih_l0"].shape == (4 * 5, 5 + 6)  # [context; embedding]
  assert len(state) == 2 + 3 + 2 + 2 * 2 * 4
  want = _numpy_bahdanau(state, *inputs, layers=2)
  got = jax.jit(model.apply)({"params": params}, *inputs)
  np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)
  assert np.abs(want).max() > 1


def test_translation_runs_suite_times_the_named_runs_models():
  settings = common.Settings()
  assert translation_runs.RUNS == ("transformer_cpu", "bahdanau_cpu", "couplet_transformer_cpu")
  for name in translation_runs.RUNS[:2]:
    run = configs.CONFIGS[name]()
    assert translation_runs.model_config(name, settings) == dataclasses.replace(run.model,
                                                                               dropout_rate=0.0)
    assert translation_runs.run_batch(name, settings) == translation_runs.RunBatch(
        batch=128, src_len=24, tgt_len=24, vocab=8000)
  couplet = couplet_configs.transformer_cpu()
  assert translation_runs.model_config("couplet_transformer_cpu", settings) == (
      dataclasses.replace(couplet.model, dropout_rate=0.0))
  assert translation_runs.run_batch("couplet_transformer_cpu", settings) == (
      translation_runs.RunBatch(batch=128, src_len=33, tgt_len=33, vocab=5386))
  quick = common.Settings(quick=True)
  assert translation_runs.model_config("bahdanau_cpu", quick).hidden_size == 16
