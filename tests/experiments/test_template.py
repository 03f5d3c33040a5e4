"""Adding an experiment touches no engine file: copy experiments/template to a new package in a
temporary directory, rename it, and train and predict with it through the command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(args, cwd, pythonpath):
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([pythonpath, ROOT]), JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, "-m", "experiments", *args], cwd=cwd, env=env,
                        capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def copied(tmp_path_factory):
  """experiments/template copied to <tmp>/mylab/sentiment_pool, registered as 'sentiment_pool'."""
  root = tmp_path_factory.mktemp("user")
  package = root / "mylab" / "sentiment_pool"
  shutil.copytree(os.path.join(ROOT, "experiments", "template"), package)
  (root / "mylab" / "__init__.py").write_text("")
  init = package / "__init__.py"
  text = init.read_text(encoding="utf-8")
  assert 'NAME = "template"' in text
  init.write_text(text.replace('NAME = "template"', 'NAME = "sentiment_pool"'), encoding="utf-8")
  return root


def test_a_copied_template_trains_and_predicts_without_engine_changes(copied):
  workdir = str(copied / "runs" / "pool")
  common = ["--import", "mylab.sentiment_pool"]
  listed = _run([*common, "list"], copied, str(copied))
  assert listed.returncode == 0, listed.stderr
  assert "sentiment_pool: pooling*" in listed.stdout.splitlines()

  trained = _run([*common, "train", "sentiment_pool", "--workdir", workdir, "--train.num_epochs=1", "--train.progress_bar=False"], copied, str(copied))
  assert trained.returncode == 0, trained.stderr[-3000:]
  for name in ("config.json", "vocab.json", "results.json", "metrics.jsonl"):
    assert os.path.exists(os.path.join(workdir, name)), name

  predicted = _run([*common, "predict", "sentiment_pool", "--workdir", workdir,
                    "a wonderful, moving film", "--top-words", "2"], copied, str(copied))
  assert predicted.returncode == 0, predicted.stderr[-3000:]
  label, probability, text = predicted.stdout.splitlines()[0].split("\t")
  assert label in ("negative", "positive") and 0.5 <= float(probability) <= 1.0
  assert text == "a wonderful, moving film"
  assert predicted.stderr.splitlines()[-1].startswith("most attended: ")

  bad = _run([*common, "predict", "sentiment_pool", "--workdir", workdir, "   "], copied,
             str(copied))
  assert bad.returncode == 2 and "has no words to classify" in bad.stderr


def test_the_template_is_a_registered_experiment_of_its_own():
  from experiments import registry  # pylint: disable=g-import-not-at-top
  experiment = registry.get_experiment("template")
  assert experiment.default_model == "pooling" and experiment.predict is not None
