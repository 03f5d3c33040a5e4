"""The named runs of the English->French experiment: one function per run, returning its Config.

Every named run reads SentencePiece subwords: one joint English+French model of 8,000 pieces
trained on the training split (pipelines.tasks.translation), cased raw text in, normal French out,
no <unk>. d2l's word-level preprocessing stays one option away (`--data.tokenizer d2l_words`:
lowercased words, vocabularies per language). Full-size runs (meant for a GPU):

    python -m experiments train translation --model transformer \
        --data-dir ../shared/data/fra-eng/fra-eng.zip --workdir runs/translation-transformer
    python -m experiments train translation --model bahdanau \
        --data-dir ../shared/data/fra-eng/fra-eng.zip --workdir runs/translation-bahdanau

CPU-sized runs: `--model transformer_cpu` / `bahdanau_cpu`, each under 60 minutes on 2 CPU cores;
measured on a 2-core Intel Xeon (2026-11-25): test sacreBLEU (cased, multi-reference, beam 4)
45.95 in 43.4 minutes and 40.72 in 41.3 minutes (docs/RESULTS.md, "English -> French
translation", with the earlier word-level results).

Every run trains with teacher forcing on the masked sequence cross-entropy (label smoothing where
the model config says so), evaluates dev loss, perplexity, and greedy sacreBLEU (cased,
lowercased) and chrF, keeps the parameters with the best dev BLEU, and scores the test split with
greedy and beam search, every English sentence once against all of its French translations
(experiments/translation/metrics.py; the sacreBLEU signatures are in results.json). Without
--data-dir the shipped 10,000-pair sample is used. Then:

    python -m experiments translate "I won!" --workdir runs/translation-transformer --beam-size 4
    python -m experiments translate --input-file english.txt --beam-size 4 \
        --workdir runs/translation-transformer > french.txt
    python -m experiments evaluate --workdir runs/translation-transformer --pairs pairs.tsv
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from experiments import config as config_lib
from experiments.seq2seq.configs import BahdanauConfig
from experiments.seq2seq.configs import PlainConfig
from experiments.seq2seq.configs import TransformerConfig


@dataclasses.dataclass
class TranslationDataConfig:
  """How fra-eng becomes batches (pipelines.tasks.TranslationData), and how the task decodes.

  Attributes:
    tokenizer: 'sentencepiece' (subwords of one joint model, cased) or 'd2l_words' (d2l's
      lowercased words). A config.json saved before this setting existed means 'd2l_words'
      (OLD_RUN_VALUES, see experiments/config.py).
    vocab_size: the most pieces of the SentencePiece model (ignored with 'd2l_words').
    max_src_len: the widest source in tokens (pieces or words), eos included (longer sentences
      keep their first tokens).
    max_tgt_len: the widest decoder input, bos included; also the most tokens decoding emits
      (eos included).
    boundaries: padded widths of the batches, ascending, the last == the maximum lengths (requires
      max_src_len == max_tgt_len); None: the pipeline's default. Each width is one more compiled
      step.
    min_freq: with 'd2l_words', words seen fewer times in train are unknown (d2l: 2).
    max_size: with 'd2l_words', keep at most this many words per vocabulary (None: all with
      min_freq).
    prepared_dir: where prepared datasets live (None: $ZOO_DATA_DIR or ~/.cache/attention_zoo).
    dev_bleu_examples: dev sentences decoded (greedy) for dev BLEU at every evaluation, a fixed
      random subset; None: all of them.
    test_bleu_examples: test sentences decoded for the final BLEU; None: all (a smaller number
      is only for quick checks; the reported figures use all).
    decode_batch_size: sentences decoded at once.
    beam_size: the beam of the test evaluation's beam search (and of `evaluate --pairs`).
    length_penalty: GNMT's alpha for beam search (0: rank by log-probability alone).
    first_pairs: d2l's `num_examples`: read only the first this many lines of fra.txt, as d2l's
      `load_data_nmt` does, and use those pairs as train, dev and test alike (d2l holds none
      out, so dev and test figures measure fitting, not generalization); None: the whole file
      in its hashed train / dev / test splits.
  """
  tokenizer: Literal["sentencepiece", "d2l_words"] = "sentencepiece"
  vocab_size: int = 8000
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
  first_pairs: int | None = None

  OLD_RUN_VALUES: ClassVar[dict[str, Any]] = {"tokenizer": "d2l_words"}


def _run(model: Any, train: config_lib.TrainConfig, optimizer: config_lib.OptimizerConfig,
         data: TranslationDataConfig) -> config_lib.Config:
  return config_lib.Config(model=model, train=train, optimizer=optimizer, data=data)


def _full_data() -> TranslationDataConfig:
  """Sentences of up to 32 pieces (eos included: 99.8% of the full data's pairs stay whole with
  the 8,000-piece model; 24 pieces keep 98.9%)."""
  return TranslationDataConfig(max_src_len=32, max_tgt_len=32)


def transformer() -> config_lib.Config:
  """Full-size Transformer (GPU): D 256, 8 heads, FFN 1024, 6 + 6 pre-norm layers, dropout 0.1,
  label smoothing 0.1, the data of `_full_data`; batch 256, Adam (0.9, 0.98) with 4,000 warm-up
  steps to 1e-3 then inverse square root decay, 40 epochs (about 23,000 steps), evaluated every
  2,000 steps; test with beam 4. Goal: test sacreBLEU >= 45. Measured on an NVIDIA H200 in
  bfloat16 (docs/RESULTS.md, 2026-11-26), stopped at 7,254 steps (12.7 epochs) by the device
  call's time: test sacreBLEU 50.99 (beam 4), 49.23 (greedy); by that run's pace a whole run
  would take about 10 minutes there (an estimate)."""
  return _run(TransformerConfig(),
              config_lib.TrainConfig(batch_size=256, num_epochs=40, log_every=200,
                                     eval_every=2000, checkpoint_every=2000,
                                     best_metric="dev/bleu", best_mode="max"),
              config_lib.OptimizerConfig(name="adam", learning_rate=1e-3, b2=0.98, eps=1e-9,
                                         schedule="rsqrt", warmup_steps=4000,
                                         grad_clip_norm=1.0),
              _full_data())


def bahdanau() -> config_lib.Config:
  """Full-size Bahdanau seq2seq (GPU): embeddings 256, 2-layer LSTMs of 512, dropout 0.2, the
  data of `_full_data`; batch 128, Adam 1e-3 with a cosine decay, gradients clipped to 1, 20
  epochs (about 23,000 steps), evaluated every 2,000 steps; test with beam 4. Goal: test
  sacreBLEU >= 35. Not yet run (no GPU was available; see docs/RESULTS.md)."""
  return _run(BahdanauConfig(),
              config_lib.TrainConfig(batch_size=128, num_epochs=20, log_every=200,
                                     eval_every=2000, checkpoint_every=2000,
                                     best_metric="dev/bleu", best_mode="max"),
              config_lib.OptimizerConfig(name="adam", learning_rate=1e-3, schedule="cosine",
                                         warmup_steps=500, min_lr_ratio=0.05,
                                         grad_clip_norm=1.0),
              _full_data())


def _cpu_data() -> TranslationDataConfig:
  """Sentences of up to 24 pieces (eos included: 98.9% of the full data's pairs stay whole; the
  means are 9.6 English and 11.2 French pieces with eos), dev BLEU on 1,000 sentences. With
  `--data.tokenizer d2l_words` the vocabularies keep the 6,000 most frequent words (English: 99.2%
  of the training tokens, French: 96.6%), as in the word-level runs of docs/RESULTS.md, which also
  cut sentences to 16 words (`--data.max_src_len 16 --data.max_tgt_len 16 --data.boundaries 8 12
  16`)."""
  return TranslationDataConfig(max_src_len=24, max_tgt_len=24, max_size=6000,
                               dev_bleu_examples=1000)


def transformer_cpu() -> config_lib.Config:
  """A Transformer sized for a 2-core CPU: D 128, 4 heads, FFN 512, 2 + 2 pre-norm layers, dropout
  0.1, label smoothing 0.1, the data of `_cpu_data`; batch 128, Adam (0.9, 0.98) with 400 warm-up
  steps to 2e-3 then cosine decay, 6,500 steps (about 5.7 epochs of the subword data; 0.4 s a step
  on 2 Xeon cores), dev BLEU every 1,625 steps. Measured (docs/RESULTS.md, 2026-11-25, both cores
  of a 2-core Xeon): test sacreBLEU 45.95 cased, multi-reference, beam 4 (greedy 43.97), in 43
  minutes; the word-level run there had 3,500 steps of d2l's words on one core."""
  return _run(TransformerConfig(model_dim=128, num_heads=4, ffn_hidden=512, num_encoder_layers=2,
                                num_decoder_layers=2),
              config_lib.TrainConfig(batch_size=128, num_steps=6500, log_every=100,
                                     eval_every=1625, checkpoint_every=500,
                                     best_metric="dev/bleu", best_mode="max"),
              config_lib.OptimizerConfig(name="adam", learning_rate=2e-3, b2=0.98, eps=1e-9,
                                         schedule="cosine", warmup_steps=400, min_lr_ratio=0.05,
                                         grad_clip_norm=1.0),
              _cpu_data())


def bahdanau_cpu() -> config_lib.Config:
  """A Bahdanau seq2seq sized for a 2-core CPU: embeddings 256, one LSTM layer of 384 in the
  encoder and the decoder, dropout 0.1, the data of `_cpu_data`; batch 128, Adam 5e-3 with 100
  warm-up steps and cosine decay, gradients clipped to 1, 4,000 steps (about 3.5 epochs of the
  subword data), dev BLEU every 2,000 steps and at every epoch's end. Chosen by dev perplexity
  among 1,500-step probes (docs/RESULTS.md, "The Bahdanau recipe"): at 5e-3 one layer of 384
  beat one of 256 (6.04 against 7.07) even at equal wall time, 3e-3 was slower to learn (9.13),
  and two layers of 256 were far behind after 750 steps (17.9 against 10.7). Measured: test BLEU
  40.72 (beam 4) in 41.3 minutes on 2 Intel Xeon cores, d2l's four sentences right with beam 4."""
  return _run(BahdanauConfig(embed_dim=256, hidden_size=384, num_layers=1, dropout_rate=0.1),
              config_lib.TrainConfig(batch_size=128, num_steps=4000, log_every=100,
                                     eval_every=2000, checkpoint_every=500,
                                     best_metric="dev/bleu", best_mode="max"),
              config_lib.OptimizerConfig(name="adam", learning_rate=5e-3, schedule="cosine",
                                         warmup_steps=100, min_lr_ratio=0.05,
                                         grad_clip_norm=1.0),
              _cpu_data())


def seq2seq_cpu() -> config_lib.Config:
  """d2l's encoder-decoder without attention (PlainConfig) at bahdanau_cpu's size and budget,
  for the comparison d2l's attention chapter makes, on the full data: embeddings 256, one LSTM
  layer of 384 in the encoder and the decoder, dropout 0.1, the data of `_cpu_data`; batch 128,
  Adam 5e-3 with 100 warm-up steps and cosine decay, gradients clipped to 1, 4,000 steps, dev
  BLEU every 2,000 steps and at every epoch's end: every setting of bahdanau_cpu but the
  decoder, which reads the encoder's final state (its start and its fixed context) instead of
  attending to the encoder's outputs. Measured (docs/RESULTS.md, "Attention or not at the CPU
  size", 2026-11-27, 2 shared AMD EPYC cores): test sacreBLEU cased 30.59 with beam 4 (27.34
  greedy) against bahdanau_cpu's 40.72 (37.65), behind it at every step; by source length 43.95
  (1-4 words) down to 11.05 (11 and more). bahdanau_cpu's own by-length figures need a retrained
  run (its recorded run kept no test translations)."""
  bahdanau = bahdanau_cpu()
  return _run(PlainConfig(embed_dim=256, hidden_size=384, num_layers=1, dropout_rate=0.1),
              bahdanau.train, bahdanau.optimizer, bahdanau.data)


# d2l's chapter run: its token-mean loss / 9 (see _d2l_toy) at epochs 50, 100 and 500, and its
# outputs for the four sentences of translation.task.D2L_SENTENCES.
D2L_CHAPTER_LOSS = {50: 0.104, 100: 0.046, 500: 0.023}
D2L_CHAPTER_OUTPUTS = {"Go.": "va !", "Good night!": "!", "I'm OK.": "ça va .",
                       "I won!": "j'ai gagné !"}
# The outputs a named run's chapter printed for D2L_SENTENCES (examples.json keeps them beside ours).
CHAPTER_EXAMPLES = {"bahdanau_d2l": D2L_CHAPTER_OUTPUTS}
# d2l's MaskedSoftmaxCELoss averages each row over its 9 label positions (padding included), and
# the training loop clips the gradient of the batch's sum of those at norm 5: with
# model.loss_reduction 'sequence_sum' (the sum over the batch / 64) that is a clip at 5 * 9 / 64.
D2L_LABEL_POSITIONS = 9
D2L_CLIP_NORM = 5.0 * D2L_LABEL_POSITIONS / 64


def _d2l_toy(model: Any) -> config_lib.Config:
  """The training of d2l's toy translation run (see bahdanau_d2l): d2l's words of the first
  1,000 lines of fra.txt, min_freq 3, batch 64, Adam 0.005, d2l's clipping, 500 epochs."""
  return _run(model,
              config_lib.TrainConfig(batch_size=64, num_epochs=500, log_every=10**6,
                                     checkpoint_every=10**6, best_metric="dev/loss",
                                     best_mode="min", test_with="last"),
              config_lib.OptimizerConfig(name="adam", learning_rate=0.005,
                                         grad_clip_norm=D2L_CLIP_NORM),
              TranslationDataConfig(tokenizer="d2l_words", first_pairs=1000, min_freq=3,
                                    max_src_len=10, max_tgt_len=10, boundaries=(10,),
                                    dev_bleu_examples=64, beam_size=4))


def bahdanau_d2l() -> config_lib.Config:
  """d2l's own run of its attention chapter (Dive into Deep Learning's PyTorch edition of
  section 10.3, "Sequence to Sequence with Attention Mechanism", the edition whose numbers issue
  #33 quotes): `load_data_nmt(64, 10)`, i.e. the first 1,000 lines of fra.txt (num_examples=1000;
  d2l 0.17's 11.4 and 10.7 take 600 and train 250 and 300 epochs with GRUs and dropout 0.1: not
  this run), d2l's lowercased words with min_freq 3, 10 steps; embeddings and a 2-layer LSTM of
  32 in the encoder and the decoder, additive attention of 32, dropout 0; the encoder runs over
  the padding as d2l's does (`model.encode_padding`: its final state, which starts the decoder,
  comes after the padding of the source's 10 positions); batch 64, Adam 0.005, 500 epochs;
  gradients clipped as d2l clips them (norm 5 of its summed loss: see D2L_CLIP_NORM, with
  model.loss_reduction 'sequence_sum', which Adam's scale invariance leaves otherwise
  unchanged).

  The chapter: loss 0.104 at epoch 50, 0.046 at 100, 0.023 at 500, where its loss is the mean
  cross-entropy per target token divided by 9 (its MaskedSoftmaxCELoss averages each row over
  its 9 label positions, padding included, and the sum is divided by the tokens): our 'nll'
  (per token) / 9 is the same quantity. Its greedy outputs: "Go . => va !", "Good Night ! => !",
  "I'm OK . => ça va .", "I won ! => j'ai gagné !".

  Where ours still differs: flax's initialization, not PyTorch's; the source ends with eos (d2l's
  has none, so ours reads one more token before the padding); batches are drawn by
  length bucket from one width (10), and the epoch's last batch is filled with empty rows (d2l's
  is short); d2l's tokenizer of that edition puts no space before '?' (ours, d2l 0.17's, does).
  Dev and test are the same 1,000 training pairs. Measured (docs/RESULTS.md, "d2l's toy
  translation runs", 2 shared AMD EPYC cores, about 5 minutes a run): nll / 9 of 0.0827, 0.0401,
  0.0214 at epochs 50, 100, 500 (seed 0; the mean of seeds 0-2: 0.0885, 0.0436, 0.0217, i.e.
  -15%, -5%, -6% against the chapter); greedy "va !", "<unk> !", "ça va .", "j'ai gagné !" (the
  chapter's "Good Night ! =>   !" lost its "<unk>" as an HTML tag). With the encoder stopping at
  each source's length (encode_padding False) it learned faster than the chapter early on
  (0.0613 at epoch 50) and ended at the same 0.0213.
  """
  return _d2l_toy(BahdanauConfig(embed_dim=32, hidden_size=32, num_layers=2, dropout_rate=0.0,
                                 loss_reduction="sequence_sum", encode_padding=True))


def seq2seq_d2l() -> config_lib.Config:
  """The attention-free encoder-decoder (PlainConfig: the encoder's final state starts the
  decoder and is its context at every step, as d2l 10.7's Seq2SeqDecoder) on bahdanau_d2l's
  data, sizes and training, so the two differ only by the attention. The chapter's attention-free
  model of that edition (its section 9.7) fed the decoder no context, only the initial state;
  d2l 10.7's decoder, with the context, is this one. d2l reports no loss for this pair of
  settings; bahdanau_d2l's chapter numbers are the reference. Measured (docs/RESULTS.md, "d2l's
  toy translation runs"): nll / 9 of 0.1026, 0.0491, 0.0218 at epochs 50, 100, 500 (the
  chapter's Bahdanau run: 0.104, 0.046, 0.023), greedy "va !", "<unk> plus <unk> !", "ça va .",
  "je l'ai emporté !": on sentences this short the attention changes nothing, as the chapter
  says."""
  return _d2l_toy(PlainConfig(embed_dim=32, hidden_size=32, num_layers=2, dropout_rate=0.0,
                              loss_reduction="sequence_sum", encode_padding=True))


CONFIGS = {
    "transformer": transformer,
    "bahdanau": bahdanau,
    "transformer_cpu": transformer_cpu,
    "bahdanau_cpu": bahdanau_cpu,
    "seq2seq_cpu": seq2seq_cpu,
    "bahdanau_d2l": bahdanau_d2l,
    "seq2seq_d2l": seq2seq_d2l,
}
DEFAULT_MODEL = "transformer"
