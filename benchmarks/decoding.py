"""Decoding speed: greedy and beam search with the key/value cache against recomputing the decoder.

Each search (zoo.greedy_search; zoo.beam_search, beam 4) translates the same source sentences over
the same zoo.transformer.Transformer (post-norm, no dropout) at each output length (24 and 128
tokens on a CPU), both ways, and the two must return the same tokens:

  cached     Transformer.init_decode_state + Transformer.decode_step: one new target position per
             step; each self-attention layer appends its key and value to the cache
             (zoo.MultiHeadAttention(decode=True)) and attends to it.
  recompute  every step runs the decoder over the whole padded prefix (max_len positions, causal
             mask) and keeps the logits of the current position: the cost of decoding without a
             cache, quadratic in the output length.

The weights are random, so eos is improbable and both run the full max_len steps (equal work);
the encoder runs once per call in both. Figures are sentences per second (source sentences, each
decoded into `beam` hypotheses for beam search) and milliseconds per decoding step of the batch;
the ratio is recompute's time over the cache's.
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
  lengths: tuple[int, ...] = (24, 128)
  model: models.TransformerSize = models.TransformerSize()


def size_for(settings: common.Settings, gpu: bool) -> DecodingSize:
  if settings.quick:
    return DecodingSize(sentences=2, beam=2, lengths=(8,), model=models.TransformerSize(
        batch=2, src_len=8, tgt_len=8, vocab=200, width=32, heads=4, ffn=64, layers=1))
  if gpu:
    return DecodingSize(sentences=64, beam=4, lengths=(64, 256), model=models.TransformerSize(
        batch=64, src_len=32, tgt_len=64, vocab=32000, width=512, heads=8, ffn=2048, layers=6))
  return DecodingSize()


def build_model(m: models.TransformerSize, max_len: int) -> Transformer:
  """The zoo Transformer of these sizes (post-norm, no dropout)."""
  return Transformer(m.vocab, m.vocab, model_dim=m.width, num_heads=m.heads, ffn_hidden=m.ffn,
                     num_encoder_layers=m.layers, num_decoder_layers=m.layers, dropout_rate=0.0,
                     max_len=max_len)


SEARCHES = ("greedy", "beam")


def translators(model: Transformer, beam: int, max_len: int, search_name: str = "beam"):
  """(cached, recompute): jitted functions (params, src, src_lens) -> zoo.Beams (beam search) or
  zoo.Decoded (greedy search, `beam` unused)."""
  if search_name not in SEARCHES:
    raise ValueError(f"search_name: unknown {search_name!r}; known are {', '.join(SEARCHES)}")

  def search(step, state):
    if search_name == "greedy":
      return zoo.greedy_search(step, state, bos_id=BOS, eos_id=EOS, max_len=max_len)
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


def _compare(model: Transformer, params, src, src_lens, size: DecodingSize, search_name: str,
             max_len: int, settings: common.Settings) -> dict[str, Any]:
  """One row: cached against recomputed decoding of one search at one output length."""
  cached, recompute = translators(model, size.beam, max_len, search_name)
  outputs = {"cached": cached(params, src, src_lens), "recompute": recompute(params, src, src_lens)}
  common.log(f"decoding: {search_name}, {size.sentences} sentences, max_len {max_len}")
  times = common.time_side_by_side(
      {"cached": common.blocking(cached, params, src, src_lens),
       "recompute": common.blocking(recompute, params, src, src_lens)}, settings)
  row = dict(search=search_name, max_len=max_len,
             same_tokens=bool(np.array_equal(outputs["cached"].tokens,
                                             outputs["recompute"].tokens)),
             max_score_gap=float(np.max(np.abs(np.asarray(outputs["cached"].scores)
                                               - np.asarray(outputs["recompute"].scores)))),
             mean_length=float(np.mean(np.asarray(outputs["cached"].lengths))))
  for name, seconds in times.items():
    ok = isinstance(seconds, float)
    row[name] = dict(seconds=seconds if ok else None, error=None if ok else seconds,
                     sentences_per_s=size.sentences / seconds if ok else None,
                     ms_per_step=1e3 * seconds / max_len if ok else None)
  row["speedup"] = common.ratio(times["recompute"], times["cached"])
  return row


def run(settings: common.Settings) -> dict[str, Any]:
  size = size_for(settings, common.on_gpu())
  m = size.model
  model = build_model(m, max(*size.lengths, m.src_len))
  batch = models.translation_inputs(dataclasses.replace(m, batch=size.sentences))
  src, src_lens = jnp.asarray(batch["src"]), jnp.asarray(batch["src_lens"])
  params = jax.jit(model.init)(jax.random.key(0), src, jnp.asarray(batch["tgt_in"]),
                               src_lens)["params"]
  rows = [_compare(model, params, src, src_lens, size, search_name, max_len, settings)
          for max_len in size.lengths for search_name in SEARCHES]
  return dict(size=dataclasses.asdict(size), reference="recompute", rows=rows)


def _cell(variant: dict[str, Any], key: str) -> str:
  return f"failed: {variant['error']}" if variant["error"] else report.number(
      variant[key] * (1e3 if key == "seconds" else 1))


def markdown(suite: dict[str, Any]) -> str:
  size = suite["size"]
  m = size["model"]
  if "rows" not in suite:  # written before greedy and 128 tokens were measured
    return _markdown_beam_only(suite)
  rows = [[r["search"] if r["search"] == "greedy" else f"beam {size['beam']}", r["max_len"],
           f"{r['mean_length']:.1f}", _cell(r["cached"], "seconds"),
           _cell(r["recompute"], "seconds"), _cell(r["cached"], "ms_per_step"),
           _cell(r["recompute"], "ms_per_step"), report.speedup(r["speedup"]),
           "yes" if r["same_tokens"] else "NO", f"{r['max_score_gap']:.1e}"]
          for r in suite["rows"]]
  return "\n".join([
      "### Decoding (greedy and beam search, key/value cache vs recomputing the prefix)", "",
      f"{size['sentences']} source sentences of up to {m['src_len']} tokens; "
      f"zoo.transformer.Transformer (post-norm) width {m['width']}, {m['heads']} heads, ffn "
      f"{m['ffn']}, {m['layers']}+{m['layers']} layers, vocabulary {m['vocab']}; random weights, "
      "so every output runs to max_len. Ratio: recompute's time over the cache's; same tokens: "
      "whether both ways decode the same (largest score difference beside it).", "",
      report.table(["search", "max_len", "mean length", "cached ms / batch",
                    "recompute ms / batch", "cached ms / step", "recompute ms / step", "ratio",
                    "same tokens", "score gap"], rows)])


def _markdown_beam_only(suite: dict[str, Any]) -> str:
  """The table of a result written before the suite measured greedy search and 128 tokens."""
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
