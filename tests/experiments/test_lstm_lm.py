"""The LSTM language model and its classifier (experiments.sentiment.lstm_lm): the stream and its
windows, the vocabulary cap, reversal and the pooling against exact values, both networks against
numpy computations from their parameters, the adversarial and weight-dropped steps of the
classifier's run (lm_tasks.ClassifierTask) against their definitions, and a member file of
lstm_lm.save_member blended by `ensemble sentiment` and `blend sentiment` on the shipped IMDB
sample. The runs end to end: test_lm_runs.py."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments import cli
from experiments import runs
from experiments.sentiment import lm_configs
from experiments.sentiment import lstm_lm
from experiments.sentiment.lm_tasks import AdversarialEpochs
from experiments.sentiment.lm_tasks import ClassifierTask
from experiments.sentiment.lstm_lm import Classifier
from experiments.sentiment.lstm_lm import LanguageModel
from experiments.sentiment.lstm_lm import ModelConfig
from _sample_runs import train_sample_ngram_run
from pipelines.batching import Ragged
from pipelines.vocab import Vocab

pytestmark = pytest.mark.usefixtures("quick_compiles")



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


# ---- the reviews' ids


def test_a_vocabulary_cap_makes_the_rarer_words_unknown():
  ragged = Ragged(np.array([4, 12, 18, 11, 3, 10, 19, 7], np.int32), np.array([3, 1, 4]))
  capped = lstm_lm.cap_ids(ragged, 11, vocab_size=20)
  np.testing.assert_array_equal(capped.flat, [4, 1, 1, 1, 3, 10, 1, 7])
  np.testing.assert_array_equal(capped.lengths, [3, 1, 4])
  for size in (4, 21):
    with pytest.raises(ValueError, match=f"vocabulary cap: expected 5 to 20 .*, got {size}"):
      lstm_lm.cap_ids(ragged, size, vocab_size=20)


def test_reversed_reviews_read_each_review_from_its_last_word():
  ragged = Ragged(np.array([4, 12, 18, 11, 3, 10, 19, 7], np.int32), np.array([3, 1, 4]))
  backward = lstm_lm.reverse_each(ragged)
  np.testing.assert_array_equal(backward.flat, [18, 12, 4, 11, 7, 19, 10, 3])
  np.testing.assert_array_equal(backward.lengths, [3, 1, 4])
  np.testing.assert_array_equal(lstm_lm.reverse_each(backward).flat, ragged.flat)


# ---- end to end on the shipped sample


@pytest.fixture(scope="module")
def sample(tmp_path_factory, quick_compiles):
  """A briefly trained ngram_attn run on the shipped IMDB sample (reviews cut to 64 tokens):
  (root, the run's directory)."""
  del quick_compiles  # set up first, so that the run compiles quickly too
  root = tmp_path_factory.mktemp("lstm_lm")
  return root, train_sample_ngram_run(root, max_len=64, boundaries=(21, 64), steps=3)


@pytest.fixture(scope="module")
def member(sample):
  """A member file of the run's dev and test reviews (lstm_lm.save_member, the format a model
  scored elsewhere is blended in), its log-odds drawn at random, its record as a fine-tuned
  classifier's."""
  root, workdir = sample
  data = runs.load_run(workdir).task.data
  rng = np.random.default_rng(12)
  index = {split: data.splits[split].scalars["index"] for split in ("dev", "test")}
  labels = {split: data.splits[split].scalars["label"] for split in ("dev", "test")}
  log_odds = {split: rng.normal(size=len(index[split])) + 0.8 * (2 * labels[split] - 1)
              for split in ("dev", "test")}
  accuracy = {f"{split}_accuracy": float(np.mean((log_odds[split] > 0) == (labels[split] == 1)))
              for split in ("dev", "test")}
  record = {**accuracy, "pretrained": True, "chosen_epoch": 1, "device": "cpu",
            "model": {"embed_dim": 8, "hidden_size": 12}, "pretrained_from": {"run": "lm"}}
  path = str(root / "member" / "classifier-seed0.npz")
  os.makedirs(os.path.dirname(path))
  lstm_lm.save_member(path, index, labels, log_odds, record)
  return path


def test_the_ensemble_blends_a_member_by_its_reviews_indices(sample, member, capsys):
  root, workdir = sample
  out = root / "blend" / "ensemble.json"
  assert cli.main(["ensemble", "sentiment", "--workdir", workdir, "--out", str(out), "--max-n",
                   "1", "--costs", "1", "--pv-epochs", "0", "--member", f"lstm={member}"]) == 0
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
  """`ensemble sentiment --save-members` writes its own models' scores; `blend sentiment`, given
  them and the same member in the same order, chooses the same weights and scores the same blend,
  to the bit."""
  root, workdir = sample
  saved = root / "saved"
  out = root / "saved-ensemble.json"
  assert cli.main(["ensemble", "sentiment", "--workdir", workdir, "--out", str(out), "--max-n",
                   "1", "--costs", "1", "--pv-epochs", "0", "--member", f"lstm={member}",
                   "--save-members", str(saved)]) == 0
  record = json.loads(out.read_text())
  assert sorted(os.listdir(saved)) == ["nbsvm.npz", "run.npz"]
  assert record["saved_members"] == {"run": str(saved / "run.npz"),
                                     "nbsvm": str(saved / "nbsvm.npz")}
  again = root / "blend.json"
  assert cli.main(["blend", "sentiment", "--out", str(again), "--member",
                   f"run={saved / 'run.npz'}", "--member", f"nbsvm={saved / 'nbsvm.npz'}",
                   "--member", f"lstm={member}"]) == 0
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
  assert cli.main(["blend", "sentiment", "--out", str(tmp_path / "b.json"), *args]) == 2
  last = capsys.readouterr().err.splitlines()[-1]  # after the notes of the members read
  assert last.startswith("error: --member: ") and message.format(**paths) in last
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
  assert cli.main(["ensemble", "sentiment", "--workdir", sample[1], "--out",
                   str(tmp_path / "e.json"), "--max-n", "1", "--costs", "1", "--pv-epochs", "0",
                   "--member", f"lstm={path}"]) == 2
  last = capsys.readouterr().err.splitlines()[-1]  # after the notes of the models fitted
  assert last.startswith(f"error: --member: {path} {message}")
  assert not (tmp_path / "e.json").exists()


@pytest.mark.parametrize("spec, message", [
    ("lstm", "expected NAME=FILE"),
    ("LSTM={member}", "expected NAME=FILE"),
    ("nbsvm={member}", "the name 'nbsvm' is taken"),
    ("lstm=/no/such.npz", "no such file /no/such.npz"),
])
def test_the_ensemble_names_what_is_wrong_with_a_member(sample, member, tmp_path, capsys, spec,
                                                        message):
  assert cli.main(["ensemble", "sentiment", "--workdir", sample[1], "--out",
                   str(tmp_path / "e.json"), "--member", spec.format(member=member)]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: --member: ") and message in err and err.count("\n") == 1


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


def _a_step_case(batch_seed: int, params_seed: int, key_seed: int, **levers):
  """The `lstm_lm_classifier` run's task at a tiny size (V 23, De 5, H 7, dropout 0.3, the
  `levers` as model fields), `_a_batch` as its batch, jiggled parameters, a dropout key, and
  loss_at(params, perturbation=None): the step's loss with that key's dropout masks, averaged
  over the real rows."""
  config = lm_configs.lstm_lm_classifier()
  config.experiment, config.model_name = "sentiment", "lstm_lm_classifier"
  config.model = lm_configs.LSTMClassifierConfig(
      embed_dim=5, hidden_size=7, vocab_cap=None, init_from=None, dropout=0.3, **levers)
  task = ClassifierTask(config, artifacts={"vocab": Vocab([f"w{i}" for i in range(19)]),
                                           "bigram_vocab": None})
  model = task.model
  tokens, lengths, label, weight = _a_batch(23, np.random.default_rng(batch_seed))
  batch = {"tokens": tokens, "tokens_len": lengths, "label": label, "weight": weight}
  params = _jiggled(model.init(jax.random.PRNGKey(1), tokens, lengths)["params"],
                    seed=params_seed)
  key = jax.random.PRNGKey(key_seed)

  def loss_at(params, perturbation=None):
    logits = model.apply({"params": params}, tokens, lengths, deterministic=False,
                         perturbation=perturbation, rngs={"dropout": key})
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, label)
    return jnp.sum(losses * weight) / jnp.sum(weight)

  return task, batch, params, key, loss_at


def _assert_close(got, want):
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
                         got, want)


def test_the_adversarial_step_follows_the_clean_and_the_perturbed_losses_gradients():
  """One step's gradient against its definition: the clean loss, the perturbation from the
  gradient at the embedded words (zero past each review's end and on the filler row), the loss
  there (higher), and the two losses' gradients summed."""
  epsilon = 0.5
  task, batch, params, key, loss_at = _a_step_case(5, 6, 9, adversarial=epsilon)
  zeros = jnp.zeros((3, 9, 5))
  towards = np.asarray(jax.grad(loss_at, argnums=1)(params, zeros), np.float64)  # (3, 9, 5)
  assert np.abs(towards[0]).max() > 0 and np.abs(towards[1, :4]).max() > 0
  np.testing.assert_array_equal(towards[1, 4:], 0.0)
  np.testing.assert_array_equal(towards[2], 0.0)
  perturbation = np.zeros_like(towards)
  for b in (0, 1):
    perturbation[b] = epsilon * towards[b] / np.sqrt(np.sum(towards[b] ** 2))
  perturbation = jnp.asarray(perturbation, jnp.float32)
  want = jax.tree_util.tree_map(jnp.add, jax.grad(loss_at)(params, zeros),
                                jax.grad(loss_at)(params, perturbation))

  (objective, metrics), grads = jax.jit(task.loss_and_grads)(params, batch, key)
  clean, moved = loss_at(params, zeros), loss_at(params, perturbation)
  np.testing.assert_allclose(metrics["loss"][0] / metrics["loss"][1], clean, rtol=1e-6)
  np.testing.assert_allclose(metrics["adversarial_loss"][0], moved, rtol=1e-5)
  np.testing.assert_allclose(objective, clean + moved, rtol=1e-5)
  assert moved > clean + 1e-3
  _assert_close(grads, want)
  plain, _, _, _, _ = _a_step_case(5, 6, 9)
  (objective, metrics), grads = jax.jit(plain.loss_and_grads)(params, batch, key)
  assert set(metrics) == {"loss", "accuracy"}
  np.testing.assert_allclose(objective, clean, rtol=1e-6)
  _assert_close(grads, jax.grad(loss_at)(params))


def test_adversarial_from_a_later_epoch_flags_the_batches_and_steps_plainly_before():
  """With adversarial_from 2, the batches of the first epoch say 0 and take the plain step (no
  adversarial loss counted), those from the second say 1 and take the adversarial one."""
  task, batch, params, key, loss_at = _a_step_case(5, 6, 9, adversarial=0.5,
                                                   adversarial_from=2)
  step = jax.jit(task.loss_and_grads)
  (objective, metrics), grads = step(params, {**batch, "adversarial": jnp.zeros(3)}, key)
  assert [float(x) for x in metrics["adversarial_loss"]] == [0.0, 0.0]
  np.testing.assert_allclose(objective, loss_at(params), rtol=1e-6)
  _assert_close(grads, jax.grad(loss_at)(params))
  (objective, metrics), _ = step(params, {**batch, "adversarial": jnp.ones(3)}, key)
  assert float(metrics["adversarial_loss"][1]) == 1.0 and objective > loss_at(params) + 1e-3
  flagged = AdversarialEpochs(iter([{"weight": np.ones(2)}] * 7), per_epoch=3, first=2)
  assert [float(next(flagged)["adversarial"][0]) for _ in range(7)] == [0, 0, 0, 1, 1, 1, 1]


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
  """One step's gradient with weight drop against its definition: the loss at W_hh * m / (1 - p)
  (the mask from fold_in(key, 1)), its gradient with respect to W_hh masked and scaled by the
  chain rule, every other gradient as at the dropped weights."""
  rate = 0.4
  task, batch, params, key, loss_at = _a_step_case(8, 9, 4, weight_drop=rate)
  dropped = lstm_lm.drop_connect(params, jax.random.fold_in(key, 1), rate)
  kernel = np.asarray(dropped["trunk"]["lstm"]["layers_0"]["hidden_kernel"])
  want = jax.grad(loss_at)(dropped)
  scale = (kernel != 0) / np.float32(1.0 - rate)  # d (W m / (1 - p)) / d W, entry by entry
  want["trunk"]["lstm"]["layers_0"]["hidden_kernel"] = (
      want["trunk"]["lstm"]["layers_0"]["hidden_kernel"] * scale)
  (objective, _), grads = jax.jit(task.loss_and_grads)(params, batch, key)
  np.testing.assert_allclose(objective, loss_at(dropped), rtol=1e-6)
  assert abs(float(objective) - float(loss_at(params))) > 1e-4
  _assert_close(grads, want)
