"""Training throughput: one optimizer step (forward, backward, Adam) of each model, JAX vs PyTorch.

Both frameworks train the same model (benchmarks/models.py and its twin in torch_models.py) of the
same size on the same batch, which sits on the device before timing (the loop is measured, not the
input pipeline). Before timing, the PyTorch model is loaded with the JAX model's initial weights and
its logits must match (float32, max |difference| <= 1e-3 times the largest logit), so both compute
the same function. The ratio is PyTorch's time over JAX's: above 1, JAX is faster.

  classifier   IMDB BiLSTM + additive attention pooling, the seed protocol's sizes
  transformer  translation Transformer (post-LN encoder-decoder)
Variants: jax_scan (zoo.LSTM), jax_cudnn (zoo.fast_paths cuDNN LSTM, GPU), jax_vmap / jax_fused
(zoo.MultiHeadAttention's two paths), torch with its default threads and, on a CPU, torch_1thread
(the faster of the two is the reference); on a GPU also torch_tf32 (PyTorch's float32 matmuls in
TF32, which JAX's float32 matmuls use by default on the GPU; the faster of torch and torch_tf32 is
the reference) and bfloat16 compute (jax dtype=bfloat16 with float32 parameters, torch autocast).
The twins' agreement is checked at full float32 precision on both sides (common.exact_matmuls).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks import common
from benchmarks import models
from benchmarks import report

LEARNING_RATE = 1e-3
SEED_PROTOCOL_EXAMPLES = 2 * 22500  # 2 epochs over IMDB's train split less the 10% dev split
AGREEMENT = 1e-3


def torch_available() -> bool:
  try:
    import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    return False
  return True


def _cross_entropy(logits: jax.Array, labels: jax.Array, weights: jax.Array) -> jax.Array:
  losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)
  return jnp.sum(losses * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def jax_train_step(loss_fn: Callable[[Any, dict], jax.Array]) -> Callable:
  """A jitted Adam step (params, opt_state, batch) -> (params, opt_state, loss), state donated."""
  optimizer = optax.adam(LEARNING_RATE)

  def step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return optimizer, jax.jit(step, donate_argnums=(0, 1))


def jax_run(loss_fn: Callable, params: Any, batch: dict[str, np.ndarray]) -> Callable[[], Any]:
  """A callable doing one training step per call on the device-resident batch."""
  optimizer, step = jax_train_step(loss_fn)
  batch = jax.device_put({k: jnp.asarray(v) for k, v in batch.items()})
  state = [jax.tree.map(jnp.array, params), None]
  state[1] = optimizer.init(state[0])

  def run():
    state[0], state[1], loss = step(state[0], state[1], batch)
    return jax.block_until_ready(loss)

  # The optimized HLO of the step (benchmarks/profile_steps.py names the profile's ops with it).
  run.compiled_text = lambda: step.lower(state[0], state[1], batch).compile().as_text()
  return run


def torch_run(module, loss_fn: Callable, batch: dict, autocast: bool = False,
              threads: int | None = None, tf32: bool = False) -> Callable:
  """A callable doing one PyTorch training step (zero_grad, forward, backward, Adam) per call.

  `threads` sets torch's CPU threads for the call (and restores them after); None keeps them.
  `tf32`: float32 matmuls in TF32 during the step (torch.set_float32_matmul_precision('high'),
  restored after); PyTorch's default is full float32.
  """
  import torch  # pylint: disable=import-outside-toplevel
  optimizer = torch.optim.Adam(module.parameters(), lr=LEARNING_RATE)
  cuda = next(module.parameters()).is_cuda

  def step():
    optimizer.zero_grad(set_to_none=True)
    context = (torch.autocast("cuda", dtype=torch.bfloat16) if autocast
               else contextlib.nullcontext())
    with context:
      loss = loss_fn(module, batch)
    loss.backward()
    optimizer.step()
    if cuda:
      torch.cuda.synchronize()
    return loss

  if tf32:
    return with_tf32(with_torch_threads(step, threads))
  return with_torch_threads(step, threads)


def with_tf32(fn: Callable[[], Any]) -> Callable[[], Any]:
  """`fn` run with PyTorch's float32 matmuls in TF32 (the setting restored after)."""
  import torch  # pylint: disable=import-outside-toplevel

  def run():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
      return fn()
    finally:
      torch.set_float32_matmul_precision(before)
  return run


def with_torch_threads(fn: Callable[[], Any], threads: int | None) -> Callable[[], Any]:
  """`fn` run with torch's CPU threads set to `threads` (restored after); None: `fn` itself."""
  if threads is None:
    return fn
  import torch  # pylint: disable=import-outside-toplevel

  def run():
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
      return fn()
    finally:
      torch.set_num_threads(before)
  return run


def torch_runs(make_module: Callable, loss_fn: Callable, batch: dict) -> dict[str, Callable]:
  """PyTorch variants: its default threads, and on a multi-core CPU also one thread; on a GPU its
  default and TF32 matmuls.

  On a loaded machine PyTorch's OpenMP threads wait for each other (one of them descheduled) and
  a step can take 10-100 times longer than with one thread; timing both and taking the faster as
  the reference (`_fastest_torch`) gives PyTorch its best setting.
  """
  runs = {"torch": torch_run(make_module(), loss_fn, batch)}
  if common.on_gpu():
    runs["torch_tf32"] = torch_run(make_module(), loss_fn, batch, tf32=True)
  elif (os.cpu_count() or 1) > 1:
    runs["torch_1thread"] = torch_run(make_module(), loss_fn, batch, threads=1)
  return runs


def _torch_device():
  import torch  # pylint: disable=import-outside-toplevel
  return torch.device("cuda" if torch.cuda.is_available() and common.on_gpu() else "cpu")


# ------------------------------------------------------------------------------------------------
# The two models


def classifier_size(settings: common.Settings) -> models.ClassifierSize:
  if settings.quick:
    return models.ClassifierSize(batch=8, length=24, vocab=500, embed=16, hidden=16)
  return models.ClassifierSize()


def transformer_size(settings: common.Settings, gpu: bool) -> models.TransformerSize:
  if settings.quick:
    return models.TransformerSize(batch=8, src_len=10, tgt_len=12, vocab=300, width=32, heads=4,
                                  ffn=64, layers=1)
  if gpu:
    return models.TransformerSize(batch=256, src_len=32, tgt_len=32, vocab=32000, width=512,
                                  heads=8, ffn=2048, layers=6)
  return models.TransformerSize()


def _classifier_loss(model: models.BiLSTMAttentionClassifier) -> Callable:
  def loss(params, batch):
    logits = model.apply({"params": params}, batch["tokens"], batch["lengths"])
    return _cross_entropy(logits, batch["labels"], jnp.ones(logits.shape[:1]))
  return loss


def transformer_loss(model: models.Transformer) -> Callable:
  def loss(params, batch):
    logits = model.apply({"params": params}, batch["src"], batch["src_lens"], batch["tgt_in"])
    weights = (jnp.arange(logits.shape[1])[None, :] < batch["tgt_lens"][:, None])
    return _cross_entropy(logits, batch["labels"], weights.astype(jnp.float32))
  return loss


def _torch_classifier_loss(module, batch):
  import torch.nn.functional as F  # pylint: disable=import-outside-toplevel
  return F.cross_entropy(module(batch["tokens"], batch["lengths"]).float(), batch["labels"])


def torch_transformer_loss(module, batch):
  import torch  # pylint: disable=import-outside-toplevel
  import torch.nn.functional as F  # pylint: disable=import-outside-toplevel
  logits = module(batch["src"], batch["src_lens"], batch["tgt_in"]).float()  # (B, T, V)
  losses = F.cross_entropy(logits.transpose(1, 2), batch["labels"], reduction="none")  # (B, T)
  steps = torch.arange(logits.shape[1], device=logits.device)[None, :]
  weights = (steps < batch["tgt_lens"][:, None]).float()
  return (losses * weights).sum() / weights.sum().clamp(min=1.0)


def _agreement(torch_module, torch_forward: Callable, jax_logits: jax.Array) -> dict[str, Any]:
  """Max |torch - jax| of the logits on the same weights, and whether it is within tolerance."""
  from benchmarks import torch_models  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  with torch.no_grad():
    difference = torch_models.max_difference(torch_forward(torch_module), jax_logits)
  scale = float(np.max(np.abs(np.asarray(jax_logits))))
  return dict(max_abs_difference=difference, max_abs_logit=scale,
              agrees=difference <= AGREEMENT * max(scale, 1.0))


def _measure(name: str, runs: dict[str, Callable], reference: str, examples: int, tokens: int,
             settings: common.Settings, extra: dict[str, Any]) -> dict[str, Any]:
  common.log(f"training {name}: {', '.join(runs)}")
  times = common.time_side_by_side(runs, settings)
  if reference == "torch":
    reference = _fastest_torch(times)
  results = {}
  for variant, seconds in times.items():
    ok = isinstance(seconds, float)
    results[variant] = dict(
        seconds=seconds if ok else None, error=None if ok else seconds,
        examples_per_s=examples / seconds if ok else None,
        tokens_per_s=tokens / seconds if ok else None,
        speedup=common.ratio(times.get(reference), seconds))
  return dict(model=name, reference=reference, examples=examples, tokens=tokens, results=results,
              **extra)


def _fastest_torch(times: dict[str, float | str]) -> str:
  """The float32 PyTorch variant with the shortest time (the reference of the ratios)."""
  timed = {k: v for k, v in times.items()
           if k in ("torch", "torch_1thread", "torch_tf32") and isinstance(v, float)}
  return min(timed, key=timed.get) if timed else "torch"


def compare(name: str, modules: dict[str, Any], jax_loss: Callable, batch: dict[str, np.ndarray],
             inputs: tuple[str, ...], to_torch: Callable, make_torch: Callable,
             torch_loss: Callable, tokens: int, settings: common.Settings,
             extra: dict[str, Any], torch_autocast: bool = False) -> dict[str, Any]:
  """Initializes the first JAX module, checks the PyTorch twin on its weights, times them all.

  Args:
    name: the model's name in the results.
    modules: variant name -> flax module (all with the first one's parameters).
    jax_loss: module -> loss(params, batch).
    batch: the numpy batch.
    inputs: the batch keys the models take, in order.
    to_torch: JAX parameters -> the PyTorch state dict.
    make_torch: () -> an untrained PyTorch twin.
    torch_loss: (module, tensors) -> loss.
    tokens: real tokens in the batch.
    settings: timing settings.
    extra: more entries for the result (sizes).
    torch_autocast: on a GPU, also time PyTorch under bfloat16 autocast.
  """
  runs, reference = prepare(modules, jax_loss, batch, inputs, to_torch, make_torch, torch_loss,
                            extra, torch_autocast)
  return _measure(name, runs, reference, batch[inputs[0]].shape[0], tokens, settings, extra)


def prepare(modules: dict[str, Any], jax_loss: Callable, batch: dict[str, np.ndarray],
            inputs: tuple[str, ...], to_torch: Callable, make_torch: Callable,
            torch_loss: Callable, extra: dict[str, Any],
            torch_autocast: bool = False) -> tuple[dict[str, Callable[[], Any]], str]:
  """The step callables `compare` times (arguments as there), and the reference's name.

  Initializes the first JAX module; with torch installed, loads its twin with those weights, adds
  `extra['torch_agreement']` and, when the logits agree, the PyTorch variants (reference 'torch':
  the faster of its thread settings, chosen after timing).
  """
  first = next(iter(modules.values()))
  params = jax.jit(first.init)(jax.random.key(0), *(batch[k] for k in inputs))["params"]
  runs = {variant: jax_run(jax_loss(m), params, batch) for variant, m in modules.items()}
  reference = next(iter(modules))
  if torch_available():
    from benchmarks import torch_models  # pylint: disable=import-outside-toplevel
    device = _torch_device()
    state = to_torch(params)

    def torch_model():
      return torch_models.load(make_torch(), state).to(device)

    tensors = torch_models.to_tensors(batch, device)
    with common.exact_matmuls():
      logits = jax.jit(first.apply)({"params": params}, *(batch[k] for k in inputs))
    extra["torch_agreement"] = _agreement(torch_model(),
                                          lambda m: m(*(tensors[k] for k in inputs)), logits)
    if extra["torch_agreement"]["agrees"]:
      runs.update(torch_runs(torch_model, torch_loss, tensors))
      reference = "torch"
      if torch_autocast and common.on_gpu():
        runs["torch_bf16_autocast"] = torch_run(torch_model(), torch_loss, tensors, autocast=True)
  return runs, reference


def classifier_arguments(settings: common.Settings) -> dict[str, Any]:
  """`compare`'s arguments for the classifier (its name, modules, losses, batch, twin, sizes)."""
  size = classifier_size(settings)
  batch = models.classifier_inputs(size)
  variants = {"jax_scan": "scan"}
  if common.on_gpu():
    variants["jax_cudnn"] = "cudnn"
  modules = {name: models.BiLSTMAttentionClassifier(size.vocab, size.embed, size.hidden,
                                                    size.layers, lstm_implementation=impl)
             for name, impl in variants.items()}
  from_torch = None
  if torch_available():
    from benchmarks import torch_models  # pylint: disable=import-outside-toplevel
    from_torch = lambda: torch_models.TorchBiLSTMAttention(size.vocab, size.embed, size.hidden,
                                                           size.layers)
  return dict(name="classifier", modules=modules, jax_loss=_classifier_loss, batch=batch,
              inputs=("tokens", "lengths"), to_torch=models.classifier_to_torch,
              make_torch=from_torch, torch_loss=_torch_classifier_loss,
              tokens=int(np.sum(batch["lengths"])), extra=dict(size=dataclasses.asdict(size)))


def run_classifier(settings: common.Settings) -> dict[str, Any]:
  result = compare(settings=settings, **classifier_arguments(settings))
  for variant in result["results"].values():
    rate = variant["examples_per_s"]
    variant["seed_protocol_s"] = SEED_PROTOCOL_EXAMPLES / rate if rate else None
  return result


def run_transformer(settings: common.Settings) -> dict[str, Any]:
  gpu = common.on_gpu()
  size = transformer_size(settings, gpu)
  batch = models.translation_inputs(size)
  max_len = max(size.src_len, size.tgt_len)
  shape = (size.vocab, size.vocab, size.width, size.heads, size.ffn, size.layers)

  def build(attention: str, dtype=jnp.float32) -> models.Transformer:
    return models.Transformer(*shape, max_len=max_len, attention=attention, dtype=dtype)

  modules = {"jax_vmap": build("vmap"), "jax_fused": build("fused")}
  if gpu:
    modules["jax_bf16_fused"] = build("fused", jnp.bfloat16)
  from_torch = None
  if torch_available():
    from benchmarks import torch_models  # pylint: disable=import-outside-toplevel
    from_torch = lambda: torch_models.TorchTransformer(*shape, max_len=max_len)
  tokens = int(np.sum(batch["src_lens"]) + np.sum(batch["tgt_lens"]))
  return compare("transformer", modules, transformer_loss, batch, ("src", "src_lens", "tgt_in"),
                 models.transformer_to_torch, from_torch, torch_transformer_loss, tokens, settings,
                 dict(size=dataclasses.asdict(size)), torch_autocast=True)


def run(settings: common.Settings) -> dict[str, Any]:
  return dict(classifier=common.guarded("classifier", lambda: run_classifier(settings)),
              transformer=common.guarded("transformer", lambda: run_transformer(settings)))


def model_tables(suite: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
  """Markdown lines for each model of `suite` named in `keys`: sizes, the PyTorch twin's agreement
  and one row per variant."""
  parts = []
  for key in keys:
    model = suite.get(key)
    if not model:
      continue
    if "error" in model:
      parts += ["", f"{key}: failed: `{model['error']}`"]
      continue
    size = ", ".join(f"{k} {v}" for k, v in model["size"].items())
    parts += ["", f"**{key}** ({size}); reference: `{model['reference']}`."]
    agreement = model.get("torch_agreement")
    if agreement:
      parts.append(f"PyTorch twin on the same weights: max |logit difference| "
                   f"{agreement['max_abs_difference']:.2e} (largest logit "
                   f"{agreement['max_abs_logit']:.3g}): "
                   f"{'agrees' if agreement['agrees'] else 'DISAGREES, not timed'}.")
    else:
      parts.append("PyTorch not installed: no PyTorch row.")
    header = ["variant", "ms / step", "examples/s", "tokens/s", "ratio"]
    if key == "classifier":
      header.append("2-epoch seed protocol at this rate (s)")
    rows = []
    for variant, r in model["results"].items():
      if r["error"]:
        rows.append([f"`{variant}`", f"failed: {r['error']}"] + [""] * (len(header) - 2))
        continue
      row = [f"`{variant}`", report.number(r["seconds"] * 1e3), report.number(r["examples_per_s"]),
             report.number(r["tokens_per_s"]), report.speedup(r["speedup"])]
      if key == "classifier":
        row.append(report.number(r.get("seed_protocol_s")))
      rows.append(row)
    parts += ["", report.table(header, rows)]
  return parts


def markdown(suite: dict[str, Any]) -> str:
  """The training section: one table per model."""
  parts = ["### Training throughput (one Adam step on a device-resident batch)", "",
           "Ratio: the reference's time over the variant's (above 1: faster than the reference); "
           "tokens are the real (unpadded) tokens of the batch, source plus target for the "
           "Transformer."]
  return "\n".join(parts + model_tables(suite, ("classifier", "transformer")))
