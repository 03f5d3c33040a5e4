"""The named runs of the English->French experiment: one function per run, returning its Config.

Full-size runs (meant for a GPU; not run in this project so far, see docs/RESULTS.md):

    python -m experiments train translation --model transformer \
        --data-dir ../shared/data/fra-eng/fra-eng.zip --workdir runs/translation-transformer
    python -m experiments train translation --model bahdanau \
        --data-dir ../shared/data/fra-eng/fra-eng.zip --workdir runs/translation-bahdanau

CPU-sized runs (31 and 16 minutes on one core of a 2-core AMD EPYC; the measured results are in
docs/RESULTS.md, "English->French translation"): `--model transformer_cpu` / `bahdanau_cpu`.
They are far too small to reach the goals; they show the pipeline end to end on the full data.

Every run trains with teacher forcing on the masked sequence cross-entropy (label smoothing where
the model config says so), evaluates dev loss, perplexity and greedy BLEU, keeps the parameters
with the best dev BLEU, and scores the test split with greedy and beam search (sacreBLEU, one
reference per line and multi-reference). Without --data-dir the shipped 10,000-pair sample is
used. Then:

    python -m experiments translate "I won !" --workdir runs/translation-transformer --beam 4 \
        --heatmap attention.png
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from experiments import config as config_lib
from experiments.seq2seq.configs import BahdanauConfig
from experiments.seq2seq.configs import TransformerConfig


@dataclasses.dataclass
class TranslationDataConfig:
  """How fra-eng becomes batches (pipelines.tasks.TranslationData), and how the task decodes.

  Attributes:
    max_src_len: the widest source, eos included (longer sentences keep their first tokens).
    max_tgt_len: the widest decoder input, bos included; also the most tokens decoding emits
      (eos included).
    boundaries: padded widths of the batches, ascending, the last == the maximum lengths (requires
      max_src_len == max_tgt_len); None: the pipeline's default. Each width is one more compiled
      step.
    min_freq: tokens seen fewer times in train are unknown (d2l: 2).
    max_size: keep at most this many tokens per vocabulary (None: all with min_freq).
    prepared_dir: where prepared datasets live (None: $ZOO_DATA_DIR or ~/.cache/attention_zoo).
    dev_bleu_examples: dev sentences decoded (greedy) for dev BLEU at every evaluation, a fixed
      random subset; None: all of them.
    test_bleu_examples: test sentences decoded for the final BLEU; None: all (a smaller number
      is only for quick checks; the reported figures use all).
    decode_batch_size: sentences decoded at once.
    beam_size: the beam of the test evaluation's beam search.
    length_penalty: GNMT's alpha for beam search (0: rank by log-probability alone).
  """
  max_src_len: int = 24
  max_tgt_len: int = 24
  boundaries: tuple[int, ...] | None = None
  min_freq: int = 2
  max_size: int | None = None
  prepared_dir: str | None = None
  dev_bleu_examples: int | None = None
  test_bleu_examples: int | None = None
  decode_batch_size: int = 256
  beam_size: int = 4
  length_penalty: float = 0.6


def _run(model: Any, train: config_lib.TrainConfig, optimizer: config_lib.OptimizerConfig,
         data: TranslationDataConfig | None = None) -> config_lib.Config:
  return config_lib.Config(model=model, train=train, optimizer=optimizer,
                           data=data or TranslationDataConfig())


def transformer() -> config_lib.Config:
  """Full-size Transformer (GPU): D 256, 8 heads, FFN 1024, 6 + 6 pre-norm layers, dropout 0.1,
  label smoothing 0.1; batch 256, Adam (0.9, 0.98) with 4,000 warm-up steps to 1e-3 then inverse
  square root decay, 40 epochs (about 23,000 steps), evaluated every 2,000 steps; test with
  beam 4. Goal: test sacreBLEU >= 45. Not yet run (no GPU was available; see docs/RESULTS.md)."""
  return _run(TransformerConfig(),
              config_lib.TrainConfig(batch_size=256, num_epochs=40, log_every=200,
                                     eval_every=2000, checkpoint_every=2000,
                                     best_metric="dev/bleu", best_mode="max"),
              config_lib.OptimizerConfig(name="adam", learning_rate=1e-3, b2=0.98, eps=1e-9,
                                         schedule="rsqrt", warmup_steps=4000,
                                         grad_clip_norm=1.0))


def bahdanau() -> config_lib.Config:
  """Full-size Bahdanau seq2seq (GPU): embeddings 256, 2-layer LSTMs of 512, dropout 0.2; batch
  128, Adam 1e-3 with a cosine decay, gradients clipped to 1, 20 epochs (about 23,000 steps),
  evaluated every 2,000 steps; test with beam 4. Goal: test sacreBLEU >= 35. Not yet run (no GPU
  was available; see docs/RESULTS.md)."""
  return _run(BahdanauConfig(),
              config_lib.TrainConfig(batch_size=128, num_epochs=20, log_every=200,
                                     eval_every=2000, checkpoint_every=2000,
                                     best_metric="dev/bleu", best_mode="max"),
              config_lib.OptimizerConfig(name="adam", learning_rate=1e-3, schedule="cosine",
                                         warmup_steps=500, min_lr_ratio=0.05,
                                         grad_clip_norm=1.0))


def _cpu_data() -> TranslationDataConfig:
  """Sentences cut to 16 tokens (98% of the pairs stay whole), vocabularies cut to the 6,000 most
  frequent tokens (English: 99.2% of the training tokens, French: 96.6%; the output layer is most
  of a step's cost), dev BLEU on 1,000 sentences."""
  return TranslationDataConfig(max_src_len=16, max_tgt_len=16, boundaries=(8, 12, 16),
                               max_size=6000, dev_bleu_examples=1000)


def transformer_cpu() -> config_lib.Config:
  """A Transformer sized for a 2-core CPU (31 minutes on one core): D 128, 4 heads, FFN 512, 2 + 2
  pre-norm layers, dropout 0.1, label smoothing 0.1, the data of `_cpu_data`; batch 128, Adam
  (0.9, 0.98) with 400 warm-up steps to 2e-3 then cosine decay, 3,500 steps (about 3 epochs), dev
  BLEU every 1,750 steps. Result in docs/RESULTS.md."""
  return _run(TransformerConfig(model_dim=128, num_heads=4, ffn_hidden=512, num_encoder_layers=2,
                                num_decoder_layers=2),
              config_lib.TrainConfig(batch_size=128, num_steps=3500, log_every=100,
                                     eval_every=1750, checkpoint_every=500,
                                     best_metric="dev/bleu", best_mode="max"),
              config_lib.OptimizerConfig(name="adam", learning_rate=2e-3, b2=0.98, eps=1e-9,
                                         schedule="cosine", warmup_steps=400, min_lr_ratio=0.05,
                                         grad_clip_norm=1.0),
              _cpu_data())


def bahdanau_cpu() -> config_lib.Config:
  """A Bahdanau seq2seq sized for a 2-core CPU (16 minutes on one core): embeddings 128, 2-layer
  LSTMs of 128, dropout 0.1, the data of `_cpu_data`; batch 128, Adam 2e-3 with 100 warm-up steps
  and cosine decay, gradients clipped to 1, 2,300 steps (2 epochs), dev BLEU every 1,150 steps.
  Result in docs/RESULTS.md."""
  return _run(BahdanauConfig(embed_dim=128, hidden_size=128, dropout_rate=0.1),
              config_lib.TrainConfig(batch_size=128, num_steps=2300, log_every=100,
                                     eval_every=1150, checkpoint_every=575,
                                     best_metric="dev/bleu", best_mode="max"),
              config_lib.OptimizerConfig(name="adam", learning_rate=2e-3, schedule="cosine",
                                         warmup_steps=100, min_lr_ratio=0.05,
                                         grad_clip_norm=1.0),
              _cpu_data())


CONFIGS = {
    "transformer": transformer,
    "bahdanau": bahdanau,
    "transformer_cpu": transformer_cpu,
    "bahdanau_cpu": bahdanau_cpu,
}
DEFAULT_MODEL = "transformer"
