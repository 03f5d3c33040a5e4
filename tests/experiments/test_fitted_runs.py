"""Models fitted without gradient steps as engine runs (experiments/fitting.py, task.FittedTask):
sentiment's nbsvm and paragraph_vectors give the ensemble command's very members, and their model
is saved under a checksum manifest, refused when damaged, and served like every run."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from experiments import cli
from experiments import fitting
from experiments import runs
from experiments import trainer
from experiments import workdir as workdir_lib
from experiments.checkpoints import CheckpointDamagedError
from experiments.explorer import service
from experiments.sentiment import fitted
from _sample_runs import train_sample_ngram_run


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory):
  """The ensemble command on a briefly trained ngram_attn run (reviews cut to 64 tokens), its
  models saved as members; and the nbsvm and paragraph_vectors runs of the same data and
  settings, through the engine's command."""
  root = tmp_path_factory.mktemp("fitted")
  teacher = train_sample_ngram_run(root, max_len=64, boundaries=(21, 64), steps=2)
  members = root / "members"
  assert cli.main(["ensemble", "sentiment", "--workdir", teacher, "--out",
                   str(root / "ensemble.json"), "--max-n", "2", "--costs", "0.1", "1",
                   "--pv-dim", "16", "--pv-epochs", "2", "--seed", "3",
                   "--save-members", str(members)]) == 0
  data = ["--data.max_len", "64", "--data.boundaries", "21", "64", "--data.prepared_dir",
          str(root / "data"), "--train.seed", "3"]
  workdirs = {"nbsvm": str(root / "nbsvm"), "paragraph_vectors": str(root / "pv")}
  assert cli.main(["train", "sentiment", "--model", "nbsvm", "--workdir", workdirs["nbsvm"],
                   "--model.max_n", "2", "--model.costs", "0.1", "1", *data]) == 0
  assert cli.main(["train", "sentiment", "--model", "paragraph_vectors", "--workdir",
                   workdirs["paragraph_vectors"], "--model.dim", "16", "--model.epochs", "2",
                   *data]) == 0
  record = json.loads((root / "ensemble.json").read_text())
  return record, members, workdirs


def _without_times(record):
  """A fit's record without its wall-clock times."""
  if isinstance(record, dict):
    return {k: _without_times(v) for k, v in record.items()
            if k not in ("fit_s", "count_s", "train_s", "infer_s")}
  if isinstance(record, list):
    return [_without_times(v) for v in record]
  return record


@pytest.mark.parametrize("name", ["nbsvm", "paragraph_vectors"])
def test_the_run_is_the_ensembles_member_of_the_same_settings_bit_for_bit(sample_runs, name):
  record, members, workdirs = sample_runs
  results = json.loads(open(os.path.join(workdirs[name], "results.json")).read())
  assert results["model"] == name and results["test_params"] == "fitted"
  assert _without_times(results["fit"]) == _without_times(record[name])
  run = runs.load_run(workdirs[name])
  ids, labels = fitted.split_reviews(run.task.data)
  with np.load(members / f"{name}.npz") as member:
    for split in ("dev", "test"):
      z = run.task.log_odds(run.params, list(ids[split]), split)
      np.testing.assert_array_equal(z, member[f"{split}_log_odds"])  # bitwise
      assert results[split]["accuracy"] == record[name]["chosen"][f"{split}_accuracy"]
      # The loss is the mean cross-entropy of the labels under sigmoid(z).
      assert results[split]["loss"] == pytest.approx(
          float(np.mean(np.log1p(np.exp(-(2 * labels[split] - 1) * z)))), rel=1e-12)
      # `evaluate` of the loaded model repeats the recorded figures exactly.
      assert runs.evaluate_run(workdirs[name], split)["metrics"] == results[split]
  assert sorted(os.listdir(workdirs[name])) == ["config.json", "model", "results.json",
                                                "train.lock", "vocab.json"]


def test_predict_and_serve_classify_new_text_without_attention(sample_runs, capsys):
  _, _, workdirs = sample_runs
  texts = ["a moving , wonderful film", "dull and boring , a waste", "a moving , wonderful film"]
  lines = {}
  for name, workdir in workdirs.items():
    capsys.readouterr()
    assert cli.main(["predict", "sentiment", "--workdir", workdir, *texts]) == 0
    out = lines[name] = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[2] for line in out] == texts  # one line each, no word weights
    assert out[0] == out[2]  # the same text, the same answer (paragraph vectors included)
    run = runs.load_run(workdir)
    z = run.task.log_odds(run.params, [run.task.encode(t)[1] for t in texts])
    for line, value in zip(out, z):
      label, probability, _ = line.split("\t")
      assert label == ("positive" if value > 0 else "negative")
      assert float(probability) == pytest.approx(1 / (1 + np.exp(-abs(value))), abs=5e-5)
  assert cli.main(["predict", "sentiment", "--workdir", workdirs["nbsvm"], "--heatmap",
                   "x.png", "fine"]) == 2
  captured = capsys.readouterr()
  assert captured.out == "" and "the nbsvm model has no attention to draw" in captured.err
  for name, workdir in workdirs.items():  # no weights to print either: one line says so
    assert cli.main(["predict", "sentiment", "--workdir", workdir, "--weights", "fine"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"error: --weights: the {name} model has no attention weights to print\n")
  explorer = service.Explorer([workdirs["nbsvm"]])
  answer = explorer.answer("0", texts[0])
  assert answer["attention"] == [] and answer["output"]["weights"] == []
  assert answer["output"]["label"] == lines["nbsvm"][0].split("\t")[0]


def test_a_damaged_or_missing_model_is_refused_naming_it(sample_runs, tmp_path, capsys):
  _, _, workdirs = sample_runs
  damaged = tmp_path / "damaged"
  os.system(f"cp -r {workdirs['nbsvm']} {damaged}")
  model_file = damaged / "model" / fitting.MODEL_FILE
  data = bytearray(model_file.read_bytes())
  data[len(data) // 2] ^= 1
  model_file.write_bytes(bytes(data))
  with pytest.raises(CheckpointDamagedError, match="model.pkl differs from what was saved"):
    runs.load_run(str(damaged))
  capsys.readouterr()
  assert cli.main(["predict", "sentiment", "--workdir", str(damaged), "fine"]) == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and f"{damaged}/model" in err[0] and "model.pkl" in err[0]
  with pytest.raises(service.RunRefusedError, match="model.pkl differs") as refused:
    service.Explorer([str(damaged)])
  assert refused.value.damaged
  model_file.write_bytes(model_file.read_bytes()[:100])  # cut short
  with pytest.raises(CheckpointDamagedError, match="model.pkl has 100 bytes"):
    runs.load_run(str(damaged))
  os.remove(damaged / "model" / "checksums.json")
  with pytest.raises(CheckpointDamagedError, match="checksums.json is missing"):
    runs.load_run(str(damaged))
  os.system(f"rm -r {damaged / 'model'}")
  assert cli.main(["predict", "sentiment", "--workdir", str(damaged), "fine"]) == 2
  assert "holds no fitted model (model/ is missing)" in capsys.readouterr().err
  assert cli.main(["evaluate", "--workdir", workdirs["nbsvm"], "--checkpoint", "3"]) == 2
  assert "holds a fitted model, no checkpoint of step 3" in capsys.readouterr().err


def test_a_fitted_run_holds_the_workdir_lock_and_replaces_its_model_whole(sample_runs, tmp_path):
  _, _, workdirs = sample_runs
  config = runs.load_config(workdirs["nbsvm"])
  workdir = str(tmp_path / "run")
  with workdir_lib.WorkdirLock(workdir, note=lambda line: None):
    with pytest.raises(workdir_lib.WorkdirLockedError):
      trainer.train(runs.make_task(config), config, workdir)
  assert not os.path.exists(os.path.join(workdir, "config.json"))  # nothing written
  # A save killed half-way leaves model.part/ beside the earlier model; the next save replaces
  # both with the new model whole.
  fitting.save_model({"weights": [1, 2]}, workdir)
  os.makedirs(os.path.join(workdir, "model.part"))
  fitting.save_model({"weights": [3]}, workdir)
  assert fitting.load_model(workdir) == {"weights": [3]}
  assert sorted(os.listdir(workdir)) == ["model", "train.lock"]


def test_a_fitted_run_and_a_trained_one_never_share_a_workdir(sample_runs, tmp_path, capsys):
  _, _, workdirs = sample_runs
  trained = tmp_path / "trained"
  os.makedirs(trained / "checkpoints")
  capsys.readouterr()
  assert cli.main(["train", "sentiment", "--model", "nbsvm", "--workdir", str(trained)]) == 2
  assert (f"{trained} holds a run trained by gradient steps (checkpoints/); `train sentiment "
          "--model nbsvm` fits its model without them") in capsys.readouterr().err
  assert cli.main(["train", "sentiment", "--model", "bilstm_mean", "--workdir",
                   workdirs["nbsvm"]]) == 2
  assert (f"{workdirs['nbsvm']} holds a fitted model (model/); `train sentiment --model "
          "bilstm_mean` trains by gradient steps") in capsys.readouterr().err
  assert not os.path.exists(trained / "config.json")
