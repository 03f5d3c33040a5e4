"""`Seq2SeqTask`: what the sequence-to-sequence experiments share on top of `experiments.task.Task`.

A subclass (translation, couplet) says where its data and vocabularies come from and what it
scores; this base builds the model from `config.model` (a configs.*Config) with the vocabulary
sizes, and gives the engine `init`, the teacher-forced `loss` (loss.sequence_loss) and the
perplexity, and the subclass batched decoding (`decode`) and attention weights (`attention`: the
heatmap's; `attention_maps`: every attention, layer and head).

Batches (pipelines' Seq2SeqData): 'src' int32 (B, S) (source ids and eos), 'src_len' (B,), 'tgt_in'
(B, T) (bos and the target ids), 'tgt_out' (B, T) (the target ids and eos), 'tgt_len' (B,),
'weight' (B,). The model reads src and tgt_in and predicts tgt_out; positions at or after tgt_len
and filler rows weigh nothing.

Metrics: the engine sums 'loss' (the training objective), 'nll' (the plain cross-entropy per
target token, eos included) and 'token_accuracy' over a split; `extra_eval` turns the mean 'nll'
into 'perplexity' (no second pass over the split) and adds what `decode_metrics` returns.

A subclass implements:
  src_vocab, tgt_vocab         the vocabularies (artifacts of the run);
  max_source_len, max_target_len  the widest source (eos included) and decoder input (bos
                               included), also the most tokens decoding emits;
  source_boundaries            the padded widths of decoding batches;
  decode_batch_size            sources decoded at once;
and optionally `decode_metric_names(split)` / `decode_metrics(params, split)` and
`suppressed_ids` (target ids decoding never emits).
"""

from __future__ import annotations

import abc
import functools
import math
import sys
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from experiments.seq2seq import decoding
from experiments.seq2seq.fused_loss import fused_sequence_loss
from experiments.seq2seq.loss import sequence_loss
from experiments.task import Batch
from experiments.task import Metrics
from experiments.task import Task
from pipelines.vocab import BOS_ID, UNK_ID, Vocab

Decoded = tuple[list[list[int]], list[float]]
"""One source's hypotheses (target ids without eos), best first, and their scores."""


@functools.partial(jax.jit, static_argnums=0)
def _cross_attention(model, params, src, src_len, tgt_in) -> jax.Array:
  return model.cross_attention(params, src, src_len, tgt_in)


@functools.partial(jax.jit, static_argnums=0)
def _attention_maps(model, params, src, src_len, tgt_in) -> dict[str, jax.Array]:
  return model.attention_maps(params, src, src_len, tgt_in)


class Seq2SeqTask(Task):
  """The shared part of the sequence-to-sequence tasks (see the module docstring)."""

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    self._model = None
    self._decoder = None

  # -- what a subclass says ------------------------------------------------------------------------

  @property
  @abc.abstractmethod
  def src_vocab(self) -> Vocab:
    """The source vocabulary."""

  @property
  @abc.abstractmethod
  def tgt_vocab(self) -> Vocab:
    """The target vocabulary."""

  @property
  @abc.abstractmethod
  def max_source_len(self) -> int:
    """S: the widest source, eos included."""

  @property
  @abc.abstractmethod
  def max_target_len(self) -> int:
    """T: the widest decoder input (bos included); also the most tokens decoding emits."""

  @property
  @abc.abstractmethod
  def source_boundaries(self) -> tuple[int, ...]:
    """Ascending padded widths of decoding batches (the last one is max_source_len)."""

  @property
  @abc.abstractmethod
  def decode_batch_size(self) -> int:
    """Sources decoded at once."""

  @property
  def suppressed_ids(self) -> tuple[int, ...]:
    """Target ids decoding never emits (none by default): `decode` bans them at every position,
    so the scores stay the model's log-probabilities."""
    return ()

  def decode_metric_names(self, split: str) -> tuple[str, ...]:
    """The names `decode_metrics(params, split)` returns."""
    del split
    return ()

  def decode_metrics(self, params: Any, split: str) -> dict[str, float]:
    """Scores of decoded outputs on `split` (BLEU ...); {} by default."""
    del params, split
    return {}

  # -- model and loss ------------------------------------------------------------------------------

  @property
  def model(self):
    """The models.Translator built from config.model for the vocabulary sizes."""
    if self._model is None:
      self._model = self.config.model.build(len(self.src_vocab), len(self.tgt_vocab),
                                            self.config.compute_dtype, self.config.storage_dtype)
    return self._model

  def example_batch(self) -> dict[str, np.ndarray]:
    """A full-width batch of one-token pairs: shapes for `init`, without reading the data."""
    size = self.config.train.batch_size
    tgt = np.zeros((size, self.max_target_len), np.int32)
    return {"src": np.full((size, self.max_source_len), UNK_ID, np.int32),
            "src_len": np.ones(size, np.int32), "tgt_in": tgt, "tgt_out": tgt,
            "tgt_len": np.ones(size, np.int32), "weight": np.ones(size, np.float32)}

  def init(self, rng: jax.Array, batch: Batch) -> Any:
    return self.model.init(rng, jnp.asarray(batch["src"]), jnp.asarray(batch["src_len"]),
                           jnp.asarray(batch["tgt_in"]))

  def loss(self, params: Any, batch: Batch, rng: jax.Array | None) -> tuple[jax.Array, Metrics]:
    model = self.config.model
    reduction = getattr(model, "loss_reduction", "token_mean")
    inputs = (params, batch["src"], batch["src_len"], batch["tgt_in"], rng)
    fused = self.model.hidden_and_output_layer(*inputs) if getattr(model, "fused_loss",
                                                                    False) else None
    if fused is not None:
      hidden, kernel, bias = fused
      return fused_sequence_loss(hidden, kernel, bias, batch["tgt_out"], batch["tgt_len"],
                                 batch["weight"], model.label_smoothing, reduction,
                                 dtype=hidden.dtype)
    logits = self.model.logits(*inputs)
    return sequence_loss(logits, batch["tgt_out"], batch["tgt_len"], batch["weight"],
                         model.label_smoothing, reduction)

  # -- evaluation ----------------------------------------------------------------------------------

  def extra_metric_names(self, split: str) -> tuple[str, ...]:
    return ("perplexity", *self.decode_metric_names(split))

  def extra_eval(self, params: Any, split: str, metrics: Mapping[str, float]) -> dict[str, float]:
    """'perplexity' = exp(mean nll per target token over the split), then `decode_metrics`."""
    return {"perplexity": math.exp(metrics["nll"]), **self.decode_metrics(params, split)}

  # -- decoding ------------------------------------------------------------------------------------

  @property
  def decoder(self) -> decoding.SearchDecoder:
    if self._decoder is None:
      self._decoder = decoding.SearchDecoder(self.model)
    return self._decoder

  def decode(self, params: Any, sources: Sequence[np.ndarray], *, beam_size: int = 1,
             length_penalty: float = 0.0, exact_length: bool = False,
             forced_tokens: Sequence[np.ndarray] | None = None,
             banned_tokens: Sequence[np.ndarray] | None = None,
             tied_positions: Sequence[np.ndarray] | None = None,
             distinct_positions: Sequence[np.ndarray] | None = None,
             progress: bool = False) -> list[Decoded]:
    """Greedy (beam_size 1) or beam search for id sequences, in length-sorted batches.

    Args:
      params: the model parameters.
      sources: int id sequences, each ending with eos.
      beam_size: the beam (1: greedy search).
      length_penalty: GNMT's alpha for beam search.
      exact_length: every hypothesis has exactly as many tokens as its source without eos
        (zoo.search's length constraint); else it ends where the model puts eos.
      forced_tokens: None, or per source an int array (L,), L <= max_target_len: the target id
        forced at each of its first L positions, -1 = free (zoo.search's forced_tokens).
      banned_tokens: None, or per source an int array (L,) or (L, K): target ids forbidden at each
        of its first L positions, -1 = none. The task's `suppressed_ids` are banned at every
        position besides.
      tied_positions: None, or per source an int array (L,): the earlier position whose token
        each hypothesis repeats at each of its first L positions, -1 = free.
      distinct_positions: None, or per source a bool array (L,): positions whose tokens differ
        from those taken at earlier marked positions. A forced id wins over a tie, a tie over the
        bans, the length over everything (zoo.search_constraints).
      progress: show a progress bar over the batches on standard error (commands set it; the
        evaluation during training does not).

    Returns:
      Per source, in order: its beam_size hypotheses (target ids without eos) best first, and
      their scores.

    Raises:
      ValueError: for constraints that are not one array per source, or have the wrong shape.
    """
    per_position = {"forced_tokens": forced_tokens, "banned_tokens": banned_tokens,
                    "tied_positions": tied_positions, "distinct_positions": distinct_positions}
    for name, per_source in per_position.items():
      if per_source is not None and len(per_source) != len(sources):
        raise ValueError(f"{name}: expected one array per source ({len(sources)} sources), got "
                         f"{len(per_source)}")
    if self.suppressed_ids:
      per_position["banned_tokens"] = self._with_suppressed(banned_tokens, len(sources))
    if distinct_positions is not None:  # stacked as int, -1 (no) where a source ends
      per_position["distinct_positions"] = [np.asarray(d, bool).astype(np.int32)
                                            for d in distinct_positions]
    # Few sources get a batch fitted to them (the next power of two rows, at most
    # decode_batch_size), so one sentence is searched as one row rather than as a full batch of
    # filler rows; a handful of shapes are compiled at most.
    rows = min(self.decode_batch_size, 1 << max(len(sources) - 1, 0).bit_length())
    batches = decoding.source_batches(sources, self.source_boundaries, rows)
    total = -(-len(sources) // rows)
    batches = tqdm.tqdm(batches, total=total, disable=not progress or total < 2, leave=False,
                        unit="batch", desc="decoding", file=sys.stderr)

    shapes = {name: decoding.constraint_shape(per_source, self.max_target_len)
              for name, per_source in per_position.items()}

    def decode_batch(batch):
      src_len = np.asarray(batch["src_len"], np.int32)
      stacked = {name: decoding.batch_constraints(per_source, batch, shapes[name], name)
                 for name, per_source in per_position.items()}
      if stacked["distinct_positions"] is not None:
        stacked["distinct_positions"] = stacked["distinct_positions"] > 0
      return self.decoder(
          params, batch["src"], src_len, max_len=self.max_target_len, beam_size=beam_size,
          length_penalty=length_penalty, exact_lens=src_len - 1 if exact_length else None,
          **stacked)

    found = decoding.decode_batches(decode_batch, batches)
    return [found[i] for i in range(len(sources))]

  def _with_suppressed(self, banned_tokens: Sequence[np.ndarray] | None,
                       num_sources: int) -> list[np.ndarray]:
    """Per source, int (T, K): its banned ids (if any) and the suppressed ids at every position."""
    width = self.max_target_len
    never = np.tile(np.asarray(self.suppressed_ids, np.int32), (width, 1))  # (T, K0)
    if banned_tokens is None:
      return [never] * num_sources
    out = []
    for i, ids in enumerate(banned_tokens):
      ids = np.asarray(ids, np.int32)
      ids = ids[:, None] if ids.ndim == 1 else ids  # (L, K)
      if ids.ndim != 2 or len(ids) > width:
        raise ValueError(f"banned_tokens[{i}]: expected ids of shape (L,) or (L, K) with "
                         f"L <= {width} target positions, got shape {ids.shape}")
      given = np.full((width, ids.shape[1]), -1, np.int32)
      given[:len(ids)] = ids
      out.append(np.concatenate([given, never], axis=1))  # (T, K + K0)
    return out

  def attention(self, params: Any, src_ids: Sequence[int], target_ids: Sequence[int]
                ) -> np.ndarray:
    """float (T + 1, S): the source-target attention while predicting each target token and eos.

    Runs the model with teacher forcing on bos + target_ids, so row t holds the weights the
    decoder used to predict target token t (the last row: eos).

    Args:
      params: the model parameters.
      src_ids: the source ids, eos included (S of them).
      target_ids: the target ids without bos and eos (T of them).
    """
    src, src_len, tgt_in, (t, s) = self._teacher_forcing_inputs(src_ids, target_ids)
    weights = _cross_attention(self.model, params, src, src_len, tgt_in)  # (1, T, S)
    weights = np.asarray(jax.device_get(weights), np.float32)[0]
    return weights[:t, :s]

  def attention_maps(self, params: Any, src_ids: Sequence[int], target_ids: Sequence[int]
                     ) -> dict[str, np.ndarray]:
    """Every attention of the model, run as `attention` runs it, cut to the real tokens.

    Returns:
      float32 (layers, H, Q, K) per attention: 'cross_attention' (layers, H, T + 1, S) (the
      recurrent models: (1, 1, T + 1, S), one row per decoding step), and for the Transformer
      'encoder_self_attention' (layers, H, S, S) and 'decoder_self_attention' (layers, H, T + 1,
      T + 1) over the decoder inputs bos + target_ids (causal: row t over inputs 0..t).
    """
    src, src_len, tgt_in, (t, s) = self._teacher_forcing_inputs(src_ids, target_ids)
    maps = _attention_maps(self.model, params, src, src_len, tgt_in)
    cut = {"encoder_self_attention": (s, s), "decoder_self_attention": (t, t),
           "cross_attention": (t, s)}
    out = {}
    for name, weights in maps.items():
      queries, keys = cut[name]
      out[name] = np.asarray(jax.device_get(weights), np.float32)[0, :, :, :queries, :keys]
    return out

  def _teacher_forcing_inputs(self, src_ids: Sequence[int], target_ids: Sequence[int]):
    """src (1, S), src_len (1,), tgt_in (1, T) (bos + target_ids), padded to the widest shapes
    so that every sentence runs the same compiled program; and the real (T, S): target ids + 1
    (their eos) and source ids."""
    src_ids = list(src_ids)[:self.max_source_len]
    target_ids = list(target_ids)[:self.max_target_len - 1]
    src = np.zeros((1, self.max_source_len), np.int32)  # (1, S)
    src[0, :len(src_ids)] = src_ids
    tgt_in = np.zeros((1, self.max_target_len), np.int32)  # (1, T), bos first
    tgt_in[0, :len(target_ids) + 1] = [BOS_ID, *target_ids]
    return (src, np.array([len(src_ids)], np.int32), tgt_in,
            (len(target_ids) + 1, len(src_ids)))
