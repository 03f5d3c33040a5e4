"""Standard output holds a command's results only, and nothing writes terminal escape codes or
carriage returns into a log: tfds' preparation messages and progress bars, the trainer's bar."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from pipelines import __main__ as pipelines_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_first_training_run_logs_plain_lines_and_keeps_tfds_off_stdout(tmp_path):
  # A fresh data dir: the sample is prepared by tfds inside this run, as on a newcomer's first one.
  env = {**os.environ, "ZOO_DATA_DIR": str(tmp_path / "data"), "JAX_PLATFORMS": "cpu"}
  run = subprocess.run(
      [sys.executable, "-m", "experiments", "train", "sentiment", "--model", "bilstm_attn_dot",
       "--workdir", str(tmp_path / "run"), "--train.num_steps=2"],  # the bar on by default
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-2000:]
  lines = run.stdout.splitlines()
  assert re.fullmatch(r"Training 2 steps: train\.num_steps = 2 \(about [\d.]+ epochs of \d+ steps; "
                      r"train\.num_epochs has no effect while train\.num_steps is set\)", lines[0])
  allowed = re.compile(r"(\[(train|dev  |test )\] step \d+ |New best |Test \(best parameters\))")
  assert all(allowed.match(line) for line in lines[1:]), lines
  assert "Dataset imdb downloaded and prepared" in run.stderr  # tfds' note, on stderr
  for stream in (run.stdout, run.stderr):
    assert "\x1b" not in stream and "\r" not in stream  # no bar redraws, no colours, no [A


def test_prepare_prints_its_report_alone_on_stdout(tmp_path, capsys):
  assert pipelines_cli.main(["prepare", "fra_eng", "--data-dir", str(tmp_path)]) == 0
  captured = capsys.readouterr()
  assert captured.out.splitlines()[0].startswith("fra_eng (sample): train ")
  assert "Downloading and preparing" not in captured.out
  assert "Downloading and preparing" in captured.err and "\x1b" not in captured.err
