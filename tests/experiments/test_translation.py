"""The English->French experiment on the shipped sample: loss, BLEU, overfitting, search, CLI."""

from __future__ import annotations

import json
import math
import os

import jax
import numpy as np
import optax
import pytest

from experiments import cli
from experiments import config as config_lib
from experiments import trainer
from experiments.checkpoints import Checkpoints
from experiments.translation import configs
from experiments.translation import metrics
from experiments.seq2seq.loss import sequence_loss
from experiments.translation import task as task_lib
from pipelines.tasks import TranslationData
from pipelines.vocab import EOS_ID

WIDTH = 8  # source and target widths of the tiny runs
B = 5  # sentences in the overfit batch
TINY = ("--model.model_dim=32", "--model.num_heads=2", "--model.ffn_hidden=48",
        "--model.num_encoder_layers=1", "--model.num_decoder_layers=1", "--model.dropout_rate=0.0",
        "--model.label_smoothing=0.0", f"--data.max_src_len={WIDTH}", f"--data.max_tgt_len={WIDTH}",
        f"--data.boundaries={WIDTH}", "--data.decode_batch_size=8", "--data.beam_size=3",
        "--data.length_penalty=0.0", "--data.test_bleu_examples=11", "--train.batch_size=8",
        "--train.eval_batch_size=256")


# ---- the masked loss


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_sequence_loss_exact_value_and_padding_weighs_nothing():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 4, 7)).astype(np.float32)  # B=3, T=4, V=7
  targets = np.array([[1, 4, 6, 3], [5, 3, 0, 0], [2, 3, 0, 0]], np.int32)
  lengths = np.array([4, 2, 2], np.int32)
  weight = np.array([1.0, 1.0, 0.0], np.float32)  # the third row is a filler row

  loss_fn = jax.jit(sequence_loss)
  loss, m = loss_fn(logits, targets, lengths, weight)
  logp = _log_softmax(logits.astype(np.float64))
  real = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
  nlls = [-logp[b, t, targets[b, t]] for b, t in real]
  np.testing.assert_allclose(float(loss), np.mean(nlls), rtol=1e-6)
  np.testing.assert_allclose([float(v) for v in m["loss"]], [np.sum(nlls), 6.0], rtol=1e-6)
  np.testing.assert_allclose([float(v) for v in m["nll"]], [np.sum(nlls), 6.0], rtol=1e-6)
  correct = sum(int(np.argmax(logits[b, t]) == targets[b, t]) for b, t in real)
  np.testing.assert_allclose([float(v) for v in m["token_accuracy"]], [correct, 6.0])

  # Anything at padded positions or in the filler row changes neither the loss nor the metrics,
  # and gets no gradient.
  noisy_logits = logits.copy()
  noisy_targets = targets.copy()
  noisy_logits[1, 2:] += 5.0
  noisy_logits[2] = rng.normal(size=(4, 7))
  noisy_targets[1, 2:], noisy_targets[2] = 6, 1
  loss2, m2 = loss_fn(noisy_logits, noisy_targets, lengths, weight)
  assert float(loss2) == float(loss)
  assert jax.tree.map(float, m2) == jax.tree.map(float, m)
  grad = jax.jit(jax.grad(lambda x: loss_fn(x, targets, lengths, weight)[0]))(logits)
  assert np.all(np.asarray(grad)[1, 2:] == 0) and np.all(np.asarray(grad)[2] == 0)
  assert np.all(np.abs(np.asarray(grad)[0]) > 0)


def test_label_smoothing_exact_value():
  logits = np.array([[[2.0, 0.5, -1.0, 0.0, 1.0], [0.0, 3.0, 1.0, -2.0, 0.5]]], np.float32)
  targets = np.array([[4, 1]], np.int32)
  lengths, weight = np.array([2], np.int32), np.ones(1, np.float32)
  eps = 0.2
  loss, m = jax.jit(sequence_loss, static_argnums=4)(logits, targets, lengths, weight,
                                                              eps)
  logp = _log_softmax(logits.astype(np.float64))[0]
  per_token = [(1 - eps) * -logp[t, targets[0, t]] + eps * -logp[t].mean() for t in range(2)]
  np.testing.assert_allclose(float(loss), np.mean(per_token), rtol=1e-6)
  nll = -logp[0, 4] - logp[1, 1]
  np.testing.assert_allclose(float(m["nll"][0]), nll, rtol=1e-6)  # nll stays unsmoothed


# ---- BLEU


def test_corpus_bleu_known_values():
  hyps = ["the cat sat on the mat.", "a dog runs"]
  refs = ["the cat sat on a mat.", "a dog runs fast today"]
  # 13a splits the final period off. Clipped 1- to 4-gram matches: sentence 1 6/7, 4/6, 2/5,
  # 1/4; sentence 2 3/3, 2/2, 1/1, 0/0. Lengths 7 + 3 (hypotheses), 7 + 5 (references).
  precisions = [(6 + 3) / (7 + 3), (4 + 2) / (6 + 2), (2 + 1) / (5 + 1), (1 + 0) / (4 + 0)]
  expected = 100 * math.exp(1 - 12 / 10) * math.prod(precisions) ** 0.25
  assert metrics.corpus_bleu(hyps, refs) == pytest.approx(expected, rel=1e-12)
  assert metrics.corpus_bleu(["va!"], ["va !"]) == pytest.approx(
      metrics.corpus_bleu(["va !"], ["va !"]))  # the 13a tokenizer splits "!" off either way
  with pytest.raises(ValueError, match="same length"):
    metrics.corpus_bleu(["a"], ["a", "b"])


def test_multi_reference_grouping_and_bleu():
  sources = [("i", "won"), ("go",), ("i", "won"), ("i", "won")]
  hyps = ["h1", "h2", "h1", "h1"]
  refs = ["r1", "r2", "r3", "r4"]
  grouped_hyps, streams = metrics.group_by_source(sources, hyps, refs)
  assert grouped_hyps == ["h1", "h2"]
  assert streams == [["r1", "r2"], ["r3", None], ["r4", None]]

  # One source with two translations, the hypothesis equal to the second: once against both
  # is a perfect score; one pair per line scores the two copies against one translation each.
  line = "the cat sat on the mat ."
  other = "a feline was sitting upon the rug ."
  sources, hyps, refs = [("k",), ("k",)], [line, line], [other, line]
  bleu, n = metrics.multi_reference_bleu(sources, hyps, refs)
  assert bleu == pytest.approx(100.0, rel=1e-12) and n == 1
  # Pairs: matches 7+2 of 7+7 unigrams ("the", "."), 6+0 of 6+6 bigrams ... 4+0 of 4+4; the
  # references have 7 + 8 tokens, the hypotheses 14 (brevity penalty).
  expected = 100 * math.exp(1 - 15 / 14) * math.prod([9 / 14, 6 / 12, 5 / 10, 4 / 8]) ** 0.25
  assert metrics.corpus_bleu(hyps, refs) == pytest.approx(expected, rel=1e-12)


# ---- a tiny Transformer overfit on one batch, searched, saved and translated from the CLI


def _tiny_config(name: str = "transformer") -> config_lib.Config:
  cfg = configs.CONFIGS[name]()
  cfg.experiment, cfg.model_name = "translation", name
  return config_lib.override(cfg, TINY)


@pytest.fixture(scope="module")
def sample():
  return TranslationData.load(max_src_len=WIDTH, max_tgt_len=WIDTH, boundaries=(WIDTH,))


def _overfit_batch(data: TranslationData) -> dict[str, np.ndarray]:
  """B training pairs with different sources that fit the width, as one padded batch."""
  train = data.splits["train"].sequences
  chosen, seen = [], set()
  for i in range(len(train["src"])):
    src = tuple(train["src"][i])
    if src not in seen and 3 <= len(src) <= WIDTH and 3 <= len(train["tgt_out"][i]) <= WIDTH:
      seen.add(src)
      chosen.append(i)
    if len(chosen) == B:
      break
  idx = np.array(chosen)
  batch = {}
  for field, length_key in (("src", "src_len"), ("tgt_in", "tgt_len"), ("tgt_out", None)):
    ids, lengths = train[field].padded(idx, WIDTH)
    batch[field] = ids
    if length_key:
      batch[length_key] = lengths
  batch["weight"] = np.ones(B, np.float32)
  return batch


@pytest.fixture(scope="module")
def overfit(sample):
  task = task_lib.TranslationTask(_tiny_config(), data=sample)
  batch = _overfit_batch(sample)
  params = jax.jit(task.init)(jax.random.key(0), batch)
  tx = optax.adam(1e-2)

  @jax.jit
  def step(params, opt_state):
    (loss, _), grads = jax.value_and_grad(task.loss, has_aux=True)(params, batch, None)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  opt_state = jax.jit(tx.init)(params)
  for _ in range(300):
    params, opt_state, loss = step(params, opt_state)
    if float(loss) < 0.02:
      break
  return task, params, batch, float(loss)


def _targets(batch) -> list[list[int]]:
  return [list(batch["tgt_out"][b, :batch["tgt_len"][b] - 1]) for b in range(B)]  # eos dropped


def test_overfit_one_batch_then_greedy_translates_it_back(overfit):
  task, params, batch, loss = overfit
  assert loss < 0.02
  decoded = task.decode(params, [batch["src"][b, :batch["src_len"][b]] for b in range(B)])
  assert [list(hyps[0]) for hyps, _ in decoded] == _targets(batch)


def test_beam_search_on_the_trained_model(overfit):
  task, params, batch, _ = overfit
  sources = [batch["src"][b, :batch["src_len"][b]] for b in range(B)]
  beams = task.decode(params, sources, beam_size=3, length_penalty=0.0)
  log_probs = jax.jit(lambda *args: jax.nn.log_softmax(task.model.logits(*args), axis=-1))
  logp = np.asarray(log_probs(params, batch["src"], batch["src_len"], batch["tgt_in"]))  # (B,T,V)
  for b, ((hyps, scores), target) in enumerate(zip(beams, _targets(batch))):
    assert len(hyps) == 3 and list(hyps[0]) == target
    assert scores[0] >= scores[1] >= scores[2]
    assert len({tuple(h) for h in hyps}) == 3  # three different hypotheses
    # The best score is the teacher-forced log-probability of the target and eos.
    path = [*target, EOS_ID]
    expected = sum(logp[b, t, token] for t, token in enumerate(path))
    assert scores[0] == pytest.approx(expected, abs=1e-4)


def test_attention_rows_are_distributions_over_the_source(overfit):
  task, params, batch, _ = overfit
  src = batch["src"][0, :batch["src_len"][0]]
  target = _targets(batch)[0]
  weights = task.attention(params, src, target)
  assert weights.shape == (len(target) + 1, len(src))
  np.testing.assert_allclose(weights.sum(1), 1.0, rtol=1e-5)


@pytest.fixture(scope="module")
def workdir(overfit, tmp_path_factory):
  """A run directory holding the overfit parameters as its best checkpoint."""
  task, params, _, _ = overfit
  path = str(tmp_path_factory.mktemp("translation_run"))
  with open(os.path.join(path, trainer.CONFIG_FILE), "w", encoding="utf-8") as f:
    json.dump(config_lib.to_dict(task.config), f)
  ckpts = Checkpoints(path, best_metric="dev/bleu", best_mode="max", asynchronous=False)
  ckpts.save_best(1, params, {"dev/bleu": 1.0})
  ckpts.close()
  assert sorted(map(os.path.basename, task.save_artifacts(path))) == ["src_vocab.json",
                                                                      "tgt_vocab.json"]
  return path


def test_cli_translate_prints_the_learned_translation_and_saves_a_heatmap(
    overfit, workdir, capsys, tmp_path):
  task, _, batch, _ = overfit
  source = task.data.source_text(batch["src"][1])
  expected = task.target_text(_targets(batch)[1])
  png = str(tmp_path / "heat.png")
  assert cli.main(["translate", source, "--workdir", workdir, "--beam", "3", "--num-results",
                   "2", "--heatmap", png]) == 0
  captured = capsys.readouterr()
  lines, notes = captured.out.splitlines(), captured.err.splitlines()
  assert notes[0].startswith("# transformer from") and "beam 3" in notes[0]
  assert notes[-1] == f"heatmap saved to {png}"
  text, score, echoed = lines[0].split("\t")
  assert (text, echoed) == (expected, source) and float(score) <= 0
  assert len(lines) == 2 and lines[1].startswith("  2. ")
  with open(png, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_extra_eval_and_on_train_end(overfit, tmp_path):
  task, params, _, _ = overfit
  result = trainer.evaluate(task, params, "test")
  assert set(result) == {"loss", "nll", "token_accuracy", "perplexity", "bleu", "bleu_beam",
                         "bleu_multiref", "bleu_beam_multiref", "multiref_sources"}
  assert result["perplexity"] == pytest.approx(np.exp(result["nll"]), rel=1e-6)
  assert result["perplexity"] > 1 and 0 <= result["bleu"] <= 100
  assert 1 <= result["multiref_sources"] <= 11
  keys = task.source_keys("test")
  assert len(keys) == task.data.num_examples("test") and len(set(keys)) < len(keys)
  task.on_train_end(params, str(tmp_path))
  with open(tmp_path / task_lib.EXAMPLES_FILE, encoding="utf-8") as f:
    examples = json.load(f)
  assert set(examples["greedy"]) == set(task_lib.D2L_SENTENCES) == set(examples["beam3"])
  lines = (tmp_path / task_lib.TEST_TRANSLATIONS_FILE).read_text(encoding="utf-8").splitlines()
  assert len(lines) == 12 and lines[0] == "source\treference\tgreedy\tbeam"
  assert all(os.path.exists(tmp_path / f"attention-{i}.png") for i in range(1, 5))
