"""The named runs of the LSTM language model (lstm_lm.py's networks, lm_tasks.py's tasks):
`lstm_lm` pretrains it on IMDB's reviews, `lstm_lm_classifier` fine-tunes it as the classifier.

    python -m experiments train sentiment --model lstm_lm --data-dir ../shared/data/imdb \
        --workdir runs/sentiment/lstm_lm
    python -m experiments train sentiment --model lstm_lm_classifier \
        --data-dir ../shared/data/imdb --model.init_from runs/sentiment/lstm_lm \
        --workdir runs/sentiment/lstm_lm_classifier-seed0 --train.seed 0

Both default to the recipe priced for a 2-core CPU (docs/RESULTS.md, "The recipe priced for the
CPU"): E 128, H 512, the vocabulary cut to its 10,000 first ids, the reviews as the ngram_attn
teacher's data gives them (their first 1,024 tokens); pretraining 8,000 steps of 64 windows of
128 tokens, Adam 2e-3 after 200 warm-up steps, decayed along a cosine to a tenth at the last step,
gradients clipped to norm 1; fine-tuning 2 epochs of batches of 64 reviews, of a review longer
than 512 tokens its first 128 and its last 384 (`model.head`), Adam 1e-3 warmed up over a tenth
of the steps, dev accuracy choosing the epoch.
"""

from __future__ import annotations

import dataclasses
from experiments import config as config_lib
from experiments.sentiment import lstm_lm as nets
from experiments.sentiment.configs import SentimentDataConfig


@dataclasses.dataclass
class LSTMTrunkConfig:
  """What both stages share (lstm_lm.ModelConfig, the reviews as ids).

  Attributes:
    embed_dim: De, the word vectors' width (also the tied output layer's).
    hidden_size: H, the LSTM's state width.
    num_layers: stacked LSTM layers.
    word_dropout: the share of words whose whole input vector is dropped.
    vocab_cap: None, or every id from this one on reads as unk (lstm_lm.cap_ids): the vocabulary
      cut to its vocab_cap - 4 most frequent words; a smaller output layer is cheaper.
    backward: read every review from its last word to its first (ULMFiT's backward model).
  """
  embed_dim: int = 128
  hidden_size: int = 512
  num_layers: int = 1
  word_dropout: float = 0.1
  vocab_cap: int | None = 10000
  backward: bool = False

  def network(self, dtype: str) -> nets.ModelConfig:
    """lstm_lm's ModelConfig with the run's compute dtype ('float32' or 'bfloat16')."""
    if dtype not in nets.DTYPES:
      raise ValueError(f"train.dtype: the LSTM language model computes in "
                       f"{' or '.join(sorted(nets.DTYPES))}, got {dtype!r}")
    return nets.ModelConfig(self.embed_dim, self.hidden_size, self.num_layers,
                               self.word_dropout, dtype)


@dataclasses.dataclass
class LSTMLanguageModelConfig(LSTMTrunkConfig):
  """lstm_lm.LanguageModel pretrained on the labelled training reviews and IMDB's unlabelled
  ones (lm_tasks.LanguageModelTask).

  Attributes (besides the trunk's):
    window: L, the tokens of one training window.
    output_dropout: dropout on the LSTM's outputs before the output layer.
  """
  window: int = 128
  output_dropout: float = 0.2


@dataclasses.dataclass
class LSTMClassifierConfig(LSTMTrunkConfig):
  """lstm_lm.Classifier fine-tuned from a pretrained language model (lm_tasks.ClassifierTask).

  Attributes (besides the trunk's, which must be the language model's):
    init_from: the directory of an `lstm_lm` run (same data options): its trunk (best
      checkpoint) starts the classifier. None: the trunk from scratch.
    dropout: dropout on the pooled features.
    read_len: the tokens of a review the classifier reads (data.max_len: those the data keeps).
    widths: the padded widths of the length buckets (those under read_len, then read_len).
    head: None, or of a review longer than read_len its first `head` tokens and its last
      read_len - head are read (lstm_lm.head_and_tail).
    also_first: with `head`, a review longer than read_len is scored by the mean of two log-odds:
      of its head and tail, and of its first read_len tokens.
    adversarial: 0, or the L2 norm of each review's adversarial perturbation of its embedded
      words (lstm_lm.adversarial_perturbation): each step's objective adds the loss at them.
    adversarial_from: with `adversarial`, the first epoch (from 1) trained adversarially.
    weight_drop: 0, or the share of the LSTM's recurrent weights dropped at each step
      (lstm_lm.drop_connect).
  """
  init_from: str | None = None
  dropout: float = 0.5
  read_len: int = 512
  widths: tuple[int, ...] = (256, 512)
  head: int | None = 128
  also_first: bool = False
  adversarial: float = 0.0
  adversarial_from: int = 1
  weight_drop: float = 0.0

  def __post_init__(self):
    if self.head is not None and not 0 <= self.head <= self.read_len:
      raise ValueError(f"model.head: expected 0 to model.read_len ({self.read_len}) tokens, "
                       f"got {self.head}")
    if self.also_first and self.head is None:
      raise ValueError("model.also_first scores a second view beside the head and tail; set "
                       "model.head too")
    if not self.adversarial >= 0:
      raise ValueError(f"model.adversarial: expected a perturbation norm >= 0 (0: none), got "
                       f"{self.adversarial}")
    if self.adversarial_from < 1:
      raise ValueError(f"model.adversarial_from: expected an epoch from 1, got "
                       f"{self.adversarial_from}")
    if not 0.0 <= self.weight_drop < 1.0:
      raise ValueError(f"model.weight_drop: expected a share of the recurrent weights in "
                       f"[0, 1), got {self.weight_drop}")

  def bucket_widths(self) -> tuple[int, ...]:
    return tuple(w for w in self.widths if w < self.read_len) + (self.read_len,)


def _teacher_data() -> SentimentDataConfig:
  """The data of the ngram_attn teacher the reviews were exported from: reviews kept to their
  first 1,024 tokens, the vocabulary of words seen 5 times (bigrams are not read)."""
  return SentimentDataConfig(max_len=1024)


def _optimizer(learning_rate: float, warmup_steps: int = 0,
               warmup_fraction: float | None = None) -> config_lib.OptimizerConfig:
  """Adam on gradients clipped to norm 1, warmed up, then a cosine to a tenth at the last step."""
  return config_lib.OptimizerConfig(
      name="adam", learning_rate=learning_rate, grad_clip_norm=1.0, schedule="cosine_to_last",
      warmup_steps=warmup_steps, warmup_fraction=warmup_fraction, min_lr_ratio=0.1)


def lstm_lm() -> config_lib.Config:
  """The LSTM language model (Dai and Le 2015's LM-LSTM, the output layer tied to the input
  embedding) pretrained on the labelled training reviews and IMDB's 50,000 unlabelled ones (dev's
  reviews give the held-out perplexity that picks the kept parameters): the CPU recipe, 8,000
  steps of 64 windows of 128 tokens (3.3-3.7 h on a 2-core CPU; a stopped run resumes)."""
  return config_lib.Config(
      train=config_lib.TrainConfig(batch_size=64, num_steps=8000, log_every=100,
                                   checkpoint_every=200, best_metric="dev/perplexity",
                                   best_mode="min", test_with="last"),
      optimizer=_optimizer(2e-3, warmup_steps=200),
      model=LSTMLanguageModelConfig(), data=_teacher_data())


def lstm_lm_classifier() -> config_lib.Config:
  """The language model of the `lstm_lm` run in runs/sentiment/lstm_lm (--model.init_from DIR
  for another) fine-tuned as the classifier: [last state, max, mean] of the LSTM's outputs ->
  dropout 0.5 -> dense, 2 epochs of 64 reviews, head 128 + tail 384 of a long review, Adam 1e-3
  warmed up over a tenth of the steps, dev accuracy choosing the epoch."""
  return config_lib.Config(
      train=config_lib.TrainConfig(batch_size=64, num_epochs=2, log_every=50,
                                   best_metric="dev/accuracy", best_mode="max"),
      optimizer=_optimizer(1e-3, warmup_fraction=0.1),
      model=LSTMClassifierConfig(init_from="runs/sentiment/lstm_lm"), data=_teacher_data())


CONFIGS = {"lstm_lm": lstm_lm, "lstm_lm_classifier": lstm_lm_classifier}
