"""The couplet experiment: metrics on known strings, the Luong model's input feeding, the
length-constrained beam search, and training + the `couplet` command on the shipped sample."""

from __future__ import annotations

import json
import math
import os

import jax
import numpy as np
import pytest

import engine_toy
from experiments import metrics_log
from experiments import runs
from experiments import trainer
from experiments.cli import main
from experiments.couplet import metrics
from experiments.couplet import task as task_lib
from experiments.seq2seq import decoding
from experiments.seq2seq import models
from pipelines.vocab import EOS_ID

engine_toy.enable_compilation_cache()

V, B, S, T, H = 11, 3, 5, 7, 12  # vocabulary, batch, source width, target width, hidden


# ---- metrics


def test_char_bleu_known_values():
  # One wrong character of 7: n-gram precisions 6/7, 5/6, 4/5, 3/4, no brevity penalty.
  assert metrics.char_bleu(["一二三四五六七"], ["一二三四五六八"]) == pytest.approx(
      100 * (6 / 7 * 5 / 6 * 4 / 5 * 3 / 4) ** 0.25, abs=1e-9)
  # Every n-gram matches but the corpus is 11 characters against 14: BP = exp(1 - 14 / 11).
  assert metrics.char_bleu(["春风得意马蹄疾", "一日看尽"],
                           ["春风得意马蹄疾", "一日看尽长安花"]) == pytest.approx(
                               100 * math.exp(1 - 14 / 11), abs=1e-9)
  assert metrics.char_bleu(["一 二 三 四"], ["一二三四"]) == pytest.approx(100.0)  # spaces ignored
  with pytest.raises(ValueError, match="same length"):
    metrics.char_bleu(["一"], ["一", "二"])


def test_length_and_copy_rates_known_values():
  uppers = [list("春风，得意"), list("夏日长"), ["<unk>", "水"], list("山高")]
  hyps = [list("春雨，失意"), list("秋月"), ["<unk>", "山"], list("水深")]
  # Copies: 春 and 意 in the first pair (the aligned comma is not one); <unk> never counts.
  assert [metrics.same_position_copies(h, u) for h, u in zip(hyps, uppers)] == [2, 0, 0, 0]
  assert metrics.exact_length_rate(hyps, uppers) == 3 / 4
  assert metrics.copy_rate(hyps, uppers) == 1 / 4
  # Aligned content positions: 4 (comma left out) + 2 (min length) + 1 (<unk> left out) + 2.
  assert metrics.copied_char_rate(hyps, uppers) == 2 / 9
  assert metrics.line_text(["<unk>", "山"]) == metrics.UNK_CHAR + "山"
  scores = metrics.score_lines(hyps, uppers, ["春雨，失意", "秋月", "□山", "水深"])
  assert scores.as_dict("_free") == pytest.approx({
      "bleu_free": 100.0, "exact_length_free": 0.75, "copy_rate_free": 0.25,
      "copied_chars_free": 2 / 9, "count_free": 4.0}, abs=1e-9)


# ---- models and search


def _batch(seed: int = 0):
  """Random sources (B, S) with lengths 5, 2, 4 (eos last) and decoder inputs (B, T)."""
  rng = np.random.default_rng(seed)
  src_len = np.array([5, 2, 4], np.int32)
  src = rng.integers(4, V, size=(B, S)).astype(np.int32)
  src[np.arange(B), src_len - 1] = EOS_ID
  src[np.arange(S)[None, :] >= src_len[:, None]] = 0
  tgt_in = rng.integers(4, V, size=(B, T)).astype(np.int32)
  return src, src_len, tgt_in


def _luong():
  return models.LuongTranslator(V, V, embed_dim=6, hidden_size=H, num_layers=2, dropout_rate=0.0)


def _transformer():
  return models.TransformerTranslator(V, V, model_dim=8, num_heads=2, ffn_hidden=10,
                                      num_encoder_layers=1, num_decoder_layers=1,
                                      dropout_rate=0.0)


def test_luong_input_feeding_shapes_and_steps_match_teacher_forcing():
  model = _luong()
  src, src_len, tgt_in = _batch()
  params = model.init(jax.random.key(0), src, src_len, tgt_in)
  decoder = params["decoder"]
  assert decoder["feed_gates"]["kernel"].shape == (H, 4 * H)  # the fed vector's LSTM weights
  assert decoder["input_proj"]["kernel"].shape == (H, H)  # encoder outputs -> attention memory
  assert decoder["output_proj"]["kernel"].shape == (2 * H, H)  # [context; top output]
  logits = np.asarray(model.logits(params, src, src_len, tgt_in))
  weights = np.asarray(model.cross_attention(params, src, src_len, tgt_in))
  assert logits.shape == (B, T, V) and weights.shape == (B, T, S)
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
  padded = np.broadcast_to(np.arange(S)[None, None, :] >= src_len[:, None, None], weights.shape)
  assert np.all(weights[padded] == 0)

  state = model.init_decode_state(params, src, src_len, T)
  assert state.feed.shape == (B, H) and not np.any(state.feed)
  assert state.memory.shape == (B, S, H)
  step = jax.jit(model.decode_step)
  for t in range(T):  # the step path feeds each attentional vector into the next step
    step_logits, state = step(params, state, tgt_in[:, t])
    np.testing.assert_allclose(step_logits, logits[:, t], rtol=1e-5, atol=1e-5)
  assert state.feed.shape == (B, H) and np.all(np.abs(state.feed).sum(-1) > 0)


@pytest.mark.parametrize("make_model", [_luong, _transformer], ids=["luong", "transformer"])
def test_constrained_beam_search_gives_the_upper_lines_length(make_model):
  model = make_model()
  src, src_len, tgt_in = _batch(1)
  params = model.init(jax.random.key(1), src, src_len, tgt_in)
  # Make eos by far the likeliest token: unconstrained, every hypothesis ends at once.
  output = params["output"] if "output" in params else params["decoder"]["output"]
  output["bias"] = output["bias"].at[EOS_ID].add(50.0)
  decoder = decoding.SearchDecoder(model)
  exact = src_len - 1  # 4, 1, 3 characters
  free = decoder(params, src, src_len, max_len=S, beam_size=3)
  assert np.all(free.lengths[:, 0] == 0)
  beams = decoder(params, src, src_len, max_len=S, beam_size=3, exact_lens=exact)
  assert beams.tokens.shape == (B, 3, S)
  np.testing.assert_array_equal(beams.lengths, np.repeat(exact[:, None], 3, axis=1))
  for b in range(B):
    for w in range(3):
      row = beams.tokens[b, w]
      assert EOS_ID not in row[:exact[b]] and row[exact[b]] == EOS_ID
      assert not np.any(row[exact[b] + 1:])
  assert np.all(np.diff(beams.scores, axis=1) <= 0)  # best first


# ---- training and the command line on the shipped sample


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  """A tiny LSTM run on the sample: one bucket of width 10, 4 steps, beam 3."""
  path = str(tmp_path_factory.mktemp("couplet") / "run")
  config = runs.make_config("couplet", "lstm", overrides=[
      "--model.embed_dim=8", "--model.hidden_size=12", "--model.num_layers=1", "--train.num_steps=4",
      "--train.batch_size=16", "--train.eval_batch_size=128", "--train.log_every=2",
      "--train.progress_bar=False", "--data.max_len=10", "--data.boundaries=10",
      "--data.dev_decode_examples=5", "--data.test_decode_examples=0", "--data.beam_size=3",
      "--data.decode_batch_size=8"])
  task = task_lib.CoupletTask(config)
  trainer.train(task, config, path, devices=jax.devices()[:1])  # one device: fewer compiles
  return path


def test_training_writes_metrics_vocab_and_samples(workdir):
  with open(os.path.join(workdir, metrics_log.RESULTS_FILE)) as f:
    results = json.load(f)
  dev, test = results["dev"], results["test"]
  assert dev["perplexity"] == pytest.approx(math.exp(dev["nll"]), rel=1e-4)
  assert dev["decoded"] == 5 and dev["exact_length"] == 1.0
  assert 0 <= dev["bleu"] <= 100 and 0 <= dev["exact_length_free"] <= 1
  assert "bleu" not in test and test["perplexity"] == pytest.approx(math.exp(test["nll"]), 1e-4)
  assert os.path.exists(os.path.join(workdir, task_lib.CoupletTask.ARTIFACTS["vocab"]))
  with open(os.path.join(workdir, task_lib.SAMPLES_FILE), encoding="utf-8") as f:
    samples = json.load(f)
  assert len(samples) == 1 + task_lib.NUM_SAMPLES
  assert samples[0]["upper"] == task_lib.DEMO_UPPER and samples[0]["reference"] is None
  for sample in samples:
    assert len(sample["lower"]) == len(sample["upper"])


def test_couplet_command_prints_beams_of_the_upper_lines_length(workdir, capsys, tmp_path):
  assert main(["couplet", task_lib.DEMO_UPPER, "--workdir", workdir, "--num-results", "3"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert [line.split("\t")[0] for line in lines] == ["1", "2", "3"]
  assert all(len(line.split("\t")[1]) == 7 for line in lines)
  scores = [float(line.split("\t")[2]) for line in lines]
  assert scores == sorted(scores, reverse=True)

  heatmap = str(tmp_path / "attention.png")
  assert main(["couplet", "春风", "海阔凭鱼跃", "--workdir", workdir, "--heatmap", heatmap]) == 0
  out = capsys.readouterr().out.splitlines()
  assert [len(line) for line in out] == [2, 5]  # one lower line per upper line
  assert os.path.exists(str(tmp_path / "attention-1.png"))

  assert main(["couplet", "一二三四五六七八九十", "--workdir", workdir]) == 2  # max_len 10
  assert "at most 9" in capsys.readouterr().err
