"""The couplet task: upper line -> lower line, for the engine, the evaluation and the command.

Batches come from pipelines.tasks.CoupletData ('src' int32 (B, S): the upper line's character ids
and eos; 'src_len' (B,); 'tgt_in' (B, T): bos and the lower line; 'tgt_out' (B, T): the lower line
and eos; 'tgt_len' (B,) == 'src_len'; 'index', 'weight'). The model comes from `config.model`
(configs.LuongConfig, or the translation experiment's TransformerConfig) with the size of the
shared vocabulary. The data is opened on first use, so a task built to generate from a trained run
(with the vocabulary saved in its workdir) never reads the couplets.

The loss is the translation experiment's masked sequence cross-entropy (experiments.translation.
task.sequence_loss: metric pairs 'loss' (the objective), 'nll', 'token_accuracy' per target token).
Evaluation (`extra_eval`, after those teacher-forced metrics):
  perplexity            exp(mean NLL per target token, eos included) over the whole split;
  bleu, exact_length,   beam search (beam config.data.beam_size) with the length constraint
  copy_rate,            (zoo.search exact_lens = the upper line's length), scored by
  copied_chars          experiments.couplet.metrics over the first dev/test_decode_examples
                        couplets of the split (by index), with `decoded` their number;
  *_free                the same without the constraint (eos may come anywhere).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from experiments import plots
from experiments import registry
from experiments import seq2seq_common
from experiments import steps
from experiments.config import Config
from experiments.couplet import metrics
from experiments.translation.task import sequence_loss
from pipelines import text as text_lib
from pipelines.batching import Batcher
from pipelines.tasks import CoupletData
from pipelines.vocab import BOS_ID, EOS_ID, UNK_ID, Vocab

VOCAB_FILE = "vocab.json"
SAMPLES_FILE = "samples.json"
DEMO_UPPER = "晚风摇树树还挺"
NUM_SAMPLES = 5  # upper lines of the test split shown after training


@dataclasses.dataclass
class Generation:
  """The lower lines generated for one upper line, best first.

  Attributes:
    upper: the upper line as given.
    chars: its characters as the model read them ("<unk>" for unknown ones).
    lines: the generated lower lines (an unknown character written as metrics.UNK_CHAR).
    tokens: the same as lists of characters ("<unk>" kept).
    scores: their summed log-probabilities (eos included).
  """
  upper: str
  chars: list[str]
  lines: list[str]
  tokens: list[list[str]]
  scores: list[float]

  @property
  def unknown(self) -> list[str]:
    """Characters of the upper line outside the vocabulary."""
    typed = text_lib.couplet_tokenize(self.upper)
    return [c for c, seen in zip(typed, self.chars) if seen == metrics.UNK_TOKEN]


class CoupletTask(registry.Task):
  """Couplet generation (a registry.Task).

  Args:
    config: the run's Config (model: configs.LuongConfig / translation TransformerConfig, data:
      configs.CoupletDataConfig).
    data: already loaded CoupletData (None: loaded from config.data_dir when first needed).
    vocab: the vocabulary to use without loading the data (e.g. the copy in a run's workdir).
  """

  def __init__(self, config: Config, *, data: CoupletData | None = None,
               vocab: Vocab | None = None):
    super().__init__(config)
    self._data, self._vocab = data, vocab
    self._model = self._decoder = None
    self._steps_per_epoch = None
    self._eval_metrics = jax.jit(self.eval_metrics)

  # -- data ----------------------------------------------------------------------------------------

  @property
  def data(self) -> CoupletData:
    """The prepared couplet splits (the shipped sample when config.data_dir is None)."""
    if self._data is None:
      d = self.config.data
      self._data = CoupletData.load(source=self.config.data_dir, data_dir=d.prepared_dir,
                                    max_src_len=d.max_len, max_tgt_len=d.max_len,
                                    boundaries=d.buckets, min_freq=d.min_freq,
                                    max_size=d.max_vocab)
    return self._data

  @property
  def vocab(self) -> Vocab:
    return self._vocab if self._vocab is not None else self.data.src_vocab

  def train_batches(self):
    tc = self.config.train
    return self.data.train_batches(tc.batch_size, tc.seed)

  @property
  def steps_per_epoch(self) -> int:
    if self._steps_per_epoch is None:
      self._steps_per_epoch = self.train_batches().batches_per_epoch
    return self._steps_per_epoch

  def eval_batches(self, split: str):
    tc = self.config.train
    return self.data.eval_batches(split, tc.eval_batch_size or tc.batch_size)

  def example_batch(self) -> dict[str, np.ndarray]:
    """A full-width batch of one-character couplets: shapes for `init`, without the data."""
    size, width = self.config.train.batch_size, self.config.data.max_len
    src = np.zeros((size, width), np.int32)
    src[:, :2] = (UNK_ID, EOS_ID)
    tgt_in = np.zeros((size, width), np.int32)
    tgt_in[:, :2] = (BOS_ID, UNK_ID)
    lengths = np.full(size, 2, np.int32)
    return {"src": src, "src_len": lengths, "tgt_in": tgt_in, "tgt_out": src.copy(),
            "tgt_len": lengths, "index": np.arange(size, dtype=np.int32),
            "weight": np.ones(size, np.float32)}

  # -- model ---------------------------------------------------------------------------------------

  @property
  def model(self):
    """The models.Translator built from config.model."""
    if self._model is None:
      size = len(self.vocab)  # upper and lower lines share the vocabulary
      self._model = self.config.model.build(size, size, self.config.compute_dtype,
                                            self.config.storage_dtype)
    return self._model

  def init(self, rng: jax.Array, batch) -> Any:
    return self.model.init(rng, jnp.asarray(batch["src"]), jnp.asarray(batch["src_len"]),
                           jnp.asarray(batch["tgt_in"]))

  def loss(self, params, batch, rng):
    logits = self.model.logits(params, batch["src"], batch["src_len"], batch["tgt_in"], rng)
    return sequence_loss(logits, batch["tgt_out"], batch["tgt_len"], batch["weight"],
                         self.config.model.label_smoothing)

  # -- generation ----------------------------------------------------------------------------------

  @property
  def decoder(self) -> seq2seq_common.SearchDecoder:
    if self._decoder is None:
      self._decoder = seq2seq_common.SearchDecoder(self.model)
    return self._decoder

  def decode_batch(self, params, batch: dict[str, np.ndarray], *, constrained: bool = True,
                   beam_size: int | None = None) -> seq2seq_common.Hypotheses:
    """Beam search for a batch of upper lines ('src' (B, S) with eos, 'src_len' (B,)).

    With `constrained`, every hypothesis has exactly src_len - 1 characters; without, it ends
    wherever the model puts eos (at most S tokens, eos included).
    """
    d = self.config.data
    src_len = np.asarray(batch["src_len"], np.int32)
    return self.decoder(params, batch["src"], src_len, max_len=int(batch["src"].shape[1]),
                        beam_size=beam_size or d.beam_size, length_penalty=d.length_penalty,
                        exact_lens=src_len - 1 if constrained else None)

  def _source_batches(self, sources: Sequence[np.ndarray], index: np.ndarray):
    """Decoding batches of id sequences (eos included), shortest first, all padded to
    config.data.max_len: one compiled search per mode, and a batch of short lines still stops
    after a few steps."""
    order = np.argsort([len(s) for s in sources], kind="stable")
    batcher = Batcher({"src": [sources[i] for i in order]},
                      {"index": np.asarray(index, np.int32)[order]},
                      boundaries=(self.config.data.max_len,),
                      batch_size=self.config.data.decode_batch_size,
                      length_keys={"src": "src_len"}, process_index=0, process_count=1)
    return batcher.eval_batches()

  def decode_split(self, params, split: str, limit: int | None, *, constrained: bool = True
                   ) -> dict[int, tuple[list[list[int]], list[float]]]:
    """Beam search over the first `limit` couplets of `split` (None: all), by example index."""
    sources = self.data.splits[split].sequences["src"]
    count = len(sources) if limit is None else min(limit, len(sources))
    index = np.arange(count)
    batches = self._source_batches([sources[i] for i in index], index)
    return seq2seq_common.decode_batches(
        lambda b: self.decode_batch(params, b, constrained=constrained), batches)

  def score_split(self, params, split: str, limit: int | None, *, constrained: bool = True
                  ) -> tuple[metrics.CoupletScores, list[list[str]]]:
    """Decodes and scores the first `limit` couplets of `split`; also returns the best lines."""
    decoded = self.decode_split(params, split, limit, constrained=constrained)
    sources = self.data.splits[split].sequences["src"]
    references = self.data.references(split)
    order = sorted(decoded)
    best = [self.vocab.decode(decoded[i][0][0]) for i in order]
    uppers = [self.vocab.decode(sources[i]) for i in order]
    return metrics.score_lines(best, uppers, [references[i] for i in order]), best

  def perplexity(self, params, split: str) -> float:
    """exp of the mean NLL per target token over the whole split."""
    sums = None
    for batch in self.eval_batches(split):
      pairs = self._eval_metrics(params, batch)
      sums = pairs if sums is None else steps.add_metrics(sums, pairs)
    return math.exp(steps.means(sums)["nll"])

  def extra_eval(self, params, split: str) -> dict[str, float]:
    """Perplexity, and the decoding scores with and without the length constraint."""
    out = {"perplexity": self.perplexity(params, split)}
    d = self.config.data
    limit = d.dev_decode_examples if split == "dev" else d.test_decode_examples
    if limit == 0:
      return out
    for constrained, suffix in ((True, ""), (False, "_free")):
      scores, _ = self.score_split(params, split, limit, constrained=constrained)
      out.update({k: v for k, v in scores.as_dict(suffix).items() if not k.startswith("count")})
      out["decoded"] = float(scores.count)
    return out

  def encode_upper(self, upper: str) -> tuple[list[str], np.ndarray]:
    """The characters of an upper line as read ("<unk>" for unknown ones) and its ids with eos.

    Raises:
      ValueError: for a line with no characters or longer than config.data.max_len - 1.
    """
    chars = text_lib.couplet_tokenize(upper)
    most = self.config.data.max_len - 1
    if not chars:
      raise ValueError(f"the upper line {upper!r} has no characters")
    if len(chars) > most:
      raise ValueError(f"the upper line {upper!r} has {len(chars)} characters; this run reads at "
                       f"most {most} (data.max_len - 1)")
    ids = self.vocab.encode(chars, add_eos=True, as_numpy=True)
    return self.vocab.decode(ids), ids

  def generate(self, params, uppers: Sequence[str], *, num_results: int = 1,
               beam_size: int | None = None, constrained: bool = True) -> list[Generation]:
    """The num_results best lower lines of each upper line.

    Args:
      params: the model parameters.
      uppers: upper lines (characters, spaces ignored).
      num_results: how many lines per upper line (at most the beam size).
      beam_size: the beam (None: config.data.beam_size, raised to num_results if smaller).
      constrained: every line exactly as long as its upper line.
    """
    beam = max(beam_size or self.config.data.beam_size, num_results)
    encoded = [self.encode_upper(u) for u in uppers]
    batches = self._source_batches([ids for _, ids in encoded], np.arange(len(encoded)))
    decoded = seq2seq_common.decode_batches(
        lambda b: self.decode_batch(params, b, constrained=constrained, beam_size=beam), batches)
    out = []
    for i, (upper, (chars, _)) in enumerate(zip(uppers, encoded)):
      ids, scores = decoded[i]
      tokens = [self.vocab.decode(h) for h in ids[:num_results]]
      out.append(Generation(upper, chars, [metrics.line_text(t) for t in tokens], tokens,
                            scores[:num_results]))
    return out

  def cross_attention(self, params, generation: Generation, rank: int = 0) -> np.ndarray:
    """(T, S) attention over the upper line's characters and eos while generating each character
    of one generated line and its eos."""
    _, src = self.encode_upper(generation.upper)
    tgt_in = [BOS_ID] + self.vocab.encode(generation.tokens[rank])
    weights = self.model.cross_attention(params, src[None], np.array([len(src)], np.int32),
                                         np.asarray([tgt_in], np.int32))
    return np.asarray(weights[0], np.float32)

  def draw_heatmap(self, params, generation: Generation, path: str, rank: int = 0) -> str:
    """Saves the attention of one generated line over its upper line as a PNG heatmap."""
    weights = self.cross_attention(params, generation, rank)
    return plots.plot_attention(weights, generation.chars + ["</s>"],
                                generation.tokens[rank] + ["</s>"], path,
                                title=f"{self.config.model_name or 'couplet'}: attention",
                                xlabel="upper line", ylabel="generated lower line")

  def samples(self, params) -> list[dict[str, Any]]:
    """The demo line and the first NUM_SAMPLES upper lines of the test split, each generated with
    and without the length constraint (beam config.data.beam_size), with their references."""
    sources = self.data.splits["test"].sequences["src"]
    count = min(NUM_SAMPLES, len(sources))
    uppers = [DEMO_UPPER] + [metrics.line_text(self.vocab.decode(sources[i]))
                             for i in range(count)]
    references = [None] + self.data.references("test")[:count]
    constrained = self.generate(params, uppers)
    free = self.generate(params, uppers, constrained=False)
    return [{"upper": upper, "reference": ref, "lower": c.lines[0], "lower_free": f.lines[0]}
            for upper, ref, c, f in zip(uppers, references, constrained, free)]

  def on_train_end(self, params, workdir: str) -> None:
    """Keeps the vocabulary with the run (the couplet command needs nothing else) and writes
    samples.json."""
    self.vocab.save(os.path.join(workdir, VOCAB_FILE))
    with open(os.path.join(workdir, SAMPLES_FILE), "w", encoding="utf-8") as f:
      json.dump(self.samples(jax.device_get(params)), f, ensure_ascii=False, indent=2)
      f.write("\n")
