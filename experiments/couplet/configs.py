"""The named runs of the couplet experiment: one function per run, returning its Config.

Full-data runs (the seed's settings; meant for a GPU, not run here):

    python -m experiments train couplet --model lstm \
        --data-dir ../shared/data/couplet/couplet.tar.gz --workdir runs/couplet-lstm
    python -m experiments train couplet --model transformer \
        --data-dir ../shared/data/couplet/couplet.tar.gz --workdir runs/couplet-transformer

CPU-sized runs of the same data (`--model lstm_cpu` / `transformer_cpu`: 51 and 56 minutes of
training on both cores of a 2-core AMD EPYC, test perplexity 48.74 and 41.94); their measured
results are in docs/RESULTS.md, "Chinese couplets". Without --data-dir the shipped sample (9,065
train, 447 dev, 488 test couplets) is used.

Every run trains with teacher forcing on the masked token cross-entropy, keeps the parameters with
the best dev loss, and reports dev/test loss and perplexity, plus character BLEU (and BLEU-1/2),
exact-length rate and the form rates (punctuation match, unwanted repetition, repetition pattern,
copies; metrics.py) of beam-search outputs with the length constraint (names without suffix) and
without it (suffix '_free'), beside the reference lines' own form rates ('ref_*'); report.py
scores the other decoding constraints. Then:

    python -m experiments couplet "晚风摇树树还挺" --workdir runs/couplet-lstm --num-results 3 \
        --force-punct --no-copy --keep-pattern
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from experiments import config as config_lib
from experiments.seq2seq.configs import LuongConfig
from experiments.seq2seq.configs import TransformerConfig


@dataclasses.dataclass
class CoupletDataConfig:
  """How couplets become batches (pipelines.tasks.CoupletData), and how the task decodes.

  Attributes:
    max_len: the widest source and decoder input, eos / bos included (the longest line has 32
      characters: 33 keeps every couplet whole).
    boundaries: padded widths of the batches, ascending, the last == max_len; None: the pipeline's
      (8, 12, 18, 33). Each width is one more compiled step.
    min_freq: characters seen fewer times in train are unknown (2 as the pipeline).
    max_size: keep at most this many characters (None: all with min_freq).
    prepared_dir: where prepared datasets live (None: $ZOO_DATA_DIR or ~/.cache/attention_zoo).
    beam_size: the beam of every evaluation decode and of the couplet command (the chapter: 10).
    length_penalty: GNMT's alpha (0: rank by log-probability alone; with the length constraint
      every hypothesis of a line has the same length, so it changes nothing there).
    dev_decode_examples: dev couplets (the first by index) decoded at each dev evaluation for
      BLEU, exact-length and form rates; 0: none; None: all.
    test_decode_examples: the same for the final test evaluation.
    decode_batch_size: upper lines decoded at once (each with beam_size hypotheses).
  """
  max_len: int = 33
  boundaries: tuple[int, ...] | None = None
  min_freq: int = 2
  max_size: int | None = None
  prepared_dir: str | None = None
  beam_size: int = 10
  length_penalty: float = 0.0
  dev_decode_examples: int | None = 1000
  test_decode_examples: int | None = None
  decode_batch_size: int = 128


def _transformer(**sizes) -> TransformerConfig:
  """The translation experiment's Transformer config (experiments.translation.configs) as couplets
  use it: pre-norm, dropout 0.1, one embedding table for upper and lower lines that is also the
  output layer (the vocabulary is shared), no label smoothing (so that the loss is the NLL)."""
  return TransformerConfig(**sizes, dropout_rate=0.1, normalize_before=True,
                           share_embeddings=True, tie_output=True, label_smoothing=0.0)


def _run(model: Any, train: config_lib.TrainConfig, optimizer: config_lib.OptimizerConfig,
         data: CoupletDataConfig | None = None) -> config_lib.Config:
  return config_lib.Config(model=model, train=train, optimizer=optimizer,
                           data=data or CoupletDataConfig())


def lstm() -> config_lib.Config:
  """The seed's run on the full data (GPU): embeddings 256, 2-layer LSTMs of 256, Luong attention
  with input feeding, dropout 0.2; batch 128, Adam 1e-3, gradients clipped to global norm 5.0,
  10 epochs (about 53,800 steps), dev every 2,000 steps (BLEU on 1,000 dev couplets), beam 10.
  The loss is the chapter's: the masked cross-entropy summed over each lower line and averaged
  over the batch (`model.loss_reduction` 'sequence_sum'; the other runs average per character),
  so its gradients, and the clipping at 5.0, are on the chapter's scale (about 10 times the
  per-character mean's for lines of 9 characters and eos). Not run in this project (no GPU was
  lent; see docs/RESULTS.md)."""
  return _run(LuongConfig(loss_reduction="sequence_sum"),
              config_lib.TrainConfig(batch_size=128, num_epochs=10, log_every=200,
                                     eval_every=2000, checkpoint_every=2000),
              config_lib.OptimizerConfig(name="adam", learning_rate=1e-3, grad_clip_norm=5.0))


def transformer() -> config_lib.Config:
  """A Transformer for the full data (GPU): D 256, 4 heads, FFN 1024, 4 + 4 pre-norm layers,
  dropout 0.1, shared tied embeddings; batch 128, Adam (0.9, 0.98) with 4,000 warm-up steps to
  1e-3 then inverse square-root decay, gradients clipped to 5.0, 10 epochs, dev every 2,000 steps,
  beam 10. Not run in this project (no GPU was lent; see docs/RESULTS.md)."""
  return _run(_transformer(model_dim=256, num_heads=4, ffn_hidden=1024, num_encoder_layers=4,
                            num_decoder_layers=4),
              config_lib.TrainConfig(batch_size=128, num_epochs=10, log_every=200,
                                     eval_every=2000, checkpoint_every=2000),
              config_lib.OptimizerConfig(name="adam", learning_rate=1e-3, b2=0.98, eps=1e-9,
                                         schedule="rsqrt", warmup_steps=4000,
                                         grad_clip_norm=5.0))


def _cpu_train(num_steps: int) -> config_lib.TrainConfig:
  """`num_steps` of batch 128 over the seed-0 shuffle of the training split (688,474 couplets:
  5,378 steps an epoch); dev every 1,000 steps."""
  return config_lib.TrainConfig(batch_size=128, num_steps=num_steps, log_every=100,
                                eval_every=1000, checkpoint_every=500)


def _cpu_data() -> CoupletDataConfig:
  """Decoding during training on 300 dev / 1,000 test couplets only (the full splits are scored
  afterwards with `python -m experiments report couplet`)."""
  return CoupletDataConfig(dev_decode_examples=300, test_decode_examples=1000)


def lstm_cpu() -> config_lib.Config:
  """The seed's LSTM at half width for both cores of a 2-core CPU (about 50 minutes): embeddings
  128, 2-layer LSTMs of 128, Luong attention with input feeding, dropout 0.2; batch 128, Adam with
  200 warm-up steps to 3e-3 then cosine decay to 3e-4 (the seed's constant 1e-3 learns too slowly
  for this budget: dev perplexity 284 after 1,000 steps), clipping 5.0; 11,000 steps (2.05 epochs
  of the seed-0 shuffle). Measured (docs/RESULTS.md, 2026-11-25, both cores of a 2-core AMD
  EPYC): test perplexity 48.74 in 51 minutes."""
  return _run(LuongConfig(embed_dim=128, hidden_size=128), _cpu_train(11000),
              config_lib.OptimizerConfig(name="adam", learning_rate=3e-3, schedule="cosine",
                                         warmup_steps=200, min_lr_ratio=0.1, grad_clip_norm=5.0),
              _cpu_data())


def transformer_cpu() -> config_lib.Config:
  """A small Transformer for both cores of a 2-core CPU (about 80 minutes): D 128, 4 heads, FFN
  512, 2 + 2 pre-norm layers, dropout 0.1, shared tied embeddings; batch 128, Adam (0.9, 0.98)
  with 400 warm-up steps to 2e-3 (the rate of the translation experiment's transformer_cpu of
  the same size) then cosine decay to 2e-4, clipping 5.0; 13,000 steps (2.42 epochs of the
  seed-0 shuffle). Measured (both cores of a 2-core Intel Xeon, 2026-11-25): test perplexity
  38.76 in 75.7 minutes; over 9,000 steps (AMD EPYC) it was 41.94 in 56 minutes. Both runs are in
  docs/RESULTS.md, "Chinese couplets"."""
  return _run(_transformer(model_dim=128, num_heads=4, ffn_hidden=512, num_encoder_layers=2,
                            num_decoder_layers=2),
              _cpu_train(13000),
              config_lib.OptimizerConfig(name="adam", learning_rate=2e-3, b2=0.98, eps=1e-9,
                                         schedule="cosine", warmup_steps=400, min_lr_ratio=0.1,
                                         grad_clip_norm=5.0),
              _cpu_data())


CONFIGS = {
    "lstm": lstm,
    "transformer": transformer,
    "lstm_cpu": lstm_cpu,
    "transformer_cpu": transformer_cpu,
}
DEFAULT_MODEL = "lstm"
