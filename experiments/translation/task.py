"""The English->French task: data, vocabularies or subwords, scores, translating texts, heatmaps.

The model, loss, perplexity and decoding are experiments.seq2seq's (Seq2SeqTask); this module adds
what is particular to fra-eng: the data (pipelines.tasks.TranslationData: SentencePiece subwords or
d2l's words, `config.data.tokenizer`), the scores of decoded dev and test sentences, translating
texts, scoring a user's own pairs, and the files written at the end of training.

Evaluation: the engine sums 'loss', 'nll' and 'token_accuracy' and Seq2SeqTask adds
'perplexity'; `decode_metrics` adds the scores of greedy decoding against the raw references,
every English sentence once against all of its translations (metrics.py): 'bleu' (sacreBLEU,
cased, 13a), 'bleu_lowercase', 'chrf'; on the test split also those of beam search ('bleu_beam',
'bleu_lowercase_beam', 'chrf_beam') and 'sources', the distinct English sentences scored. Their
sacreBLEU signatures are `metric_signatures(split)` (results.json's "signatures").

Artifacts (saved into the run's directory before the first step): the SentencePiece model
(sentencepiece.model), or with d2l's words the two vocabularies (src_vocab.json, tgt_vocab.json).
At the end of training the test translations, the translations of d2l's four sentences and their
attention heatmaps are written there too.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Sequence

import numpy as np

from experiments import plots
from experiments.config import Config
from experiments.seq2seq.task import Seq2SeqTask
from experiments.task import pipeline_options
from experiments.translation import configs
from experiments.translation import metrics
from pipelines import sources
from pipelines.tasks import AnyVocab
from pipelines.tasks import FraEngText
from pipelines.tasks import TranslationData
from pipelines.tasks import TranslationOptions
from pipelines.vocab import BOS_ID, PAD_ID, UNK_ID

TEST_TRANSLATIONS_FILE = "test_translations.tsv"
EXAMPLES_FILE = "examples.json"
HEATMAP_FILE = "attention.png"
# d2l's four sentences (d2l 10.7 / 11.4); d2l's word tokenizer reads them as d2l spelled them
# ("go .", "good night !" ...).
D2L_SENTENCES = ("Go.", "Good night!", "I'm OK.", "I won!")


def read_first_pairs(source: str | os.PathLike | None, count: int) -> list[dict[str, str]]:
  """The pairs of the first `count` lines of fra.txt, as d2l's `load_data_nmt(num_examples=count)`
  takes them: lines split at newlines, the first `count` lines read, those with a tab kept
  ({'en': first column, 'fr': second}, the raw texts; the tokenizer normalises them).

  Args:
    source: what `--data-dir` names (fra-eng.zip, its folder, a folder holding it, or fra.txt);
      None: the shipped sample (its first lines are not the full file's).
    count: d2l's num_examples, at least 1.

  Raises:
    SourceError: the source cannot be found or read (naming it); ValueError: count < 1, or no
      pair among the first lines.
  """
  if count < 1:
    raise ValueError(f"data.first_pairs: expected at least 1 line, got {count}")
  if source is None:
    path = sources.sample_path("fra_eng")
  else:
    path = sources.resolve("fra_eng", source, data_dir=sources.default_data_dir())
  files = sources.read_files(path, lambda rel: rel.rsplit("/", 1)[-1] == "fra.txt")
  if len(files) != 1:
    raise sources.SourceError(f"{path}: expected one fra.txt, found {sorted(files) or 'none'}")
  [(name, data)] = files.items()
  pairs = []
  for line in sources.decode_utf8(data, f"{path}:{name}").split("\n")[:count]:
    columns = line.rstrip("\r").split("\t")
    if len(columns) >= 2:
      pairs.append({"en": columns[0], "fr": columns[1]})
  if not pairs:
    raise ValueError(f"{path}: no English<TAB>French pair in its first {count} lines")
  return pairs


class SharedVocabTranslationData(TranslationData):
  """TranslationData with one vocabulary for English and French (for shared embeddings).

  Its encoded splits are cached under their own file name, beside the two-vocabulary cache.
  """
  shared_vocab = True

  def cache_path(self, folder: str | os.PathLike) -> str:
    stem, ext = os.path.splitext(super().cache_path(folder))
    return f"{stem}_shared{ext}"


# ---- what `translate` returns


@dataclasses.dataclass
class Translation:
  """The translation of one input.

  Attributes:
    source: the input text.
    source_tokens: the tokens the model read (cut to the maximum length), then '<eos>'.
    unknown_source: the source tokens outside the vocabulary (read as <unk>).
    tokens: the best hypothesis's target tokens, then '<eos>' if it ended.
    alternatives: the detokenized hypotheses, best first (alternatives[0] is `text`).
    alternative_scores: their ranking scores.
    attention: float (len(tokens), len(source_tokens)) source-target weights of the best
      hypothesis (row t: the weights while predicting tokens[t]), or None if not asked for.
    source_ids: the source ids the model read (eos included).
    target_ids: the best hypothesis's target ids (without bos and eos).
  """
  source: str
  source_tokens: list[str]
  unknown_source: list[str]
  tokens: list[str]
  alternatives: list[str]
  alternative_scores: list[float]
  attention: np.ndarray | None = None
  source_ids: list[int] = dataclasses.field(default_factory=list)
  target_ids: list[int] = dataclasses.field(default_factory=list)

  @property
  def text(self) -> str:
    return self.alternatives[0]

  @property
  def score(self) -> float:
    return self.alternative_scores[0]


# ---- the task


class TranslationTask(Seq2SeqTask):
  """English -> French translation with a Bahdanau seq2seq or a Transformer.

  Args:
    config: the run's Config (model: a seq2seq.configs model config, data:
      configs.TranslationDataConfig).
    data: already loaded TranslationData (None: loaded from config.data_dir when first needed).
    artifacts: {'subwords': SubwordVocab} or {'src_vocab': Vocab, 'tgt_vocab': Vocab} to use
      instead of the data's (a run's saved copies; runs.load_run passes them).
  """

  ARTIFACTS = {"subwords": "sentencepiece.model", "src_vocab": "src_vocab.json",
               "tgt_vocab": "tgt_vocab.json"}

  def __init__(self, config: Config, *, data: TranslationData | None = None,
               artifacts: dict[str, AnyVocab] | None = None):
    super().__init__(config, data=data, artifacts=artifacts)
    self.test_outputs: dict[str, list[str]] | None = None  # kept by decode_metrics('test')
    self._signatures: dict[str, dict[str, str]] = {}  # split -> metric -> sacreBLEU signature

  # -- data, vocabularies and text -----------------------------------------------------------------

  @property
  def subwords(self) -> bool:
    """Whether the run reads SentencePiece pieces (else d2l's words)."""
    return self.config.data.tokenizer == "sentencepiece"

  def load_data(self) -> TranslationData:
    """The prepared fra-eng splits (the shipped sample when config.data_dir is None), or with
    `data.first_pairs` the first pairs of the file as every split (see `read_first_pairs`)."""
    d = self.config.data
    shared_words = self.config.model.shared_vocab and not self.subwords
    cls = SharedVocabTranslationData if shared_words else TranslationData
    options = pipeline_options(d, TranslationOptions)
    if getattr(d, "first_pairs", None) is not None:
      pairs = read_first_pairs(self.config.data_dir, d.first_pairs)
      return cls.from_records({"train": pairs, "dev": pairs, "test": pairs}, **options)
    return cls.load(source=self.config.data_dir, data_dir=d.prepared_dir, **options)

  def artifacts_from_data(self) -> dict[str, AnyVocab]:
    if self.subwords:
      return {"subwords": self.data.src_vocab}
    return {"src_vocab": self.data.src_vocab, "tgt_vocab": self.data.tgt_vocab}

  @property
  def src_vocab(self) -> AnyVocab:
    return self.artifact("subwords" if self.subwords else "src_vocab")

  @property
  def tgt_vocab(self) -> AnyVocab:
    return self.artifact("subwords" if self.subwords else "tgt_vocab")

  @property
  def text(self) -> FraEngText:
    """The run's tokenizer and detokenizer: SentencePiece pieces, or d2l's words."""
    return FraEngText(self.artifact("subwords") if self.subwords else None)

  def target_text(self, ids) -> str:
    """Detokenized text of target ids (stops at eos; pad and bos left out)."""
    return self.text.detokenize(self.tgt_vocab.decode(ids))

  @property
  def suppressed_ids(self) -> tuple[int, ...]:
    """Subword targets never hold pad, unk or bos, so decoding never emits them (word-level
    targets do hold unk, which the model may predict as d2l's does)."""
    return (PAD_ID, UNK_ID, BOS_ID) if self.subwords else ()

  @property
  def max_source_len(self) -> int:
    return self.config.data.max_src_len

  @property
  def max_target_len(self) -> int:
    return self.config.data.max_tgt_len

  @property
  def source_boundaries(self) -> tuple[int, ...]:
    """The source widths of the training buckets: decoding compiles no other shapes."""
    d = self.config.data
    return tuple(TranslationOptions(**pipeline_options(d, TranslationOptions)).boundaries["src"])

  @property
  def decode_batch_size(self) -> int:
    return self.config.data.decode_batch_size

  # -- scores --------------------------------------------------------------------------------------

  def _score_indices(self, split: str) -> np.ndarray:
    n = self.data.num_examples(split)
    d = self.config.data
    limit = d.dev_bleu_examples if split == "dev" else d.test_bleu_examples
    if limit is None or limit >= n:
      return np.arange(n)
    return np.sort(np.random.default_rng(0).permutation(n)[:limit])  # the same subset every time

  def decode_metric_names(self, split: str) -> tuple[str, ...]:
    if split == "test":
      return (*metrics.METRICS, *(f"{name}_beam" for name in metrics.METRICS), "sources")
    return metrics.METRICS

  def decode_metrics(self, params, split: str) -> dict[str, float]:
    """The scores of greedy decoding; on the test split also of beam search (see the module
    docstring)."""
    indices = self._score_indices(split)
    refs = [self.data.references(split)[i] for i in indices]
    sources = [self.data.sources(split)[i] for i in indices]
    src_ids = [self.data.splits[split].sequences["src"][i] for i in indices]
    greedy = [self.target_text(h[0]) for h, _ in self.decode(params, src_ids)]
    scores = metrics.score_translations(greedy, refs, sources)
    out, signatures = scores.figures(), dict(scores.signatures)
    if split == "test":
      d = self.config.data
      beam = [self.target_text(h[0]) for h, _ in self.decode(
          params, src_ids, beam_size=d.beam_size, length_penalty=d.length_penalty)]
      beam_scores = metrics.score_translations(beam, refs, sources)
      out.update({f"{name}_beam": value for name, value in beam_scores.figures().items()})
      signatures.update({f"{name}_beam": sig for name, sig in beam_scores.signatures.items()})
      out["sources"] = float(scores.sources)
      self.test_outputs = {"source": sources, "reference": refs, "greedy": greedy, "beam": beam}
    self._signatures[split] = signatures
    return out

  def metric_signatures(self, split: str) -> dict[str, str]:
    return dict(self._signatures.get(split, {}))

  def score_pairs(self, params, sources: Sequence[str], references: Sequence[str], *,
                  beam_size: int = 1, length_penalty: float | None = None,
                  progress: bool = False) -> metrics.Scores:
    """Translates English sentences and scores the outputs against their French references.

    Each distinct source is translated once and scored once, against all of its references (a
    source given on several lines has several references).

    Args:
      params: the model parameters.
      sources: n English texts.
      references: n French texts, line i a translation of sources[i].
      beam_size: 1 for greedy search, else beam search.
      length_penalty: GNMT's alpha for beam search (None: the run's).
      progress: a progress bar over the decoding batches on standard error.
    """
    if len(sources) != len(references):
      raise ValueError(f"sources and references must have the same length, got {len(sources)} "
                       f"and {len(references)}")
    distinct = list(dict.fromkeys(sources))
    found = self.translate(params, distinct, beam_size=beam_size, length_penalty=length_penalty,
                           progress=progress)
    output = {source: translation.text for source, translation in zip(distinct, found)}
    return metrics.score_translations([output[s] for s in sources], references, sources)

  # -- translating texts ---------------------------------------------------------------------------

  def encode_source(self, text: str) -> tuple[list[str], list[int]]:
    """The tokens the model reads for `text` (cut to max_src_len - 1) and their ids with eos."""
    tokens = self.text.tokenize(text)[:self.config.data.max_src_len - 1]
    if not tokens:
      raise ValueError(f"the text {text!r} has nothing to translate")
    return tokens, self.src_vocab.encode(tokens, add_eos=True)

  def translate(self, params, texts: Sequence[str], *, beam_size: int = 1, num_results: int = 1,
                length_penalty: float | None = None, with_attention: bool = False,
                progress: bool = False) -> list[Translation]:
    """Translates each text (greedy for beam_size 1), optionally with the attention weights
    (and a progress bar on standard error over the decoding batches)."""
    if length_penalty is None:
      length_penalty = self.config.data.length_penalty if beam_size > 1 else 0.0
    encoded = [self.encode_source(t) for t in texts]
    decoded = self.decode(params, [np.asarray(ids) for _, ids in encoded], beam_size=beam_size,
                          length_penalty=length_penalty, progress=progress)
    out = []
    for text, (tokens, ids), (found, scores) in zip(texts, encoded, decoded):
      best = found[0]
      target = self.tgt_vocab.decode(best) + (["<eos>"] if len(best) < self.max_target_len
                                              else [])
      out.append(Translation(
          source=text, source_tokens=tokens + ["<eos>"],
          unknown_source=[t for t, i in zip(tokens, ids) if i == UNK_ID], tokens=target,
          alternatives=[self.target_text(h) for h in found[:num_results]],
          alternative_scores=scores[:num_results],
          attention=(self.attention(params, ids, best)[:len(target)]
                     if with_attention else None),
          source_ids=list(ids), target_ids=list(best)))
    return out

  def draw_heatmap(self, translation: Translation, path: str) -> str:
    """Saves the translation's source-target attention as a PNG."""
    if translation.attention is None:
      raise ValueError("the translation carries no attention weights; translate it with "
                       "with_attention=True")
    title = f"{self.config.model_name or 'translation'}: {translation.source} -> {translation.text}"
    return plots.plot_attention(translation.attention, translation.source_tokens,
                                translation.tokens, path, title=title,
                                xlabel="source (English)", ylabel="output (French)")

  # -- end of training -----------------------------------------------------------------------------

  def on_train_end(self, params, workdir: str) -> None:
    """Saves the test translations, d2l's four sentences and their heatmaps (none for a model
    without attention, models.PlainTranslator)."""
    if self.test_outputs is not None:
      with open(os.path.join(workdir, TEST_TRANSLATIONS_FILE), "w", encoding="utf-8") as f:
        f.write("source\treference\tgreedy\tbeam\n")
        for row in zip(*(self.test_outputs[k] for k in ("source", "reference", "greedy", "beam"))):
          f.write("\t".join(row) + "\n")
    d = self.config.data
    examples = {"greedy": {}, f"beam{d.beam_size}": {}}
    heatmaps = self.model.has_attention
    for beam, key in ((1, "greedy"), (d.beam_size, f"beam{d.beam_size}")):
      found = self.translate(params, D2L_SENTENCES, beam_size=beam,
                             with_attention=heatmaps and beam == 1)
      paths = plots.numbered_paths(os.path.join(workdir, HEATMAP_FILE), len(found))
      for translation, path in zip(found, paths):
        examples[key][translation.source] = translation.text
        if heatmaps and beam == 1:
          self.draw_heatmap(translation, path)
    chapter = configs.CHAPTER_EXAMPLES.get(self.config.model_name)
    if chapter:  # what the chapter this run follows printed for the same sentences
      examples["chapter"] = dict(chapter)
    with open(os.path.join(workdir, EXAMPLES_FILE), "w", encoding="utf-8") as f:
      json.dump(examples, f, ensure_ascii=False, indent=2)
      f.write("\n")


