"""The command line, run in-process on the toy experiment."""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest

import engine_toy
from experiments import metrics_log
from experiments import registry
from experiments.cli import main
from experiments.console import UsageError

engine_toy.enable_compilation_cache()


def _fails(argv, capsys) -> str:
  with pytest.raises(SystemExit) as info:
    main(argv)
  assert info.value.code == 2
  return capsys.readouterr().err


def test_train_stop_resume_evaluate_predict(tmp_path, capsys, monkeypatch):
  workdir = str(tmp_path / "run")
  train = ["train", "toy", "--workdir", workdir, "--train.num_epochs=1", "--train.log_every=5"]
  # SIGTERM while batch 2 is drawn: a checkpoint is saved and the exit status is 128 + 15.
  assert main(train + ["--data.signal_at_batch=2"]) == 128 + signal.SIGTERM
  assert "Stopped by SIGTERM" in capsys.readouterr().out
  assert not os.path.exists(os.path.join(workdir, metrics_log.RESULTS_FILE))
  assert main(train) == 0
  out = capsys.readouterr().out
  assert "Resuming" in out and "data.signal_at_batch: 2 -> None" in out
  with open(os.path.join(workdir, metrics_log.RESULTS_FILE)) as f:
    results = json.load(f)
  assert results["steps"] == 5 and results["model"] == "mlp"

  assert main(["evaluate", "--workdir", workdir, "--split", "test"]) == 0
  evaluated = json.loads(capsys.readouterr().out)
  assert evaluated["metrics"] == pytest.approx(results["test"], rel=1e-6)
  assert evaluated["signatures"] == {}
  # Scoring examples of one's own is for the experiments that declare it (translation).
  assert main(["evaluate", "--workdir", workdir, "--pairs", str(tmp_path / "pairs.tsv")]) == 2
  assert "the toy experiment does not score examples of your own (--pairs)" in (
      capsys.readouterr().err)

  heatmap = str(tmp_path / "weights.png")
  assert main(["predict", "toy", "1 2 3", "9 10 11 12", "--workdir", workdir,
               "--heatmap", heatmap]) == 0
  lines = capsys.readouterr().out.strip().splitlines()
  assert [line.split("\t")[0] for line in lines] == ["1 2 3", "9 10 11 12"]
  assert all(0.5 <= float(line.split("\t")[2]) <= 1 for line in lines)
  assert os.path.getsize(heatmap) > 1000
  assert main(["toyclassify", "4 5", "--workdir", workdir]) == 0  # the experiment's alias
  assert capsys.readouterr().out.startswith("4 5\t")

  # Inputs one per line from a file or from standard input, outputs in the same order.
  inputs = tmp_path / "inputs.txt"
  inputs.write_text("1 2 3\n7\n9 10 11 12\n", encoding="utf-8")
  assert main(["predict", "toy", "--input-file", str(inputs), "--workdir", workdir]) == 0
  from_file = capsys.readouterr().out.splitlines()
  assert [line.split("\t")[0] for line in from_file] == ["1 2 3", "7", "9 10 11 12"]
  assert from_file[0] == lines[0] and from_file[2] == lines[1]
  with open(inputs, encoding="utf-8") as stdin:
    monkeypatch.setattr("sys.stdin", stdin)
    assert main(["predict", "toy", "--workdir", workdir]) == 0
  assert capsys.readouterr().out.splitlines() == from_file
  inputs.write_text("1 2\n\n3\n", encoding="utf-8")
  assert main(["predict", "toy", "--input-file", str(inputs), "--workdir", workdir]) == 2
  assert "line 2 of " in capsys.readouterr().err
  assert main(["predict", "toy", "5", "--input-file", str(inputs), "--workdir", workdir]) == 2
  assert "not both" in capsys.readouterr().err


def test_list_and_show_config(capsys):
  assert main(["list"]) == 0
  assert "toy: mlp*, wide" in capsys.readouterr().out
  assert main(["train", "toy", "--model", "wide", "--optimizer.learning_rate", "0.5", "--show-config"]) == 0
  shown = capsys.readouterr().out
  assert "optimizer.learning_rate = 0.5" in shown and "model.embed_dim = 14" in shown


def _help(argv, capsys) -> str:
  with pytest.raises(SystemExit) as info:
    main(argv)
  assert info.value.code == 0
  return capsys.readouterr().out


def test_train_help_after_an_experiment_lists_its_models_and_settings(capsys):
  shown = _help(["train", "toy", "--help"], capsys)
  assert shown.startswith("usage: python -m experiments train toy [-h] [--model MODEL]")
  assert "synthetic token classification for engine tests" in shown
  assert shown.split("models (--model NAME; * the default):\n")[1].splitlines() == [
      "  mlp*  The toy run: 5 steps per epoch, 2 epochs, Adam 1e-2.",
      "  wide",  # a lambda: no docstring to summarise
      "",
      "settings of mlp, each overridden by its dotted path (e.g. --optimizer.learning_rate=3e-4",
      "--train.num_epochs 4); --show-config prints them with their values, --model NAME --help "
      "another",
      "model's:",
      "  train      seed, batch_size, eval_batch_size, num_epochs, num_steps, log_every, "
      "eval_every,",
      "             checkpoint_every, keep_checkpoints, best_metric, best_mode, test_with, dtype,",
      "             param_dtype, prefetch, progress_bar, divergence_factor",
      "  optimizer  name, learning_rate, b1, b2, eps, weight_decay, momentum, grad_clip_norm, "
      "schedule,",
      "             warmup_steps, warmup_fraction, decay_steps, min_lr_ratio",
      "  model      embed_dim, hidden, dropout",
      "  data       n_train, n_dev, n_test, seq_len, vocab_size, nan_at_batch, signal_at_batch,",
      "             kill_at_batch, fault_process"]
  assert "settings of wide, each" in _help(["train", "toy", "--model", "wide", "-h"], capsys)
  generic = _help(["train", "--help"], capsys)  # no experiment yet: the command's own help
  assert "`train EXPERIMENT --help` lists the experiment's models" in " ".join(generic.split())
  assert "models (--model NAME" not in generic
  assert "unknown model 'big' for experiment 'toy'" in _fails(
      ["train", "toy", "--model", "big", "--help"], capsys)


@pytest.mark.parametrize("name, named", [
    ("matching", ["transformer", "transformer_mlm", "transformer_pretrained", "decomposable",
                  "esim", "siamese"]),
    ("sentiment", ["bilstm_mean", "bilstm_attn_additive", "transformer", "nbsvm"])])
def test_train_help_names_every_model_of_a_shipped_experiment(name, named, capsys):
  experiment = registry.get_experiment(name)
  shown = _help(["train", name, "--help"], capsys)
  rows = shown.split("models (--model NAME; * the default):\n")[1].split("\n\n")[0].splitlines()
  starred = [f"{m}*" if m == experiment.default_model else m for m in experiment.configs]
  assert [row.split()[0] for row in rows] == starred
  assert set(named) <= set(experiment.configs)
  for row, model in zip(rows, experiment.configs):
    summary = experiment.summary(model, 100 - 2 - (max(map(len, starred)) + 2))
    assert summary and row.endswith(summary) and len(row) <= 100
  assert f"settings of {experiment.default_model}, each" in shown


def test_a_models_summary_is_its_docstrings_first_sentence_cut_at_a_word():

  def named_run():
    """Word + bigram embeddings (E 64) -> pooling, on whole
    reviews. Measured: 0.91 (see RESULTS).

    More."""

  experiment = dataclasses.replace(registry.get_experiment("toy"),
                                   configs={"a": named_run, "b": lambda: None}, default_model="a")
  assert experiment.summary("a") == ("Word + bigram embeddings (E 64) -> pooling, on whole "
                                     "reviews.")
  assert experiment.summary("a", 40) == "Word + bigram embeddings (E 64) -> ..."
  assert experiment.summary("b") == ""


def test_bad_names_and_keys_exit_2_with_the_known_ones(capsys, tmp_path):
  assert "unknown experiment 'imdb'; known experiments: " in _fails(["train", "imdb"], capsys)
  assert "toy" in _fails(["train", "imdb"], capsys)
  assert "unknown model 'big' for experiment 'toy'; known models: mlp, wide" in _fails(
      ["train", "toy", "--model", "big"], capsys)
  err = _fails(["train", "toy", "--optimizer.learning_rat=1"], capsys)
  assert "Unrecognized options: --optimizer.learning_rat=1" in err
  assert "Perhaps you meant:" in err and "--optimizer.learning_rate FLOAT" in err
  err = _fails(["train", "toy", "--train.batch_size", "x"], capsys)
  assert "Error parsing --train.batch_size: invalid literal for int() with base 10: 'x'" in err
  assert "invalid choice 'lion' for argument '--optimizer.name'" in _fails(
      ["train", "toy", "--optimizer.name=lion"], capsys)
  assert "train.log_every must be at least 1, got 0" in _fails(
      ["train", "toy", "--train.log_every=0"], capsys)
  assert "--set KEY=VALUE is gone" in _fails(["train", "toy", "--set", "train.seed=1"], capsys)
  assert "unrecognized arguments: --train.seed=1" in _fails(
      ["evaluate", "--workdir", str(tmp_path), "--train.seed=1"], capsys)
  if "translation" not in registry.load_experiments():
    assert "unknown experiment 'translation'" in _fails(["translate", "I won !"], capsys)
  assert "invalid choice: 'nope'" in _fails(["predict", "nope", "text"], capsys)
  assert "argument --checkpoint: expected best, latest or a step number, got 'first'" in _fails(
      ["evaluate", "--workdir", str(tmp_path), "--checkpoint", "first"], capsys)
  # A directory that is not a run: an input error, status 2 and a message, no traceback.
  assert main(["evaluate", "--workdir", str(tmp_path)]) == 2
  assert "config.json does not exist" in capsys.readouterr().err


def test_the_first_line_says_how_many_steps_and_which_setting_decided(tmp_path, capsys):
  common = ["train", "toy", "--train.log_every=5", "--train.progress_bar=False"]
  # The epochs given after the steps win (and the other way round); the first line says which.
  assert main(common + ["--workdir", str(tmp_path / "a"), "--train.num_steps=3",
                        "--train.num_epochs=1"]) == 0
  assert capsys.readouterr().out.splitlines()[0] == (
      "Training 5 steps: train.num_epochs = 1 epochs of 5 steps (train.num_steps is None)")
  assert main(common + ["--workdir", str(tmp_path / "b"), "--train.num_epochs=1",
                        "--train.num_steps=3"]) == 0
  assert capsys.readouterr().out.splitlines()[0].startswith(
      "Training 3 steps: train.num_steps = 3 (about 0.6 epochs of 5 steps")
  # An override the rest of the config leaves idle is a usage error, before anything runs.
  assert _fails(common + ["--workdir", str(tmp_path / "c"), "--optimizer.momentum=0.9"],
                capsys).strip().endswith(
      "--optimizer.momentum has no effect: only sgd uses momentum (optimizer.name = 'adam')")
  assert not (tmp_path / "c").exists()


def test_predict_offers_no_flag_it_would_ignore(tmp_path, capsys):
  # The toy classifier does not decode: no --beam-size or --num-results to be silently ignored.
  assert "unrecognized arguments: --beam-size 4" in _fails(
      ["predict", "toy", "1 2", "--workdir", str(tmp_path), "--beam-size", "4"], capsys)
  # --model only picks the default --workdir; beside --workdir it would be ignored.
  assert "--model only chooses the default --workdir" in _fails(
      ["predict", "toy", "1 2", "--workdir", str(tmp_path), "--model", "wide"], capsys)


def test_an_experiments_own_command_parses_runs_and_exits_by_the_rule(capsys):
  """registry.Experiment.commands: `python -m experiments <command> <experiment> ...`, its flags
  its own, a UsageError exit 2 and a ValueError exit 1 (one line each); a command named like a
  built-in one or an alias is refused naming both."""
  toy = registry.get_experiment("toy")
  seen = []

  def add_arguments(parser):
    parser.add_argument("--count", type=int, required=True)

  def run(args, console):
    seen.append((args.experiment, args.count))
    if args.count < 0:
      raise UsageError(f"--count must be at least 0, got {args.count}")
    if args.count == 0:
      raise ValueError("nothing to count")
    console.print(f"counted {args.count}")
    return 0

  tally = registry.Command(help="count to --count", add_arguments=add_arguments, run=run)
  try:
    registry.register(dataclasses.replace(toy, commands={"tally": tally}), replace=True)
    assert main(["tally", "toy", "--count", "3"]) == 0
    assert capsys.readouterr().out == "counted 3\n" and seen == [("toy", 3)]
    assert main(["tally", "toy", "--count", "-2"]) == 2
    assert capsys.readouterr().err == "error: --count must be at least 0, got -2\n"
    assert main(["tally", "toy", "--count", "0"]) == 1
    assert capsys.readouterr().err == "error: nothing to count\n"
    assert "the following arguments are required: --count" in _fails(["tally", "toy"], capsys)
    assert "invalid choice: 'nope'" in _fails(["tally", "nope"], capsys)
    for name, taken in (("serve", "a built-in command"), ("toyalias", "the toy experiment's alias")):
      registry.register(dataclasses.replace(toy, aliases=("toyalias",), commands={name: tally}),
                        replace=True)
      with pytest.raises(ValueError, match=f"the toy experiment's command '{name}' is already "
                         f"{taken}; name it otherwise"):
        main(["list"])
  finally:
    registry.register(toy, replace=True)
