"""The English->French task: data, vocabularies, BLEU, translating texts, heatmaps.

The model, loss, perplexity and decoding are experiments.seq2seq's (Seq2SeqTask); this module adds
what is particular to fra-eng: the data (pipelines.tasks.TranslationData, one shared vocabulary
when the model shares its embeddings), BLEU of decoded dev and test sentences, translating texts
and the files written at the end of training.

Evaluation: the engine sums 'loss', 'nll' and 'token_accuracy' and Seq2SeqTask adds
'perplexity'; `decode_metrics` adds sacreBLEU of greedy decoding ('bleu'); on the test split also
beam search ('bleu_beam') and the multi-reference figures ('bleu_multiref', 'bleu_beam_multiref',
'multiref_sources'), see metrics.py. The vocabularies are the run's artifacts (saved into its
directory before the first step); at the end of training the test translations, the translations
of d2l's four sentences and their attention heatmaps are written there too.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Sequence

import numpy as np

from experiments import plots
from experiments.config import Config
from experiments.seq2seq.task import Seq2SeqTask
from experiments.task import pipeline_options
from experiments.translation import metrics as bleu_lib
from pipelines import datasets
from pipelines.tasks import TranslationData
from pipelines.tasks import TranslationOptions
from pipelines.tasks import read_records
from pipelines.vocab import UNK_ID, Vocab

TEST_TRANSLATIONS_FILE = "test_translations.tsv"
EXAMPLES_FILE = "examples.json"
HEATMAP_FILE = "attention.png"
# d2l's four sentences (d2l 10.7 / 11.4), in its tokenized spelling.
D2L_SENTENCES = ("Go .", "Good Night !", "I'm OK .", "I won !")


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
  """
  source: str
  source_tokens: list[str]
  unknown_source: list[str]
  tokens: list[str]
  alternatives: list[str]
  alternative_scores: list[float]
  attention: np.ndarray | None = None

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
    artifacts: {'src_vocab': Vocab, 'tgt_vocab': Vocab} to use instead of the data's (a run's
      saved copies; runs.load_run passes them).
  """

  ARTIFACTS = {"src_vocab": "src_vocab.json", "tgt_vocab": "tgt_vocab.json"}

  def __init__(self, config: Config, *, data: TranslationData | None = None,
               artifacts: dict[str, Vocab] | None = None):
    super().__init__(config, data=data, artifacts=artifacts)
    self._source_keys: dict[str, list[tuple[str, ...]]] = {}
    self.test_outputs: dict[str, list[str]] | None = None  # kept by decode_metrics('test')

  # -- data and vocabularies -----------------------------------------------------------------------

  def load_data(self) -> TranslationData:
    """The prepared fra-eng splits (the shipped sample when config.data_dir is None)."""
    d = self.config.data
    cls = SharedVocabTranslationData if self.config.model.shared_vocab else TranslationData
    return cls.load(source=self.config.data_dir, data_dir=d.prepared_dir,
                    **pipeline_options(d, TranslationOptions))

  def artifacts_from_data(self) -> dict[str, Vocab]:
    return {"src_vocab": self.data.src_vocab, "tgt_vocab": self.data.tgt_vocab}

  @property
  def src_vocab(self) -> Vocab:
    return self.artifact("src_vocab")

  @property
  def tgt_vocab(self) -> Vocab:
    return self.artifact("tgt_vocab")

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

  def _split_sources(self, split: str, indices: np.ndarray) -> list[np.ndarray]:
    src = self.data.splits["dev" if split == "dev" else split].sequences["src"]
    return [src[i] for i in indices]

  def _bleu_indices(self, split: str) -> np.ndarray:
    n = self.data.num_examples(split)
    d = self.config.data
    limit = d.dev_bleu_examples if split == "dev" else d.test_bleu_examples
    if limit is None or limit >= n:
      return np.arange(n)
    return np.sort(np.random.default_rng(0).permutation(n)[:limit])  # the same subset every time

  def source_keys(self, split: str) -> list[tuple[str, ...]]:
    """Per example of `split`, its full source tokens: the key that groups a sentence's
    translations. Read from the raw records, so two sentences that differ only in unknown or
    truncated words are not confused; checked against the split's references."""
    if split not in self._source_keys:
      data = self.data
      records = read_records(datasets.load(
          data.task, "validation" if split == "dev" else split, source=self.config.data_dir,
          data_dir=self.config.data.prepared_dir))
      keys, refs = [], []
      for record in records:
        src, tgt = data.tokenize(record[data.src_field]), data.tokenize(record[data.tgt_field])
        if src and tgt:  # the pipeline leaves out pairs with an empty side
          keys.append(tuple(src))
          refs.append(data.detokenize(tgt))
      if refs != data.references(split):
        raise ValueError(f"the raw {split} records do not line up with the prepared {split} "
                         f"split ({len(refs)} vs {data.num_examples(split)} examples)")
      self._source_keys[split] = keys
    return self._source_keys[split]

  def decode_metric_names(self, split: str) -> tuple[str, ...]:
    if split == "test":
      return ("bleu", "bleu_beam", "bleu_multiref", "bleu_beam_multiref", "multiref_sources")
    return ("bleu",)

  def decode_metrics(self, params, split: str) -> dict[str, float]:
    """sacreBLEU of greedy decoding; on the test split also beam search and multi-reference."""
    indices = self._bleu_indices(split)
    refs = [self.data.references(split)[i] for i in indices]
    sources = self._split_sources(split, indices)
    greedy = [self.target_text(h[0]) for h, _ in self.decode(params, sources)]
    out = {"bleu": bleu_lib.corpus_bleu(greedy, refs)}
    if split != "test":
      return out
    d = self.config.data
    beam = [self.target_text(h[0]) for h, _ in self.decode(
        params, sources, beam_size=d.beam_size, length_penalty=d.length_penalty)]
    out["bleu_beam"] = bleu_lib.corpus_bleu(beam, refs)
    keys = [self.source_keys(split)[i] for i in indices]
    out["bleu_multiref"], sources_n = bleu_lib.multi_reference_bleu(keys, greedy, refs)
    out["bleu_beam_multiref"], _ = bleu_lib.multi_reference_bleu(keys, beam, refs)
    out["multiref_sources"] = float(sources_n)
    self.test_outputs = {"source": [self.data.detokenize(list(k)) for k in keys],
                         "reference": refs, "greedy": greedy, "beam": beam}
    return out

  def target_text(self, ids) -> str:
    """Detokenized text of target ids (stops at eos; pad and bos left out)."""
    return TranslationData.detokenize(self.tgt_vocab.decode(ids))

  # -- translating texts ---------------------------------------------------------------------------

  def encode_source(self, text: str) -> tuple[list[str], list[int]]:
    """The tokens the model reads for `text` (cut to max_src_len - 1) and their ids with eos."""
    tokens = TranslationData.tokenize(text)[:self.config.data.max_src_len - 1]
    if not tokens:
      raise ValueError(f"the text {text!r} has no words to translate")
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
                     if with_attention else None)))
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
    """Saves the test translations, d2l's four sentences and their heatmaps."""
    if self.test_outputs is not None:
      with open(os.path.join(workdir, TEST_TRANSLATIONS_FILE), "w", encoding="utf-8") as f:
        f.write("source\treference\tgreedy\tbeam\n")
        for row in zip(*(self.test_outputs[k] for k in ("source", "reference", "greedy", "beam"))):
          f.write("\t".join(row) + "\n")
    d = self.config.data
    examples = {"greedy": {}, f"beam{d.beam_size}": {}}
    for beam, key in ((1, "greedy"), (d.beam_size, f"beam{d.beam_size}")):
      found = self.translate(params, D2L_SENTENCES, beam_size=beam, with_attention=beam == 1)
      paths = plots.numbered_paths(os.path.join(workdir, HEATMAP_FILE), len(found))
      for translation, path in zip(found, paths):
        examples[key][translation.source] = translation.text
        if beam == 1:
          self.draw_heatmap(translation, path)
    with open(os.path.join(workdir, EXAMPLES_FILE), "w", encoding="utf-8") as f:
      json.dump(examples, f, ensure_ascii=False, indent=2)
      f.write("\n")


