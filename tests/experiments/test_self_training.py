"""Self-training on the shipped IMDB sample: a teacher run labels the unlabelled reviews
(`python -m experiments pseudo-label sentiment`: experiments.sentiment.pseudo_label) and a
student's data takes the confident ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from experiments import cli
from experiments import runs
from experiments.sentiment import pseudo_label
from _sample_runs import train_sample_ngram_run
from pipelines import datasets
from pipelines import pseudo_labels as pseudo_lib
from pipelines.tasks import SentimentData
from pipelines.tasks import read_records


pytestmark = pytest.mark.usefixtures("quick_compiles")


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
  """A briefly trained ngram_attn run on the sample (reviews cut to 48 tokens)."""
  root = tmp_path_factory.mktemp("self_training")
  workdir = train_sample_ngram_run(root, max_len=48, boundaries=(13, 48), steps=3)
  return root, workdir


def test_probabilities_match_predict_and_skip_texts_without_words(teacher):
  run = runs.load_run(teacher[1])
  texts = ["A fine, moving film.", "   ", "Dull. " * 60, "not bad at all", "!!"]
  rows, probabilities = run.task.probabilities(run.params, texts, batch_size=2)
  np.testing.assert_array_equal(rows, [0, 2, 3, 4])
  assert probabilities.shape == (4, 2) and probabilities.dtype == np.float32
  for row, p in zip(rows, probabilities):
    expected = run.task.predict(run.params, [texts[row]])[0]
    assert p[expected.label] == pytest.approx(expected.probability, abs=1e-5)
    assert p.sum() == pytest.approx(1.0, abs=1e-5)


def test_the_teacher_labels_the_unlabelled_reviews_and_the_student_trains_on_them(teacher,
                                                                                   capsys):
  root, workdir = teacher
  out = root / "pseudo.npz"
  assert cli.main(["pseudo-label", "sentiment", "--workdir", workdir, "--out", str(out),
                   "--batch-size", "64"]) == 0
  err = capsys.readouterr().err
  assert "300 reviews labelled" in err and f"written to {out}" in err
  labels = pseudo_lib.load(out)
  unlabelled = read_records(datasets.load("imdb", "unsupervised"))
  assert len(unlabelled) == 300
  np.testing.assert_array_equal(np.sort(labels.ids), np.sort([int(r["id"]) for r in unlabelled]))
  assert labels.meta["teacher"] == workdir and labels.meta["step"] == 3
  assert labels.meta["model"] == "ngram_attn" and labels.meta["split"] == "unsupervised"

  # The student's data: the sample's training part plus the reviews the teacher was surest of.
  threshold = float(np.median(labels.probabilities))
  expected = int(np.count_nonzero(labels.probabilities >= threshold))
  options = dict(max_len=48, boundaries=(13, 48), bigrams=True, protocol="movie_dev")
  plain = SentimentData.load(data_dir=str(root / "data"), **options)
  student = SentimentData.load(data_dir=str(root / "data"), pseudo_labels=str(out),
                               pseudo_min_probability=threshold, **options)
  assert student.num_examples("train") == plain.num_examples("train") + expected
  n = plain.num_examples("train")
  by_id = dict(zip(labels.ids.tolist(), labels.labels.tolist()))
  chosen = [i for i in labels.ids.tolist()
            if labels.probabilities[labels.ids.tolist().index(i)] >= threshold]
  assert sorted(student.splits["train"].scalars["label"][n:].tolist()) == sorted(
      by_id[i] for i in chosen)
  for split in ("dev", "test"):
    assert student.num_examples(split) == plain.num_examples(split)
  assert len(student.vocab) > len(plain.vocab)
  # Loaded again: from the cache of these options and this file.
  again = SentimentData.load(data_dir=str(root / "data"), pseudo_labels=str(out),
                             pseudo_min_probability=threshold, **options)
  assert again.report["cache"].startswith("loaded from") and "_pseudo" in again.report["cache"]
  np.testing.assert_array_equal(again.splits["train"].scalars["label"],
                                student.splits["train"].scalars["label"])


def test_the_command_writes_what_label_reviews_gives(teacher, capsys):
  # The file holds exactly the teacher's labels of the first --limit reviews, in their order.
  root, workdir = teacher
  out = root / "pseudo_limit.npz"
  assert cli.main(["pseudo-label", "sentiment", "--workdir", workdir, "--out", str(out),
                   "--limit", "37", "--batch-size", "5", "--checkpoint", "latest"]) == 0
  assert "37 reviews labelled" in capsys.readouterr().err
  written = pseudo_lib.load(out)
  run = runs.load_run(workdir, "latest")
  records = read_records(datasets.load("imdb", "unsupervised"))[:37]
  expected, empty = pseudo_label.label_reviews(run, records, batch_size=5)
  assert empty == 0
  np.testing.assert_array_equal(written.ids, [int(r["id"]) for r in records])
  np.testing.assert_array_equal(written.ids, expected.ids)
  np.testing.assert_array_equal(written.labels, expected.labels)
  np.testing.assert_array_equal(written.probabilities, expected.probabilities)
  assert written.probabilities.dtype == np.float32 and written.labels.dtype == np.int32
  assert {k: v for k, v in written.meta.items() if k != "written"} == {
      "teacher": workdir, "model": "ngram_attn", "checkpoint": "latest", "step": 3,
      "split": "unsupervised", "reviews": 37}


@pytest.mark.parametrize("argv, message", [
    (["--workdir", "{tmp}/nothing", "--out", "{tmp}/p.npz"], "nothing"),
    (["--workdir", "{tmp}", "--out", "p.npz", "--limit", "0"], "--limit must be at least 1, got 0"),
    (["--workdir", "{tmp}", "--out", "p.npz", "--batch-size", "-3"],
     "--batch-size must be at least 1, got -3"),
])
def test_pseudo_label_command_errors_exit_2_in_one_line(argv, message, tmp_path, capsys):
  argv = [word.format(tmp=tmp_path) for word in argv]
  assert cli.main(["pseudo-label", "sentiment", *argv]) == 2
  captured = capsys.readouterr()
  assert message in captured.err and len(captured.err.strip().splitlines()) == 1
  assert captured.out == "" and not (tmp_path / "p.npz").exists()


def test_a_run_of_another_experiment_is_refused(teacher, tmp_path, capsys):
  _, workdir = teacher
  other = tmp_path / "other"
  other.mkdir()
  saved = json.loads((Path(workdir) / "config.json").read_text(encoding="utf-8"))
  (other / "config.json").write_text(json.dumps({**saved, "experiment": "matching"}),
                                     encoding="utf-8")
  assert cli.main(["pseudo-label", "sentiment", "--workdir", str(other), "--out",
                   str(tmp_path / "p.npz")]) == 2
  err = capsys.readouterr().err
  assert "holds a 'matching' run" in err and "`pseudo-label sentiment`" in err


def test_a_data_dir_without_the_data_exits_2_in_one_line(teacher, tmp_path, capsys):
  _, workdir = teacher
  assert cli.main(["pseudo-label", "sentiment", "--workdir", workdir, "--data-dir",
                   str(tmp_path / "imdb"), "--out", str(tmp_path / "p.npz")]) == 2
  captured = capsys.readouterr()
  assert captured.err.startswith(f"error: imdb source {tmp_path / 'imdb'} does not exist")
  assert len(captured.err.strip().splitlines()) == 1 and not (tmp_path / "p.npz").exists()
