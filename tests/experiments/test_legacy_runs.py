"""Runs saved by the code before the experiments/ redesign load and predict the same today.

tests/fixtures/legacy_runs holds nine tiny runs written by commit 7347528 (their config.json files
use the settings' old names, `data.buckets` and `data.max_vocab`, and have no `data.protocol`,
which load as 'random_dev', the dev split they were trained with) with what `predict` printed then.
Today's commands print the same result lines on stdout; what changed is where the notes go (the '#'
header and the unknown-word notes now go to stderr), the couplet command's layout (no blank line
between the lower lines of two upper lines), and that `translate` needs --tsv for its old
`translation<TAB>score<TAB>input` lines. The translation runs predate the subword tokenizer:
their config.json has no `data.tokenizer`, which means d2l's words (OLD_RUN_VALUES).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from experiments import cli
from experiments import runs
from experiments.console import ListConsole

LEGACY = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "legacy_runs")
INPUTS = {
    "sentiment": ["predict", "sentiment", "--weights", "This great science fiction film is really awesome",
                  "Not good at all, a waste of time"],
    "translation": ["translate", "--tsv", "--beam-size", "3", "Go .", "I won !"],
    "couplet": ["couplet", "晚风摇树树还挺", "海阔凭鱼跃"],
}
RUNS = sorted(name for name in os.listdir(LEGACY) if os.path.isdir(os.path.join(LEGACY, name)))


def _result_lines(printed: str) -> list[str]:
  """What the old commands printed, less the notes that today go to stderr and blank lines."""
  return [line for line in printed.splitlines()
          if line.strip() and not line.startswith("#")
          and not line.lstrip().startswith("unknown source words")]


def test_every_legacy_run_is_here():
  assert RUNS == ["couplet-lstm", "couplet-transformer", "sentiment-bilstm_attn_additive",
                  "sentiment-bilstm_mha", "sentiment-ngram_attn", "sentiment-sanet",
                  "sentiment-transformer", "translation-bahdanau", "translation-transformer"]


@pytest.mark.parametrize("name", RUNS)
def test_legacy_run_predicts_what_it_printed(name, tmp_path):
  workdir = tmp_path / name
  shutil.copytree(os.path.join(LEGACY, name), workdir)  # loading must not need to write, but may
  with open(workdir / "config.json", encoding="utf-8") as f:
    saved = json.load(f)
  # The old names are still in the saved file and load under the current ones.
  if saved["experiment"] in ("translation", "couplet"):
    assert "max_vocab" in saved["data"] and "buckets" in saved["data"]
    assert runs.load_config(str(workdir)).data.max_size == saved["data"]["max_vocab"]
  else:  # written before data.protocol existed: their dev split was the random one
    assert "protocol" not in saved["data"]
    assert runs.load_config(str(workdir)).data.protocol == "random_dev"
  if saved["experiment"] in ("translation", "couplet"):
    # Written before model.loss_reduction existed: they trained on the mean per target token,
    # even couplet's `lstm`, whose named run now sums over each line (OLD_RUN_VALUES).
    assert "loss_reduction" not in saved["model"]
    assert runs.load_config(str(workdir)).model.loss_reduction == "token_mean"
  if saved["experiment"] in ("translation", "couplet"):
    # Written before model.fused_loss existed: their logits were computed whole.
    assert "fused_loss" not in saved["model"]
    assert runs.load_config(str(workdir)).model.fused_loss is False
  if saved["experiment"] == "translation":
    assert "tokenizer" not in saved["data"]
    assert runs.load_config(str(workdir)).data.tokenizer == "d2l_words"
  console = ListConsole()
  assert cli.main([*INPUTS[saved["experiment"]], "--workdir", str(workdir)], console) == 0
  with open(workdir / "predict_stdout.txt", encoding="utf-8") as f:
    expected = _result_lines(f.read())
  assert _result_lines("\n".join(console.lines)) == expected
  assert len(expected) >= 2
