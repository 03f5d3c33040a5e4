"""From token-id sequences to padded, length-bucketed int32 numpy batches.

The loader is a lean numpy one of our own, not grain. After tokenization every dataset of the zoo
fits in memory as a few flat int32 arrays (full IMDB train: 25,000 reviews, 4.8 M ids at max
length 256), so a batch is one fancy-indexing gather of b x L ids. benchmarks/bench_loader.py
measures the choices on the full IMDB train split (numbers in docs/BENCHMARKS.md, "Data loading"):
this loader serves bucketed batches 2 to 3 times faster than grain's MapDataset serving the very
same batch plan (grain's per-element machinery costs more than the gather itself), 15 to 25 times
faster than the idiomatic per-example grain pipeline (shuffle -> map(pad) -> batch, which also has
no length bucketing), and over 150 times faster than grain mapping the tokenizer over the tfds
data source in every epoch. grain's worker processes cannot win that back on a 2-core machine, and
resumable state and per-process slicing take a few lines here, because an epoch's whole plan is
a pure function of (seed, epoch).

Batches (the contract every task's batches keep, and what the experiments' steps read): a dict
of numpy arrays with leading axis b,
  <field>        int32 (b, L_field): the ids of each sequence field, padded with 0 (pad) to the
                 bucket's width for that field;
  <length key>   int32 (b,): the number of valid ids of a field (named by `length_keys`);
  <scalar field> the per-example values (e.g. 'label'), with their own dtype;
  'weight'       float32 (b,): 1.0 for a real example, 0.0 for a filler row.
b is `batch_size // process_count` (see "Several processes").

Length buckets: each sequence field has ascending `boundaries` (all fields the same number of
them). An example goes to the first bucket k whose boundary is >= its length in every field, and a
batch of bucket k pads field f to `boundaries[f][k]`, so at most len(boundaries) padded shapes ever
reach jit. Within an epoch, leftovers of a bucket (fewer than batch_size examples) move up into
the next bucket, so only one batch per epoch can be incomplete.

Too long: an example longer than the last boundary is truncated to it (`overflow='truncate'`, the
default; `truncated` counts them per field, and its length becomes the boundary) or refused with a
ValueError (`overflow='error'`). Task code truncates before adding eos, so the loader's truncation
is a safety net.

Training (`train_batches(seed)`): an endless iterator over epochs; epoch e shuffles the examples
with numpy's generator seeded by (seed, e), groups them into buckets, forms full batches and
shuffles their order. `shuffle=False` instead cuts the examples in index order into consecutive
batches, each padded to the smallest bucket that holds its longest example (the same batches every
epoch; with a boundary at every width, padded to the batch's longest). The last incomplete batch
of an epoch is dropped (`drop_remainder=True`, at most batch_size - 1 examples, a different random
few each epoch when shuffled; `dropped_per_epoch` says how many)
or completed with weight-0 filler rows (`drop_remainder=False`). `get_state()` returns a JSON-able
dict {seed, epoch, position, num_examples, batch_size}; `set_state(state)` on an iterator over the
same data continues with exactly the batches that would have come next.

Evaluation (`eval_batches()`): one pass in bucket order, every example exactly once; the last
batch is completed with filler rows of weight 0 (copies of the batch's first example, so no
degenerate zero-length row reaches a model).

Several processes (multi-host): every process computes the same global plan of batches of
`batch_size` rows, and process p yields rows [p*b, (p+1)*b) of each, b = batch_size //
process_count; so the processes read disjoint slices, step in lockstep with equal shapes, and
together cover each batch exactly once. `batch_size` must be divisible by `process_count`. The
training state does not depend on the process count: a run can resume on a different number of
hosts with the same global batches. `process_index` / `process_count` default to
`jax.process_index()` / `jax.process_count()` (jax is imported only then).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from pipelines.checks import positive_int

Batch = dict[str, np.ndarray]


class Ragged:
  """int32 sequences of different lengths, stored as one flat array and their lengths."""

  def __init__(self, flat: np.ndarray, lengths: np.ndarray):
    self.flat = np.asarray(flat, dtype=np.int32)
    self.lengths = np.asarray(lengths, dtype=np.int32)
    if self.flat.ndim != 1 or self.lengths.ndim != 1:
      raise ValueError(f"Ragged: flat and lengths must be 1-D, got shapes {self.flat.shape} "
                       f"and {self.lengths.shape}")
    if self.lengths.size and self.lengths.min() < 0:
      raise ValueError("Ragged: lengths must be >= 0")
    if int(self.lengths.sum()) != self.flat.size:
      raise ValueError(f"Ragged: lengths sum to {int(self.lengths.sum())} but flat holds "
                       f"{self.flat.size} ids")
    self.starts = np.zeros(len(self.lengths), dtype=np.int64)
    np.cumsum(self.lengths[:-1], out=self.starts[1:])

  @classmethod
  def from_sequences(cls, sequences: Sequence[Sequence[int]]) -> Ragged:
    """Packs a list of id lists (or 1-D arrays)."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int32, count=len(sequences))
    flat = np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int32,
                       count=int(lengths.sum()))
    return cls(flat, lengths)

  def __len__(self) -> int:
    return len(self.lengths)

  def __getitem__(self, i: int) -> np.ndarray:
    start = self.starts[i]
    return self.flat[start:start + self.lengths[i]]

  def take(self, indices: np.ndarray) -> Ragged:
    """The sequences at `indices`, in that order."""
    indices = np.asarray(indices, dtype=np.int64)
    lengths = self.lengths[indices]
    # Position j of the output comes from starts[i] + (j - the output start of sequence i).
    out_starts = np.cumsum(lengths, dtype=np.int64) - lengths
    positions = np.arange(int(lengths.sum())) + np.repeat(self.starts[indices] - out_starts, lengths)
    return Ragged(self.flat[positions], lengths)

  def padded(self, indices: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The sequences at `indices` as an int32 (len(indices), width) array padded with 0, and
    their lengths clipped to `width` (longer sequences are cut)."""
    lengths = np.minimum(self.lengths[indices], width)
    cols = np.arange(width)
    positions = self.starts[indices][:, None] + cols
    np.minimum(positions, max(self.flat.size - 1, 0), out=positions)
    ids = self.flat[positions] if self.flat.size else np.zeros(positions.shape, np.int32)
    return np.where(cols < lengths[:, None], ids, 0).astype(np.int32, copy=False), lengths


def _resolve_processes(process_index: int | None, process_count: int | None) -> tuple[int, int]:
  if process_index is None or process_count is None:
    import jax  # pylint: disable=g-import-not-at-top
    process_index = jax.process_index() if process_index is None else process_index
    process_count = jax.process_count() if process_count is None else process_count
  if not 0 <= process_index < process_count:
    raise ValueError(f"process_index must lie in [0, process_count={process_count}), got "
                     f"{process_index}")
  return int(process_index), int(process_count)


class Batcher:
  """Serves padded, bucketed batches of in-memory examples (see the module docstring).

  Args:
    sequences: field name -> the id sequences of every example (a list of lists / 1-D arrays, or
      a `Ragged`). All fields have the same number of examples N.
    scalars: field name -> array (N, ...) of per-example values (e.g. labels).
    boundaries: the bucket widths: one ascending sequence for every sequence field, or a mapping
      field -> ascending sequence (all of the same length). The last one is the maximum length.
    batch_size: the global batch size (rows per step, summed over processes).
    overflow: 'truncate' (default) or 'error', for sequences longer than the last boundary.
    length_keys: field -> the batch key of its lengths; default '<field>_len'; None leaves a
      field's lengths out (e.g. when two fields always have equal lengths).
    process_index, process_count: this process and how many there are; default from jax.
  """

  def __init__(self, sequences: Mapping[str, Sequence[Sequence[int]] | Ragged],
               scalars: Mapping[str, np.ndarray] | None = None, *,
               boundaries: Sequence[int] | Mapping[str, Sequence[int]], batch_size: int,
               overflow: str = "truncate", length_keys: Mapping[str, str | None] | None = None,
               process_index: int | None = None, process_count: int | None = None):
    if not sequences:
      raise ValueError("sequences: need at least one sequence field")
    self.sequences = {name: seqs if isinstance(seqs, Ragged) else Ragged.from_sequences(seqs)
                      for name, seqs in sequences.items()}
    self.scalars = {name: np.asarray(values) for name, values in (scalars or {}).items()}
    sizes = {name: len(v) for name, v in itertools.chain(self.sequences.items(),
                                                          self.scalars.items())}
    if len(set(sizes.values())) != 1:
      raise ValueError(f"every field must hold the same number of examples, got {sizes}")
    self.num_examples = next(iter(sizes.values()))
    if self.num_examples == 0:
      raise ValueError("the loader got no examples")

    if not isinstance(boundaries, Mapping):
      boundaries = {name: boundaries for name in self.sequences}
    if set(boundaries) != set(self.sequences):
      raise ValueError(f"boundaries: expected one entry per sequence field "
                       f"{sorted(self.sequences)}, got {sorted(boundaries)}")
    self.boundaries = {name: tuple(int(b) for b in bounds) for name, bounds in boundaries.items()}
    counts = {len(b) for b in self.boundaries.values()}
    if len(counts) != 1 or not counts.pop():
      raise ValueError(f"boundaries: every field needs the same, non-zero number of boundaries, "
                       f"got {self.boundaries}")
    for name, bounds in self.boundaries.items():
      if bounds[0] < 1 or any(a >= b for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"boundaries[{name!r}] must be positive and strictly increasing, got "
                         f"{bounds}")
    self.num_buckets = len(next(iter(self.boundaries.values())))

    positive_int(batch_size, "batch_size")
    self.batch_size = int(batch_size)
    self.process_index, self.process_count = _resolve_processes(process_index, process_count)
    if self.batch_size % self.process_count:
      raise ValueError(f"batch_size {batch_size} must be divisible by process_count "
                       f"{self.process_count}")
    self.local_batch_size = self.batch_size // self.process_count

    if overflow not in ("truncate", "error"):
      raise ValueError(f"overflow must be 'truncate' or 'error', got {overflow!r}")
    self.truncated = {}
    for name, seqs in self.sequences.items():
      too_long = int(np.count_nonzero(seqs.lengths > self.boundaries[name][-1]))
      if too_long and overflow == "error":
        raise ValueError(f"{too_long} sequences of field {name!r} are longer than the largest "
                         f"boundary {self.boundaries[name][-1]} (longest: "
                         f"{int(seqs.lengths.max())}); raise the boundary or use "
                         f"overflow='truncate'")
      self.truncated[name] = too_long
    self.length_keys = {name: f"{name}_len" for name in self.sequences}
    self.length_keys.update(length_keys or {})
    unknown = set(self.length_keys) - set(self.sequences)
    if unknown:
      raise ValueError(f"length_keys: unknown fields {sorted(unknown)}")

    # The bucket of each example: the first k with length <= boundary in every field.
    self.bucket_of = np.zeros(self.num_examples, dtype=np.int64)
    for name, seqs in self.sequences.items():
      k = np.searchsorted(np.asarray(self.boundaries[name]), seqs.lengths, side="left")
      np.maximum(self.bucket_of, np.minimum(k, self.num_buckets - 1), out=self.bucket_of)

  # ---- plans: lists of (bucket, example indices of one global batch)

  def _plan(self, order: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Cuts `order` into batches bucket by bucket, carrying each bucket's leftovers upward."""
    buckets = self.bucket_of[order]
    plan, carry = [], order[:0]
    for k in range(self.num_buckets):
      pool = np.concatenate([carry, order[buckets == k]])
      full = len(pool) // self.batch_size * self.batch_size
      for start in range(0, full, self.batch_size):
        rows = pool[start:start + self.batch_size]
        plan.append((int(self.bucket_of[rows].max()), rows))
      carry = pool[full:]
    if len(carry):
      plan.append((int(self.bucket_of[carry].max()), carry))
    return plan

  def epoch_plan(self, seed: int, epoch: int, drop_remainder: bool = True,
                 shuffle: bool = True) -> list[tuple[int, np.ndarray]]:
    """The training batches of one epoch, in order: a pure function of (seed, epoch); without
    `shuffle`, consecutive examples in index order (the same every epoch)."""
    if not shuffle:
      rows = [np.arange(start, min(start + self.batch_size, self.num_examples))
              for start in range(0, self.num_examples, self.batch_size)]
      if drop_remainder and len(rows[-1]) < self.batch_size:
        rows.pop()
      return [(int(self.bucket_of[r].max()), r) for r in rows]
    rng = np.random.default_rng([int(seed), int(epoch)])
    plan = self._plan(rng.permutation(self.num_examples))
    if drop_remainder and len(plan[-1][1]) < self.batch_size:
      plan.pop()
    return [plan[i] for i in rng.permutation(len(plan))]

  def eval_plan(self) -> list[tuple[int, np.ndarray]]:
    """One pass over every example, by bucket, in index order within a bucket."""
    return self._plan(np.arange(self.num_examples))

  @property
  def dropped_per_epoch(self) -> int:
    """How many examples a training epoch with drop_remainder=True leaves out."""
    return self.num_examples % self.batch_size

  def shapes(self) -> list[dict[str, tuple[int, int]]]:
    """The padded shape of each sequence field, per bucket: every shape a batch can have."""
    return [{name: (self.local_batch_size, bounds[k]) for name, bounds in self.boundaries.items()}
            for k in range(self.num_buckets)]

  # ---- batches

  def make_batch(self, bucket: int, rows: np.ndarray) -> Batch:
    """This process's slice of the global batch of examples `rows` (fewer rows = filler)."""
    weight = np.zeros(self.batch_size, dtype=np.float32)
    weight[:len(rows)] = 1.0
    full = np.full(self.batch_size, rows[0], dtype=np.int64)
    full[:len(rows)] = rows
    local = slice(self.process_index * self.local_batch_size,
                  (self.process_index + 1) * self.local_batch_size)
    indices = full[local]
    batch = {}
    for name, seqs in self.sequences.items():
      ids, lengths = seqs.padded(indices, self.boundaries[name][bucket])
      batch[name] = ids
      if self.length_keys[name] is not None:
        batch[self.length_keys[name]] = lengths
    for name, values in self.scalars.items():
      batch[name] = values[indices]
    batch["weight"] = weight[local]
    return batch

  def eval_batches(self) -> Iterator[Batch]:
    """One pass: every example exactly once (weight 1), filler rows with weight 0 at the end."""
    for bucket, rows in self.eval_plan():
      yield self.make_batch(bucket, rows)

  def num_eval_batches(self) -> int:
    return -(-self.num_examples // self.batch_size)

  def train_batches(self, seed: int, *, drop_remainder: bool = True,
                    shuffle: bool = True) -> TrainIterator:
    """An endless, resumable iterator over training batches, shuffled unless `shuffle` is False
    (see `TrainIterator`)."""
    return TrainIterator(self, seed, drop_remainder=drop_remainder, shuffle=shuffle)


class TrainIterator:
  """Training batches epoch after epoch; `get_state` / `set_state` resume exactly.

  Attributes:
    epoch, position: the epoch and the index within it of the batch `next` returns.
    batches_per_epoch: how many batches an epoch has.
  """

  def __init__(self, batcher: Batcher, seed: int, *, drop_remainder: bool = True,
               shuffle: bool = True):
    positive_int(seed, "seed", minimum=0)
    self._batcher = batcher
    self._drop_remainder = drop_remainder
    self._shuffle = shuffle
    self.seed = int(seed)
    self.epoch = 0
    self.position = 0
    self._plan_epoch = None
    self._plan = []
    self.batches_per_epoch = len(self._current_plan())
    if not self.batches_per_epoch:
      raise ValueError(f"no full training batch: {batcher.num_examples} examples, batch_size "
                       f"{batcher.batch_size}, drop_remainder=True")

  def _current_plan(self) -> list[tuple[int, np.ndarray]]:
    if self._plan_epoch != self.epoch:
      self._plan = self._batcher.epoch_plan(self.seed, self.epoch, self._drop_remainder,
                                            self._shuffle)
      self._plan_epoch = self.epoch
    return self._plan

  def __iter__(self) -> TrainIterator:
    return self

  def __next__(self) -> Batch:
    bucket, rows = self._current_plan()[self.position]
    self.position += 1
    if self.position == self.batches_per_epoch:
      self.epoch, self.position = self.epoch + 1, 0
    return self._batcher.make_batch(bucket, rows)

  def get_state(self) -> dict[str, Any]:
    """JSON-serialisable position: {seed, epoch, position, num_examples, batch_size}."""
    return {"seed": self.seed, "epoch": self.epoch, "position": self.position,
            "num_examples": self._batcher.num_examples, "batch_size": self._batcher.batch_size}

  def set_state(self, state: Mapping[str, Any]) -> None:
    """Continues from a state of `get_state` (of an iterator over the same data and batch size)."""
    try:
      seed, epoch, position = int(state["seed"]), int(state["epoch"]), int(state["position"])
    except (KeyError, TypeError, ValueError):
      raise ValueError(f"state: expected a dict with integer 'seed', 'epoch' and 'position', got "
                       f"{state!r}") from None
    for key in ("num_examples", "batch_size"):
      ours = getattr(self._batcher, key)
      if key in state and state[key] != ours:
        raise ValueError(f"state was saved with {key}={state[key]} but this loader has {ours}; "
                         f"it cannot reproduce that run's batches")
    if seed < 0 or epoch < 0 or not 0 <= position < self.batches_per_epoch:
      raise ValueError(f"state out of range: seed {seed}, epoch {epoch}, position {position} "
                       f"(an epoch has {self.batches_per_epoch} batches)")
    self.seed, self.epoch, self.position = seed, epoch, position
    self._plan_epoch = None
