"""The LSTM language model and its classifier (experiments.sentiment.lstm_lm): the stream and its
windows, the learning rate and the pooling against exact values, both networks against numpy
computations from their parameters, the reviews file's checks, and export_reviews, pretraining
and fine-tuning end to end on the shipped IMDB sample."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tarfile

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments import runs
from experiments.sentiment import blend
from experiments.sentiment import ensemble
from experiments.sentiment import export_reviews
from experiments.sentiment import lstm_lm
from experiments.sentiment.cli import unlabelled_records
from experiments.sentiment.lstm_lm import Classifier
from experiments.sentiment.lstm_lm import LanguageModel
from experiments.sentiment.lstm_lm import ModelConfig
from _sample_runs import train_sample_ngram_run
from pipelines.batching import Ragged

pytestmark = pytest.mark.usefixtures("quick_compiles")

REPO = pathlib.Path(__file__).resolve().parents[2]
TINY_FLAGS = ["--embed-dim", "8", "--hidden-size", "12"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
  return 1.0 / (1.0 + np.exp(-x))


def _lstm_by_hand(lstm: dict, x: np.ndarray) -> np.ndarray:
  """zoo.LSTM's stacked layers over one sequence x (L, D) from a zero state, in float64: the top
  layer's outputs (L, H). Gates i, f, g, o; `lstm` is the params' trunk/lstm subtree."""
  for index in range(len(lstm)):
    layer = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), lstm[f"layers_{index}"])
    kernel, bias = layer["input"]["kernel"][:, 0], layer["input"]["bias"][0]  # (D, 4H), (4H,)
    hidden_kernel = layer["hidden_kernel"][0]  # (H, 4H)
    width = hidden_kernel.shape[0]
    h, c, outputs = np.zeros(width), np.zeros(width), []
    for t in range(len(x)):
      i, f, g, o = np.split(x[t] @ kernel + bias + h @ hidden_kernel, 4)
      c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
      h = _sigmoid(o) * np.tanh(c)
      outputs.append(h)
    x = np.stack(outputs)
  return x


def _jiggled(params, seed: int):
  """The parameters plus noise, so that zero-initialised biases count too."""
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map(
      lambda a: jnp.asarray(np.asarray(a) + 0.3 * rng.normal(size=a.shape), jnp.float32), params)


# ---- the stream, its windows and batches, the learning rate


def test_the_stream_is_every_review_followed_by_eos():
  assert lstm_lm.EOS_ID == 3
  first = Ragged(np.array([11, 12, 13, 14, 15, 16], np.int32), np.array([2, 1, 3], np.int32))
  second = Ragged(np.array([21, 22, 23, 24, 25], np.int32), np.array([5], np.int32))
  stream = lstm_lm.lm_stream([first, second])
  np.testing.assert_array_equal(stream, [11, 12, 3, 13, 3, 14, 15, 16, 3, 21, 22, 23, 24, 25, 3])
  assert stream.dtype == np.int32


def test_the_windows_are_the_stream_shifted_by_one():
  stream = np.arange(23, dtype=np.int32)
  inputs, targets = lstm_lm.lm_windows(stream, 5, 0)
  np.testing.assert_array_equal(inputs, [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9],
                                         [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]])
  np.testing.assert_array_equal(targets, [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10],
                                          [11, 12, 13, 14, 15], [16, 17, 18, 19, 20]])
  inputs, targets = lstm_lm.lm_windows(stream, 5, 3)
  np.testing.assert_array_equal(inputs, [[3, 4, 5, 6, 7], [8, 9, 10, 11, 12],
                                         [13, 14, 15, 16, 17]])
  np.testing.assert_array_equal(targets, [[4, 5, 6, 7, 8], [9, 10, 11, 12, 13],
                                          [14, 15, 16, 17, 18]])
  # A stream of window + 1 tokens fills exactly one window.
  inputs, targets = lstm_lm.lm_windows(np.arange(6), 5, 0)
  np.testing.assert_array_equal(inputs, [[0, 1, 2, 3, 4]])
  np.testing.assert_array_equal(targets, [[1, 2, 3, 4, 5]])


def test_the_windows_refuse_a_bad_offset_and_a_short_stream():
  stream = np.arange(23)
  with pytest.raises(ValueError, match=r"offset: expected 0 <= offset < window = 5, got 5"):
    lstm_lm.lm_windows(stream, 5, 5)
  with pytest.raises(ValueError, match=r"offset: expected 0 <= offset < window = 5, got -1"):
    lstm_lm.lm_windows(stream, 5, -1)
  with pytest.raises(ValueError, match=r"a stream of 5 tokens fills no window of 5 \+ 1 tokens"):
    lstm_lm.lm_windows(np.arange(5), 5, 0)
  # 9 tokens fill one window of 7 from offset 1, but none from offset 2.
  assert lstm_lm.lm_windows(np.arange(9), 7, 1)[0].shape == (1, 7)
  with pytest.raises(ValueError, match=r"a stream of 9 tokens fills no window of 7 \+ 1 tokens"):
    lstm_lm.lm_windows(np.arange(9), 7, 2)


def test_an_epochs_batches_follow_its_seed_and_epoch():
  stream = np.arange(101, dtype=np.int32)
  window, batch_size = 7, 3
  batches = list(lstm_lm.epoch_batches(stream, window, batch_size, seed=4, epoch=0))
  again = list(lstm_lm.epoch_batches(stream, window, batch_size, seed=4, epoch=0))
  other = list(lstm_lm.epoch_batches(stream, window, batch_size, seed=4, epoch=1))
  for (a, b), (c, d) in zip(batches, again, strict=True):
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, d)
  assert len(batches) and len(other)
  assert any(not np.array_equal(a, c) for (a, _), (c, _) in zip(batches, other))
  for epoch_batches in (batches, other):
    starts = []
    for inputs, targets in epoch_batches:
      assert inputs.shape == targets.shape == (batch_size, window)
      for row, target in zip(inputs, targets):
        # The stream is its positions: a row is a stretch of it, its targets one token on.
        np.testing.assert_array_equal(row, np.arange(row[0], row[0] + window))
        np.testing.assert_array_equal(target, np.arange(row[0] + 1, row[0] + window + 1))
        starts.append(int(row[0]))
    offset = starts[0] % window
    assert {s % window for s in starts} == {offset} and len(set(starts)) == len(starts)
    # Every whole batch of the windows at that offset, and no more.
    assert len(epoch_batches) == ((101 - offset - 1) // window) // batch_size
    assert max(starts) + window + 1 <= 101


def test_the_learning_rate_warms_up_then_decays_to_a_tenth():
  peak, warmup, total = 0.3, 4, 15  # the cosine runs over steps 4 .. 14, its midpoint step 9
  assert lstm_lm.warmup_cosine(0, total, peak, warmup) == pytest.approx(0.075, rel=1e-12)
  assert lstm_lm.warmup_cosine(1, total, peak, warmup) == pytest.approx(0.15, rel=1e-12)
  assert lstm_lm.warmup_cosine(3, total, peak, warmup) == pytest.approx(0.3, rel=1e-12)
  assert lstm_lm.warmup_cosine(4, total, peak, warmup) == pytest.approx(0.3, rel=1e-12)
  assert lstm_lm.warmup_cosine(9, total, peak, warmup) == pytest.approx(0.165, rel=1e-12)
  assert lstm_lm.warmup_cosine(14, total, peak, warmup) == pytest.approx(0.03, rel=1e-12)
  rates = [lstm_lm.warmup_cosine(s, total, peak, warmup) for s in range(total)]
  assert all(a > b for a, b in zip(rates[4:], rates[5:]))


# ---- the networks


def test_concat_pool_reads_only_each_sequences_real_steps():
  rng = np.random.default_rng(3)
  outputs = rng.normal(size=(3, 7, 5)).astype(np.float32)
  last = rng.normal(size=(3, 5)).astype(np.float32)
  lengths = np.array([7, 2, 4])
  got = np.asarray(lstm_lm.concat_pool(jnp.asarray(outputs), jnp.asarray(last),
                                       jnp.asarray(lengths)))
  want = np.stack([np.concatenate([last[b], outputs[b, :n].max(axis=0),
                                   outputs[b, :n].astype(np.float64).mean(axis=0)])
                   for b, n in enumerate(lengths)])
  assert got.shape == (3, 15) and got.dtype == np.float32
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
  huge = outputs.copy()
  huge[1, 2:] = 1e30
  huge[2, 4:] = -1e30
  huge[2, 5] = 3e30
  np.testing.assert_array_equal(
      lstm_lm.concat_pool(jnp.asarray(huge), jnp.asarray(last), jnp.asarray(lengths)), got)


def test_the_language_models_output_layer_is_its_input_embedding():
  """logits_t = (W h_t + b) E^T + c, with h_t the LSTM's output over E[x_1 .. x_t], in numpy."""
  v, config = 17, ModelConfig(embed_dim=5, hidden_size=7, num_layers=1, word_dropout=0.3)
  model = LanguageModel(v, config, output_dropout=0.4)
  tokens = np.random.default_rng(1).integers(0, v, (2, 9)).astype(np.int32)
  params = model.init(jax.random.PRNGKey(0), jnp.asarray(tokens))["params"]
  assert set(params) == {"trunk", "project", "output_bias"} and "output" not in params["trunk"]
  params = _jiggled(params, seed=2)
  got = np.asarray(model.apply({"params": params}, jnp.asarray(tokens), deterministic=True))
  assert got.shape == (2, 9, v) and got.dtype == np.float32
  p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)
  table = p["trunk"]["embed"]["embedding"]  # (V, De)
  for b in range(2):
    outputs = _lstm_by_hand(params["trunk"]["lstm"], table[tokens[b]])  # (9, H)
    query = outputs @ p["project"]["kernel"] + p["project"]["bias"]  # (9, De)
    np.testing.assert_allclose(got[b], query @ table.T + p["output_bias"], rtol=1e-5, atol=1e-5)


def test_a_token_changes_no_logit_before_it():
  v, config = 19, ModelConfig(embed_dim=5, hidden_size=7, num_layers=2)
  model = LanguageModel(v, config)
  tokens = np.random.default_rng(4).integers(0, v, (3, 11)).astype(np.int32)
  params = model.init(jax.random.PRNGKey(1), jnp.asarray(tokens))["params"]
  changed = tokens.copy()
  changed[1, 6] = (tokens[1, 6] + 5) % v
  before = np.asarray(model.apply({"params": params}, jnp.asarray(tokens)))
  after = np.asarray(model.apply({"params": params}, jnp.asarray(changed)))
  np.testing.assert_allclose(after[:, :6], before[:, :6], rtol=0, atol=1e-6)
  np.testing.assert_allclose(after[[0, 2]], before[[0, 2]], rtol=0, atol=1e-6)
  assert (np.abs(after[1, 6:] - before[1, 6:]).max(axis=-1) > 1e-4).all()


def test_the_classifier_pools_the_real_steps_and_padding_changes_no_logit():
  """logits = V [h_n, max_t h_t, mean_t h_t] + v in numpy; wider padding, even of non-pad ids,
  gives the same logits; the trunk's parameters are the language model's."""
  v, config = 23, ModelConfig(embed_dim=5, hidden_size=7, num_layers=2)
  model = Classifier(v, config, dropout=0.5)
  rng = np.random.default_rng(6)
  lengths = np.array([9, 4, 6])
  tokens = rng.integers(4, v, (3, 9)).astype(np.int32)
  tokens[np.arange(9)[None, :] >= lengths[:, None]] = 0
  params = model.init(jax.random.PRNGKey(2), jnp.asarray(tokens), jnp.asarray(lengths))["params"]
  params = _jiggled(params, seed=7)
  got = np.asarray(model.apply({"params": params}, jnp.asarray(tokens), jnp.asarray(lengths)))
  assert got.shape == (3, 2) and got.dtype == np.float32
  p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)
  for b, n in enumerate(lengths):
    embedded = p["trunk"]["embed"]["embedding"][tokens[b, :n]]  # (n, De)
    outputs = _lstm_by_hand(params["trunk"]["lstm"], embedded)  # (n, H)
    pooled = np.concatenate([outputs[-1], outputs.max(axis=0), outputs.mean(axis=0)])  # (3H,)
    want = pooled @ p["head"]["kernel"] + p["head"]["bias"]
    np.testing.assert_allclose(got[b], want, rtol=1e-5, atol=1e-5)
  wider = np.concatenate([tokens, np.zeros((3, 6), np.int32)], axis=1)  # (3, 15)
  junk = wider.copy()
  junk[np.arange(15)[None, :] >= lengths[:, None]] = rng.integers(4, v, 15 * 3 - lengths.sum())
  for padded in (wider, junk):
    np.testing.assert_allclose(
        model.apply({"params": params}, jnp.asarray(padded), jnp.asarray(lengths)), got,
        rtol=0, atol=1e-5)
  lm = LanguageModel(v, config).init(jax.random.PRNGKey(3), jnp.asarray(tokens))["params"]
  assert (jax.tree_util.tree_structure(lm["trunk"])
          == jax.tree_util.tree_structure(params["trunk"]))
  assert (jax.tree_util.tree_map(np.shape, lm["trunk"])
          == jax.tree_util.tree_map(np.shape, params["trunk"]))
  assert set(params) == {"trunk", "head"} and params["head"]["kernel"].shape == (21, 2)


def test_saved_parameters_load_as_they_were(tmp_path):
  rng = np.random.default_rng(8)
  normal = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
  params = {"output_bias": normal(13),
            "trunk": {"embed": {"embedding": normal(13, 5)},
                      "lstm": {"layers_0": {"hidden_kernel": normal(1, 3, 11)}}}}
  record = {"steps": 7, "model": {"embed_dim": 5}, "curve": [{"step": 7, "train_loss": 1.25}]}
  path = str(tmp_path / "lm.npz")
  lstm_lm.save_params(path, params, record)
  loaded, loaded_record = lstm_lm.load_params(path)
  assert loaded_record == record and os.listdir(tmp_path) == ["lm.npz"]
  assert jax.tree_util.tree_structure(loaded) == jax.tree_util.tree_structure(params)
  for a, b in zip(jax.tree_util.tree_leaves(loaded), jax.tree_util.tree_leaves(params)):
    np.testing.assert_array_equal(a, b)
    assert a.dtype == b.dtype
  with pytest.raises(FileNotFoundError, match="lstm_lm.py pretrain"):
    lstm_lm.load_params(str(tmp_path / "none.npz"))
  np.savez(tmp_path / "other.npz", embedding=np.zeros(3))
  with pytest.raises(ValueError, match="other.npz is not a file of lstm_lm.py pretrain"):
    lstm_lm.load_params(str(tmp_path / "other.npz"))


# ---- the reviews file


def _review_arrays() -> dict[str, np.ndarray]:
  """A small valid reviews file's arrays, as export_reviews writes them (vocabulary of 19)."""
  rng = np.random.default_rng(9)
  arrays = {"vocab_size": np.int64(19),
            "source": np.asarray(json.dumps({"run": "by hand", "max_len": 7}))}
  for split, lengths in (("train", [3, 5, 2]), ("dev", [4, 1]), ("test", [2, 6, 3, 1]),
                         ("unlabelled", [7])):
    arrays[f"{split}_ids"] = rng.integers(0, 19, sum(lengths)).astype(np.uint16)
    arrays[f"{split}_lengths"] = np.asarray(lengths, np.int32)
  arrays["train_labels"] = np.array([1, 0, 1], np.int8)
  arrays["dev_labels"] = np.array([0, 1], np.int8)
  arrays["test_labels"] = np.array([1, 1, 0, 0], np.int8)
  arrays["dev_index"] = np.array([17, 4], np.int64)
  arrays["test_index"] = np.array([3, 11, 0, 25], np.int64)
  return arrays


def test_a_reviews_file_loads_split_by_split(tmp_path):
  arrays = _review_arrays()
  np.savez(tmp_path / "r.npz", **arrays)
  reviews = lstm_lm.load_reviews(str(tmp_path / "r.npz"))
  assert reviews.vocab_size == 19 and reviews.source == {"run": "by hand", "max_len": 7}
  for split in ("train", "dev", "test", "unlabelled"):
    ragged = reviews.ids[split]
    np.testing.assert_array_equal(ragged.lengths, arrays[f"{split}_lengths"])
    ends = np.cumsum(arrays[f"{split}_lengths"])
    for i, end in enumerate(ends):
      np.testing.assert_array_equal(ragged[i], arrays[f"{split}_ids"][end - ragged.lengths[i]:end])
  for split in ("train", "dev", "test"):
    np.testing.assert_array_equal(reviews.labels[split], arrays[f"{split}_labels"])
  np.testing.assert_array_equal(reviews.index["dev"], [17, 4])
  np.testing.assert_array_equal(reviews.index["test"], [3, 11, 0, 25])
  assert set(reviews.index) == {"dev", "test"}


@pytest.mark.parametrize("changes, message", [
    ({"test_index": None}, r"lacks \['test_index'\]: not a file of export_reviews"),
    ({"vocab_size": None, "unlabelled_lengths": None},
     r"lacks \['vocab_size', 'unlabelled_lengths'\]"),
    ({"dev_lengths": np.array([4, 2], np.int32)},
     "dev_lengths do not cut dev_ids into non-empty reviews"),
    ({"train_lengths": np.array([3, 0, 5, 2], np.int32), "train_labels": np.array([1, 0, 1, 1])},
     "train_lengths do not cut train_ids into non-empty reviews"),
    ({"test_labels": np.array([1, 2, 0, 0], np.int8)},
     "test_labels must hold one 0/1 label per review"),
    ({"train_labels": np.array([1, 0], np.int8)}, "train_labels must hold one 0/1 label per"),
    ({"unlabelled_ids": np.array([0, 1, 2, 19, 4, 5, 6], np.uint16)},
     r"unlabelled_ids outside the vocabulary \[0, 19\)"),
    ({"dev_index": np.array([17], np.int64)}, "dev_index must hold one index per review"),
], ids=["missing_key", "missing_keys", "lengths_not_summing", "empty_review", "label_2",
        "labels_too_few", "id_outside", "index_too_short"])
def test_a_reviews_file_names_what_is_missing_or_wrong(tmp_path, changes, message):
  arrays = _review_arrays()
  for key, value in changes.items():
    if value is None:
      del arrays[key]
    else:
      arrays[key] = value
  np.savez(tmp_path / "r.npz", **arrays)
  with pytest.raises(ValueError, match=message):
    lstm_lm.load_reviews(str(tmp_path / "r.npz"))


def test_a_missing_or_foreign_reviews_file_says_how_to_write_one(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"no reviews file at .*none.npz: write one with "
                                              r"`python -m experiments.sentiment.export_reviews`"):
    lstm_lm.load_reviews(str(tmp_path / "none.npz"))
  (tmp_path / "text.npz").write_text("not an archive")
  with pytest.raises(ValueError, match="text.npz is not a readable .npz reviews file"):
    lstm_lm.load_reviews(str(tmp_path / "text.npz"))


# ---- end to end on the shipped sample


@pytest.fixture(scope="module")
def sample(tmp_path_factory, quick_compiles):
  """A briefly trained ngram_attn run on the shipped IMDB sample (reviews cut to 64 tokens) and
  its reviews exported: (root, the run's directory, the reviews file)."""
  del quick_compiles  # set up first, so that the run compiles quickly too
  root = tmp_path_factory.mktemp("lstm_lm")
  workdir = train_sample_ngram_run(root, max_len=64, boundaries=(21, 64), steps=3)
  path = root / "exported" / "reviews.npz"
  assert export_reviews.main(["--workdir", workdir, "--out", str(path)]) == 0
  return root, workdir, str(path)


@pytest.fixture(scope="module")
def language_model(sample, quick_compiles):
  """The folder of a tiny language model pretrained for 120 steps on the sample's reviews."""
  del quick_compiles
  out = str(sample[0] / "lm")
  assert lstm_lm.main(["pretrain", "--reviews", sample[2], "--out", out, *TINY_FLAGS,
                       "--window", "16", "--batch-size", "8", "--steps", "120",
                       "--warmup-steps", "5", "--lr", "1e-2"]) == 0
  return out


def test_export_reviews_writes_the_runs_reviews_split_by_split(sample):
  _, workdir, path = sample
  reviews = lstm_lm.load_reviews(path)
  run = runs.load_run(workdir)
  data = run.task.data
  counts = {split: data.num_examples(split) for split in ("train", "dev", "test")}
  assert {split: len(reviews.ids[split]) for split in counts} == counts
  assert len(reviews.ids["unlabelled"]) == 300
  assert reviews.vocab_size == len(run.task.vocab)
  assert reviews.source == {"run": workdir, "protocol": run.config.data.protocol,
                            "split_seed": run.config.data.split_seed, "max_len": 64,
                            "vocab_size": len(run.task.vocab),
                            "reviews": {**counts, "unlabelled": 300}}
  for split in counts:
    tokens = data.splits[split].sequences["tokens"]
    for i in range(counts[split]):
      np.testing.assert_array_equal(reviews.ids[split][i], np.asarray(tokens[i]))
    np.testing.assert_array_equal(reviews.labels[split], data.splits[split].scalars["label"])
  for split in ("dev", "test"):
    np.testing.assert_array_equal(reviews.index[split], data.splits[split].scalars["index"])
  records = unlabelled_records(run)
  assert len(records) == 300
  for i, record in enumerate(records):
    np.testing.assert_array_equal(reviews.ids["unlabelled"][i], run.task.encode(record["text"])[1])
  assert reviews.ids["unlabelled"].lengths.max() <= 64
  with np.load(path) as raw:  # a vocabulary of fewer than 65,537 ids is stored as uint16
    assert raw["train_ids"].dtype == np.uint16 and raw["dev_labels"].dtype == np.int8


def test_pretraining_lowers_the_loss_and_saves_what_it_learned(sample, language_model):
  reviews = lstm_lm.load_reviews(sample[2])
  with open(os.path.join(language_model, "lm.json")) as f:
    record = json.load(f)
  params, saved = lstm_lm.load_params(os.path.join(language_model, "lm.npz"))
  assert saved == record
  assert record["steps"] == record["steps_planned"] == 120
  assert record["command"].startswith(f"lstm_lm.py pretrain --reviews {sample[2]} ")
  assert [row["step"] for row in record["curve"]] == [100, 120]
  assert record["curve"][-1]["train_loss"] < record["curve"][0]["train_loss"]
  assert record["held_out_perplexity"] < reviews.vocab_size
  assert record["model"] == {"embed_dim": 8, "hidden_size": 12, "num_layers": 1,
                             "word_dropout": 0.1, "dtype": "float32"}
  stream = lstm_lm.lm_stream([reviews.ids["train"], reviews.ids["unlabelled"]])
  assert record["stream_tokens"] == len(stream)
  assert record["steps_per_epoch"] == ((len(stream) - 1) // 16) // 8
  # The saved parameters are the trained ones: they give the record's held-out perplexity on
  # dev's windows, computed here in numpy.
  config = ModelConfig(embed_dim=8, hidden_size=12)
  model = LanguageModel(reviews.vocab_size, config)
  assert (jax.tree_util.tree_map(np.shape, params) == jax.tree_util.tree_map(
      np.shape, model.init(jax.random.PRNGKey(0), jnp.ones((1, 8), jnp.int32))["params"]))
  held_out = lstm_lm.lm_stream([reviews.ids["dev"]])
  assert record["held_out_tokens"] == len(held_out)
  count = (len(held_out) - 1) // 16
  inputs = held_out[:count * 16].reshape(count, 16)
  targets = held_out[1:count * 16 + 1].reshape(count, 16)
  logits_of = jax.jit(lambda tokens: model.apply({"params": params}, tokens))
  nats, chunk = 0.0, 64
  for start in range(0, count, chunk):
    rows = inputs[start:start + chunk]
    padded = np.concatenate([rows, np.zeros((chunk - len(rows), 16), np.int32)])
    logits = np.asarray(logits_of(padded), np.float64)[:len(rows)]  # (n, 16, V)
    top = logits.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(axis=-1)) + top[..., 0]
    picked = np.take_along_axis(logits, targets[start:start + chunk, :, None], -1)[..., 0]
    nats += float((log_z - picked).sum())
  loss = nats / inputs.size
  assert record["held_out_loss"] == pytest.approx(loss, abs=2e-4)
  assert record["held_out_perplexity"] == pytest.approx(np.exp(loss), rel=2e-4)


def test_fine_tuning_writes_a_member_per_seed_with_dev_choosing_the_epoch(sample, language_model):
  reviews = lstm_lm.load_reviews(sample[2])
  out = str(sample[0] / "classifiers")
  lm_path = os.path.join(language_model, "lm.npz")
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--pretrained", lm_path, "--out", out,
                       "--seeds", "0", "1", *TINY_FLAGS, "--epochs", "2", "--max-len", "32",
                       "--widths", "16", "32"]) == 0
  _, pretrained = lstm_lm.load_params(lm_path)
  log_odds = {}
  for seed in (0, 1):
    with open(os.path.join(out, f"classifier-seed{seed}.json")) as f:
      record = json.load(f)
    with np.load(os.path.join(out, f"classifier-seed{seed}.npz")) as member:
      assert json.loads(str(member["record"])) == record
      for split in ("dev", "test"):
        assert member[f"{split}_log_odds"].shape == (len(reviews.ids[split]),)
        np.testing.assert_array_equal(member[f"{split}_index"], reviews.index[split])
        np.testing.assert_array_equal(member[f"{split}_labels"], reviews.labels[split])
      log_odds[seed] = {split: member[f"{split}_log_odds"] for split in ("dev", "test")}
    assert record["pretrained"] is True and record["finetuning"]["seed"] == seed
    assert record["command"].startswith(f"lstm_lm.py finetune --reviews {sample[2]} ")
    assert record["pretrained_from"] == {"file": lm_path, "steps": 120,
                                         "held_out_perplexity": pretrained["held_out_perplexity"]}
    accuracies = [row["dev_accuracy"] for row in record["epochs"]]
    assert [row["epoch"] for row in record["epochs"]] == [1, 2]
    assert record["chosen_epoch"] == 1 + accuracies.index(max(accuracies))
    for split in ("dev", "test"):
      recomputed = np.mean((log_odds[seed][split] > 0) == (reviews.labels[split] == 1))
      assert record[f"{split}_accuracy"] == recomputed
    assert record["dev_accuracy"] == max(accuracies)
  assert not np.array_equal(log_odds[0]["test"], log_odds[1]["test"])


def test_fine_tuning_from_scratch_says_so(sample):
  out = str(sample[0] / "scratch")
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--out", out, *TINY_FLAGS,
                       "--epochs", "1", "--max-len", "32", "--widths", "16"]) == 0
  with open(os.path.join(out, "classifier-seed0.json")) as f:
    record = json.load(f)
  assert record["pretrained"] is False and "pretrained_from" not in record
  assert record["chosen_epoch"] == 1 and sorted(os.listdir(out)) == [
      "classifier-seed0.json", "classifier-seed0.npz"]


def test_fine_tuning_refuses_a_language_model_of_other_settings(sample, language_model):
  lm_path = os.path.join(language_model, "lm.npz")
  out = str(sample[0] / "refused")
  with pytest.raises(SystemExit, match=r"lm.npz was pretrained with \{.*'hidden_size': 12.*\}, "
                                       r"not this command's \{.*'hidden_size': 10"):
    lstm_lm.main(["finetune", "--reviews", sample[2], "--pretrained", lm_path, "--out", out,
                  "--embed-dim", "8", "--hidden-size", "10", "--epochs", "1"])
  assert not os.listdir(out)
  # Called directly, a trunk of another vocabulary is refused before any training.
  reviews = lstm_lm.load_reviews(sample[2])
  other = LanguageModel(reviews.vocab_size + 2, ModelConfig(8, 12)).init(
      jax.random.PRNGKey(0), jnp.ones((1, 8), jnp.int32))["params"]["trunk"]
  config = lstm_lm.FinetuneConfig(epochs=1, max_len=32, widths=(16, 32))
  with pytest.raises(ValueError, match="the pretrained trunk's parameters do not fit this "
                                       "classifier"):
    lstm_lm.finetune(reviews, ModelConfig(8, 12), config, other)


def test_the_module_imports_nothing_of_experiments():
  """It runs by path on a machine with jax, flax, optax and numpy only."""
  code = ("import runpy, sys\n"
          "sys.argv = ['lstm_lm.py', '--help']\n"
          "try:\n"
          "  runpy.run_path('experiments/sentiment/lstm_lm.py', run_name='__main__')\n"
          "except SystemExit as e:\n"
          "  assert e.code == 0, e.code\n"
          "print(' '.join(sorted(sys.modules)))\n")
  result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=True, timeout=120)
  help_text, modules = result.stdout.rstrip("\n").rsplit("\n", 1)
  modules = modules.split()
  assert "usage: lstm_lm.py" in help_text and "pretrain" in help_text
  assert "zoo" in modules and "pipelines.batching" in modules and "flax" in modules
  assert [m for m in modules if m == "experiments" or m.startswith("experiments.")] == []
  assert [m for m in modules if m.split(".")[0] in ("tensorflow_datasets", "tensorflow")] == []


def test_fine_tuning_refuses_a_language_model_of_other_reviews(sample, language_model, tmp_path):
  """Another export's ids may mean other words, even with as many of them."""
  with np.load(sample[2]) as raw:
    arrays = {key: raw[key] for key in raw.files}
  source = json.loads(str(arrays["source"]))
  arrays["source"] = np.asarray(json.dumps({**source, "run": "elsewhere"}))
  other = tmp_path / "other.npz"
  np.savez(other, **arrays)
  with pytest.raises(SystemExit, match=r"lm.npz was pretrained on the reviews of .*'run': "
                                       r".*, not on .*other.npz's .*'run': 'elsewhere'"):
    lstm_lm.main(["finetune", "--reviews", str(other), "--out", str(tmp_path / "out"),
                  "--pretrained", os.path.join(language_model, "lm.npz"), *TINY_FLAGS])


def test_pretraining_refuses_a_window_longer_than_devs_reviews(sample):
  reviews = lstm_lm.load_reviews(sample[2])
  held_out = len(lstm_lm.lm_stream([reviews.ids["dev"]]))
  config = lstm_lm.PretrainConfig(window=held_out, batch_size=1, steps=1)
  with pytest.raises(ValueError, match=f"dev's reviews hold {held_out} tokens, too few for one "
                                       f"held-out window of {held_out} \\+ 1"):
    lstm_lm.pretrain(reviews, ModelConfig(8, 12), config)


@pytest.fixture(scope="module")
def member(sample, language_model):
  """A classifier fine-tuned for one epoch from the tiny language model: its member file."""
  out = str(sample[0] / "member")
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--out", out, *TINY_FLAGS,
                       "--pretrained", os.path.join(language_model, "lm.npz"), "--epochs", "1",
                       "--max-len", "32", "--widths", "16", "32"]) == 0
  return os.path.join(out, "classifier-seed0.npz")


def test_the_ensemble_blends_a_member_by_its_reviews_indices(sample, member, capsys):
  root, workdir, _ = sample
  out = root / "blend" / "ensemble.json"
  assert ensemble.main(["--workdir", workdir, "--out", str(out), "--max-n", "1", "--costs", "1",
                        "--pv-epochs", "0", "--member", f"lstm={member}"]) == 0
  record = json.loads(out.read_text())
  with np.load(member) as raw:
    own = json.loads(str(raw["record"]))
  assert record["ensemble"]["models"] == ["run", "nbsvm", "lstm"]
  assert record["members"]["lstm"] == {
      "file": member, "dev_accuracy": own["dev_accuracy"], "test_accuracy": own["test_accuracy"],
      "pretrained": True, "chosen_epoch": 1, "device": own["device"], "model": own["model"],
      "pretrained_from": own["pretrained_from"]}
  by_weights = {tuple(row[:-1]): row[-1] for row in record["ensemble"]["dev_accuracy_by_weights"]}
  assert by_weights[0.0, 0.0, 1.0] == own["dev_accuracy"]
  assert f"member lstm read from {member}: dev " in capsys.readouterr().err


def test_saved_members_blend_again_to_the_ensembles_blend(sample, member, capsys):
  """ensemble.py --save-members writes its own models' scores; blend.py, given them and the same
  member in the same order, chooses the same weights and scores the same blend, to the bit."""
  root, workdir, _ = sample
  saved = root / "saved"
  out = root / "saved-ensemble.json"
  assert ensemble.main(["--workdir", workdir, "--out", str(out), "--max-n", "1", "--costs", "1",
                        "--pv-epochs", "0", "--member", f"lstm={member}",
                        "--save-members", str(saved)]) == 0
  record = json.loads(out.read_text())
  assert sorted(os.listdir(saved)) == ["nbsvm.npz", "run.npz"]
  assert record["saved_members"] == {"run": str(saved / "run.npz"),
                                     "nbsvm": str(saved / "nbsvm.npz")}
  again = root / "blend.json"
  assert blend.main(["--out", str(again), "--member", f"run={saved / 'run.npz'}",
                     "--member", f"nbsvm={saved / 'nbsvm.npz'}", "--member",
                     f"lstm={member}"]) == 0
  blended = json.loads(again.read_text())
  assert blended["ensemble"] == record["ensemble"]
  assert blended["reviews"] == {split: record["reviews"][split] for split in ("dev", "test")}
  nbsvm = blended["members"]["nbsvm"]
  assert nbsvm["saved_from"]["name"] == "nbsvm" and nbsvm["saved_from"]["ensemble_of"] == workdir
  assert nbsvm["saved_from"]["record"] == record["nbsvm"]
  assert (nbsvm["dev_accuracy"], nbsvm["test_accuracy"]) == (
      record["nbsvm"]["chosen"]["dev_accuracy"], record["nbsvm"]["chosen"]["test_accuracy"])
  assert blended["members"]["run"]["dev_accuracy"] == record["run_alone"]["dev_accuracy"]
  assert blended["members"]["lstm"] == record["members"]["lstm"]
  assert "blend run " in capsys.readouterr().err


@pytest.mark.parametrize("specs, message", [
    (["lstm={member}"], "a blend needs at least two, got 1"),
    (["lstm={member}", "lstm={member}"], "the name 'lstm' is taken"),
    (["lstm={member}", "other={reversed}"], "{reversed} scores other dev reviews than the run's"),
    (["lstm={member}", "other={member}.missing"], "no such file {member}.missing"),
])
def test_blend_names_what_is_wrong_with_its_members(member, tmp_path, capsys, specs, message):
  paths = {"member": member,
           "reversed": _member_with(member, tmp_path / "reversed.npz",
                                    dev_index=lambda a: a[::-1])}
  args = [arg for spec in specs for arg in ("--member", spec.format(**paths))]
  with pytest.raises(SystemExit) as exit_info:
    blend.main(["--out", str(tmp_path / "b.json"), *args])
  assert exit_info.value.code == 2 and message.format(**paths) in capsys.readouterr().err
  assert not (tmp_path / "b.json").exists()


def _member_with(member: str, path, **changes) -> str:
  with np.load(member) as raw:
    arrays = {key: raw[key] for key in raw.files}
  for key, change in changes.items():
    arrays[key] = change(arrays[key])
  np.savez(path, **arrays)
  return str(path)


@pytest.mark.parametrize("changes, message", [
    ({"dev_index": lambda a: a[::-1]}, "scores other dev reviews than the run's"),
    ({"test_index": lambda a: a[:-1]}, "scores other test reviews than the run's"),
    ({"dev_labels": lambda a: 1 - a}, "gives other dev labels than the run's"),
    ({"test_log_odds": lambda a: np.full_like(a, np.nan)},
     "holds log-odds that are not finite on test"),
])
def test_the_ensemble_refuses_a_member_of_other_reviews(sample, member, tmp_path, capsys, changes,
                                                         message):
  path = _member_with(member, tmp_path / "changed.npz", **changes)
  with pytest.raises(SystemExit) as exit_info:
    ensemble.main(["--workdir", sample[1], "--out", str(tmp_path / "e.json"), "--max-n", "1",
                   "--costs", "1", "--pv-epochs", "0", "--member", f"lstm={path}"])
  assert exit_info.value.code == 2
  assert f"--member: {path} {message}" in capsys.readouterr().err
  assert not (tmp_path / "e.json").exists()


@pytest.mark.parametrize("spec, message", [
    ("lstm", "expected NAME=FILE"),
    ("LSTM={member}", "expected NAME=FILE"),
    ("nbsvm={member}", "the name 'nbsvm' is taken"),
    ("lstm=/no/such.npz", "no such file /no/such.npz"),
])
def test_the_ensemble_names_what_is_wrong_with_a_member(sample, member, tmp_path, capsys, spec,
                                                        message):
  with pytest.raises(SystemExit) as exit_info:
    ensemble.main(["--workdir", sample[1], "--out", str(tmp_path / "e.json"),
                   "--member", spec.format(member=member)])
  assert exit_info.value.code == 2 and message in capsys.readouterr().err


def _batchable_review_arrays() -> dict[str, np.ndarray]:
  """_review_arrays with 70 training reviews (a batch of 64) and 3 dev reviews (a held-out
  window), for the GPU scripts' quick mode."""
  arrays = _review_arrays()
  rng = np.random.default_rng(4)
  for split, count in (("train", 70), ("dev", 3)):
    lengths = rng.integers(9, 14, count).astype(np.int32)
    arrays[f"{split}_lengths"] = lengths
    arrays[f"{split}_ids"] = rng.integers(4, 19, lengths.sum()).astype(np.uint16)
    arrays[f"{split}_labels"] = (np.arange(count) % 2).astype(np.int8)
  arrays["dev_index"] = np.array([5, 1, 8])
  return arrays


@pytest.mark.parametrize("recipe", ["gpu", "cpu"])
def test_the_gpu_script_brings_back_the_recipes_files_in_quick_mode(tmp_path, recipe):
  """scripts/lstm_lm_gpu.sh end to end with QUICK=1 (tiny sizes) on this machine: the files a
  device call brings back (at most 8), each seed's member, the log of every stage; RECIPE=cpu
  brings the language model back too."""
  reviews = tmp_path / "reviews.npz"
  np.savez(reviews, **_batchable_review_arrays())
  out = tmp_path / "out"
  env = {**os.environ, "QUICK": "1", "OUT": str(out), "WORK": str(tmp_path / "work"),
         "REVIEWS": str(reviews), "PYTHON": sys.executable, "RECIPE": recipe}
  done = subprocess.run(["bash", "scripts/lstm_lm_gpu.sh"], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stdout + done.stderr
  files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
  lm_files = ["lm.json", "lm.npz"] if recipe == "cpu" else ["lm.json"]
  assert files == ["classifier-seed0.npz", "classifier-seed1.npz", "classifier-seed2.npz",
                   "gpu.log", *lm_files, "scratch/classifier-seed0.npz"]
  log = (out / "gpu.log").read_text()
  for line in ("pretrained 30 steps", "seed 0 (pretrained): dev", "seed 2 (pretrained): dev",
               "seed 0 (from scratch): dev"):
    assert line in log
  for name in files[:3] + files[-1:]:
    with np.load(out / name) as member:
      record = json.loads(str(member["record"]))
      assert record["pretrained"] == (not name.startswith("scratch"))
      np.testing.assert_array_equal(member["dev_index"], [5, 1, 8])


def test_the_pair_script_brings_back_both_directions_in_quick_mode(tmp_path):
  """scripts/lstm_lm_pair_gpu.sh end to end with QUICK=1: a forward and a backward language
  model, each direction's classifiers for seeds 0-2 at both lengths, packed in one tar each."""
  reviews = tmp_path / "reviews.npz"
  np.savez(reviews, **_batchable_review_arrays())
  out = tmp_path / "out"
  env = {**os.environ, "QUICK": "1", "OUT": str(out), "WORK": str(tmp_path / "work"),
         "REVIEWS": str(reviews), "PYTHON": sys.executable}
  done = subprocess.run(["bash", "scripts/lstm_lm_pair_gpu.sh"], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stdout + done.stderr
  assert sorted(p.name for p in out.iterdir()) == ["backward.tar", "forward.tar", "gpu.log"]
  for direction in ("forward", "backward"):
    with tarfile.open(out / f"{direction}.tar") as tar:
      names = sorted(name for name in tar.getnames() if name.endswith((".npz", ".json")))
      assert names == sorted([f"{direction}/lm.json", f"{direction}/lm.npz"] + [
          f"{direction}/len{length}/classifier-seed{seed}.{ext}" for length in (16, 32)
          for seed in range(3) for ext in ("json", "npz")])
      record = json.load(tar.extractfile(f"{direction}/len32/classifier-seed1.json"))
      assert record["source"].get("reversed", False) == (direction == "backward")
      assert record["finetuning"]["max_len"] == 32 and record["finetuning"]["epochs"] == 1
  log = (out / "gpu.log").read_text()
  assert log.count("pretrained 20 steps") == 2 and log.count("(pretrained): dev") == 12


def test_the_command_names_a_missing_or_wrong_file_and_exits_2(tmp_path, capsys):
  for argv, message in (
      (["pretrain", "--reviews", str(tmp_path / "none.npz"), "--out", str(tmp_path)],
       "no reviews file at "),
      (["finetune", "--reviews", str(tmp_path / "r.npz"), "--out", str(tmp_path),
        "--pretrained", str(tmp_path / "lm.npz")], "no pretrained language model at ")):
    np.savez(tmp_path / "r.npz", **_review_arrays())
    with pytest.raises(SystemExit) as exit_info:
      lstm_lm.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_a_vocabulary_cap_makes_the_rarer_words_unknown(tmp_path):
  arrays = _review_arrays()
  np.savez(tmp_path / "r.npz", **arrays)
  reviews = lstm_lm.load_reviews(str(tmp_path / "r.npz"))
  capped = lstm_lm.cap_vocabulary(reviews, 11)
  assert capped.vocab_size == 11 and capped.source == {**reviews.source, "vocab_cap": 11}
  for split in ("train", "dev", "test", "unlabelled"):
    flat = arrays[f"{split}_ids"].astype(np.int32)
    np.testing.assert_array_equal(capped.ids[split].flat, np.where(flat >= 11, 1, flat))
    np.testing.assert_array_equal(capped.ids[split].lengths, arrays[f"{split}_lengths"])
  assert (arrays["train_ids"] >= 11).any()  # the cap acts on this file
  for size in (4, 20):
    with pytest.raises(ValueError, match=f"vocabulary cap: expected 5 to 19 .*, got {size}"):
      lstm_lm.cap_vocabulary(reviews, size)


def test_fine_tuning_needs_the_vocabulary_cap_pretraining_had(sample, tmp_path):
  out = str(tmp_path / "lm")
  assert lstm_lm.main(["pretrain", "--reviews", sample[2], "--out", out, *TINY_FLAGS,
                       "--vocab-cap", "300", "--window", "16", "--batch-size", "8", "--steps",
                       "3", "--warmup-steps", "2"]) == 0
  with open(os.path.join(out, "lm.json")) as f:
    record = json.load(f)
  assert record["vocab_size"] == 300 and record["source"]["vocab_cap"] == 300
  with pytest.raises(SystemExit, match=r"lm.npz was pretrained on a vocabulary of 300 ids, this "
                                       r"command's reviews have [\d,]+: give --vocab-cap"):
    lstm_lm.main(["finetune", "--reviews", sample[2], "--pretrained", f"{out}/lm.npz",
                  "--out", str(tmp_path / "c"), *TINY_FLAGS])
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--pretrained", f"{out}/lm.npz",
                       "--out", str(tmp_path / "c"), *TINY_FLAGS, "--vocab-cap", "300",
                       "--epochs", "1", "--max-len", "32", "--widths", "16", "32"]) == 0
  with np.load(tmp_path / "c" / "classifier-seed0.npz") as member:
    assert json.loads(str(member["record"]))["source"]["vocab_cap"] == 300


def test_reversed_reviews_read_each_review_from_its_last_word(tmp_path):
  arrays = _review_arrays()
  np.savez(tmp_path / "r.npz", **arrays)
  reviews = lstm_lm.load_reviews(str(tmp_path / "r.npz"))
  backward = lstm_lm.reverse_reviews(reviews)
  assert backward.source == {**reviews.source, "reversed": True}
  for split in ("train", "dev", "test", "unlabelled"):
    lengths = arrays[f"{split}_lengths"]
    pieces = np.split(arrays[f"{split}_ids"].astype(np.int32), np.cumsum(lengths)[:-1])
    np.testing.assert_array_equal(backward.ids[split].flat,
                                  np.concatenate([piece[::-1] for piece in pieces]))
    np.testing.assert_array_equal(backward.ids[split].lengths, lengths)
    np.testing.assert_array_equal(lstm_lm.reverse_reviews(backward).ids[split].flat,
                                  reviews.ids[split].flat)
  assert list(arrays["train_lengths"]) == [3, 5, 2]  # reviews of different lengths
  np.testing.assert_array_equal(backward.ids["train"].flat[3:8], arrays["train_ids"][7:2:-1])
  for split in ("dev", "test"):  # labels and IMDB's indices stay with their reviews
    np.testing.assert_array_equal(backward.labels[split], reviews.labels[split])
    np.testing.assert_array_equal(backward.index[split], reviews.index[split])


def test_a_backward_model_is_fine_tuned_only_backward(sample, tmp_path):
  out = str(tmp_path / "lm")
  assert lstm_lm.main(["pretrain", "--reviews", sample[2], "--out", out, *TINY_FLAGS,
                       "--backward", "--window", "16", "--batch-size", "8", "--steps", "3",
                       "--warmup-steps", "2"]) == 0
  with open(os.path.join(out, "lm.json")) as f:
    assert json.load(f)["source"]["reversed"] is True
  with pytest.raises(SystemExit, match=r"lm.npz reads the reviews backward, this command "
                                       r"forward: give --backward to both commands or to neither"):
    lstm_lm.main(["finetune", "--reviews", sample[2], "--pretrained", f"{out}/lm.npz",
                  "--out", str(tmp_path / "c"), *TINY_FLAGS])
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--pretrained", f"{out}/lm.npz",
                       "--out", str(tmp_path / "c"), *TINY_FLAGS, "--backward",
                       "--epochs", "1", "--max-len", "32", "--widths", "16", "32"]) == 0
  with np.load(tmp_path / "c" / "classifier-seed0.npz") as member:
    assert json.loads(str(member["record"]))["source"]["reversed"] is True
    reviews = lstm_lm.load_reviews(sample[2])
    np.testing.assert_array_equal(member["test_index"], reviews.index["test"])
  forward = str(tmp_path / "forward")
  assert lstm_lm.main(["pretrain", "--reviews", sample[2], "--out", forward, *TINY_FLAGS,
                       "--window", "16", "--batch-size", "8", "--steps", "2",
                       "--warmup-steps", "1"]) == 0
  with pytest.raises(SystemExit, match=r"reads the reviews forward, this command backward"):
    lstm_lm.main(["finetune", "--reviews", sample[2], "--pretrained", f"{forward}/lm.npz",
                  "--out", str(tmp_path / "d"), *TINY_FLAGS, "--backward"])


def test_pretraining_resumes_from_its_checkpoint_to_the_bit(sample, tmp_path, monkeypatch):
  """12 steps straight, against 12 steps interrupted after step 9 and resumed from the
  checkpoint of step 8 (a checkpoint every 4 steps): the same parameters and curve."""
  reviews = lstm_lm.load_reviews(sample[2])
  config = lstm_lm.PretrainConfig(window=16, batch_size=8, steps=12, warmup_steps=3, lr=1e-2,
                                  log_every=4)
  model = ModelConfig(8, 12)
  straight, record = lstm_lm.pretrain(reviews, model, config)
  folder = str(tmp_path / "checkpoints")
  real_batches, served = lstm_lm.epoch_batches, []

  def interrupted(*args):
    for batch in real_batches(*args):
      if len(served) == 9:
        raise KeyboardInterrupt
      served.append(1)
      yield batch
  monkeypatch.setattr(lstm_lm, "epoch_batches", interrupted)
  with pytest.raises(KeyboardInterrupt):
    lstm_lm.pretrain(reviews, model, config, checkpoint_dir=folder, checkpoint_every=4)
  assert sorted(os.listdir(folder)) == ["8"]
  monkeypatch.setattr(lstm_lm, "epoch_batches", real_batches)
  lines = []
  resumed, again = lstm_lm.pretrain(reviews, model, config, lines.append,
                                    checkpoint_dir=folder, checkpoint_every=4)
  assert f"resumed from {folder} at step 8/12" in lines
  assert jax.tree_util.tree_all(jax.tree_util.tree_map(
      lambda a, b: bool(np.array_equal(np.asarray(a), np.asarray(b))), straight, resumed))
  assert [(r["step"], r["train_loss"]) for r in again["curve"]] == [
      (r["step"], r["train_loss"]) for r in record["curve"]] and again["steps"] == 12
  # A checkpoint of other settings is refused, not silently resumed.
  with pytest.raises(ValueError, match="is of a run with other settings or reviews"):
    lstm_lm.pretrain(reviews, model, dataclasses.replace(config, lr=5e-3), checkpoint_dir=folder,
                     checkpoint_every=4)
  with pytest.raises(ValueError, match=r"checkpoint_every: expected a positive multiple of "
                                       r"log_every \(4\), got 6"):
    lstm_lm.pretrain(reviews, model, config, checkpoint_dir=folder, checkpoint_every=6)


def test_head_and_tail_keeps_a_long_reviews_first_and_last_ids():
  rng = np.random.default_rng(7)
  lengths = [3, 11, 7, 1, 8, 13]  # shorter than, equal to and longer than max_len 7
  sequences = [rng.integers(4, 50, size=n).tolist() for n in lengths]
  ragged = Ragged.from_sequences(sequences)
  for head in (0, 2, 5, 7):  # 7 = max_len: the first max_len, as without a head
    cut = lstm_lm.head_and_tail(ragged, 7, head)
    expected = [s if len(s) <= 7 else s[:head] + s[len(s) - (7 - head):] for s in sequences]
    assert [cut[i].tolist() for i in range(len(cut))] == expected
  for head in (-1, 8):
    with pytest.raises(ValueError, match=rf"head: expected 0 to max_len \(7\) tokens, got {head}"):
      lstm_lm.head_and_tail(ragged, 7, head)


def test_the_classifier_reads_head_and_tail_when_asked():
  sequences = [list(range(10, 19)), [5, 6, 7], list(range(20, 26))]
  ragged, labels = Ragged.from_sequences(sequences), np.array([1, 0, 1], np.int32)
  for head, first, third in ((None, [10, 11, 12, 13, 14], [20, 21, 22, 23, 24]),
                             (2, [10, 11, 16, 17, 18], [20, 21, 23, 24, 25]),
                             (0, [14, 15, 16, 17, 18], [21, 22, 23, 24, 25])):
    config = lstm_lm.FinetuneConfig(batch_size=3, max_len=5, widths=(3,))
    batcher = lstm_lm._classifier_batcher(  # pylint: disable=protected-access
        ragged, labels, config, head)
    seen = {}
    for batch in batcher.eval_batches():
      for row, tokens, length, weight in zip(batch["row"], batch["tokens"], batch["tokens_len"],
                                             batch["weight"]):
        if weight > 0:
          seen[int(row)] = tokens[:length].tolist()
    assert seen == {0: first, 1: [5, 6, 7], 2: third}


def test_fine_tuning_with_a_head_records_it_and_refuses_one_past_max_len(sample, tmp_path, capsys):
  out = tmp_path / "c"
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--out", str(out), *TINY_FLAGS,
                       "--epochs", "1", "--max-len", "32", "--widths", "16", "32",
                       "--head", "8"]) == 0
  with open(out / "classifier-seed0.json") as f:
    assert json.load(f)["finetuning"]["head"] == 8
  with pytest.raises(SystemExit) as exit_info:
    lstm_lm.main(["finetune", "--reviews", sample[2], "--out", str(out), *TINY_FLAGS,
                  "--max-len", "32", "--head", "40"])
  assert exit_info.value.code == 2
  assert "head: expected 0 to max_len (32) tokens, got 40" in capsys.readouterr().err


def _cut_reviews(path: str, out: str) -> None:
  """`path`'s reviews file written to `out` with each labelled review cut to its first 9 to 63
  ids (the sample's are 64 long)."""
  with np.load(path) as data:
    arrays = {key: data[key] for key in data.files}
  for split in ("train", "dev", "test"):
    lengths = arrays[f"{split}_lengths"]
    keep = np.minimum(lengths, 9 + (np.arange(len(lengths)) * 13) % 55)
    starts = np.cumsum(lengths) - lengths
    arrays[f"{split}_ids"] = np.concatenate(
        [arrays[f"{split}_ids"][start:start + n] for start, n in zip(starts, keep)])
    arrays[f"{split}_lengths"] = keep.astype(lengths.dtype)
  np.savez(out, **arrays)


def test_also_first_scores_a_long_review_by_the_mean_of_its_two_views(sample, tmp_path, capsys):
  path = str(tmp_path / "cut.npz")
  _cut_reviews(sample[2], path)
  reviews = lstm_lm.load_reviews(path)
  flags = [*TINY_FLAGS, "--epochs", "1", "--max-len", "24", "--widths", "8", "24", "--head", "5"]
  members, records = {}, {}
  for name, extra in (("kept", []), ("both", ["--also-first"])):
    assert lstm_lm.main(["finetune", "--reviews", path, "--out", str(tmp_path / name),
                         *flags, *extra]) == 0
    with np.load(tmp_path / name / "classifier-seed0.npz") as member:
      members[name] = {split: member[f"{split}_log_odds"] for split in ("dev", "test")}
      members[name].update({f"{split}_views": {view: member[f"{split}_long_{view}"]
                                               for view in ("rows", "head_and_tail", "first")}
                            for split in ("dev", "test") if f"{split}_long_rows" in member})
      records[name] = json.loads(str(member["record"]))
  assert records["both"]["finetuning"]["also_first"] is True
  assert "long_reviews" not in records["kept"] and set(members["kept"]) == {"dev", "test"}
  for split in ("dev", "test"):
    labels, long = reviews.labels[split] == 1, reviews.ids[split].lengths > 24
    kept, both = members["kept"][split], members["both"][split]
    assert 0 < long.sum() < len(long)
    np.testing.assert_array_equal(both[~long], kept[~long])  # one view, one pass: the same ids
    assert not np.array_equal(both[long], kept[long])
    views = members["both"][f"{split}_views"]
    np.testing.assert_array_equal(views["rows"], np.flatnonzero(long))
    np.testing.assert_array_equal(views["head_and_tail"], kept[long])
    np.testing.assert_allclose(both[long], (kept[long] + views["first"]) / 2)
    assert records["both"]["long_reviews"][split] == {
        "count": int(long.sum()),
        **{view: float(np.mean((views[view] > 0) == labels[long]))
           for view in ("head_and_tail", "first")},
        "mean": float(np.mean((both[long] > 0) == labels[long]))}
    assert records["both"][f"{split}_accuracy"] == float(np.mean((both > 0) == labels))
  with pytest.raises(SystemExit) as exit_info:
    lstm_lm.main(["finetune", "--reviews", sample[2], "--out", str(tmp_path / "x"), *TINY_FLAGS,
                  "--also-first"])
  assert exit_info.value.code == 2
  assert "also_first: scores a second view beside the head and tail; give head too" in (
      capsys.readouterr().err)


# ---- adversarial training


def test_the_adversarial_perturbation_has_norm_epsilon_along_each_reviews_gradient():
  rng = np.random.default_rng(11)
  gradient = rng.normal(size=(3, 5, 7))
  gradient[1] = 0.0  # a batch's filler row
  gradient[2] *= 1e-30  # far below float32's square root of its smallest normal number
  got = np.asarray(lstm_lm.adversarial_perturbation(jnp.asarray(gradient, jnp.float32), 0.37))
  assert got.shape == (3, 5, 7) and got.dtype == np.float32
  for b in (0, 2):
    want = 0.37 * gradient[b] / np.sqrt(np.sum(gradient[b] ** 2))
    np.testing.assert_allclose(got[b], want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.sqrt(np.sum(got[b].astype(np.float64) ** 2)), 0.37, rtol=1e-6)
  np.testing.assert_array_equal(got[1], 0.0)


def _a_batch(v: int, rng: np.random.Generator):
  """tokens int32 (3, 9) padded with 0 past lengths (9, 4, 6), labels, weights (a filler row)."""
  lengths = np.array([9, 4, 6])
  tokens = rng.integers(4, v, (3, 9)).astype(np.int32)
  tokens[np.arange(9)[None, :] >= lengths[:, None]] = 0
  return (jnp.asarray(tokens), jnp.asarray(lengths), jnp.asarray([1, 0, 1]),
          jnp.asarray([1.0, 1.0, 0.0]))


def test_a_perturbation_moves_the_embedded_words_and_none_past_a_reviews_end():
  v, config = 23, ModelConfig(embed_dim=5, hidden_size=7)
  model = Classifier(v, config)
  tokens, lengths, _, _ = _a_batch(v, np.random.default_rng(3))
  params = _jiggled(model.init(jax.random.PRNGKey(0), tokens, lengths)["params"], seed=4)
  plain = model.apply({"params": params}, tokens, lengths)
  zero = model.apply({"params": params}, tokens, lengths, perturbation=jnp.zeros((3, 9, 5)))
  np.testing.assert_array_equal(zero, plain)
  delta = np.zeros((3, 9, 5), np.float32)
  delta[1, 2] = 0.4  # within review 1
  delta[1, 6] = 9.0  # past its 4 tokens
  moved = np.asarray(model.apply({"params": params}, tokens, lengths,
                                 perturbation=jnp.asarray(delta)))
  np.testing.assert_array_equal(moved[[0, 2]], np.asarray(plain)[[0, 2]])
  table = np.asarray(params["trunk"]["embed"]["embedding"], np.float64)  # (V, De)
  embedded = table[np.asarray(tokens)[1, :4]]  # (4, De)
  embedded[2] += 0.4
  outputs = _lstm_by_hand(params["trunk"]["lstm"], embedded)  # (4, H)
  pooled = np.concatenate([outputs[-1], outputs.max(axis=0), outputs.mean(axis=0)])
  want = pooled @ np.asarray(params["head"]["kernel"], np.float64) + np.asarray(
      params["head"]["bias"], np.float64)
  np.testing.assert_allclose(moved[1], want, rtol=1e-5, atol=1e-5)


def _a_step_case(batch_seed: int, params_seed: int, key_seed: int):
  """A tiny classifier (V 23, De 5, H 7, dropout 0.3), `_a_batch`, jiggled parameters, Adam with
  its state, a dropout key, and loss_at(params, perturbation=None): the step's loss with that key's
  dropout masks, averaged over the real rows."""
  v, config = 23, ModelConfig(embed_dim=5, hidden_size=7)
  model = Classifier(v, config, dropout=0.3)
  tokens, lengths, label, weight = _a_batch(v, np.random.default_rng(batch_seed))
  params = _jiggled(model.init(jax.random.PRNGKey(1), tokens, lengths)["params"],
                    seed=params_seed)
  optimizer = lstm_lm.optimizer_for(1.0)
  key = jax.random.PRNGKey(key_seed)

  def loss_at(params, perturbation=None):
    logits = model.apply({"params": params}, tokens, lengths, deterministic=False,
                         perturbation=perturbation, rngs={"dropout": key})
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, label)
    return jnp.sum(losses * weight) / jnp.sum(weight)

  return (model, (tokens, lengths, label, weight), params, optimizer, optimizer.init(params), key,
          loss_at)


def test_the_adversarial_step_follows_the_clean_and_the_perturbed_losses_gradients():
  """One step against its definition: the clean loss, the perturbation from the gradient at the
  embedded words (zero past each review's end and on the filler row), the loss there (higher),
  and Adam's update of the two losses' summed gradients."""
  model, batch, params, optimizer, opt_state, key, loss_at = _a_step_case(5, 6, 9)
  tokens, lengths, label, weight = batch
  lr, epsilon = 0.01, 0.5

  zeros = jnp.zeros((3, 9, 5))
  towards = np.asarray(jax.grad(loss_at, argnums=1)(params, zeros), np.float64)  # (3, 9, 5)
  assert np.abs(towards[0]).max() > 0 and np.abs(towards[1, :4]).max() > 0
  np.testing.assert_array_equal(towards[1, 4:], 0.0)
  np.testing.assert_array_equal(towards[2], 0.0)
  perturbation = np.zeros_like(towards)
  for b in (0, 1):
    perturbation[b] = epsilon * towards[b] / np.sqrt(np.sum(towards[b] ** 2))
  perturbation = jnp.asarray(perturbation, jnp.float32)
  grads = jax.tree_util.tree_map(jnp.add, jax.grad(loss_at)(params, zeros),
                                 jax.grad(loss_at)(params, perturbation))
  updates, _ = optimizer.update(grads, opt_state, params)
  want = jax.tree_util.tree_map(lambda p, u: p - lr * u, params, updates)

  step = lstm_lm.classifier_train_step(model, optimizer, adversarial=epsilon)
  got, _, losses = step(params, opt_state, tokens, lengths, label, weight, key, lr)
  assert set(losses) == {"loss", "adversarial_loss"}
  np.testing.assert_allclose(losses["loss"], loss_at(params, zeros), rtol=1e-6)
  np.testing.assert_allclose(losses["adversarial_loss"], loss_at(params, perturbation),
                             rtol=1e-5)
  assert losses["adversarial_loss"] > losses["loss"] + 1e-3
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
                         got, want)
  plain = lstm_lm.classifier_train_step(model, optimizer)
  _, _, losses = plain(params, opt_state, tokens, lengths, label, weight, key, lr)
  assert set(losses) == {"loss"}
  np.testing.assert_allclose(losses["loss"], loss_at(params, zeros), rtol=1e-6)


def test_fine_tuning_adversarially_records_both_losses(sample, tmp_path, capsys):
  out = tmp_path / "adv"
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--out", str(out), *TINY_FLAGS,
                       "--epochs", "2", "--max-len", "32", "--widths", "16", "32",
                       "--adversarial", "0.5"]) == 0
  with open(out / "classifier-seed0.json") as f:
    record = json.load(f)
  assert record["finetuning"]["adversarial"] == 0.5
  for row in record["epochs"]:
    assert row["adversarial_loss"] > row["train_loss"] > 0
  assert "(adversarial " in capsys.readouterr().err


# ---- weight drop (DropConnect on the recurrent weights)


def test_drop_connect_drops_a_share_of_each_recurrent_kernel_and_scales_the_rest():
  v, config = 23, ModelConfig(embed_dim=5, hidden_size=31, num_layers=2)
  model = Classifier(v, config)
  tokens, lengths, _, _ = _a_batch(v, np.random.default_rng(7))
  params = model.init(jax.random.PRNGKey(2), tokens, lengths)["params"]
  key, rate = jax.random.PRNGKey(11), 0.3
  dropped = lstm_lm.drop_connect(params, key, rate)
  masks = []
  for layer in ("layers_0", "layers_1"):
    before = np.asarray(params["trunk"]["lstm"][layer]["hidden_kernel"])  # (1, 31, 124)
    after = np.asarray(dropped["trunk"]["lstm"][layer]["hidden_kernel"])
    kept = after != 0
    assert abs(1.0 - kept.mean() - rate) < 0.03  # 3,844 entries
    np.testing.assert_allclose(after[kept], before[kept] / (1.0 - rate), rtol=1e-6)
    masks.append(kept)
  assert (masks[0] != masks[1]).mean() > 0.2  # each kernel its own mask
  flat, flat_dropped = (lstm_lm.traverse_util.flatten_dict(p) for p in (params, dropped))
  for path, value in flat.items():
    if path[-1] != "hidden_kernel":
      assert flat_dropped[path] is value
  again = lstm_lm.drop_connect(params, key, rate)
  other = lstm_lm.drop_connect(params, jax.random.PRNGKey(12), rate)
  hidden = lambda p: np.asarray(p["trunk"]["lstm"]["layers_0"]["hidden_kernel"])
  np.testing.assert_array_equal(hidden(again), hidden(dropped))
  assert (hidden(other) != hidden(dropped)).any()
  assert lstm_lm.drop_connect(params, key, 0.0) is params
  for bad in (1.0, -0.1):
    with pytest.raises(ValueError, match=r"weight drop: expected a rate in \[0, 1\)"):
      lstm_lm.drop_connect(params, key, bad)
  with pytest.raises(ValueError, match="no parameter called 'kernel_hh'"):
    lstm_lm.drop_connect(params, key, rate, name="kernel_hh")


def test_the_weight_dropped_step_follows_the_loss_at_the_dropped_weights():
  """One step with weight drop against its definition: the loss at W_hh * m / (1 - p) (the mask
  from fold_in(key, 1)), its gradient with respect to W_hh masked and scaled by the chain rule,
  every other gradient as at the dropped weights; and at p = 0 the plain step to the bit."""
  model, batch, params, optimizer, opt_state, key, loss_at = _a_step_case(8, 9, 4)
  tokens, lengths, label, weight = batch
  lr, rate = 0.01, 0.4

  dropped = lstm_lm.drop_connect(params, jax.random.fold_in(key, 1), rate)
  kernel = np.asarray(dropped["trunk"]["lstm"]["layers_0"]["hidden_kernel"])
  grads = jax.grad(loss_at)(dropped)
  scale = (kernel != 0) / np.float32(1.0 - rate)  # d (W m / (1 - p)) / d W, entry by entry
  grads["trunk"]["lstm"]["layers_0"]["hidden_kernel"] = (
      grads["trunk"]["lstm"]["layers_0"]["hidden_kernel"] * scale)
  updates, _ = optimizer.update(grads, opt_state, params)
  want = jax.tree_util.tree_map(lambda p, u: p - lr * u, params, updates)

  step = lstm_lm.classifier_train_step(model, optimizer, weight_drop=rate)
  got, _, losses = step(params, opt_state, tokens, lengths, label, weight, key, lr)
  np.testing.assert_allclose(losses["loss"], loss_at(dropped), rtol=1e-6)
  assert abs(float(losses["loss"]) - float(loss_at(params))) > 1e-4
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
                         got, want)
  plain = lstm_lm.classifier_train_step(model, optimizer)
  undropped = lstm_lm.classifier_train_step(model, optimizer, weight_drop=0.0)
  for a, b in zip(jax.tree_util.tree_leaves(plain(params, opt_state, tokens, lengths, label,
                                                  weight, key, lr)),
                  jax.tree_util.tree_leaves(undropped(params, opt_state, tokens, lengths, label,
                                                      weight, key, lr))):
    np.testing.assert_array_equal(a, b)


def test_fine_tuning_with_weight_drop_records_it(sample, tmp_path):
  out = tmp_path / "wd"
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--out", str(out), *TINY_FLAGS,
                       "--epochs", "1", "--max-len", "32", "--widths", "16", "32",
                       "--weight-drop", "0.25"]) == 0
  with open(out / "classifier-seed0.json") as f:
    record = json.load(f)
  assert record["finetuning"]["weight_drop"] == 0.25
  assert record["epochs"][0]["train_loss"] > 0


def test_adversarial_from_trains_the_epochs_before_it_plainly(sample, tmp_path, capsys):
  out = tmp_path / "late"
  assert lstm_lm.main(["finetune", "--reviews", sample[2], "--out", str(out), *TINY_FLAGS,
                       "--epochs", "3", "--max-len", "32", "--widths", "16", "32",
                       "--adversarial", "0.5", "--adversarial-from", "3"]) == 0
  with open(out / "classifier-seed0.json") as f:
    record = json.load(f)
  assert record["finetuning"]["adversarial_from"] == 3
  assert ["adversarial_loss" in row for row in record["epochs"]] == [False, False, True]
  assert record["epochs"][2]["adversarial_loss"] > record["epochs"][2]["train_loss"] > 0
  assert capsys.readouterr().err.count("(adversarial ") == 1


@pytest.mark.parametrize("flags, message", [
    (["--adversarial", "-1"], "adversarial: expected a perturbation norm >= 0 (0: none), got -1.0"),
    (["--adversarial", "0.5", "--adversarial-from", "0"],
     "adversarial_from: expected an epoch from 1 to 3 (the epochs), got 0"),
    (["--adversarial", "0.5", "--adversarial-from", "4"],
     "adversarial_from: expected an epoch from 1 to 3 (the epochs), got 4"),
    (["--weight-drop", "1"],
     "weight_drop: expected a share of the recurrent weights in [0, 1), got 1.0"),
    (["--weight-drop", "-0.5"],
     "weight_drop: expected a share of the recurrent weights in [0, 1), got -0.5"),
])
def test_fine_tuning_names_a_bad_regularizer_setting_and_exits_2(sample, tmp_path, capsys, flags,
                                                                  message):
  with pytest.raises(SystemExit) as exit_info:
    lstm_lm.main(["finetune", "--reviews", sample[2], "--out", str(tmp_path / "x"), *TINY_FLAGS,
                  "--epochs", "3", *flags])
  assert exit_info.value.code == 2
  assert message in capsys.readouterr().err
