"""Training throughput of the CPU runs' sequence-to-sequence models against PyTorch twins.

    python -m benchmarks --suites translation_runs

The models are the named runs' own: the translation experiment's `transformer_cpu()` and
`bahdanau_cpu()` (experiments.translation.configs: zoo.transformer.Transformer, pre-norm, D 128, 4
heads, FFN 512, 2 + 2 layers; zoo.seq2seq's Bahdanau model, embeddings 256, one LSTM layer of 384
since the recipe search of 2026-11-25, 256 before) and the couplet experiment's `transformer_cpu()`
(experiments.couplet.configs: the same Transformer with one character table for both lines that is
also the output layer). Their PyTorch twins (torch_models.TorchZooTransformer, with `shared=True`
for the couplets; torch_models.TorchBahdanau, written as d2l writes its decoder: one nn.LSTM call
per target step) load the same weights (models.zoo_transformer_to_torch, models.bahdanau_to_torch)
and must give the same logits before anything is timed. One step is forward, backward and Adam on
one batch of the run's shape that sits on the device: its batch size (128), sources and decoder
inputs padded to its widest bucket (24 pieces for translation, 33 characters for couplets), ids
drawn over its vocabulary on both sides (8,000 pieces; the 5,386 characters of the full couplet
data), lengths uniform between half the width and the width. Both frameworks run without dropout
and with plain cross-entropy (the runs train with dropout 0.1, and translation's transformer_cpu
with label smoothing 0.1), so that they compute one function. The ratio is PyTorch's time over
JAX's (the faster of its thread settings): above 1, JAX is faster. Each run trains with the
output layer inside the loss (`model.fused_loss`, experiments/seq2seq/fused_loss.py), as the named
runs do since 2026-11-27 (the Transformers, then bahdanau_cpu); 'jax_whole_logits' is
the same step computing the logits whole (`loss.sequence_loss`'s path, the runs before), timed
beside it.
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
from experiments.couplet import configs as couplet_configs
from experiments.seq2seq import fused_loss
from experiments.translation import configs

RUNS = ("transformer_cpu", "bahdanau_cpu", "couplet_transformer_cpu")
COUPLET_VOCAB = 5386  # characters of the full couplet data's vocabulary (docs/RESULTS.md)


def _config(name: str) -> Any:
  """The named run's experiments config."""
  if name == "couplet_transformer_cpu":
    return couplet_configs.transformer_cpu()
  return configs.CONFIGS[name]()


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
  config = _config(name)
  if name == "couplet_transformer_cpu":
    return RunBatch(batch=config.train.batch_size, src_len=config.data.max_len,
                    tgt_len=config.data.max_len, vocab=COUPLET_VOCAB)
  return RunBatch(batch=config.train.batch_size, src_len=config.data.max_src_len,
                  tgt_len=config.data.max_tgt_len, vocab=config.data.vocab_size)


def model_config(name: str, settings: common.Settings) -> Any:
  """The named run's model config without dropout (with --quick, at toy widths)."""
  config = dataclasses.replace(_config(name).model, dropout_rate=0.0)
  if settings.quick:
    small = (dict(embed_dim=12, hidden_size=16) if name == "bahdanau_cpu"
             else dict(model_dim=16, num_heads=2, ffn_hidden=24))
    config = dataclasses.replace(config, **small)
  return config


@dataclasses.dataclass(frozen=True)
class RunModel:
  """A named run's experiments.seq2seq translator seen as a flax module (`init`, `apply` ->
  teacher-forced logits), as the training benchmark calls its models; `fused`: its loss applies
  the output layer itself (run_loss)."""
  translator: Any
  fused: bool = False

  def init(self, rng: jax.Array, src: jax.Array, src_lens: jax.Array, tgt_in: jax.Array):
    return {"params": self.translator.init(rng, src, src_lens, tgt_in)}

  def apply(self, variables: dict[str, Any], src: jax.Array, src_lens: jax.Array,
            tgt_in: jax.Array) -> jax.Array:
    return self.translator.logits(variables["params"], src, src_lens, tgt_in)


def run_loss(model: RunModel) -> Callable:
  """The benchmark's loss (plain cross-entropy, the mean over real target tokens) of a RunModel:
  through fused_loss.fused_sequence_loss when `model.fused`, else training.transformer_loss."""
  if not model.fused:
    return training.transformer_loss(model)

  def loss(params, batch):
    hidden, kernel, bias = model.translator.hidden_and_output_layer(
        params, batch["src"], batch["src_lens"], batch["tgt_in"])
    ones = jnp.ones(batch["tgt_in"].shape[:1], jnp.float32)
    return fused_loss.fused_sequence_loss(hidden, kernel, bias, batch["labels"],
                                          batch["tgt_lens"], ones)[0]
  return loss


def _torch_twin(name: str, config: Any, vocab: int, max_len: int) -> Callable[[], Any] | None:
  """() -> an untrained PyTorch twin of the run's model; None without torch."""
  if not training.torch_available():
    return None
  from benchmarks import torch_models  # pylint: disable=import-outside-toplevel
  if name != "bahdanau_cpu":
    return lambda: torch_models.TorchZooTransformer(
        vocab, vocab, config.model_dim, config.num_heads, config.ffn_hidden,
        config.num_encoder_layers, config.num_decoder_layers,
        pre_norm=config.normalize_before, max_len=max_len, shared=config.share_embeddings)
  return lambda: torch_models.TorchBahdanau(vocab, vocab, config.embed_dim, config.hidden_size,
                                            config.num_layers)


def arguments(name: str, settings: common.Settings) -> dict[str, Any]:
  """training.compare's arguments for one named run (its model, losses, batch, twin, sizes)."""
  shape = run_batch(name, settings)
  config = model_config(name, settings)
  batch = models.translation_inputs(shape)
  translator = config.build(shape.vocab, shape.vocab, jnp.float32, jnp.float32)
  modules = {"jax": RunModel(translator, fused=getattr(config, "fused_loss", False))}
  if modules["jax"].fused:
    modules["jax_whole_logits"] = RunModel(translator)
  to_torch = (models.bahdanau_to_torch if name == "bahdanau_cpu"
              else models.zoo_transformer_to_torch)
  tokens = int(np.sum(batch["src_lens"]) + np.sum(batch["tgt_lens"]))
  sizes = {**dataclasses.asdict(shape),
           **{k: v for k, v in dataclasses.asdict(config).items()
              if k not in ("dropout_rate", "attention_dropout_rate", "label_smoothing")}}
  return dict(name=name, modules=modules, jax_loss=run_loss, batch=batch,
              inputs=("src", "src_lens", "tgt_in"), to_torch=to_torch,
              make_torch=_torch_twin(name, config, shape.vocab, max(shape.src_len, shape.tgt_len)),
              torch_loss=training.torch_transformer_loss, tokens=tokens, extra=dict(size=sizes))


def run_model(name: str, settings: common.Settings) -> dict[str, Any]:
  """Checks the twin and times JAX against PyTorch for one named run."""
  return training.compare(settings=settings, **arguments(name, settings))


def run(settings: common.Settings) -> dict[str, Any]:
  return {name: common.guarded(name, lambda name=name: run_model(name, settings)) for name in RUNS}


def markdown(suite: dict[str, Any]) -> str:
  """The section: one table per named run."""
  parts = ["### Training throughput of the translation and couplet CPU runs' models",
           "",
           "The named runs' own modules (benchmarks/translation_runs.py; `couplet_transformer_cpu` "
           "is the couplet experiment's transformer_cpu) against PyTorch twins on "
           "the same weights and batch; no dropout, plain cross-entropy. Ratio: the reference's "
           "time over the variant's; tokens are the real source plus target tokens of the batch."]
  return "\n".join(parts + training.model_tables(suite, RUNS))
