"""The English->French task: data, model, masked sequence loss, decoding, BLEU and heatmaps.

Batches come from pipelines.tasks.TranslationData: 'src' int32 (B, S) (source ids and eos),
'src_len' (B,), 'tgt_in' (B, T) (bos and the target ids), 'tgt_out' (B, T) (the target ids and
eos), 'tgt_len' (B,), 'weight' (B,). The model (configs.*Config.build) reads src and tgt_in and
predicts tgt_out (teacher forcing); positions at or after tgt_len and filler rows weigh nothing.

Evaluation: the engine sums the batch metrics ('loss' the training objective, 'nll' the plain
cross-entropy per target token, 'token_accuracy'); `extra_eval` adds 'perplexity' = exp(nll over
the split) and sacreBLEU of greedy decoding ('bleu'); on the test split also beam search
('bleu_beam') and the multi-reference figures ('bleu_multiref', 'bleu_beam_multiref',
'multiref_sources'), see metrics.py. At the end of training the vocabularies, the test
translations, the translations of d2l's four sentences and their attention heatmaps are written
into the run's directory, so `translate` needs nothing but the directory.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from experiments import plots
from experiments import registry
from experiments import steps
from experiments import trainer
from experiments.config import Config
from experiments.translation import metrics as bleu_lib
from experiments.translation.decode import Decoder
from pipelines import datasets
from pipelines.tasks import TranslationData
from pipelines.tasks import TranslationOptions
from pipelines.tasks import read_records
from pipelines.vocab import BOS_ID, UNK_ID, Vocab

SRC_VOCAB_FILE, TGT_VOCAB_FILE = "src_vocab.json", "tgt_vocab.json"
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


# ---- the loss


def token_losses(logits: jax.Array, targets: jax.Array,
                 label_smoothing: float = 0.0) -> tuple[jax.Array, jax.Array]:
  """Per-token cross-entropies, computed in float32.

  Args:
    logits: float (B, T, V).
    targets: int (B, T) target ids.
    label_smoothing: eps: the target distribution is (1 - eps) on the target plus eps / V on every
      token.

  Returns:
    (objective (B, T), nll (B, T)): the label-smoothed cross-entropy that training minimises, and
    the plain negative log-likelihood of the target (the same when eps == 0).
  """
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)  # (B, T, V)
  nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # (B, T)
  if not label_smoothing:
    return nll, nll
  uniform = -jnp.mean(log_probs, axis=-1)  # (B, T): cross-entropy against the uniform target
  return (1.0 - label_smoothing) * nll + label_smoothing * uniform, nll


def target_weights(lengths: jax.Array, width: int, weight: jax.Array) -> jax.Array:
  """float32 (B, T): the example's weight on its first lengths[b] positions, 0 on padding."""
  positions = jnp.arange(width)[None, :]  # (1, T)
  return (positions < lengths[:, None]).astype(jnp.float32) * weight[:, None].astype(jnp.float32)


def sequence_loss(logits: jax.Array, targets: jax.Array, lengths: jax.Array, weight: jax.Array,
                  label_smoothing: float = 0.0) -> tuple[jax.Array, registry.Metrics]:
  """Masked sequence cross-entropy: the mean over the real target tokens of the batch.

  Args:
    logits: float (B, T, V).
    targets: int (B, T), padded with anything (padding positions weigh nothing).
    lengths: int (B,), real target tokens per row (eos included).
    weight: float (B,), 1 for real examples and 0 for filler rows.
    label_smoothing: see token_losses.

  Returns:
    (loss, metrics): the weighted mean objective per token, and metric pairs 'loss' (objective),
    'nll' (plain cross-entropy) and 'token_accuracy' (argmax == target), each (total, tokens).
  """
  objective, nll = token_losses(logits, targets, label_smoothing)
  weights = target_weights(lengths, targets.shape[1], weight)  # (B, T)
  correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32)
  loss_pair = steps.weighted_sum(objective, weights)
  metrics = {"loss": loss_pair, "nll": steps.weighted_sum(nll, weights),
             "token_accuracy": steps.weighted_sum(correct, weights)}
  return loss_pair[0] / jnp.maximum(loss_pair[1], 1.0), metrics


@functools.partial(jax.jit, static_argnums=0)
def _nll_sums(model, params, batch) -> tuple[jax.Array, jax.Array]:
  """(summed nll of the real target tokens, their number) of one batch, without dropout."""
  logits = model.logits(params, batch["src"], batch["src_len"], batch["tgt_in"])
  _, nll = token_losses(logits, batch["tgt_out"])
  return steps.weighted_sum(nll, target_weights(batch["tgt_len"], batch["tgt_out"].shape[1],
                                                batch["weight"]))


@functools.partial(jax.jit, static_argnums=0)
def _cross_attention(model, params, src, src_len, tgt_in) -> jax.Array:
  return model.cross_attention(params, src, src_len, tgt_in)


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


class TranslationTask(registry.Task):
  """English -> French translation with a Bahdanau seq2seq or a Transformer (a registry.Task).

  Args:
    config: the run's Config (model: configs.BahdanauConfig or TransformerConfig, data:
      configs.TranslationDataConfig).
    data: already loaded TranslationData (None: loaded from config.data_dir when first needed).
    vocabs: (source, target) vocabularies to use without loading the data (a run's saved copies).
  """

  def __init__(self, config: Config, *, data: TranslationData | None = None,
               vocabs: tuple[Vocab, Vocab] | None = None):
    super().__init__(config)
    self._data = data
    self._vocabs = vocabs
    self._model = None
    self._decoder = None
    self._steps_per_epoch = None
    self._source_keys: dict[str, list[tuple[str, ...]]] = {}
    self.test_outputs: dict[str, list[str]] | None = None  # kept by extra_eval('test')

  # -- data ----------------------------------------------------------------------------------------

  @property
  def data(self) -> TranslationData:
    """The prepared fra-eng splits (the shipped sample when config.data_dir is None)."""
    if self._data is None:
      d = self.config.data
      cls = SharedVocabTranslationData if self.config.model.shared_vocab else TranslationData
      self._data = cls.load(source=self.config.data_dir, data_dir=d.prepared_dir,
                            max_src_len=d.max_src_len, max_tgt_len=d.max_tgt_len,
                            boundaries=d.buckets, min_freq=d.min_freq, max_size=d.max_vocab)
    return self._data

  @property
  def src_vocab(self) -> Vocab:
    return self._vocabs[0] if self._vocabs is not None else self.data.src_vocab

  @property
  def tgt_vocab(self) -> Vocab:
    return self._vocabs[1] if self._vocabs is not None else self.data.tgt_vocab

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
    """A full-size batch of one-token pairs: shapes for `init`, without reading the data."""
    d, size = self.config.data, self.config.train.batch_size
    tgt = np.zeros((size, d.max_tgt_len), np.int32)
    return {"src": np.full((size, d.max_src_len), UNK_ID, np.int32),
            "src_len": np.ones(size, np.int32), "tgt_in": tgt, "tgt_out": tgt,
            "tgt_len": np.ones(size, np.int32), "weight": np.ones(size, np.float32)}

  # -- model ---------------------------------------------------------------------------------------

  @property
  def model(self):
    """The configs.*Config.build translator for the vocabulary sizes."""
    if self._model is None:
      self._model = self.config.model.build(len(self.src_vocab), len(self.tgt_vocab),
                                            self.config.compute_dtype, self.config.storage_dtype)
    return self._model

  @property
  def decoder(self) -> Decoder:
    if self._decoder is None:
      self._decoder = Decoder(self.model, self.config.data.max_tgt_len)
    return self._decoder

  def init(self, rng: jax.Array, batch) -> Any:
    return self.model.init(rng, jnp.asarray(batch["src"]), jnp.asarray(batch["src_len"]),
                           jnp.asarray(batch["tgt_in"]))

  def loss(self, params, batch, rng):
    logits = self.model.logits(params, batch["src"], batch["src_len"], batch["tgt_in"], rng)
    return sequence_loss(logits, batch["tgt_out"], batch["tgt_len"], batch["weight"],
                         self.config.model.label_smoothing)

  # -- decoding ------------------------------------------------------------------------------------

  def _src_width(self, longest: int) -> int:
    """The padded source width for a batch whose longest source has `longest` ids."""
    d = self.config.data
    buckets = TranslationOptions(max_src_len=d.max_src_len, max_tgt_len=d.max_tgt_len,
                                 boundaries=d.buckets).boundaries["src"]
    return next((b for b in buckets if b >= longest), d.max_src_len)

  def decode_ids(self, params, src: Sequence[np.ndarray], beam_size: int = 1,
                 length_penalty: float = 0.0) -> list[tuple[list[np.ndarray], list[float]]]:
    """Decodes source id sequences (each ending with eos) in length-sorted batches.

    Returns:
      Per source, (the hypotheses' target ids without eos, their scores), best first, beam_size
      of each.
    """
    size = self.config.data.decode_batch_size
    order = np.argsort([len(s) for s in src], kind="stable")
    out: list[Any] = [None] * len(src)
    for start in range(0, len(order), size):
      rows = order[start:start + size]
      width = self._src_width(max(len(src[i]) for i in rows))
      batch = np.zeros((size, width), np.int32)  # always `size` rows: one compiled shape
      lengths = np.ones(size, np.int32)
      for r, i in enumerate(rows):
        ids = np.asarray(src[i][:width])
        batch[r, :len(ids)], lengths[r] = ids, len(ids)
      batch[len(rows):], lengths[len(rows):] = batch[0], lengths[0]  # filler rows
      hyps = self.decoder(params, batch, lengths, beam_size, length_penalty)
      for r, i in enumerate(rows):
        out[i] = ([hyps.tokens[r, w, :hyps.lengths[r, w]] for w in range(beam_size)],
                  [float(x) for x in hyps.scores[r]])
    return out

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

  def extra_eval(self, params, split: str) -> dict[str, float]:
    """Perplexity over the split and sacreBLEU of decoding (see the module docstring)."""
    total = count = 0.0
    for batch in self.eval_batches(split):
      nll, tokens = jax.device_get(_nll_sums(self.model, params, batch))
      total, count = total + float(nll), count + float(tokens)
    out = {"perplexity": math.exp(total / count)}

    indices = self._bleu_indices(split)
    refs = [self.data.references(split)[i] for i in indices]
    sources = self._split_sources(split, indices)
    greedy = [self.target_text(h[0]) for h, _ in self.decode_ids(params, sources)]
    out["bleu"] = bleu_lib.corpus_bleu(greedy, refs)
    if split != "test":
      return out
    d = self.config.data
    beam = [self.target_text(h[0]) for h, _ in self.decode_ids(params, sources, d.beam_size,
                                                               d.length_penalty)]
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
                length_penalty: float | None = None,
                with_attention: bool = False) -> list[Translation]:
    """Translates each text (greedy for beam_size 1), optionally with the attention weights."""
    if length_penalty is None:
      length_penalty = self.config.data.length_penalty if beam_size > 1 else 0.0
    encoded = [self.encode_source(t) for t in texts]
    decoded = self.decode_ids(params, [np.asarray(ids) for _, ids in encoded], beam_size,
                              length_penalty)
    out = []
    for text, (tokens, ids), (found, scores) in zip(texts, encoded, decoded):
      best = found[0]
      target = self.tgt_vocab.decode(best) + (["<eos>"] if len(best) < self.decoder.max_len
                                              else [])
      out.append(Translation(
          source=text, source_tokens=tokens + ["<eos>"],
          unknown_source=[t for t, i in zip(tokens, ids) if i == UNK_ID], tokens=target,
          alternatives=[self.target_text(h) for h in found[:num_results]],
          alternative_scores=scores[:num_results],
          attention=(self.attention_weights(params, ids, best)[:len(target)]
                     if with_attention else None)))
    return out

  def attention_weights(self, params, src_ids: Sequence[int], target_ids: Sequence[int]
                        ) -> np.ndarray:
    """float (T + 1, S): source-target attention while predicting each target token and eos.

    Runs the model with teacher forcing on bos + target_ids, so row t holds the weights the
    decoder used to predict target token t (the last row: eos).
    """
    d = self.config.data
    src_ids, target_ids = list(src_ids)[:d.max_src_len], list(target_ids)[:d.max_tgt_len - 1]
    # Padded to the widest shapes, so that every sentence runs the same compiled program.
    src = np.zeros((1, d.max_src_len), np.int32)  # (1, S)
    src[0, :len(src_ids)] = src_ids
    tgt_in = np.zeros((1, d.max_tgt_len), np.int32)  # (1, T), bos first
    tgt_in[0, :len(target_ids) + 1] = [BOS_ID, *target_ids]
    weights = _cross_attention(self.model, params, src,
                              np.array([len(src_ids)], np.int32), tgt_in)  # (1, T, S)
    weights = np.asarray(jax.device_get(weights), np.float32)[0]
    return weights[:len(target_ids) + 1, :len(src_ids)]

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
    """Saves the vocabularies, the test translations, d2l's four sentences and their heatmaps."""
    self.src_vocab.save(os.path.join(workdir, SRC_VOCAB_FILE))
    self.tgt_vocab.save(os.path.join(workdir, TGT_VOCAB_FILE))
    if self.test_outputs is not None:
      with open(os.path.join(workdir, TEST_TRANSLATIONS_FILE), "w", encoding="utf-8") as f:
        f.write("source\treference\tgreedy\tbeam\n")
        for row in zip(*(self.test_outputs[k] for k in ("source", "reference", "greedy", "beam"))):
          f.write("\t".join(row) + "\n")
    d = self.config.data
    examples = {"greedy": {}, f"beam{d.beam_size}": {}}
    for beam, key in ((1, "greedy"), (d.beam_size, f"beam{d.beam_size}")):
      found = self.translate(params, D2L_SENTENCES, beam_size=beam, with_attention=beam == 1)
      for i, translation in enumerate(found, start=1):
        examples[key][translation.source] = translation.text
        if beam == 1:
          stem, ext = os.path.splitext(HEATMAP_FILE)
          self.draw_heatmap(translation, os.path.join(workdir, f"{stem}-{i}{ext}"))
    with open(os.path.join(workdir, EXAMPLES_FILE), "w", encoding="utf-8") as f:
      json.dump(examples, f, ensure_ascii=False, indent=2)
      f.write("\n")


def load_run(workdir: str, checkpoint: str = "best", data_dir: str | None = None
             ) -> tuple[TranslationTask, Any, int]:
  """(task, parameters, step) of a trained translation run.

  The vocabularies come from the run's directory when it saved them, else from the run's data
  (`data_dir` overrides where that lives).
  """
  config = trainer.load_config(workdir)
  if data_dir is not None:
    config.data_dir = data_dir
  paths = [os.path.join(workdir, name) for name in (SRC_VOCAB_FILE, TGT_VOCAB_FILE)]
  vocabs = tuple(Vocab.load(p) for p in paths) if all(map(os.path.exists, paths)) else None
  task = TranslationTask(config, vocabs=vocabs)
  params, step = trainer.restore_params(task, config, workdir, checkpoint)
  return task, jax.device_get(params), step

