"""benchmarks/lstm_lm_steps.py: the recipe's step costs and what they price (tiny sizes here; the
full-size figures are a command run and recorded in docs/RESULTS.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import lstm_lm_steps


def _reviews(path, lengths) -> str:
  """A reviews file whose training reviews have `lengths` (the other splits one review each)."""
  rng = np.random.default_rng(3)
  arrays = {"vocab_size": np.int64(23), "source": np.asarray(json.dumps({"run": "by hand"}))}
  for split, sizes in (("train", lengths), ("dev", [5]), ("test", [4]), ("unlabelled", [6])):
    arrays[f"{split}_ids"] = rng.integers(4, 23, sum(sizes)).astype(np.uint16)
    arrays[f"{split}_lengths"] = np.asarray(sizes, np.int32)
  for split, count in (("train", len(lengths)), ("dev", 1), ("test", 1)):
    arrays[f"{split}_labels"] = np.arange(count, dtype=np.int8) % 2
  arrays["dev_index"], arrays["test_index"] = np.array([2]), np.array([7])
  np.savez(path, **arrays)
  return str(path)


def test_the_epoch_is_priced_batch_by_batch_from_the_step_times(tmp_path, capsys):
  # 64-review batches: 70 reviews of at most 9 tokens, 130 of 10 to 13 -> one batch of width 9
  # (its 6 leftovers move up), two of width 13 (136 reviews: the last 8 are dropped).
  lengths = [int(n) for n in np.random.default_rng(5).permutation([7] * 70 + [11] * 130)]
  out = tmp_path / "cost.json"
  assert lstm_lm_steps.main(["--vocab", "23", "--embed-dim", "6", "--hidden-size", "5",
                             "--steps", "2", "--lm-steps", "7", "--widths", "9", "13",
                             "--epochs", "3", "--reviews", _reviews(tmp_path / "r.npz", lengths),
                             "--json", str(out)]) == 0
  record = json.loads(out.read_text())
  assert record["machine"]["backend"] == "cpu" and record["lm_step_s"] > 0
  assert record["settings"]["hidden_size"] == 5 and record["settings"]["lm_steps"] == 7
  assert record["lm_hours"] == pytest.approx(record["lm_step_s"] * 7 / 3600)
  assert record["batches_per_epoch"] == {"9": 1, "13": 2}
  step = record["finetune_step_s"]
  assert record["finetune_epoch_min"] == pytest.approx((step["9"] + 2 * step["13"]) / 60)
  assert record["finetune_min"] == pytest.approx(3 * record["finetune_epoch_min"])
  assert "a fine-tuning epoch ({9: 1, 13: 2} batches by width)" in capsys.readouterr().out


def test_the_adversarial_step_is_priced_when_asked(tmp_path, monkeypatch):
  asked = []
  recipe_step = lstm_lm_steps.lstm_lm.classifier_train_step

  def step(model, optimizer, adversarial=0.0):
    asked.append(adversarial)
    return recipe_step(model, optimizer, adversarial)

  monkeypatch.setattr(lstm_lm_steps.lstm_lm, "classifier_train_step", step)
  out = tmp_path / "cost.json"
  assert lstm_lm_steps.main(["--vocab", "23", "--embed-dim", "6", "--hidden-size", "5",
                             "--steps", "1", "--lm-steps", "7", "--widths", "9", "13",
                             "--adversarial", "0.6", "--json", str(out)]) == 0
  assert asked == [0.6, 0.6]
  record = json.loads(out.read_text())
  assert record["settings"]["adversarial"] == 0.6 and set(record["finetune_step_s"]) == {"9", "13"}


@pytest.mark.parametrize("argv, message", [
    (["--steps", "0"], "--steps, --lm-steps and --epochs must be >= 1"),
    (["--adversarial", "-0.5"], "--adversarial must be >= 0 (0: the plain step), got -0.5"),
    (["--widths", "512", "256"], "--widths must be positive and ascending, got [512, 256]"),
])
def test_bad_counts_and_widths_are_refused(argv, message, capsys):
  with pytest.raises(SystemExit):
    lstm_lm_steps.main(argv)
  assert message in capsys.readouterr().err
