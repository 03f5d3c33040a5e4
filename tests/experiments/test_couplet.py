"""The couplet experiment: the Luong model's input feeding, the length-constrained beam search,
and training, the form constraints, the `couplet` command and the report on the shipped sample
(the metrics: test_couplet_metrics.py)."""

from __future__ import annotations

import json
import math
import os

import jax
import numpy as np
import pytest
import sacrebleu

import engine_toy
from experiments import metrics_log
from experiments import runs
from experiments import trainer
from experiments.cli import main
from experiments.couplet import cli as couplet_cli
from experiments.couplet import form
from experiments.couplet import metrics
from experiments.couplet import report
from experiments.couplet import table
from experiments.couplet import task as task_lib
from experiments.couplet.form import FormOptions
from experiments.seq2seq import decoding
from experiments.seq2seq import models
from pipelines.vocab import EOS_ID

engine_toy.enable_compilation_cache()

V, B, S, T, H = 11, 3, 5, 7, 12  # vocabulary, batch, source width, target width, hidden


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
  names = metrics.CoupletScores.names() + metrics.CoupletScores.names("_free")
  assert set(names + metrics.REFERENCE_NAMES) <= set(dev)
  assert dev["ref_punct_match_rate"] == 1.0  # the first 5 dev couplets keep their punctuation
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

  # Longer than the run reads (max_len 10: 9 characters and eos): cut, with a note, as every
  # experiment does; the note quotes an excerpt of the line, never the whole of a long one.
  assert main(["couplet", "一二三四五六七八九十", "--workdir", workdir]) == 0
  captured = capsys.readouterr()
  assert [len(line) for line in captured.out.splitlines()] == [9]
  assert ("note: input 1 ('一二三四五六七八九十') has 10 characters; this run reads the first 9 "
          "(data.max_len - 1), the rest was not used") in captured.err
  assert main(["couplet", "一" * 5000, "--workdir", workdir]) == 0
  note = [line for line in capsys.readouterr().err.splitlines() if "input 1" in line][0]
  assert "... (5,000 characters)) has 5,000 characters" in note and len(note) < 250


# Upper lines of the shipped sample, cut to the 9 characters this run reads, with marks at 1, 3, 4.
FORM_UPPERS = ["精进修行，为人师表", "店虽小，酱醋油盐犹", "一碧无垠，吴楚青苍", "春，风"]


def _assert_form_kept(uppers, lines, pattern=False):
  for upper, line in zip(uppers, lines):
    upper, line = list(upper), list(line)
    assert len(line) == len(upper), (upper, line)
    assert form.punct_matches(line, upper), (upper, line)
    assert form.same_position_copies(line, upper) == 0, (upper, line)
    if pattern:
      assert form.repeat_pattern_matches(line, upper), (upper, line)


def test_form_constraints_hold_for_a_model_that_breaks_the_form(workdir):
  run = runs.load_run(workdir, "best", None)
  task = run.task
  # Bias the output layer to 人 (at position 6 of the first upper line) above the comma above
  # everything else: with the length alone every line is all 人, a copy and no comma.
  params = jax.tree.map(np.array, run.params)
  output = params["output"] if "output" in params else params["decoder"]["output"]
  people, comma = task.vocab.token_to_id("人"), task.vocab.token_to_id("，")
  output["bias"][people] += 60.0
  output["bias"][comma] += 50.0
  length_only = task.generate(params, FORM_UPPERS)
  assert [g.lines[0] for g in length_only] == ["人" * len(u) for u in FORM_UPPERS]
  kept = task.generate(params, FORM_UPPERS, options=FormOptions(force_punct=True, no_copy=True),
                       num_results=3)
  for rank in range(3):
    _assert_form_kept(FORM_UPPERS, [g.lines[rank] for g in kept])
  # Where the comma is forced it is chosen; 人 is banned only where the upper line has it.
  assert kept[0].lines[0][4] == "，" and kept[0].lines[0][6] != "人"
  assert kept[0].lines[0].count("人") == 7 and kept[1].lines[0].count("人") == 8
  # Forced and banned ids only restrict the choice: the scores stay the model's log-probabilities.
  assert all(np.isfinite(g.scores).all() for g in kept)


def test_pattern_constraint_repeats_exactly_where_the_upper_line_does(workdir):
  run = runs.load_run(workdir, "best", None)
  task = run.task
  params = jax.tree.map(np.array, run.params)
  output = params["output"] if "output" in params else params["decoder"]["output"]
  output["bias"][task.vocab.token_to_id("人")] += 60.0  # every line all 人 with the length alone
  uppers = FORM_UPPERS + ["正正反反，反正"]  # 正 at 0, 1, 6 and 反 at 2, 3, 5
  assert all(task.vocab.token_to_id(c) != task.vocab.token_to_id("<unk>") for c in "正反")
  assert all(not form.repeat_pairs(list(u)) for u in FORM_UPPERS)
  everything = FormOptions(force_punct=True, no_copy=True, keep_pattern=True)
  kept = task.generate(params, uppers, options=everything, num_results=2)
  for rank in range(2):
    _assert_form_kept(uppers, [g.lines[rank] for g in kept], pattern=True)
  line = kept[-1].lines[0]
  assert line[0] == line[1] == line[6] and line[2] == line[3] == line[5] and line[0] != line[2]
  # Without it the biased model repeats 人 all over the lines (punctuation and copies kept).
  loose = task.generate(params, uppers, options=FormOptions(force_punct=True, no_copy=True))
  assert all(form.has_unwanted_repeat(list(g.lines[0]), list(u)) for g, u in zip(loose, uppers))
  assert all(np.isfinite(g.scores).all() for g in kept)


def test_form_constraints_hold_on_the_dev_split(workdir):
  run = runs.load_run(workdir, "best", None)
  both = FormOptions(force_punct=True, no_copy=True)
  scores, lines = run.task.score_split(run.params, "dev", 40, options=both)
  assert scores.count == 40
  assert (scores.exact_length, scores.punct_match_rate, scores.copy_rate) == (1.0, 1.0, 0.0)
  sources = run.task.data.splits["dev"].sequences["src"]
  uppers = [run.task.vocab.decode(sources[i]) for i in range(40)]
  assert sum(bool(form.punct_positions(u)) for u in uppers) >= 3  # some lines have marks
  _assert_form_kept(uppers, lines)
  with pytest.raises(ValueError, match=r"forced_tokens: expected one array per source \(2 "
                                       r"sources\), got 1"):
    run.task.decode(run.params, [sources[0], sources[1]], forced_tokens=[np.array([-1])])


def test_couplet_command_keeps_the_form_with_its_flags(workdir, capsys):
  assert main(["couplet", *FORM_UPPERS, "--workdir", workdir, "--force-punct", "--no-copy",
               "--num-results", "2"]) == 0
  blocks = capsys.readouterr().out.split("\n\n")
  assert len(blocks) == len(FORM_UPPERS)
  for upper, block in zip(FORM_UPPERS, blocks):
    _assert_form_kept([upper] * 2, [line.split("\t")[1] for line in block.strip().splitlines()])


def test_report_scores_each_form_and_the_references(workdir, tmp_path, capsys):
  out = str(tmp_path / "report.json")
  assert main(["report", "couplet", "--workdir", workdir, "--splits", "dev", "--limit", "7", "--force-punct",
                      "--no-copy", "--keep-pattern", "--out", out]) == 0
  capsys.readouterr()
  with open(out, encoding="utf-8") as f:
    dev = json.load(f)["splits"]["dev"]
  forms = ["free", "length", "length+punct", "length+nocopy", "length+pattern",
           "length+punct+nocopy+pattern"]
  assert list(dev) == ["perplexity", "perplexity_s", *forms, "reference"]
  for name in forms:
    assert set(dev[name]) == {*metrics.CoupletScores.names(), "count", "decode_s"}
    assert dev[name]["count"] == 7
  assert dev["length"]["exact_length"] == 1.0
  kept = dev["length+punct+nocopy+pattern"]
  assert (kept["exact_length"], kept["punct_match_rate"], kept["copy_rate"]) == (1.0, 1.0, 0.0)
  assert (kept["unwanted_repeat_rate"], kept["repeat_pattern_rate"]) == (0.0, 1.0)
  assert dev["length+punct"]["punct_match_rate"] == 1.0 and dev["length+nocopy"]["copy_rate"] == 0
  assert set(dev["reference"]) == {*metrics.REFERENCE_NAMES, "count"}


def test_report_scores_the_named_forms_with_another_beam(workdir, tmp_path, capsys, monkeypatch):
  beams = []
  decode = task_lib.CoupletTask.decode

  def spy(self, params, sources, **kwargs):
    beams.append(kwargs["beam_size"])
    return decode(self, params, sources, **kwargs)

  monkeypatch.setattr(task_lib.CoupletTask, "decode", spy)
  out = str(tmp_path / "report.json")
  assert main(["report", "couplet", "--workdir", workdir, "--splits", "dev", "--limit", "5", "--forms",
                      "length+punct", "free", "--beam-size", "3", "--out", out]) == 0
  capsys.readouterr()
  with open(out, encoding="utf-8") as f:
    written = json.load(f)
  assert written["beam_size"] == 3
  assert list(written["splits"]["dev"]) == ["perplexity", "perplexity_s", "free", "length+punct",
                                            "reference"]  # report order, not the order given
  assert beams[:2] == [3, 3]  # the two forms; the samples after them use the run's own beam
  assert written["splits"]["dev"]["length+punct"]["punct_match_rate"] == 1.0


def test_report_oracle_reranks_the_beam_and_equals_the_best_for_beam_one(workdir, tmp_path,
                                                                         capsys):
  def dev_report(beam: int) -> dict:
    out = str(tmp_path / f"report-{beam}.json")
    assert main(["report", "couplet", "--workdir", workdir, "--splits", "dev", "--limit", "9", "--forms",
                        "length", "--beam-size", str(beam), "--oracle", "--out", out]) == 0
    capsys.readouterr()
    with open(out, encoding="utf-8") as f:
      return json.load(f)["splits"]["dev"]["length"]

  greedy = dev_report(1)  # one hypothesis per line: the oracle can only take it
  assert greedy["oracle"] == {name: value for name, value in greedy.items()
                              if name not in ("oracle", "decode_s")}
  beam = dev_report(4)
  assert set(beam["oracle"]) == {*metrics.CoupletScores.names(), "count"}
  assert beam["oracle"]["count"] == 9 and beam["oracle"]["exact_length"] == 1.0
  # The lines behind those scores: each is one of its beam's, at least as close to the reference.
  run = runs.load_run(workdir, "best", None)
  decoded = run.task.decode_split(run.params, "dev", 9, beam_size=4)
  _, best = run.task.score_decoded("dev", decoded)
  _, picked = run.task.score_decoded("dev", decoded, oracle=True)
  references = run.task.data.references("dev")[:9]
  sentence_bleu2 = sacrebleu.metrics.BLEU(tokenize="char", max_ngram_order=2, effective_order=True)
  closeness = lambda line, ref: sentence_bleu2.sentence_score(metrics.line_text(line), [ref]).score
  for (hyps, _), line, first, ref in zip(decoded, picked, best, references):
    assert line in [run.task.vocab.decode(h) for h in hyps]
    assert first == run.task.vocab.decode(hyps[0])
    assert closeness(line, ref) >= closeness(first, ref)


@pytest.mark.parametrize("argv, message", [
    (["--forms", "length", "--no-copy"], "--forms names the forms itself"),
    (["--forms", "length+copy"], "invalid choice: 'length+copy'"),
    (["--beam-size", "0"], "--beam-size must be at least 1, got 0"),
    (["--limit", "0"], "--limit must be at least 1, got 0"),
])
def test_report_rejects_bad_arguments(argv, message, capsys):
  try:
    status = main(["report", "couplet", "--workdir", "nowhere", *argv])
  except SystemExit as e:  # argparse's own errors
    status = e.code
  assert status == 2
  assert message in capsys.readouterr().err


def test_named_forms_keep_report_order_and_reject_unknown_names():
  assert [f.name for f in report.named_forms(["length+pattern", "free"])] == ["free",
                                                                              "length+pattern"]
  assert report.FORM_NAMES == ("free", "length", "length+punct", "length+nocopy",
                               "length+pattern", "length+punct+nocopy+pattern")
  with pytest.raises(ValueError, match="unknown decoding form\\(s\\) 'punct': choose from free"):
    report.named_forms(["punct", "free"])


# ---- the side-by-side table of random couplets


def test_pick_indices_draws_distinct_sorted_positions_reproducibly():
  drawn = table.pick_indices(17, 5, seed=3)
  assert drawn == sorted(np.random.default_rng(3).choice(17, 5, replace=False).tolist())
  assert len(set(drawn)) == 5 and all(0 <= i < 17 for i in drawn)
  assert table.pick_indices(17, 5, seed=3) == drawn and table.pick_indices(17, 5, seed=4) != drawn
  assert table.pick_indices(4, 4, seed=0) == [0, 1, 2, 3]
  for count in (0, 18):
    with pytest.raises(ValueError, match=f"cannot draw {count} couplets from a split of 17"):
      table.pick_indices(17, count, seed=0)


def test_markdown_table_rows_and_escaping():
  text = table.markdown_table(["春风", "a|b"], ["秋月", "c"], {"lstm": ["夏雨", "d"],
                                                              "tf": ["冬雪", "e|f"]})
  assert text == ("| # | upper line | reference | lstm | tf |\n"
                  "|---:|---|---|---|---|\n"
                  "| 1 | 春风 | 秋月 | 夏雨 | 冬雪 |\n"
                  "| 2 | a\\|b | c | d | e\\|f |\n")
  with pytest.raises(ValueError, match="column 'tf' has 1 lines for 2 upper lines"):
    table.markdown_table(["春风", "a"], ["秋月", "c"], {"tf": ["冬雪"]})


def test_table_command_lines_up_runs_on_the_same_couplets(workdir, tmp_path, capsys):
  out = tmp_path / "table.md"
  assert main(["table", "couplet", "--workdirs", workdir, workdir, "--count", "6", "--seed", "1", "--split",
                     "dev", "--force-punct", "--no-copy", "--keep-pattern", "--out", str(out)]) == 0
  captured = capsys.readouterr()
  assert out.read_text(encoding="utf-8").rstrip("\n") == captured.out.rstrip("\n")
  assert "decoding: length+punct+nocopy+pattern" in captured.err
  lines = captured.out.strip().splitlines()
  name = os.path.normpath(workdir)  # the same run twice: columns named by directory, numbered
  assert lines[0] == f"| # | upper line | reference | {name} (1) | {name} (2) |"
  run = runs.load_run(workdir)
  picked = table.pick_indices(len(run.task.data.sources("dev")), 6, seed=1)
  rows = [line.strip("| ").split(" | ") for line in lines[2:]]
  assert [row[0] for row in rows] == ["1", "2", "3", "4", "5", "6"]
  assert [row[1] for row in rows] == [run.task.data.sources("dev")[i] for i in picked]
  assert [row[2] for row in rows] == [run.task.data.references("dev")[i] for i in picked]
  for row in rows:
    assert row[3] == row[4]  # one run, one deterministic beam search
  _assert_form_kept([row[1] for row in rows], [row[3] for row in rows], pattern=True)


def test_table_command_names_a_directory_without_a_run(workdir, tmp_path, capsys):
  assert main(["table", "couplet", "--workdirs", workdir, str(tmp_path / "nothing")]) == 2
  assert f"{tmp_path / 'nothing'} the --workdir of a training run?" in capsys.readouterr().err


def test_table_command_refuses_a_count_larger_than_the_split(workdir, capsys):
  assert main(["table", "couplet", "--workdirs", workdir, "--count", "100000", "--split",
               "dev"]) == 2
  assert "--count 100000: cannot draw 100000 couplets from a split of" in capsys.readouterr().err


def test_couplet_command_keeps_spaces_and_lists_unknown_characters_apart(workdir, capsys):
  assert main(["couplet", "春风 秋月", "hello", "--workdir", workdir]) == 0
  captured = capsys.readouterr()
  spaced, unknown = captured.out.splitlines()
  assert len(spaced) == 5 and spaced[2] == " " and " " not in spaced[:2] + spaced[3:]
  assert len(unknown) == 5
  assert "characters outside the vocabulary (read as <unk>): h e l o" in captured.err


@pytest.mark.parametrize("upper, line, expected", [
    ("风 雨", "年岁", "年 岁"), ("hello world", "abcdefghij", "abcde fghij"),
    ("晚  风", "夜雨", "夜  雨"), ("春风", "秋月", "秋月"), ("a b", "xyz", "x yz")])
def test_spaced_like_puts_the_upper_lines_spaces_in_place(upper, line, expected):
  assert couplet_cli.spaced_like(upper, line) == expected


def test_heatmap_of_a_free_line_cut_at_the_length_limit_has_no_eos_row(workdir, tmp_path,
                                                                        monkeypatch):
  """A line without the length constraint may run to max_target_len characters without eos: its
  heatmap has one row per character, as its attention has (an eos label once made it fail)."""
  run = runs.load_run(workdir)
  task = run.task
  generation = task.generate(run.params, ["春风"], options=FormOptions(exact_length=False))[0]
  full = [generation.tokens[0][0] if generation.tokens[0] else "春"] * task.max_target_len
  cut = task_lib.Generation(generation.upper, generation.chars, ["".join(full)], [full], [0.0])
  drawn = {}

  def plot(weights, x_tokens, y_tokens, path, **kwargs):
    drawn.update(weights=weights, x=x_tokens, y=y_tokens)
    return path

  monkeypatch.setattr(task_lib.plots, "plot_attention", plot)
  task.draw_heatmap(run.params, cut, str(tmp_path / "cut.png"))
  assert drawn["y"] == full and drawn["weights"].shape == (task.max_target_len, 3)
  np.testing.assert_allclose(drawn["weights"].sum(axis=1), 1.0, rtol=1e-5)
  ended = task.generate(run.params, ["春风"])[0]  # the upper line's length: 2 characters, eos
  task.draw_heatmap(run.params, ended, str(tmp_path / "ended.png"))
  assert drawn["y"] == ended.tokens[0] + ["</s>"] and len(ended.tokens[0]) == 2
  assert drawn["weights"].shape == (3, 3)
  assert task.ended_tokens(["春"] * (task.max_target_len - 1))[-1] == "</s>"
