"""The sentence-pair matching experiment on the shipped AFQMC sample: models, metrics, commands."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments import cli
from experiments import config as config_lib
from experiments import runs
from experiments import steps
from experiments import trainer
from experiments.matching import configs
from experiments.matching import metrics as metrics_lib
from experiments.matching import report as report_lib
from experiments.matching import task as task_lib
from experiments.matching.task import MatchingTask
from experiments.train_state import TrainState
from pipelines.tasks import MatchingData

B = 3  # pairs in the small batch
A_LENS, B_LENS = np.array([7, 2, 5], np.int32), np.array([3, 9, 1], np.int32)
SMALL = ("embed_dim=12", "hidden_size=10", "hidden=14", "num_heads=2", "ffn_hidden=14")

pytestmark = pytest.mark.usefixtures("quick_compiles")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
  return MatchingData.load(data_dir=tmp_path_factory.mktemp("data"), max_len=12,
                           boundaries=(12,))


@pytest.fixture(scope="module")
def small_batch(sample):
  """Three real sample pairs cut to odd, all-different lengths, packed as the pipeline packs."""
  batch = next(sample.eval_batches("train", batch_size=B))
  a = [batch["a"][i, :n].tolist() for i, n in enumerate(A_LENS)]
  b = [batch["b"][i, :n].tolist() for i, n in enumerate(B_LENS)]
  assert all(len(x) == n for x, n in zip(a + b, list(A_LENS) + list(B_LENS)))
  packed = task_lib.pack_pairs(a, b, a_width=9, b_width=11)
  packed.update(label=batch["label"], weight=np.ones(B, np.float32))
  return packed


def _small_config(name: str, extra=()) -> config_lib.Config:
  cfg = configs.CONFIGS[name]()
  cfg.experiment, cfg.model_name = "matching", name
  keys = set(config_lib.leaf_paths(cfg))
  wanted = [f"--model.{s}" for s in SMALL if f"model.{s.split('=')[0]}" in keys]
  return config_lib.override(cfg, wanted + ["--data.max_len=12", "--data.boundaries=12"]
                             + list(extra))


def test_pack_pairs_matches_the_pipelines_batches(sample):
  batch = next(sample.eval_batches("dev", batch_size=5))
  real = batch["weight"] > 0
  a = [row[:n].tolist() for row, n in zip(batch["a"][real], batch["a_len"][real])]
  b = [row[:n].tolist() for row, n in zip(batch["b"][real], batch["b_len"][real])]
  packed = task_lib.pack_pairs(a, b, batch["a"].shape[1], batch["b"].shape[1])
  for field in ("a", "a_len", "b", "b_len", "pair", "pair_len", "segments"):
    np.testing.assert_array_equal(packed[field], batch[field][real], err_msg=field)


def test_pack_pairs_exact_layout():
  packed = task_lib.pack_pairs([[11, 12], [13]], [[21], [22, 23, 24]])
  np.testing.assert_array_equal(packed["pair"], [[2, 11, 12, 3, 21, 3, 0, 0],
                                                 [2, 13, 3, 22, 23, 24, 3, 0]])
  np.testing.assert_array_equal(packed["segments"], [[0, 0, 0, 0, 1, 1, 0, 0],
                                                     [0, 0, 0, 1, 1, 1, 1, 0]])
  np.testing.assert_array_equal(packed["pair_len"], [6, 7])
  np.testing.assert_array_equal(packed["a"], [[11, 12], [13, 0]])


# transformer_mlm trains the masked language model instead (test_pretraining_...).
# overlap is fitted without gradient steps (test_matching_overlap.py).
CLASSIFIERS = sorted(name for name in configs.CONFIGS if name not in ("transformer_mlm", "overlap"))


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_every_model_runs_and_trains(name, sample, small_batch):
  """Shapes, attention rows that sum to 1 over the real positions (zero on padding), padding
  invariance, and a few steps that change every parameter; the default model, with a larger
  learning rate, lowers its loss at every step."""
  default = name == configs.DEFAULT_MODEL
  # Without dropout, so that every step of the default model must lower its loss.
  cfg = _small_config(name, (["--optimizer.learning_rate=0.01", "--model.dropout_rate=0"]
                            if default else [])
                      # from scratch here: test_a_classifier_starts_from_... covers init_from
                      + (["--model.init_from=None"] if name == "transformer_pretrained" else []))
  task = MatchingTask(cfg, data=sample)
  tx = optax.adam(cfg.optimizer.learning_rate)
  train_step = steps.make_train_step(task, tx)
  num_steps = 8 if default else 2
  inputs = task_lib._inputs(small_batch)
  noisy = dict(inputs)
  for field, lens in (("a", "a_len"), ("b", "b_len"), ("pair", "pair_len")):
    pad = np.arange(inputs[field].shape[1])[None, :] >= inputs[lens][:, None]
    noisy[field] = np.where(pad, 5, inputs[field]).astype(np.int32)  # other ids in padding

  @jax.jit
  def run(rng, batch, inputs, noisy):
    params = task.init(rng, batch)
    outputs = task.forward(params, inputs)
    noisy_logits, _ = task.forward(params, noisy)

    def body(state, _):
      state, metrics = train_step(state, batch)
      return state, metrics["loss"][0] / metrics["loss"][1]

    state, losses = jax.lax.scan(body, TrainState.create(params, tx, jax.random.key(1)), None,
                                 length=num_steps)
    return params, outputs, noisy_logits, state.params, losses

  params, (logits, attention), noisy_logits, trained, losses = run(
      jax.random.key(0), small_batch, inputs, noisy)
  assert logits.shape == (B, 2) and logits.dtype == jnp.float32
  np.testing.assert_allclose(noisy_logits, logits, rtol=1e-5, atol=1e-5)
  a_valid = np.arange(9)[None, :] < A_LENS[:, None]  # (B, 9)
  b_valid = np.arange(11)[None, :] < B_LENS[:, None]  # (B, 11)
  if "a_to_b" in attention:
    a_to_b, b_to_a = np.asarray(attention["a_to_b"]), np.asarray(attention["b_to_a"])
    assert a_to_b.shape == (B, 9, 11) and b_to_a.shape == (B, 11, 9)
    np.testing.assert_allclose(a_to_b.sum(-1), a_valid.astype(np.float32), atol=1e-5)
    np.testing.assert_allclose(b_to_a.sum(-1), b_valid.astype(np.float32), atol=1e-5)
    assert np.all(a_to_b[~(a_valid[:, :, None] & b_valid[:, None, :])] == 0)
  elif "a_pooling" in attention:
    np.testing.assert_allclose(np.asarray(attention["a_pooling"]).sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.asarray(attention["b_pooling"])[~b_valid] == 0)
  else:
    weights = np.asarray(attention["self_attention"])  # (B, layers, H, Lp, Lp)
    assert weights.shape == (B, cfg.model.num_layers, cfg.model.num_heads, 23, 23)
    pair_valid = np.arange(23)[None, :] < (A_LENS + B_LENS + 3)[:, None]
    np.testing.assert_allclose(weights[:, :, :, 0].sum(-1), 1.0, rtol=1e-5)  # the [CLS] rows
    assert np.all(weights[~pair_valid[:, None, None, None, :].repeat(23, 3)
                          .reshape(B, 1, 1, 23, 23).repeat(cfg.model.num_layers, 1)
                          .repeat(cfg.model.num_heads, 2)] == 0)
  for (path, old), now in zip(jax.tree_util.tree_leaves_with_path(params),
                              jax.tree.leaves(trained)):
    assert not np.array_equal(old, now), f"{name}: {jax.tree_util.keystr(path)} did not change"
  losses = np.asarray(losses)
  assert np.all(np.isfinite(losses))
  if default:
    assert np.all(np.diff(losses) < 0) and losses[-1] < 0.8 * losses[0], losses


def test_best_threshold_is_the_most_accurate_cut_closest_to_a_half():
  labels, prob = [1, 0, 1, 0, 0, 1], [0.9, 0.6, 0.4, 0.2, 0.1, 0.7]
  # cuts at 0.7 and at 0.4 both get 5 of 6 right; 0.4 is closer to 0.5
  assert metrics_lib.best_threshold(labels, prob) == pytest.approx(0.4)
  assert metrics_lib.binary_metrics(labels, prob, 0.4)["accuracy"] == pytest.approx(5 / 6)
  assert metrics_lib.best_threshold([0, 0, 0, 1], [0.9, 0.8, 0.3, 0.2]) > 0.9  # nothing positive
  assert metrics_lib.best_threshold([1, 1, 0], [0.5, 0.5, 0.5]) == 0.5  # ties are not split
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 2, 301)
  prob = np.clip(0.3 * labels + 0.7 * rng.random(301), 0, 1)
  best = metrics_lib.binary_metrics(labels, prob, metrics_lib.best_threshold(labels, prob))
  for t in np.linspace(0, 1, 201):
    assert metrics_lib.binary_metrics(labels, prob, t)["accuracy"] <= best["accuracy"] + 1e-12


def test_binary_metrics_by_hand():
  labels = [1, 0, 1, 0, 0, 1]
  prob = [0.9, 0.6, 0.4, 0.2, 0.1, 0.7]  # predicted 1 0 0 0 0 1 -> 1 1 0 0 0 1
  scores = metrics_lib.binary_metrics(labels, prob)
  # TP 2 (0.9, 0.7), FP 1 (0.6), FN 1 (0.4), TN 2: accuracy 4/6, F1(1) = 2*2/(2*2+1+1) = 2/3,
  # F1(0) = 2*2/(2*2+1+1) = 2/3; AUC: of the 9 positive-negative pairs, 8 ranked right.
  assert scores["accuracy"] == pytest.approx(4 / 6)
  assert scores["f1"] == pytest.approx(2 / 3)
  assert scores["macro_f1"] == pytest.approx(2 / 3)
  assert scores["auc"] == pytest.approx(8 / 9)
  assert metrics_lib.confusion(labels, prob) == [[2, 1], [1, 2]]
  assert np.isnan(metrics_lib.binary_metrics([0, 0], [0.2, 0.7])["auc"])
  with pytest.raises(ValueError, match="labels must be 0 or 1"):
    metrics_lib.binary_metrics([0, 2], [0.1, 0.2])
  with pytest.raises(ValueError, match="no predictions"):
    metrics_lib.binary_metrics([], [])


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, sample):
  """A small Transformer trained for 6 steps on the sample, with its results."""
  root = tmp_path_factory.mktemp("matching")
  cfg = _small_config("transformer", ["--train.num_steps=6", "--train.batch_size=16",
                                      "--train.progress_bar=False"])
  result = trainer.train(MatchingTask(cfg, data=sample), cfg, str(root / "run"))
  return root, str(root / "run"), result


def test_training_reports_every_metric_and_names_the_selecting_one(trained_run):
  root, workdir, result = trained_run
  for split in ("dev", "test"):
    for name in ("loss", "accuracy", "f1", "macro_f1", "auc", "threshold", "tuned_accuracy",
                 "tuned_f1", "tuned_macro_f1"):
      assert 0.0 <= result.results[split][name] < 10.0, (split, name)
    # the threshold is dev's, and no other threshold is more accurate on dev
    assert result.results[split]["threshold"] == result.results["dev"]["threshold"]
  assert result.results["dev"]["tuned_accuracy"] >= result.results["dev"]["accuracy"]
  written = json.loads((root / "run" / "results.json").read_text())
  assert written["best"]["metric"] == "dev/auc"
  for name in ("attention.png", "curves.png", "vocab.json"):
    assert (root / "run" / name).exists(), name


def test_predict_prints_label_and_probability_per_pair(trained_run, capsys, tmp_path):
  _, workdir, _ = trained_run
  capsys.readouterr()
  heatmap = tmp_path / "pair.png"
  assert cli.main(["predict", "matching", "花呗怎么还款", "怎么还花呗", "借呗能提额吗", "借呗提额",
                   "--workdir", workdir, "--heatmap", str(heatmap), "--layer", "0",
                   "--head", "1"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 2
  for line in lines:
    label, probability = line.split("\t")
    assert label in ("0", "1") and (float(probability) >= 0.5) == (label == "1")
    assert len(probability.split(".")[1]) == 4
  assert (tmp_path / "pair-1.png").stat().st_size > 0 and (tmp_path / "pair-2.png").exists()

  pairs = tmp_path / "pairs.tsv"
  pairs.write_text("花呗怎么还款\t怎么还花呗\t1\n借呗能提额吗\t借呗提额\n", encoding="utf-8")
  assert cli.main(["match", "--input-file", str(pairs), "--workdir", workdir]) == 0
  assert capsys.readouterr().out.splitlines() == lines  # the same pairs, the same answers
  # A header line is skipped with a note; the heatmaps are numbered by pair, not by line.
  pairs.write_text("text_a\ttext_b\tlabel\n" + pairs.read_text(encoding="utf-8"), encoding="utf-8")
  assert cli.main(["match", "--input-file", str(pairs), "--workdir", workdir, "--heatmap",
                   str(tmp_path / "file.png")]) == 0
  captured = capsys.readouterr()
  assert captured.out.splitlines() == lines
  assert (f"note: line 1 of {pairs} ('text_a\\ttext_b\\tlabel') names the columns: read as a "
          "header and skipped") in captured.err.splitlines()
  assert sorted(p.name for p in tmp_path.glob("file*.png")) == ["file-1.png", "file-2.png"]
  for threshold, label in (("0", "1"), ("1", "0")):
    assert cli.main(["match", "--input-file", str(pairs), "--workdir", workdir,
                     "--threshold", threshold]) == 0
    shifted = capsys.readouterr().out.splitlines()
    assert shifted == [f"{label}\t{line.split(chr(9))[1]}" for line in lines]


def test_evaluate_pairs_scores_a_users_file(trained_run, capsys, tmp_path):
  _, workdir, _ = trained_run
  run = runs.load_run(workdir)
  rows = [("花呗怎么还款", "怎么还花呗", 1), ("借呗能提额吗", "借呗提额", 1),
          ("花呗逾期了怎么办", "支付宝怎么实名", 0), ("蚂蚁借呗怎么关闭", "借呗还款日", 0)]
  pairs = tmp_path / "labelled.tsv"  # with a header line: skipped, with a note
  pairs.write_text("sentence1\tsentence2\tlabel\n" +
                   "".join(f"{a}\t{b}\t{y}\n" for a, b, y in rows), encoding="utf-8")
  capsys.readouterr()
  assert cli.main(["evaluate", "--workdir", workdir, "--pairs", str(pairs)]) == 0
  captured = capsys.readouterr()
  assert captured.err.splitlines() == [f"note: line 1 of {pairs} ('sentence1\\tsentence2\\tlabel') "
                                       "names the columns: read as a header and skipped"]
  scores = json.loads(captured.out)
  prob = run.task.probabilities(run.params, [(a, b) for a, b, _ in rows])
  expected = metrics_lib.binary_metrics([y for *_, y in rows], prob)
  for name, value in expected.items():
    assert scores[name] == pytest.approx(value)
  assert scores["pairs"] == 4 and np.sum(scores["confusion"]) == 4


@pytest.mark.parametrize("argv, message", [
    (["花呗怎么还款"], "got 1 questions: give them two by two"),
    (["花呗怎么还款\t"], "input 1 has an empty sentence"),
    (["花呗", "借呗", "--threshold", "1.5"], "--threshold must lie in \\[0, 1\\]"),
    (["？？", "怎么还花呗", "--heatmap", "x.png", "--head", "7"], "--head must lie in \\[0, 2\\)"),
])
def test_predict_names_bad_inputs(trained_run, capsys, argv, message):
  _, workdir, _ = trained_run
  capsys.readouterr()
  assert cli.main(["predict", "matching", *argv, "--workdir", workdir]) == 2
  err = capsys.readouterr().err
  assert pytest.importorskip("re").search(message, err), err


def test_file_inputs_need_a_tab_and_evaluate_needs_labels(trained_run, capsys, tmp_path):
  _, workdir, _ = trained_run
  plain = tmp_path / "plain.txt"
  plain.write_text("花呗怎么还款\n怎么还花呗\n", encoding="utf-8")
  capsys.readouterr()
  assert cli.main(["predict", "matching", "--input-file", str(plain), "--workdir", workdir]) == 2
  assert f"line 1 of {plain} has no TAB" in capsys.readouterr().err
  unlabelled = tmp_path / "unlabelled.tsv"
  unlabelled.write_text("花呗怎么还款\t怎么还花呗\n", encoding="utf-8")
  assert cli.main(["evaluate", "--workdir", workdir, "--pairs", str(unlabelled)]) == 2
  assert f"line 1 of {unlabelled} has no label" in capsys.readouterr().err
  unlabelled.write_text("text_a\ttext_b\n花呗怎么还款\t怎么还花呗\n", encoding="utf-8")
  assert cli.main(["evaluate", "--workdir", workdir, "--pairs", str(unlabelled)]) == 2
  assert f"line 2 of {unlabelled} has no label" in capsys.readouterr().err  # the file's line
  extra = tmp_path / "extra.tsv"  # more columns than sentence1, sentence2, label
  extra.write_text("花呗\t借呗\t1\n花呗\t借呗\t1\tmore\n", encoding="utf-8")
  assert cli.main(["predict", "matching", "--input-file", str(extra), "--workdir", workdir]) == 2
  assert capsys.readouterr().err.splitlines() == [
      f"error: line 2 of {extra} has 4 columns; a pair has at most three, "
      "sentence1<TAB>sentence2<TAB>label: '花呗\\t借呗\\t1\\tmore'"]


def test_a_question_longer_than_the_model_reads_is_cut_with_a_note(trained_run, capsys):
  _, workdir, _ = trained_run
  capsys.readouterr()
  assert cli.main(["predict", "matching", "花" * 30, "怎么还花呗", "--workdir", workdir]) == 0
  captured = capsys.readouterr()
  assert len(captured.out.splitlines()) == 1
  assert "pair 1: the first question has 30 tokens; the model reads the first 12" in captured.err


def test_wrong_pairs_takes_half_of_each_kind_where_it_can():
  labels = np.array([0, 0, 0, 1, 1, 1, 1, 0])
  prob = np.array([0.9, 0.8, 0.1, 0.2, 0.3, 0.1, 0.9, 0.7])  # FP: 0, 1, 7; FN: 3, 4, 5
  rows = report_lib.wrong_pairs(labels, prob, 4, seed=0)
  assert len(rows) == 4 and rows == sorted(rows)
  assert sum(r in (0, 1, 7) for r in rows) == 2 and sum(r in (3, 4, 5) for r in rows) == 2
  assert sorted(report_lib.wrong_pairs(labels, prob, 10, seed=1)) == [0, 1, 3, 4, 5, 7]
  only_fp = report_lib.wrong_pairs(labels, np.ones(8), 4, seed=0)
  assert set(only_fp) <= {0, 1, 2, 7} and len(only_fp) == 4


def test_report_scores_both_splits_and_lists_wrong_dev_pairs(trained_run, capsys, sample):
  root, workdir, result = trained_run
  capsys.readouterr()
  assert cli.main(["report", "matching", "--workdir", workdir, "--errors", "6"]) == 0
  out = capsys.readouterr().out
  report = json.loads((root / "run" / "report.json").read_text())
  for split in ("dev", "test"):
    assert report[split]["accuracy"] == pytest.approx(result.results[split]["accuracy"],
                                                      abs=1e-6)
    assert report[split]["auc"] == pytest.approx(result.results[split]["auc"], abs=1e-6)
    assert np.sum(report[split]["confusion"]) == report[split]["pairs"]
  table = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
  assert len(table) == len(report["dev"]["errors_listed"]) == 6
  first = table[0].split(" | ")
  assert first[1] == sample.texts("dev")[report["dev"]["errors_listed"][0]][0]


@pytest.fixture(scope="module")
def pretrained_run(tmp_path_factory, sample):
  """A small masked-language-model run: 3 steps on the sample's training and unlabelled pairs."""
  root = tmp_path_factory.mktemp("mlm")
  cfg = _small_config("transformer_mlm", ["--train.num_steps=3", "--train.batch_size=16",
                                          "--train.progress_bar=False"])
  trainer.train(task_lib.make_task(cfg, data=sample), cfg, str(root / "run"))
  return str(root / "run")


def test_pretraining_masks_only_sentence_tokens_and_reads_the_unlabelled_pairs(sample):
  cfg = _small_config("transformer_mlm", ["--model.mask_rate=0.5"])
  task = task_lib.make_task(cfg, data=sample)
  assert isinstance(task, task_lib.PretrainTask)
  batcher = sample.pretraining_batcher(16)
  assert batcher.num_examples == sample.num_examples("train") + len(sample.unlabelled_texts) // 2
  batch = next(sample.eval_batches("dev", batch_size=16))
  params = task.init(jax.random.key(0), batch)
  assert "mlm_bias" in params and "head" not in params
  loss, metrics = task.loss(params, batch, None)
  again, _ = task.loss(params, batch, None)
  assert loss == again  # evaluation masks the same positions every time
  regular = int(np.sum((batch["pair"] > 3) & (batch["weight"][:, None] > 0)))
  chosen = float(metrics["loss"][1])
  assert 0.3 * regular < chosen < 0.7 * regular  # about half of the sentence tokens, no others
  _, trained = task.loss(params, batch, jax.random.key(1))
  assert float(trained["loss"][1]) != chosen  # training draws its own positions
  tx = optax.adam(1e-2)
  state, _ = jax.jit(steps.make_train_step(task, tx))(
      TrainState.create(params, tx, jax.random.key(2)), batch)
  for (path, old), now in zip(jax.tree_util.tree_leaves_with_path(params),
                              jax.tree.leaves(state.params)):
    assert not np.array_equal(old, now), f"{jax.tree_util.keystr(path)} did not change"


def test_a_classifier_starts_from_the_pretrained_embeddings_and_encoder(pretrained_run, sample,
                                                                        small_batch):
  pre = runs.load_run(pretrained_run)
  cfg = _small_config("transformer_pretrained", [f"--model.init_from={pretrained_run}"])
  params = task_lib.make_task(cfg, data=sample).init(jax.random.key(5), small_batch)
  for name in ("embed", "positions", "segments", "embed_norm", "encoder"):
    for got, want in zip(jax.tree.leaves(params[name]), jax.tree.leaves(pre.params[name])):
      np.testing.assert_array_equal(got, want)
  assert "pooler" in params and "head" in params and "mlm_bias" not in params


def test_init_from_and_predict_refuse_what_cannot_work(pretrained_run, trained_run, sample,
                                                       small_batch, tmp_path, capsys):
  for init_from, message in [(str(tmp_path / "none"), "is not a directory; train it first"),
                             (trained_run[1], "is a transformer run, not a pretraining run")]:
    cfg = _small_config("transformer_pretrained", [f"--model.init_from={init_from}"])
    with pytest.raises(ValueError, match=message):
      task_lib.make_task(cfg, data=sample).init(jax.random.key(0), small_batch)
  capsys.readouterr()
  assert cli.main(["predict", "matching", "花呗怎么还款", "怎么还花呗",
                   "--workdir", pretrained_run]) == 2
  assert "this is a pretraining run" in capsys.readouterr().err
