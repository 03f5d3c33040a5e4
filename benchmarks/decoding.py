"""Decoding speed: beam search with the key/value cache against recomputing the decoder each step.

Both translate the same source sentences with zoo.beam_search (beam 4) over the same
zoo.transformer.Transformer (post-norm, no dropout) and must return the same beams:

  cached     Transformer.init_decode_state + Transformer.decode_step: one new target position per
             step; each self-attention layer appends its key and value to the cache
             (zoo.MultiHeadAttention(decode=True)) and attends to it.
  recompute  every step runs the decoder over the whole padded prefix (max_len positions, causal
             mask) and keeps the logits of the current position: the cost of decoding without a
             cache, quadratic in the output length.

The weights are random, so eos is improbable and both run the full max_len steps (equal work);
the encoder runs once per call in both. Figures are sentences per second (source sentences, each
decoded into `beam` hypotheses); the ratio is cached over recompute.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import zoo
from benchmarks import common
from benchmarks import models
from benchmarks import report
from zoo.transformer import Transformer

BOS, EOS = 2, 3


@dataclasses.dataclass(frozen=True)
class DecodingSize:
  sentences: int = 8
  beam: int = 4
  max_len: int = 24
  model: models.TransformerSize = models.TransformerSize()


def size_for(settings: common.Settings, gpu: bool) -> DecodingSize:
  if settings.quick:
    return DecodingSize(sentences=2, beam=2, max_len=8, model=models.TransformerSize(
        batch=2, src_len=8, tgt_len=8, vocab=200, width=32, heads=4, ffn=64, layers=1))
  if gpu:
    return DecodingSize(sentences=64, beam=4, max_len=64, model=models.TransformerSize(
        batch=64, src_len=32, tgt_len=64, vocab=32000, width=512, heads=8, ffn=2048, layers=6))
  return DecodingSize()


def build_model(m: models.TransformerSize, max_len: int) -> Transformer:
  """The zoo Transformer of these sizes (post-norm, no dropout)."""
  return Transformer(m.vocab, m.vocab, model_dim=m.width, num_heads=m.heads, ffn_hidden=m.ffn,
                     num_encoder_layers=m.layers, num_decoder_layers=m.layers, dropout_rate=0.0,
                     max_len=max_len)


def translators(model: Transformer, beam: int, max_len: int):
  """(cached, recompute): jitted functions (params, src, src_lens) -> zoo.Beams."""

  def search(step, state):
    return zoo.beam_search(step, state, beam_size=beam, bos_id=BOS, eos_id=EOS, max_len=max_len)

  @jax.jit
  def cached(params, src, src_lens):
    variables = {"params": params}
    state = model.apply(variables, src, src_lens, max_len=max_len,
                        method=Transformer.init_decode_state)
    return search(lambda s, t: model.apply(variables, s, t, method=Transformer.decode_step),
                  state)

  @jax.jit
  def recompute(params, src, src_lens):
    variables = {"params": params}
    enc = model.apply(variables, src, src_lens, method=Transformer.encode)

    def step(state, tokens):
      prefix = lax.dynamic_update_slice(state["prefix"], tokens[:, None], (0, state["step"]))
      logits = model.apply(variables, prefix, state["enc"], state["src_lens"],
                           method=Transformer.decode)  # (N, max_len, V)
      current = lax.dynamic_index_in_dim(logits, state["step"], axis=1, keepdims=False)
      return current, dict(state, prefix=prefix, step=state["step"] + 1)

    start = dict(prefix=jnp.zeros((src.shape[0], max_len), jnp.int32),
                 step=jnp.array(0, jnp.int32), enc=enc, src_lens=src_lens)
    return search(step, start)

  return cached, recompute


def run(settings: common.Settings) -> dict[str, Any]:
  size = size_for(settings, common.on_gpu())
  m = size.model
  model = build_model(m, max(size.max_len, m.src_len))
  batch = models.translation_inputs(dataclasses.replace(m, batch=size.sentences))
  src, src_lens = jnp.asarray(batch["src"]), jnp.asarray(batch["src_lens"])
  params = jax.jit(model.init)(jax.random.key(0), src, jnp.asarray(batch["tgt_in"]),
                               src_lens)["params"]
  cached, recompute = translators(model, size.beam, size.max_len)
  beams = {"cached": cached(params, src, src_lens), "recompute": recompute(params, src, src_lens)}
  same_tokens = bool(np.array_equal(beams["cached"].tokens, beams["recompute"].tokens))
  score_gap = float(np.max(np.abs(np.asarray(beams["cached"].scores)
                                  - np.asarray(beams["recompute"].scores))))
  common.log(f"decoding: {size.sentences} sentences, beam {size.beam}, max_len {size.max_len}")
  times = common.time_side_by_side(
      {"cached": common.blocking(cached, params, src, src_lens),
       "recompute": common.blocking(recompute, params, src, src_lens)}, settings)
  results = {}
  for name, seconds in times.items():
    ok = isinstance(seconds, float)
    results[name] = dict(seconds=seconds if ok else None, error=None if ok else seconds,
                         sentences_per_s=size.sentences / seconds if ok else None,
                         speedup=common.ratio(times["recompute"], seconds))
  return dict(size=dataclasses.asdict(size), same_tokens=same_tokens, max_score_gap=score_gap,
              mean_length=float(np.mean(np.asarray(beams["cached"].lengths))),
              reference="recompute", results=results)


def markdown(suite: dict[str, Any]) -> str:
  size = suite["size"]
  m = size["model"]
  rows = []
  for name, r in suite["results"].items():
    if r["error"]:
      rows.append([f"`{name}`", f"failed: {r['error']}", "", ""])
    else:
      rows.append([f"`{name}`", report.number(r["seconds"] * 1e3),
                   report.number(r["sentences_per_s"]), report.speedup(r["speedup"])])
  return "\n".join([
      "### Decoding (beam search, key/value cache vs recomputing the prefix)", "",
      f"{size['sentences']} source sentences of up to {m['src_len']} tokens, beam {size['beam']}, "
      f"max_len {size['max_len']} (mean output length {suite['mean_length']:.1f}); "
      f"zoo.transformer.Transformer (post-norm) "
      f"width {m['width']}, {m['heads']} heads, ffn {m['ffn']}, {m['layers']}+{m['layers']} "
      f"layers, vocabulary {m['vocab']}. Same beams from both: {suite['same_tokens']} (largest "
      f"score difference {suite['max_score_gap']:.1e}). Ratio: recompute's time over the "
      "variant's.", "",
      report.table(["variant", "ms / batch", "sentences/s", "ratio"], rows)])
