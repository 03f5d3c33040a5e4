import json

import numpy as np
import pytest

from pipelines.batching import Batcher, Ragged


def _sequences(n, max_len, seed):
  """n sequences with lengths 1..max_len whose ids encode (example, position): 1000*i + j + 1."""
  lengths = np.random.default_rng(seed).integers(1, max_len + 1, size=n)
  return [[1000 * i + j + 1 for j in range(length)] for i, length in enumerate(lengths)]


def _batcher(n=47, batch_size=6, boundaries=(4, 7, 11), **kwargs):
  seqs = _sequences(n, 11, seed=n)
  kwargs.setdefault("process_index", 0)
  kwargs.setdefault("process_count", 1)
  return Batcher({"tokens": seqs}, {"label": np.arange(n) % 3},
                 boundaries=boundaries, batch_size=batch_size, **kwargs), seqs


def _examples(batch):
  """The real rows of a batch as (example index, ids, label) tuples, checking the padding."""
  out = []
  for ids, length, label, weight in zip(batch["tokens"], batch["tokens_len"], batch["label"],
                                        batch["weight"]):
    assert np.all(ids[length:] == 0) and np.all(ids[:length] > 0)
    if weight:
      out.append((int(ids[0]) // 1000, tuple(ids[:length].tolist()), int(label)))
  return out


def test_ragged_pack_take_and_pad():
  r = Ragged.from_sequences([[5, 6, 7], [], [8], [9, 10, 11, 12]])
  assert r.flat.tolist() == [5, 6, 7, 8, 9, 10, 11, 12] and r.lengths.tolist() == [3, 0, 1, 4]
  assert r[3].tolist() == [9, 10, 11, 12] and r[1].tolist() == []
  t = r.take([3, 0, 1])
  assert [t[i].tolist() for i in range(3)] == [[9, 10, 11, 12], [5, 6, 7], []]
  ids, lengths = r.padded(np.array([3, 1, 0]), 3)
  assert ids.dtype == np.int32 and ids.tolist() == [[9, 10, 11], [0, 0, 0], [5, 6, 7]]
  assert lengths.tolist() == [3, 0, 3]
  with pytest.raises(ValueError, match="lengths sum to 2"):
    Ragged(np.arange(3), np.array([1, 1]))


def test_eval_pass_covers_every_example_once_with_weights():
  b, seqs = _batcher()
  batches = list(b.eval_batches())
  assert len(batches) == b.num_eval_batches() == 8  # ceil(47 / 6)
  seen = [e for batch in batches for e in _examples(batch)]
  assert sorted(seen) == [(i, tuple(s), i % 3) for i, s in enumerate(seqs)]
  weights = np.concatenate([batch["weight"] for batch in batches])
  assert weights.dtype == np.float32 and weights.sum() == 47 and len(weights) == 48
  # Only the last batch has filler, and its filler rows copy a real example.
  assert batches[-1]["weight"].tolist() == [1, 1, 1, 1, 1, 0]
  assert np.array_equal(batches[-1]["tokens"][5], batches[-1]["tokens"][0])
  for batch in batches:
    assert batch["tokens"].dtype == np.int32 and batch["tokens_len"].dtype == np.int32
    assert batch["tokens"].shape[1] in (4, 7, 11) and batch["tokens"].shape[0] == 6
    assert batch["tokens_len"].max() <= batch["tokens"].shape[1]


def test_bucketing_uses_few_shapes_and_pads_little():
  b, seqs = _batcher(n=301, batch_size=8, boundaries=(3, 5, 8, 11))
  it = b.train_batches(seed=3)
  shapes = {next(it)["tokens"].shape for _ in range(it.batches_per_epoch)}
  assert shapes <= {(8, 3), (8, 5), (8, 8), (8, 11)} and len(shapes) == 4
  assert [s["tokens"] for s in b.shapes()] == [(8, 3), (8, 5), (8, 8), (8, 11)]
  # Everything but the carried leftovers lands in the smallest bucket that holds it.
  widths = [b.boundaries["tokens"][k] for k, _ in b.eval_plan()]
  assert widths == sorted(widths)


def test_train_epoch_is_a_shuffled_permutation_minus_remainder():
  b, seqs = _batcher()
  it = b.train_batches(seed=11)
  assert it.batches_per_epoch == 7 and b.dropped_per_epoch == 5
  epochs = []
  for _ in range(2):
    rows = [e for _ in range(7) for e in _examples(next(it))]
    assert len(rows) == len(set(rows)) == 42
    epochs.append([r[0] for r in rows])
  assert epochs[0] != epochs[1]
  assert it.epoch == 2 and it.position == 0
  first = [e[0] for e in _examples(next(b.train_batches(seed=11)))]
  assert first == epochs[0][:6]
  assert first != [e[0] for e in _examples(next(b.train_batches(seed=12)))]


def test_train_without_drop_remainder_fills_with_weight_zero():
  b, _ = _batcher()
  it = b.train_batches(seed=2, drop_remainder=False)
  assert it.batches_per_epoch == 8
  batches = [next(it) for _ in range(8)]
  assert sum(float(x["weight"].sum()) for x in batches) == 47
  assert sorted(e[0] for x in batches for e in _examples(x)) == list(range(47))


def test_unshuffled_batches_are_consecutive_and_padded_to_their_longest_bucket():
  b, seqs = _batcher(boundaries=(2, 4, 5, 7, 9, 11))
  lengths = [len(s) for s in seqs]
  for drop_remainder, count in ((True, 7), (False, 8)):
    it = b.train_batches(seed=3, drop_remainder=drop_remainder, shuffle=False)
    assert it.batches_per_epoch == count
    for epoch in range(2):
      for k in range(count):
        batch = next(it)
        rows = list(range(6 * k, min(6 * k + 6, 47)))
        assert [e[0] for e in _examples(batch)] == rows
        longest = max(lengths[i] for i in rows)
        # The smallest boundary >= the batch's longest sequence.
        assert batch["tokens"].shape == (6, min(w for w in (2, 4, 5, 7, 9, 11) if w >= longest))
      assert it.epoch == epoch + 1 and it.position == 0


@pytest.mark.parametrize("stop", [3, 6, 9])  # mid-epoch, at the last batch, in epoch 1
def test_resume_reproduces_the_next_batches(stop):
  b, _ = _batcher()
  it = b.train_batches(seed=5)
  for _ in range(stop):
    next(it)
  state = json.loads(json.dumps(it.get_state()))
  expected = [next(it) for _ in range(9)]
  resumed = b.train_batches(seed=999)
  resumed.set_state(state)
  assert resumed.seed == 5
  for want in expected:
    got = next(resumed)
    assert got.keys() == want.keys()
    for key in want:
      np.testing.assert_array_equal(got[key], want[key])


def test_state_is_validated():
  b, _ = _batcher()
  it = b.train_batches(seed=1)
  state = it.get_state()
  assert state == {"seed": 1, "epoch": 0, "position": 0, "num_examples": 47, "batch_size": 6}
  other, _ = _batcher(n=45)
  with pytest.raises(ValueError, match="num_examples=47 but this loader has 45"):
    other.train_batches(seed=1).set_state(state)
  with pytest.raises(ValueError, match="out of range"):
    it.set_state(dict(state, position=7))
  with pytest.raises(ValueError, match="integer 'seed'"):
    it.set_state({"epoch": 0})


def test_three_processes_cover_each_global_batch_exactly_once():
  n, batch_size = 47, 9
  loaders = [_batcher(n=n, batch_size=batch_size, process_index=p, process_count=3)[0]
             for p in range(3)]
  whole, _ = _batcher(n=n, batch_size=batch_size)
  evals = [list(loader.eval_batches()) for loader in loaders]
  assert len({len(e) for e in evals}) == 1
  covered = []
  for step, parts in enumerate(zip(*evals)):
    assert {p["tokens"].shape for p in parts} == {(3, parts[0]["tokens"].shape[1])}
    for p in parts:
      covered += _examples(p)
  assert sorted(e[0] for e in covered) == list(range(n))
  # Training: the three slices of each step make up the single-process global batch.
  trains = [loader.train_batches(seed=4) for loader in loaders]
  reference = whole.train_batches(seed=4)
  for _ in range(reference.batches_per_epoch + 2):
    parts = [next(t) for t in trains]
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    want = next(reference)
    for key in want:
      np.testing.assert_array_equal(joined[key], want[key])
  with pytest.raises(ValueError, match="divisible by process_count"):
    _batcher(batch_size=10, process_index=0, process_count=3)
  with pytest.raises(ValueError, match="process_index"):
    _batcher(batch_size=9, process_index=3, process_count=3)


def test_default_process_from_jax():
  b, _ = _batcher(process_index=None, process_count=None)
  assert (b.process_index, b.process_count) == (0, 1)


def test_too_long_sequences_truncated_and_counted_or_refused():
  seqs = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10], [11], [12, 13, 14, 15, 16, 17]]
  b = Batcher({"tokens": seqs}, boundaries=(2, 5), batch_size=4, process_index=0, process_count=1)
  assert b.truncated == {"tokens": 2}
  (batch,) = list(b.eval_batches())
  assert batch["tokens"].shape == (4, 5)
  order = np.argsort(batch["tokens"][:, 0])
  assert batch["tokens_len"][order].tolist() == [3, 5, 1, 5]
  assert batch["tokens"][order].tolist() == [[1, 2, 3, 0, 0], [4, 5, 6, 7, 8], [11, 0, 0, 0, 0],
                                             [12, 13, 14, 15, 16]]
  with pytest.raises(ValueError, match="2 sequences of field 'tokens' are longer than the "
                     "largest boundary 5 \\(longest: 7\\)"):
    Batcher({"tokens": seqs}, boundaries=(2, 5), batch_size=4, overflow="error", process_index=0,
            process_count=1)


def test_several_fields_share_the_bucket_and_length_keys():
  src = [[1, 2], [3, 4, 5, 6, 7], [8], [9, 10, 11]]
  tgt = [[1, 2, 3, 4, 5, 6], [7], [8, 9], [10]]
  b = Batcher({"src": src, "tgt": tgt}, boundaries={"src": (3, 6), "tgt": (4, 8)},
              batch_size=2, length_keys={"src": "src_len", "tgt": None}, process_index=0,
              process_count=1)
  # Example 0 needs bucket 1 for its target, example 1 for its source; 2 and 3 fit bucket 0.
  assert b.bucket_of.tolist() == [1, 1, 0, 0]
  first, second = list(b.eval_batches())
  assert set(first) == {"src", "src_len", "tgt", "weight"}
  assert first["src"].shape == (2, 3) and first["tgt"].shape == (2, 4)
  assert second["src"].shape == (2, 6) and second["tgt"].shape == (2, 8)
  assert first["src_len"].tolist() == [1, 3]


def test_bad_arguments():
  seqs = [[1], [2, 3]]
  common = dict(batch_size=2, process_index=0, process_count=1)
  with pytest.raises(ValueError, match="strictly increasing"):
    Batcher({"tokens": seqs}, boundaries=(4, 4), **common)
  with pytest.raises(ValueError, match="same number of examples"):
    Batcher({"tokens": seqs}, {"label": np.zeros(3)}, boundaries=(4,), **common)
  with pytest.raises(ValueError, match="same, non-zero number of boundaries"):
    Batcher({"a": seqs, "b": seqs}, boundaries={"a": (2,), "b": (2, 4)}, **common)
  with pytest.raises(ValueError, match="no examples"):
    Batcher({"tokens": []}, boundaries=(4,), **common)
  with pytest.raises(ValueError, match="no full training batch"):
    Batcher({"tokens": seqs}, boundaries=(4,), batch_size=3, process_index=0,
            process_count=1).train_batches(seed=0)
  with pytest.raises(ValueError, match="overflow"):
    Batcher({"tokens": seqs}, boundaries=(4,), overflow="drop", **common)
