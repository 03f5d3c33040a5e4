"""Batched, jit-compiled greedy and beam search over a models.Translator, for every
sequence-to-sequence experiment.

  SearchDecoder(model)(params, src, src_len, max_len=..., beam_size=..., exact_lens=...,
                       forced_tokens=..., banned_tokens=...)
                                             Hypotheses of a batch of sources (zoo.search)
  source_batches(sources, boundaries, batch_size)
                                             length-sorted, padded batches of id sequences
  constraint_shape(per_source, max_len), batch_constraints(per_source, batch, shape, name)
                                             per-source forced / banned ids stacked for a batch
  decode_batches(decode, batches)            the hypotheses of every real row, by example index

Shape letters: B batch, S source length, T target length, V vocabulary, W beam.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import jax
import numpy as np

from pipelines.batching import Batcher
from pipelines.vocab import BOS_ID, EOS_ID
from zoo.search import beam_search
from zoo.search import greedy_search


class Hypotheses(NamedTuple):
  """Decoded hypotheses, best first along W, as numpy arrays.

  Attributes:
    tokens: int32 (B, W, T): target ids (bos excluded), eos at `lengths`, pad after it.
    lengths: int32 (B, W): the tokens before eos.
    scores: float32 (B, W): summed log-probabilities (length-penalized when a penalty is used).
  """
  tokens: np.ndarray
  lengths: np.ndarray
  scores: np.ndarray

  def ids(self, row: int, rank: int = 0) -> list[int]:
    """The ids of one hypothesis, eos and padding left out."""
    return self.tokens[row, rank, :self.lengths[row, rank]].tolist()


class SearchDecoder:
  """Greedy (beam_size 1) or beam search over a model with init_decode_state / decode_step.

  The parameters are an argument of the compiled program, so decoding with new parameters (every
  dev evaluation) reuses it; a program is compiled per (beam size, max_len, which constraints are
  given and their shapes) and per padded source shape.

  Args:
    model: an object with `init_decode_state(params, src, src_len, max_len)` and
      `decode_step(params, state, tokens)` (a models.Translator).
    bos_id, eos_id: the special ids (pipelines.vocab's by default).
  """

  def __init__(self, model: Any, *, bos_id: int = BOS_ID, eos_id: int = EOS_ID):
    self.model, self.bos_id, self.eos_id = model, bos_id, eos_id
    self._compiled: dict[tuple[int, int], Callable] = {}

  def _search_fn(self, beam_size: int, max_len: int) -> Callable:
    model, bos_id, eos_id = self.model, self.bos_id, self.eos_id

    def search(params, src, src_len, constraints, length_penalty):
      state = model.init_decode_state(params, src, src_len, max_len)

      def step(state, tokens):
        return model.decode_step(params, state, tokens)

      if beam_size == 1:
        out = greedy_search(step, state, bos_id=bos_id, eos_id=eos_id, max_len=max_len,
                            **constraints)
        return out.tokens[:, None], out.lengths[:, None], out.scores[:, None]
      out = beam_search(step, state, beam_size=beam_size, bos_id=bos_id, eos_id=eos_id,
                        max_len=max_len, length_penalty=length_penalty, **constraints)
      return out.tokens, out.lengths, out.scores

    return jax.jit(search)

  def __call__(self, params: Any, src: np.ndarray, src_len: np.ndarray, *, max_len: int,
               beam_size: int = 1, length_penalty: float = 0.0,
               exact_lens: np.ndarray | None = None, forced_tokens: np.ndarray | None = None,
               banned_tokens: np.ndarray | None = None, tied_positions: np.ndarray | None = None,
               distinct_positions: np.ndarray | None = None) -> Hypotheses:
    """Decodes a batch of sources.

    Args:
      params: the model parameters.
      src: int32 (B, S) source ids, padded with 0.
      src_len: int32 (B,) the real source ids per row.
      max_len: T, the most target tokens emitted per row (eos included).
      beam_size: 1 for greedy search, W > 1 for beam search.
      length_penalty: GNMT's alpha (beam search only; changing it does not recompile).
      exact_lens: None, or int (B,) in [0, max_len]: row b gets exactly exact_lens[b] tokens
        before eos (zoo.search's length constraint).
      forced_tokens: None, or int (B, max_len): the id row b takes at position t, -1 = free.
      banned_tokens: None, or int (B, max_len) or (B, max_len, K): ids row b may not take at
        position t, -1 = none.
      tied_positions: None, or int (B, max_len): the earlier position whose token row b repeats
        at position t, -1 = free.
      distinct_positions: None, or bool (B, max_len): positions whose tokens differ from those
        taken at earlier marked positions (zoo.search_constraints: forced wins over ties, ties
        over bans, the length over everything).

    Returns:
      Hypotheses with W = beam_size.

    Raises:
      ValueError: from zoo.search, for a beam_size or max_len that is not a positive integer, or
        constraints of the wrong shape or values.
    """
    key = (beam_size, max_len)
    if key not in self._compiled:
      self._compiled[key] = self._search_fn(beam_size, max_len)
    constraints = {name: None if value is None else np.asarray(value, np.int32)
                   for name, value in (("exact_lens", exact_lens), ("forced_tokens", forced_tokens),
                                       ("banned_tokens", banned_tokens),
                                       ("tied_positions", tied_positions))}
    constraints["distinct_positions"] = (None if distinct_positions is None
                                         else np.asarray(distinct_positions, bool))
    tokens, lengths, scores = self._compiled[key](
        params, np.asarray(src, np.int32), np.asarray(src_len, np.int32), constraints,
        np.float32(length_penalty))
    return Hypotheses(*jax.device_get((tokens, lengths, scores)))


def source_batches(sources: Sequence[np.ndarray], boundaries: Sequence[int],
                   batch_size: int) -> Iterator[dict[str, np.ndarray]]:
  """Batches of id sequences for decoding: shortest first, each padded to the first boundary that
  holds its longest source, always `batch_size` rows (filler rows weigh 0), so that only
  len(boundaries) shapes are ever compiled and a batch of short sources stops after a few steps.

  Args:
    sources: int id sequences (eos included), at most boundaries[-1] long (longer ones are cut).
    boundaries: ascending padded widths, e.g. the data's source buckets, or (max_len,).
    batch_size: rows per batch.

  Yields:
    dicts with 'src' int32 (batch_size, S), 'src_len' (batch_size,), 'index' (batch_size,) (the
    position of the row's source in `sources`) and 'weight' (batch_size,).
  """
  order = np.argsort([len(s) for s in sources], kind="stable")
  batcher = Batcher({"src": [sources[i] for i in order]}, {"index": order.astype(np.int32)},
                    boundaries=tuple(boundaries), batch_size=batch_size,
                    length_keys={"src": "src_len"}, process_index=0, process_count=1)
  return batcher.eval_batches()


def constraint_shape(per_source: Sequence[np.ndarray] | None, max_len: int
                     ) -> tuple[int, ...] | None:
  """The per-row shape of stacked constraints: (T,) when every source gives (L,) ids, else
  (T, K) with K the most ids any source gives per position (None for None)."""
  if per_source is None:
    return None
  slots = [np.shape(ids)[1] for ids in per_source if np.ndim(ids) == 2]
  return (max_len, max(slots)) if slots else (max_len,)


def batch_constraints(per_source: Sequence[np.ndarray] | None, batch: dict[str, np.ndarray],
                      shape: tuple[int, ...] | None, name: str) -> np.ndarray | None:
  """Per-source token constraints stacked for the rows of one batch of `source_batches`.

  Args:
    per_source: None, or for every source (by its index in `sources`) an int array (L,) or (L, K)
      over its first L <= T target positions (forced ids, or banned ids with K per position),
      -1 = none.
    batch: a batch with 'index' and 'weight' (B,).
    shape: (T,) or (T, K), from `constraint_shape` over all the sources (so that every batch has
      the same shape and the search compiles once).
    name: the argument's name, for errors.

  Returns:
    None, or int32 (B, *shape): -1 at the positions and slots a source leaves out, and in filler
    rows.

  Raises:
    ValueError: naming `name`, for an array that does not fit `shape`.
  """
  if per_source is None:
    return None
  index, weight = np.asarray(batch["index"]).tolist(), np.asarray(batch["weight"])
  out = np.full((len(index),) + tuple(shape), -1, np.int32)  # (B, T) or (B, T, K)
  for row, (i, w) in enumerate(zip(index, weight)):
    if w <= 0:
      continue
    ids = np.asarray(per_source[i])
    fits = ids.ndim == 1 or (ids.ndim == 2 and len(shape) == 2 and ids.shape[1] <= shape[1])
    if not fits or len(ids) > shape[0]:
      raise ValueError(f"{name}[{i}]: expected ids of shape (L,){' or (L, K)' * (len(shape) - 1)} "
                       f"with L <= {shape[0]} target positions, got shape {ids.shape}")
    if len(shape) == 2 and ids.ndim == 1:
      ids = ids[:, None]
    out[(row, slice(0, len(ids))) + ((slice(0, ids.shape[1]),) if ids.ndim == 2 else ())] = ids
  return out


def decode_batches(decode: Callable[[dict[str, np.ndarray]], Hypotheses],
                   batches: Iterable[dict[str, np.ndarray]]) -> dict[int, tuple[list[list[int]],
                                                                              list[float]]]:
  """Runs `decode` on every batch and keeps the real rows (weight > 0) by example index.

  Args:
    decode: batch -> Hypotheses of its B rows (e.g. a lambda around a SearchDecoder).
    batches: evaluation batches with 'index' and 'weight' (B,).

  Returns:
    index -> (the hypotheses' ids best first, their scores).
  """
  out = {}
  for batch in batches:
    hyps = decode(batch)
    for row in np.flatnonzero(np.asarray(batch["weight"]) > 0):
      width = hyps.tokens.shape[1]
      out[int(batch["index"][row])] = ([hyps.ids(row, rank) for rank in range(width)],
                                       hyps.scores[row].tolist())
  return out
