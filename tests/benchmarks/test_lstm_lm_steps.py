"""benchmarks/lstm_lm_steps.py: the LSTM language model runs' step costs and what they price
(tiny sizes here; the full-size figures are a command run and recorded in docs/BENCHMARKS.md)."""

from __future__ import annotations

import json

import pytest

from benchmarks import lstm_lm_steps


def test_the_steps_are_timed_and_the_pretraining_priced(tmp_path, capsys):
  out = tmp_path / "cost.json"
  assert lstm_lm_steps.main(["--vocab", "23", "--embed-dim", "6", "--hidden-size", "5",
                             "--window", "7", "--batch-size", "3", "--finetune-batch-size", "2",
                             "--steps", "2", "--lm-steps", "7", "--widths", "9", "13",
                             "--json", str(out)]) == 0
  record = json.loads(out.read_text())
  assert record["machine"]["backend"] == "cpu" and record["lm_step_s"] > 0
  assert record["settings"]["hidden_size"] == 5 and record["settings"]["lm_steps"] == 7
  assert record["lm_hours"] == pytest.approx(record["lm_step_s"] * 7 / 3600)
  assert record["lm_tokens_per_s"] == pytest.approx(3 * 7 / record["lm_step_s"])
  assert set(record["finetune_step_s"]) == {"9", "13"}
  assert all(seconds > 0 for seconds in record["finetune_step_s"].values())
  assert "pretraining step (3 x 7)" in capsys.readouterr().out


def test_the_adversarial_step_is_the_runs_adversarial_step(monkeypatch):
  built = []
  make_task = lstm_lm_steps.make_task

  def task(config, **kwargs):
    built.append((config.model_name, getattr(config.model, "adversarial", None)))
    return make_task(config, **kwargs)

  monkeypatch.setattr(lstm_lm_steps, "make_task", task)
  assert lstm_lm_steps.main(["--vocab", "23", "--embed-dim", "6", "--hidden-size", "5",
                             "--window", "7", "--batch-size", "2", "--finetune-batch-size", "2",
                             "--steps", "1", "--widths", "9", "13", "--adversarial", "0.6"]) == 0
  assert built == [("lstm_lm", None), ("lstm_lm_classifier", 0.6), ("lstm_lm_classifier", 0.6)]


@pytest.mark.parametrize("argv, message", [
    (["--steps", "0"], "--steps and --lm-steps must be >= 1"),
    (["--adversarial", "-0.5"], "--adversarial must be >= 0 (0: the plain step), got -0.5"),
    (["--widths", "512", "256"], "--widths must be positive and ascending, got [512, 256]"),
])
def test_bad_counts_and_widths_are_refused(argv, message, capsys):
  with pytest.raises(SystemExit):
    lstm_lm_steps.main(argv)
  assert message in capsys.readouterr().err
