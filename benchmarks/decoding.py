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

With PyTorch installed (an optional dependency), each row also times a PyTorch twin of the cached
way, in the same round-robin:

  torch_cached          torch_models.torch_greedy_search / torch_beam_search: the same model
                        (torch_models.TorchZooTransformer, post-norm, the JAX weights through
                        models.zoo_transformer_to_torch), the source encoded and each layer's
                        cross-attention keys/values projected once, one new query per step against
                        a preallocated self-attention cache, zoo's search rules, inference_mode;
                        PyTorch's default threads.
  torch_cached_1thread  the same on one thread (a multi-core CPU only; on a loaded machine torch's
                        threads wait for each other, see benchmarks/training.py). The faster of the
                        two is PyTorch's figure.

The twin must decode the same tokens as zoo's cached search (scores may differ by float error); a
twin that does not is not timed, and the row says why. The tokens compared (cached, recompute and
the twin's) are decoded with float32 matmuls at full precision (common.exact_matmuls; on a GPU,
JAX's default TF32 flips near-tied argmaxes of random weights); the timed calls run at the
backend's default.

The weights are random, so eos is improbable and both run the full max_len steps (equal work);
the encoder runs once per call in both. Figures are sentences per second (source sentences, each
decoded into `beam` hypotheses for beam search) and milliseconds per decoding step of the batch;
the ratio is recompute's time over the cache's, and PyTorch's (the faster twin's) over the cache's
(above 1: JAX is faster).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import zoo
from benchmarks import common
from benchmarks import models
from benchmarks import report
from benchmarks import training
from zoo.transformer import Transformer

BOS, EOS = 2, 3
TORCH_VARIANTS = ("torch_cached", "torch_cached_1thread")


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


# ------------------------------------------------------------------------------------------------
# The PyTorch twin of the cached way (torch is optional: imported only when installed).


@dataclasses.dataclass(frozen=True)
class TorchTwin:
  """The PyTorch model on the JAX weights and the source batch as its tensors.

  Attributes:
    module: torch_models.TorchZooTransformer (post-norm), in eval mode.
    src: int64 tensor (B, S).
    src_lens: int64 tensor (B,).
  """
  module: Any
  src: Any
  src_lens: Any


def torch_twin(m: models.TransformerSize, max_len: int, params,
               batch: dict[str, np.ndarray]) -> TorchTwin | None:
  """The twin of build_model(m, max_len) with `params`, or None without torch."""
  if not training.torch_available():
    return None
  import torch  # pylint: disable=import-outside-toplevel
  from benchmarks import torch_models  # pylint: disable=import-outside-toplevel
  device = torch.device("cuda" if torch.cuda.is_available() and common.on_gpu() else "cpu")
  module = torch_models.TorchZooTransformer(m.vocab, m.vocab, m.width, m.heads, m.ffn, m.layers,
                                            m.layers, pre_norm=False, max_len=max_len)
  module = torch_models.load(module, models.zoo_transformer_to_torch(params)).to(device).eval()
  tensors = torch_models.to_tensors({k: batch[k] for k in ("src", "src_lens")}, device)
  return TorchTwin(module, tensors["src"], tensors["src_lens"])


def torch_translator(twin: TorchTwin, beam: int, max_len: int, search_name: str,
                     threads: int | None = None) -> Callable[[], Any]:
  """() -> numpy zoo.Decoded (greedy) or zoo.Beams (beam) of the twin's cached search; `threads`
  sets torch's CPU threads for the call (restored after), None keeps them."""
  from benchmarks import torch_models  # pylint: disable=import-outside-toplevel
  args = (twin.module, twin.src, twin.src_lens)

  def search():
    if search_name == "greedy":
      return torch_models.torch_greedy_search(*args, bos_id=BOS, eos_id=EOS, max_len=max_len)
    return torch_models.torch_beam_search(*args, beam_size=beam, bos_id=BOS, eos_id=EOS,
                                          max_len=max_len)

  return training.with_torch_threads(search, threads)


def _torch_runs(twin: TorchTwin, beam: int, max_len: int,
                search_name: str) -> dict[str, Callable[[], Any]]:
  """torch_cached (default threads) and, on a multi-core CPU, torch_cached_1thread."""
  runs = {"torch_cached": torch_translator(twin, beam, max_len, search_name)}
  if not common.on_gpu() and (os.cpu_count() or 1) > 1:
    runs["torch_cached_1thread"] = torch_translator(twin, beam, max_len, search_name, threads=1)
  return runs


def torch_agreement(jax_out, torch_out) -> dict[str, Any]:
  """Whether the twin decoded zoo's tokens and lengths, its largest score gap, and why it is not
  timed (error, None when it agrees). Both are zoo.Decoded or zoo.Beams."""
  jax_tokens, torch_tokens = np.asarray(jax_out.tokens), np.asarray(torch_out.tokens)
  same = (jax_tokens.shape == torch_tokens.shape and np.array_equal(jax_tokens, torch_tokens)
          and np.array_equal(np.asarray(jax_out.lengths), np.asarray(torch_out.lengths)))
  gap = (float(np.max(np.abs(np.asarray(jax_out.scores) - np.asarray(torch_out.scores))))
         if np.shape(jax_out.scores) == np.shape(torch_out.scores) else None)
  error = None
  if jax_tokens.shape != torch_tokens.shape:
    error = (f"not timed: its tokens have shape {torch_tokens.shape}, zoo's cached search's "
             f"{jax_tokens.shape}")
  elif not same:
    differ = int(np.any(jax_tokens != torch_tokens, axis=-1).sum())
    error = (f"not timed: decodes other tokens than zoo's cached search ({differ} of "
             f"{int(np.prod(jax_tokens.shape[:-1]))} outputs differ, or their lengths)")
  return dict(same_tokens=bool(same), max_score_gap=gap, error=error)


def _check_twin(runs: dict[str, Callable[[], Any]], jax_out) -> dict[str, Any]:
  """Runs the twin once and compares it with zoo's cached output (a failure is recorded)."""
  try:
    return torch_agreement(jax_out, next(iter(runs.values()))())
  except Exception as error:  # pylint: disable=broad-except
    return dict(same_tokens=False, max_score_gap=None,
                error=f"not timed: {common.failure_message(error)}")


def _fastest_torch(times: dict[str, float | str]) -> str | None:
  """The PyTorch variant with the shortest time, None when none was timed."""
  timed = {k: v for k, v in times.items() if k in TORCH_VARIANTS and isinstance(v, float)}
  return min(timed, key=timed.get) if timed else None


# ------------------------------------------------------------------------------------------------
# One row.


def _variant(seconds: float | str, sentences: int, max_len: int) -> dict[str, Any]:
  """A timed variant's fields; `seconds` is a time or the reason it has none."""
  ok = isinstance(seconds, float)
  return dict(seconds=seconds if ok else None, error=None if ok else seconds,
              sentences_per_s=sentences / seconds if ok else None,
              ms_per_step=1e3 * seconds / max_len if ok else None)


def _compare(model: Transformer, params, src, src_lens, size: DecodingSize, search_name: str,
             max_len: int, settings: common.Settings,
             twin: TorchTwin | None = None) -> dict[str, Any]:
  """One row: cached against recomputed decoding of one search at one output length, and the
  PyTorch twin of the cached way when `twin` is given.

  The row: search, max_len, same_tokens and max_score_gap (recompute against cached), mean_length,
  each variant's seconds / error / sentences_per_s / ms_per_step (cached, recompute and, with a
  twin, torch_cached and torch_cached_1thread), speedup (recompute's time over the cache's) and,
  with a twin, torch: {same_tokens, max_score_gap (against zoo's cached search), error (why it
  was not timed, or None), reference (the faster PyTorch variant, None if none was timed),
  speedup (the reference's time over the cache's: above 1, JAX is faster)}.
  """
  cached, recompute = translators(model, size.beam, max_len, search_name)
  with common.exact_matmuls():  # the agreement at full float32 (a GPU's TF32 flips near-ties)
    outputs = {"cached": cached(params, src, src_lens),
               "recompute": recompute(params, src, src_lens)}
  runs = {"cached": common.blocking(cached, params, src, src_lens),
          "recompute": common.blocking(recompute, params, src, src_lens)}
  agreement, torch_runs = None, {}
  if twin is not None:
    torch_runs = _torch_runs(twin, size.beam, max_len, search_name)
    agreement = _check_twin(torch_runs, outputs["cached"])
    if agreement["error"] is None:
      runs.update(torch_runs)
  common.log(f"decoding: {search_name}, {size.sentences} sentences, max_len {max_len}: "
             f"{', '.join(runs)}")
  times = common.time_side_by_side(runs, settings)
  row = dict(search=search_name, max_len=max_len,
             same_tokens=bool(np.array_equal(outputs["cached"].tokens,
                                             outputs["recompute"].tokens)),
             max_score_gap=float(np.max(np.abs(np.asarray(outputs["cached"].scores)
                                               - np.asarray(outputs["recompute"].scores)))),
             mean_length=float(np.mean(np.asarray(outputs["cached"].lengths))))
  for name in torch_runs:
    times.setdefault(name, agreement["error"])
  for name, seconds in times.items():
    row[name] = _variant(seconds, size.sentences, max_len)
  row["speedup"] = common.ratio(times["recompute"], times["cached"])
  if agreement is not None:  # "speedup": a ratio, so report.merge_rounds keeps every round's
    reference = _fastest_torch(times)
    row["torch"] = dict(agreement, reference=reference,
                        speedup=common.ratio(times.get(reference), times["cached"]))
  return row


def run(settings: common.Settings) -> dict[str, Any]:
  size = size_for(settings, common.on_gpu())
  m = size.model
  model = build_model(m, max(*size.lengths, m.src_len))
  batch = models.translation_inputs(dataclasses.replace(m, batch=size.sentences))
  src, src_lens = jnp.asarray(batch["src"]), jnp.asarray(batch["src_lens"])
  params = jax.jit(model.init)(jax.random.key(0), src, jnp.asarray(batch["tgt_in"]),
                               src_lens)["params"]
  twin = torch_twin(m, model.max_len, params, batch)
  rows = [_compare(model, params, src, src_lens, size, search_name, max_len, settings, twin)
          for max_len in size.lengths for search_name in SEARCHES]
  return dict(size=dataclasses.asdict(size), reference="recompute", rows=rows)


def _cell(variant: dict[str, Any], key: str) -> str:
  return f"failed: {variant['error']}" if variant["error"] else report.number(
      variant[key] * (1e3 if key == "seconds" else 1))


TORCH_COLUMNS = ["PyTorch cached ms / batch", "JAX cached vs PyTorch cached",
                 "PyTorch same tokens", "PyTorch score gap"]


def _torch_cells(r: dict[str, Any]) -> list[str]:
  """The PyTorch columns of one row: its faster variant's time ("(1 thread)" when that is the
  one-thread run) or why it has none, PyTorch's time over the cache's, and its agreement."""
  twin = r.get("torch")
  if twin is None:  # measured without torch
    return ["n/a"] * len(TORCH_COLUMNS)
  reference = twin["reference"]
  if reference is None:  # not timed (it disagreed) or every timing failed
    time_cell = twin["error"] or f"failed: {r['torch_cached']['error']}"
  else:
    one_thread = " (1 thread)" if reference == "torch_cached_1thread" else ""
    time_cell = _cell(r[reference], "seconds") + one_thread
  gap = twin["max_score_gap"]
  return [time_cell, report.speedup(twin["speedup"]),
          "yes" if twin["same_tokens"] else "NO", "n/a" if gap is None else f"{gap:.1e}"]


def markdown(suite: dict[str, Any]) -> str:
  size = suite["size"]
  m = size["model"]
  if "rows" not in suite:  # written before greedy and 128 tokens were measured
    return _markdown_beam_only(suite)
  with_torch = any("torch" in r for r in suite["rows"])
  rows = [[r["search"] if r["search"] == "greedy" else f"beam {size['beam']}", r["max_len"],
           f"{r['mean_length']:.1f}", _cell(r["cached"], "seconds"),
           _cell(r["recompute"], "seconds"), _cell(r["cached"], "ms_per_step"),
           _cell(r["recompute"], "ms_per_step"), report.speedup(r["speedup"]),
           "yes" if r["same_tokens"] else "NO", f"{r['max_score_gap']:.1e}"]
          + (_torch_cells(r) if with_torch else [])
          for r in suite["rows"]]
  torch_note = (
      " PyTorch: its twin of the cached way (benchmarks/torch_models.py, the same weights), the "
      "faster of its default threads and one thread (marked \"(1 thread)\"); JAX cached vs "
      "PyTorch cached: PyTorch's time over the cache's (above 1: JAX is faster); PyTorch same "
      "tokens: whether it decodes zoo's cached tokens (a twin that does not is not timed), with "
      "the largest score difference." if with_torch else
      " No PyTorch columns: torch was not installed for this result, or it predates the twin.")
  return "\n".join([
      "### Decoding (greedy and beam search, key/value cache vs recomputing the prefix)", "",
      f"{size['sentences']} source sentences of up to {m['src_len']} tokens; "
      f"zoo.transformer.Transformer (post-norm) width {m['width']}, {m['heads']} heads, ffn "
      f"{m['ffn']}, {m['layers']}+{m['layers']} layers, vocabulary {m['vocab']}; random weights, "
      "so every output runs to max_len. Ratio: recompute's time over the cache's; same tokens: "
      "whether both ways decode the same (largest score difference beside it)." + torch_note, "",
      report.table(["search", "max_len", "mean length", "cached ms / batch",
                    "recompute ms / batch", "cached ms / step", "recompute ms / step", "ratio",
                    "same tokens", "score gap"] + (TORCH_COLUMNS if with_torch else []), rows)])


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
