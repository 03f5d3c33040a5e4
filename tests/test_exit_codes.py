"""One rule for exit codes across the project's commands: 2 for a usage or input error (bad
arguments, a path that does not exist, input that cannot be read), 1 for a failure while running;
the message on standard error, nothing on standard output."""

from __future__ import annotations

import pytest

from experiments import cli
from pipelines import __main__ as pipelines_cli
from pipelines import download


def _status(main, argv) -> int:
  try:
    return main(argv)
  except SystemExit as e:  # argparse's errors
    return e.code


@pytest.mark.parametrize("command, argv, message", [
    (cli.main, ["train", "sentimental"], "unknown experiment 'sentimental'"),
    (cli.main, ["train", "sentimental", "--help"], "unknown experiment 'sentimental'"),
    (cli.main, ["evaluate", "--workdir", "{empty}"], "config.json does not exist"),
    (cli.main, ["translate", "I won!", "--workdir", "{empty}"], "config.json does not exist"),
    (cli.main, ["train", "sentiment", "--data-dir", "{empty}/imdb.tar.gz", "--workdir",
                "{empty}/run"], "imdb.tar.gz does not exist"),
    (cli.main, ["report", "couplet", "--workdir", "{empty}"], "config.json does not exist"),
    (cli.main, ["table", "couplet", "--workdirs", "{empty}"], "config.json does not exist"),
    (cli.main, ["report", "matching", "--workdir", "{empty}"], "config.json does not exist"),
    (cli.main, ["ensemble", "matching", "--workdir", "{empty}", "--overlap"],
     "config.json does not exist"),
    (cli.main, ["ensemble", "matching", "--workdir", "{empty}", "--checkpoint", "last"],
     "expected best, latest or a step number, got 'last'"),
    (cli.main, ["by-length", "translation", "{empty}"], "test_translations.tsv: no such file"),
    (cli.main, ["report", "sentiment"], "invalid choice: 'sentiment'"),
    (cli.main, ["pseudo-label", "sentiment", "--workdir", "{empty}", "--out", "{empty}/x.npz"],
     "config.json does not exist"),
    (cli.main, ["ensemble", "sentiment", "--workdir", "{empty}", "--out", "{empty}/x.json"],
     "config.json does not exist"),
    (cli.main, ["blend", "sentiment", "--out", "{empty}/x.json", "--member", "a={empty}/a.npz",
                "--member", "b={empty}/b.npz"], "--member: no such file"),
    (pipelines_cli.main, ["prepare", "imdb", "--source", "{empty}/nothing"], "does not exist"),
    (pipelines_cli.main, ["download", "mnist"], "invalid choice: 'mnist'"),
])
def test_usage_and_input_errors_exit_2(command, argv, message, tmp_path, capsys):
  argv = [word.format(empty=tmp_path) for word in argv]
  assert _status(command, argv) == 2
  captured = capsys.readouterr()
  assert message in captured.err and "Traceback" not in captured.err
  assert captured.out == ""


def test_a_failure_while_running_exits_1(tmp_path, monkeypatch, capsys):
  monkeypatch.setenv(download.ENV_MIRROR, "http://127.0.0.1:9")  # nothing listens there
  assert _status(pipelines_cli.main, ["download", "fra_eng", "--to", str(tmp_path)]) == 1
  captured = capsys.readouterr()
  assert captured.err.startswith("error: fra_eng: cannot reach") and captured.out == ""
