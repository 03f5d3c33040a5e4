"""Training throughput of the translation experiment's CPU runs against PyTorch twins of their models.

    python -m benchmarks --suites translation_runs

The models are the named runs' own: `experiments.translation.configs.transformer_cpu()` and
`bahdanau_cpu()` build them (zoo.transformer.Transformer, pre-norm, D 128, 4 heads, FFN 512, 2 + 2
layers; zoo.seq2seq's Bahdanau model, embeddings 256, one LSTM layer of 384 since the recipe search
of 2026-11-25, 256 before). Their PyTorch twins (torch_models.TorchZooTransformer,
torch_models.TorchBahdanau, the latter written as d2l writes its decoder: one nn.LSTM call per
target step) load the same weights (models.zoo_transformer_to_torch, models.bahdanau_to_torch) and
must give the same logits before anything is timed. One step is forward, backward and Adam on one
batch of the runs' shape that sits on the device: batch 128, sources and decoder inputs padded to 24
pieces (the runs' widest bucket), ids drawn over the runs' 8,000-piece vocabulary on both sides,
lengths uniform between 12 and 24. Both frameworks run without dropout and with plain cross-entropy
(the runs train with dropout 0.1, and transformer_cpu with label smoothing 0.1), so that they
compute one function. The ratio is PyTorch's time over JAX's (the faster of its thread settings):
above 1, JAX is faster.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from benchmarks import models
from benchmarks import training
from experiments.translation import configs

RUNS = ("transformer_cpu", "bahdanau_cpu")


@dataclasses.dataclass(frozen=True)
class RunBatch:
  """The timed batch: rows, padded source and decoder-input widths, and the vocabulary size."""
  batch: int
  src_len: int
  tgt_len: int
  vocab: int


def run_batch(name: str, settings: common.Settings) -> RunBatch:
  """The named run's batch shape (its config's batch size, widest lengths and vocabulary)."""
  if settings.quick:
    return RunBatch(batch=8, src_len=10, tgt_len=12, vocab=300)
  config = configs.CONFIGS[name]()
  return RunBatch(batch=config.train.batch_size, src_len=config.data.max_src_len,
                  tgt_len=config.data.max_tgt_len, vocab=config.data.vocab_size)


def model_config(name: str, settings: common.Settings) -> Any:
  """The named run's model config without dropout (with --quick, at toy widths)."""
  config = dataclasses.replace(configs.CONFIGS[name]().model, dropout_rate=0.0)
  if settings.quick:
    small = (dict(model_dim=16, num_heads=2, ffn_hidden=24) if name == "transformer_cpu"
             else dict(embed_dim=12, hidden_size=16))
    config = dataclasses.replace(config, **small)
  return config


@dataclasses.dataclass(frozen=True)
class RunModel:
  """A named run's experiments.seq2seq translator seen as a flax module (`init`, `apply` ->
  teacher-forced logits), as the training benchmark calls its models."""
  translator: Any

  def init(self, rng: jax.Array, src: jax.Array, src_lens: jax.Array, tgt_in: jax.Array):
    return {"params": self.translator.init(rng, src, src_lens, tgt_in)}

  def apply(self, variables: dict[str, Any], src: jax.Array, src_lens: jax.Array,
            tgt_in: jax.Array) -> jax.Array:
    return self.translator.logits(variables["params"], src, src_lens, tgt_in)


def _torch_twin(name: str, config: Any, vocab: int, max_len: int) -> Callable[[], Any] | None:
  """() -> an untrained PyTorch twin of the run's model; None without torch."""
  if not training.torch_available():
    return None
  from benchmarks import torch_models  # pylint: disable=import-outside-toplevel
  if name == "transformer_cpu":
    return lambda: torch_models.TorchZooTransformer(
        vocab, vocab, config.model_dim, config.num_heads, config.ffn_hidden,
        config.num_encoder_layers, config.num_decoder_layers,
        pre_norm=config.normalize_before, max_len=max_len)
  return lambda: torch_models.TorchBahdanau(vocab, vocab, config.embed_dim, config.hidden_size,
                                            config.num_layers)


def run_model(name: str, settings: common.Settings) -> dict[str, Any]:
  """Checks the twin and times JAX against PyTorch for one named run."""
  shape = run_batch(name, settings)
  config = model_config(name, settings)
  batch = models.translation_inputs(shape)
  model = RunModel(config.build(shape.vocab, shape.vocab, jnp.float32, jnp.float32))
  to_torch = (models.zoo_transformer_to_torch if name == "transformer_cpu"
              else models.bahdanau_to_torch)
  tokens = int(np.sum(batch["src_lens"]) + np.sum(batch["tgt_lens"]))
  sizes = {**dataclasses.asdict(shape),
           **{k: v for k, v in dataclasses.asdict(config).items()
              if k not in ("dropout_rate", "attention_dropout_rate", "label_smoothing")}}
  return training.compare(name, {"jax": model}, training.transformer_loss, batch,
                          ("src", "src_lens", "tgt_in"), to_torch,
                          _torch_twin(name, config, shape.vocab, max(shape.src_len,
                                                                     shape.tgt_len)),
                          training.torch_transformer_loss, tokens, settings, dict(size=sizes))


def run(settings: common.Settings) -> dict[str, Any]:
  return {name: common.guarded(name, lambda name=name: run_model(name, settings)) for name in RUNS}


def markdown(suite: dict[str, Any]) -> str:
  """The section: one table per named run."""
  parts = ["### Training throughput of the translation CPU runs' models",
           "",
           "The named runs' own modules (benchmarks/translation_runs.py) against PyTorch twins on "
           "the same weights and batch; no dropout, plain cross-entropy. Ratio: the reference's "
           "time over the variant's; tokens are the real source plus target tokens of the batch."]
  return "\n".join(parts + training.model_tables(suite, RUNS))
