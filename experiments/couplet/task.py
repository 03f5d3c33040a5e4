"""The couplet task: upper line -> lower line, for the engine, the evaluation and the command.

The model, loss, perplexity and decoding are experiments.seq2seq's (Seq2SeqTask) over one shared
character vocabulary (pipelines.tasks.CoupletData: upper and lower lines use the same one). Its
batches are Seq2SeqTask's, with 'tgt_len' == 'src_len' and an 'index'. The vocabulary is the run's
artifact (saved into its directory before the first step), so a task built to generate from a
trained run never reads the couplets.

Evaluation, after the engine's teacher-forced metrics and Seq2SeqTask's perplexity:
  bleu, bleu1, bleu2,   beam search (beam config.data.beam_size) with the length constraint
  exact_length, the     (zoo.search exact_lens = the upper line's length), scored by
  form rates            experiments.couplet.metrics over the first dev/test_decode_examples
                        couplets of the split (by index), with `decoded` their number;
  *_free                the same without the constraint (eos may come anywhere);
  ref_*                 the form rates of the reference lines of those couplets.
Decoding can also keep the upper line's punctuation, forbid same-position copies and keep its
repetition pattern (form.FormOptions; zoo.search forced_tokens / banned_tokens / tied_positions /
distinct_positions): the couplet command, report.py and table.py take them as flags.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Sequence

import jax
import numpy as np

from experiments import plots
from experiments.config import Config
from experiments.couplet import form
from experiments.couplet import metrics
from experiments.couplet.form import FormOptions
from experiments.seq2seq.task import Decoded
from experiments.seq2seq.task import Seq2SeqTask
from experiments.task import pipeline_options
from pipelines import text as text_lib
from pipelines.tasks import CoupletData
from pipelines.tasks import CoupletOptions
from pipelines.vocab import Vocab

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
    return [c for c, seen in zip(typed, self.chars) if seen == form.UNK_TOKEN]


class CoupletTask(Seq2SeqTask):
  """Couplet generation.

  Args:
    config: the run's Config (model: a seq2seq.configs model config, data:
      configs.CoupletDataConfig).
    data: already loaded CoupletData (None: loaded from config.data_dir when first needed).
    artifacts: {'vocab': Vocab} to use instead of the data's (e.g. the copy in a run's workdir).
  """

  ARTIFACTS = {"vocab": "vocab.json"}

  def __init__(self, config: Config, *, data: CoupletData | None = None,
               artifacts: dict[str, Vocab] | None = None):
    super().__init__(config, data=data, artifacts=artifacts)
    self._punct_ids = None

  # -- data and vocabulary -------------------------------------------------------------------------

  def load_data(self) -> CoupletData:
    """The prepared couplet splits (the shipped sample when config.data_dir is None)."""
    d = self.config.data
    return CoupletData.load(source=self.config.data_dir, data_dir=d.prepared_dir,
                            max_src_len=d.max_len, max_tgt_len=d.max_len,
                            **pipeline_options(d, CoupletOptions))

  def artifacts_from_data(self) -> dict[str, Vocab]:
    return {"vocab": self.data.src_vocab}

  @property
  def vocab(self) -> Vocab:
    """The character vocabulary of upper and lower lines."""
    return self.artifact("vocab")

  src_vocab = vocab
  tgt_vocab = vocab

  @property
  def max_source_len(self) -> int:
    return self.config.data.max_len

  max_target_len = max_source_len

  @property
  def source_boundaries(self) -> tuple[int, ...]:
    """Every decoding batch padded to max_len: one compiled search per mode."""
    return (self.config.data.max_len,)

  @property
  def decode_batch_size(self) -> int:
    return self.config.data.decode_batch_size

  # -- generation ----------------------------------------------------------------------------------

  @property
  def punct_ids(self) -> np.ndarray:
    """int32 (P,): the vocabulary's punctuation ids (what force_punct bans off its positions)."""
    if self._punct_ids is None:
      self._punct_ids = form.punctuation_ids(self.vocab.tokens)
    return self._punct_ids

  def decode_lines(self, params, sources: Sequence[np.ndarray], *,
                   options: FormOptions = FormOptions(), beam_size: int | None = None,
                   length_penalty: float | None = None,
                   progress: bool = False) -> list[Decoded]:
    """Beam search for upper lines given as ids with eos (see Seq2SeqTask.decode); beam_size and
    length_penalty None: the run's config.data.beam_size and config.data.length_penalty.

    options.exact_length: every hypothesis has exactly as many characters as its upper line, else
    it ends wherever the model puts eos (at most max_len tokens, eos included); force_punct and
    no_copy: the constraints of form.decoding_constraints; keep_pattern: those of
    form.pattern_constraints.
    """
    d = self.config.data
    forced = banned = tied = distinct = None
    if options.force_punct or options.no_copy or options.keep_pattern:
      uppers = [self.vocab.decode(ids) for ids in sources]  # the tokens the rules read
    if options.force_punct or options.no_copy:
      pairs = [form.decoding_constraints(upper, ids, self.punct_ids,
                                         force_punct=options.force_punct,
                                         no_copy=options.no_copy)
               for upper, ids in zip(uppers, sources)]
      forced, banned = [f for f, _ in pairs], [b for _, b in pairs]
    if options.keep_pattern:
      pairs = [form.pattern_constraints(upper) for upper in uppers]
      tied, distinct = [t for t, _ in pairs], [flags for _, flags in pairs]
    return self.decode(params, sources, beam_size=beam_size or d.beam_size,
                       length_penalty=(d.length_penalty if length_penalty is None
                                       else length_penalty),
                       exact_length=options.exact_length,
                       forced_tokens=forced, banned_tokens=banned, tied_positions=tied,
                       distinct_positions=distinct, progress=progress)

  def decode_split(self, params, split: str, limit: int | None, *,
                   options: FormOptions = FormOptions(),
                   beam_size: int | None = None) -> list[Decoded]:
    """Beam search (beam_size None: config.data.beam_size) over the first `limit` couplets of
    `split` (None: all), in index order."""
    sources = self.data.splits[split].sequences["src"]
    count = len(sources) if limit is None else min(limit, len(sources))
    return self.decode_lines(params, [sources[i] for i in range(count)], options=options,
                             beam_size=beam_size)

  def score_split(self, params, split: str, limit: int | None, *,
                  options: FormOptions = FormOptions(), beam_size: int | None = None
                  ) -> tuple[metrics.CoupletScores, list[list[str]]]:
    """Decodes (beam_size None: config.data.beam_size) and scores the first `limit` couplets of
    `split`; also returns the best lines.

    The references' form rates read them as the model does ("<unk>" for unknown characters).
    """
    decoded = self.decode_split(params, split, limit, options=options, beam_size=beam_size)
    return self.score_decoded(split, decoded)

  def score_decoded(self, split: str, decoded: Sequence[Decoded], *, oracle: bool = False
                    ) -> tuple[metrics.CoupletScores, list[list[str]]]:
    """Scores the n-best lists of the first len(decoded) couplets of `split` (decode_split's);
    also returns the lines scored.

    The line scored for each couplet is its best-scored hypothesis, or with `oracle` the one
    closest to the reference (metrics.oracle_lines: a bound on reranking, which reads the
    reference).
    """
    sequences = self.data.splits[split].sequences
    count = len(decoded)
    references = self.data.references(split)[:count]
    if oracle:
      nbest = [[self.vocab.decode(h) for h in hyps] for hyps, _ in decoded]
      lines = metrics.oracle_lines(nbest, references)
    else:
      lines = [self.vocab.decode(hyps[0]) for hyps, _ in decoded]
    uppers = [self.vocab.decode(sequences["src"][i]) for i in range(count)]
    reference_tokens = [self.vocab.decode(sequences["tgt_out"][i]) for i in range(count)]
    return metrics.score_lines(lines, uppers, references, reference_tokens), lines

  def _decode_limit(self, split: str) -> int | None:
    d = self.config.data
    return d.dev_decode_examples if split == "dev" else d.test_decode_examples

  def decode_metric_names(self, split: str) -> tuple[str, ...]:
    if self._decode_limit(split) == 0:
      return ()
    names = [name for suffix in ("", "_free") for name in metrics.CoupletScores.names(suffix)]
    return (*names, *metrics.REFERENCE_NAMES, "decoded")

  def decode_metrics(self, params, split: str) -> dict[str, float]:
    """The decoding scores with and without the length constraint, and the references' rates."""
    limit = self._decode_limit(split)
    if limit == 0:
      return {}
    out = {}
    for exact_length, suffix in ((True, ""), (False, "_free")):
      scores, _ = self.score_split(params, split, limit,
                                   options=FormOptions(exact_length=exact_length))
      rates = scores.as_dict(suffix)
      out.update({name: rates[name]
                  for name in metrics.CoupletScores.names(suffix) + metrics.REFERENCE_NAMES})
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
               beam_size: int | None = None, options: FormOptions = FormOptions(),
               length_penalty: float | None = None,
               progress: bool = False) -> list[Generation]:
    """The num_results best lower lines of each upper line.

    Args:
      params: the model parameters.
      uppers: upper lines (characters, spaces ignored).
      num_results: how many lines per upper line (at most the beam size).
      beam_size: the beam (None: config.data.beam_size, raised to num_results if smaller).
      options: what of the form decoding enforces (default: the exact length only).
      length_penalty: GNMT's alpha (None: config.data.length_penalty).
      progress: a progress bar over the decoding batches on standard error.
    """
    beam = max(beam_size or self.config.data.beam_size, num_results)
    encoded = [self.encode_upper(u) for u in uppers]
    decoded = self.decode_lines(params, [ids for _, ids in encoded], options=options,
                                beam_size=beam, length_penalty=length_penalty,
                                progress=progress)
    out = []
    for upper, (chars, _), (ids, scores) in zip(uppers, encoded, decoded):
      tokens = [self.vocab.decode(h) for h in ids[:num_results]]
      out.append(Generation(upper, chars, [metrics.line_text(t) for t in tokens], tokens,
                            scores[:num_results]))
    return out

  def cross_attention(self, params, generation: Generation, rank: int = 0) -> np.ndarray:
    """(T, S) attention over the upper line's characters and eos while generating each character
    of one generated line and its eos."""
    _, src = self.encode_upper(generation.upper)
    return self.attention(params, src, self.vocab.encode(generation.tokens[rank]))

  def ended_tokens(self, tokens: Sequence[str]) -> list[str]:
    """A generated line's characters and its eos '</s>', the rows of its attention; a line cut at
    the length limit (max_target_len characters, possible with `FormOptions(exact_length=False)`)
    has no eos, and no eos row."""
    return list(tokens) + (["</s>"] if len(tokens) < self.max_target_len else [])

  def draw_heatmap(self, params, generation: Generation, path: str, rank: int = 0) -> str:
    """Saves the attention of one generated line over its upper line as a PNG heatmap."""
    rows = self.ended_tokens(generation.tokens[rank])
    weights = self.cross_attention(params, generation, rank)[:len(rows)]  # (T (+ 1), S)
    return plots.plot_attention(weights, generation.chars + ["</s>"], rows, path,
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
    free = self.generate(params, uppers, options=FormOptions(exact_length=False))
    return [{"upper": upper, "reference": ref, "lower": c.lines[0], "lower_free": f.lines[0]}
            for upper, ref, c, f in zip(uppers, references, constrained, free)]

  def on_train_end(self, params, workdir: str) -> None:
    """Writes samples.json: a few test couplets generated at the end of training."""
    with open(os.path.join(workdir, SAMPLES_FILE), "w", encoding="utf-8") as f:
      json.dump(self.samples(jax.device_get(params)), f, ensure_ascii=False, indent=2)
      f.write("\n")
