"""The explorer's service: runs refused with the reason, inputs and options checked, and the
attention maps equal to what the models and the heatmaps compute."""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil
import types

import jax

import numpy as np
import pytest

from experiments import answers
from experiments import cli as engine_cli
from experiments import config as config_lib
from experiments import registry
from experiments import runs
from experiments.console import ListConsole
from experiments.explorer import service
from experiments.sentiment import configs as sentiment_configs
from experiments.sentiment.task import SentimentTask
from pipelines.vocab import Vocab

LIMITS = service.Limits(max_chars=50)
WORDS = ["a", "fine", "film", "with", "dull", "bits"]


# ---- discovery and refusals -------------------------------------------------------------------


def test_the_explorer_is_not_an_experiment():
  assert "experiments.explorer" not in registry.builtin_modules()
  assert "explorer" in registry.TOOL_PACKAGES
  assert "explorer" not in registry.load_experiments()
  with pytest.raises(ValueError, match="unknown experiment 'explorer'"):
    registry.get_experiment("explorer")


def test_missing_and_non_run_directories_are_refused_naming_them(tmp_path):
  missing = str(tmp_path / "nowhere")
  with pytest.raises(service.RunRefusedError, match=f"--workdir {missing}: no such directory"):
    service.Explorer([missing])
  with pytest.raises(service.RunRefusedError) as e:
    service.Explorer([str(tmp_path)])
  assert f"--workdir {tmp_path} is not a training run" in str(e.value)
  assert "config.json does not exist" in str(e.value) and not e.value.damaged
  with pytest.raises(service.RunRefusedError, match="no --workdir given"):
    service.Explorer([])


def test_the_registry_says_how_a_run_answers_or_why_it_is_refused(tiny_runs):
  """The explorer serves what the experiment's registry entry declares (Experiment.answerer):
  none, and the run is refused naming the experiments that are served; an Answerer's `refuses`
  reason, and the run is refused with it."""
  workdir = tiny_runs["sentiment_pooling"]
  sentiment = registry.get_experiment("sentiment")
  assert service.Explorer([workdir]).describe()[0]["input"] == "text"
  try:
    registry.register(dataclasses.replace(sentiment, answerer=None), replace=True)
    with pytest.raises(service.RunRefusedError) as e:
      service.Explorer([workdir])
    assert str(e.value) == (f"--workdir {workdir} is a 'sentiment' run; the explorer serves "
                            "couplet, matching, translation")
    refusing = dataclasses.replace(sentiment.answerer, refuses=lambda run: (
        f"a {run.config.model_name} run that answers nothing here"))
    registry.register(dataclasses.replace(sentiment, answerer=refusing), replace=True)
    with pytest.raises(service.RunRefusedError) as e:
      service.Explorer([workdir])
    assert str(e.value) == f"--workdir {workdir} is a ngram_attn run that answers nothing here"
    assert not e.value.damaged
  finally:
    registry.register(sentiment, replace=True)


def test_an_answerer_takes_a_text_or_a_pair_only():
  with pytest.raises(ValueError, match="Answerer.input must be 'text' or 'pair', got 'image'"):
    answers.Answerer("image", lambda run, limits: {}, lambda run, value, options, console: None)


def test_a_damaged_checkpoint_is_refused(tiny_runs, tmp_path):
  workdir = str(tmp_path / "run")
  shutil.copytree(tiny_runs["sentiment_pooling"], workdir)
  data = max(glob.glob(os.path.join(workdir, "best", "*", "params", "d", "*")),
             key=os.path.getsize)
  with open(data, "r+b") as f:  # flip the last bytes
    f.seek(-8, os.SEEK_END)
    tail = f.read(8)
    f.seek(-8, os.SEEK_END)
    f.write(bytes(b ^ 0xFF for b in tail))
  with pytest.raises(service.RunRefusedError) as e:
    service.Explorer([workdir])
  assert str(e.value).startswith(f"--workdir {workdir}: checkpoint ") and e.value.damaged
  assert "is damaged" in str(e.value)


@pytest.mark.parametrize("argv, status, message", [
    (["--workdir", "{missing}"], 2, "error: --workdir {missing}: no such directory"),
    (["--workdir", "{empty}"], 2, "error: --workdir {empty} is not a training run: "),
    (["--workdir", "{empty}", "--port", "70000"], 2, "--port must lie in [0, 65535]"),
])
def test_serve_refuses_before_the_server_starts(argv, status, message, tmp_path, capsys):
  paths = {"missing": str(tmp_path / "nowhere"), "empty": str(tmp_path)}
  argv = [word.format(**paths) for word in argv]
  if status == 2 and "--port" in argv:
    with pytest.raises(SystemExit) as e:
      engine_cli.main(["serve", *argv])
    assert e.value.code == 2 and message in capsys.readouterr().err
    return
  assert engine_cli.main(["serve", *argv]) == status
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 1 and err[0].startswith(message.format(**paths))


# ---- options and inputs ----------------------------------------------------------------------


SPEC = {"beam": service.Option("beam", "int", 4, 1, 16), "alpha": service.Option(
    "alpha", "float", 0.6, 0.0, 10.0), "tsv": service.Option("tsv", "bool", False),
        "mode": service.Option("mode", "choice", "a", choices=("a", "b"))}


def test_options_take_their_types_and_ranges_and_null_is_the_default():
  assert service.check_options(SPEC, {"beam": 2, "alpha": 1, "tsv": True, "mode": "b"}) == {
      "beam": 2, "alpha": 1, "tsv": True, "mode": "b"}
  assert service.check_options(SPEC, None) == dict.fromkeys(SPEC)
  assert service.check_options(SPEC, {"beam": None}) == dict.fromkeys(SPEC)
  assert SPEC["beam"].describe() == {"type": "int", "default": 4, "help": "", "min": 1, "max": 16}
  assert SPEC["mode"].describe()["choices"] == ["a", "b"]


@pytest.mark.parametrize("options, message", [
    ([], "options must be an object"),
    ({"width": 3}, "unknown option 'width'; this run's options: beam, alpha, tsv, mode"),
    ({"beam": "2"}, "options.beam must be an integer, got a string '2'"),
    ({"beam": 2.0}, "options.beam must be an integer"),
    ({"beam": True}, "options.beam must be an integer, got a boolean"),
    ({"beam": 0}, "options.beam must lie in [1, 16], got 0"),
    ({"alpha": float("nan")}, "options.alpha must be a finite number"),
    ({"alpha": 11}, "options.alpha must lie in [0.0, 10.0], got 11"),
    ({"tsv": 1}, "options.tsv must be true or false, got an integer 1"),
    ({"mode": "c"}, "options.mode must be one of ['a', 'b']"),
])
def test_bad_options_are_named(options, message):
  with pytest.raises(service.InputError) as e:
    service.check_options(SPEC, options)
  assert message in str(e.value)


@pytest.mark.parametrize("value, error, message", [
    (3, service.InputError, "input must be a string, got an integer"),
    ("  \n", service.InputError, "input is empty"),
    ("x" * 51, service.TooLargeError, "input has 51 characters; the limit is 50"),
    ("a\x00b", service.InputError, "control character U+0000 at character 1"),
    ("a\x1bb", service.InputError, "control character U+001B"),
    ("a\ud800b", service.InputError, "unpaired surrogate (U+D800) at character 1"),
])
def test_bad_texts_are_named(value, error, message):
  with pytest.raises(error) as e:
    service.check_text(value, "input", LIMITS)
  assert message in str(e.value)
  assert service.check_text("two\tcolumns\nand lines", "input", LIMITS)  # allowed in a text


@pytest.mark.parametrize("value, message", [
    ("a b", "input must be an object {\"a\": text, \"b\": text}"),
    ({"a": "x"}, "input.b is missing"),
    ({"a": "x", "b": "y", "c": "z"}, "input has unknown field 'c'"),
    ({"a": "x\ty", "b": "z"}, "input.a holds the control character U+0009"),
    ({"a": "x", "b": ""}, "input.b is empty"),
])
def test_bad_pairs_are_named(value, message):
  with pytest.raises(service.InputError) as e:
    service.check_pair(value, LIMITS)
  assert message in str(e.value)


# ---- attention maps: the models' own weights ---------------------------------------------------


@pytest.mark.parametrize("model, overrides, layers, heads", [
    ("sanet", ["--model.embed_dim=6", "--model.num_heads=3"], 1, 3),
    ("transformer", ["--model.embed_dim=6", "--model.num_heads=3", "--model.num_layers=2",
                     "--model.ffn_hidden=5"], 2, 3),
])
def test_sentiment_maps_hold_every_head_and_their_mean_is_the_heatmap(model, overrides, layers,
                                                                      heads):
  # (BiLSTMSelfAttention's weights come as SANet's do: its zoo.MultiHeadAttention 'attention';
  # the pooling models' map is checked through the API, on a trained run.)
  cfg = sentiment_configs.CONFIGS[model]()
  cfg.experiment, cfg.model_name = "sentiment", model
  cfg = config_lib.override(cfg, ["--data.max_len=9", "--train.batch_size=2", *overrides])
  task = SentimentTask(cfg, artifacts={"vocab": Vocab(WORDS), "bigram_vocab": None})
  params = task.init(jax.random.key(0), task.example_batch())
  prediction = task.predict(params, ["a fine film with unknown dull bits"])[0]
  maps = task.attention_maps(params, prediction)
  n = len(prediction.words)
  weights = maps["self_attention"]
  assert weights.shape == (layers, heads, n, n)
  np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
  np.testing.assert_allclose(weights[-1].mean(0), prediction.attention, atol=1e-6)
  assert len(set(np.round(weights[-1, :, 0, 0], 6))) == heads  # the heads differ


def test_seq2seq_maps_last_layer_mean_is_the_heatmaps_cross_attention(tiny_runs):
  run = runs.load_run(tiny_runs["translation_transformer"])
  translation = run.task.translate(run.params, ["I won!"], with_attention=True)[0]
  maps = run.task.attention_maps(run.params, translation.source_ids, translation.target_ids)
  # Rows: one per target token and eos, within the widest decoder input.
  s, t = len(translation.source_ids), min(len(translation.target_ids) + 1,
                                          run.task.max_target_len)
  assert maps["encoder_self_attention"].shape == (2, 2, s, s)
  assert maps["decoder_self_attention"].shape == (1, 2, t, t)
  assert maps["cross_attention"].shape == (1, 2, t, s)
  rows = len(translation.tokens)
  np.testing.assert_allclose(maps["cross_attention"][-1].mean(0)[:rows], translation.attention,
                             atol=1e-6)
  causal = maps["decoder_self_attention"][0, 0]
  assert np.all(np.triu(causal, k=1) == 0)  # a decoder input never sees a later one
  for weights in maps.values():
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_answers_print_what_the_command_prints_and_notes_go_to_notes(tiny_runs):
  explorer = service.Explorer([tiny_runs["sentiment_pooling"]])
  result = explorer.answer("0", "a fine film")
  console = ListConsole()
  run = explorer.runs["0"].run
  from experiments.sentiment import cli  # pylint: disable=g-import-not-at-top
  predictions = cli.answer(run, _namespace(run, ["a fine film"]), console)
  # The lines of `predict sentiment --weights`: the label line, then each word's weight.
  assert result["output"]["lines"] == console.lines == cli.format_prediction(predictions[0],
                                                                             weights=True)
  assert len(console.lines) == 1 + 3
  assert result["output"]["notes"] == console.notes
  with pytest.raises(service.UnknownRunError, match="unknown run id '1'; the runs are 0"):
    explorer.answer("1", "a fine film")
  with pytest.raises(service.InputError, match="has no words to classify"):
    explorer.answer("0", "<br />")


def _namespace(run, inputs):
  import argparse  # pylint: disable=g-import-not-at-top
  return argparse.Namespace(inputs=inputs, workdir=run.workdir, checkpoint="best", heatmap=None,
                            weights=True)


def test_one_source_is_decoded_as_one_row_with_the_full_batchs_result(tiny_runs):
  run = runs.load_run(tiny_runs["translation_transformer"])
  task = run.task
  _, ids = task.encode_source("I won!")
  alone = task.decode(run.params, [np.asarray(ids)], beam_size=3)  # a batch of 1 row
  among = task.decode(run.params, [np.asarray(ids)] * 9, beam_size=3)  # batches of 8 rows
  assert task.decode_batch_size == 8
  for found, scores in among:
    assert found == alone[0][0]
    np.testing.assert_allclose(scores, alone[0][1], rtol=1e-5)


@pytest.mark.parametrize("host, note", [(None, False), ("0.0.0.0", True)])
def test_serve_binds_localhost_unless_told_and_says_so(tiny_runs, monkeypatch, capsys, host, note):
  import uvicorn  # pylint: disable=g-import-not-at-top
  from experiments.explorer import server  # pylint: disable=g-import-not-at-top
  started = {}
  # What would be served, recorded (a real Config would set up uvicorn's logging on capsys).
  monkeypatch.setattr(uvicorn, "Config", lambda app, **kwargs: {"app": app, **kwargs})
  monkeypatch.setattr(uvicorn, "Server", lambda config: types.SimpleNamespace(
      run=lambda: started.update(config)))
  argv = ["serve", "--workdir", tiny_runs["sentiment_pooling"], "--port", "8123"]
  assert engine_cli.main(argv + ([] if host is None else ["--host", host])) == 0
  assert started["host"] == (host or "127.0.0.1") and started["port"] == 8123
  # Every bound of server.py: the body deadline outermost, uvicorn's and h11's limits.
  assert isinstance(started["app"], server.BodyDeadline) and started["app"].timeout_s == 10.0
  assert (started["limit_concurrency"], started["timeout_keep_alive"],
          started["h11_max_incomplete_event_size"]) == (200, 5, 16 * 1024)
  err = capsys.readouterr().err
  assert ("note: binding 0.0.0.0, not 127.0.0.1" in err) == note
  assert f"serving sentiment ngram_attn at http://{host or '127.0.0.1'}:8123/" in err
