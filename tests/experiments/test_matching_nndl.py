"""transformer_nndl: the nndl chapter's matching recipe, its settings and a tiny run of it."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import config as config_lib
from experiments import trainer
from experiments.cli import main
from experiments.matching import configs
from experiments.matching.task import MatchingTask

pytestmark = pytest.mark.usefixtures("quick_compiles")

# Each of the chapter's settings as `--show-config` prints it.
CHAPTER = [
    "train.batch_size = 32", "train.num_epochs = 3", "train.eval_every = 500",
    "train.best_metric = 'dev/accuracy'", "train.best_mode = 'max'",
    "optimizer.name = 'adamw'", "optimizer.learning_rate = 5e-05",
    "optimizer.weight_decay = 0.0", "optimizer.grad_clip_norm = None",
    "optimizer.schedule = 'constant'", "optimizer.warmup_steps = 0",
    "model.embed_dim = 768", "model.num_layers = 1", "model.num_heads = 4",
    "model.ffn_hidden = 3072", "model.dropout_rate = 0.1", "model.attention_dropout_rate = 0.1",
    "model.activation_dropout_rate = 0.0", "model.max_positions = 512",
    "model.normalize_before = False", "model.pooler = False", "model.head_dropout_rate = 0.0",
    "data.tokenizer = 'chars'", "data.vocab_file = None", "data.shuffle = False",
    "data.max_len = 254", "data.boundaries = (" + ", ".join(map(str, range(1, 255))) + ")",
]


def test_show_config_gives_each_of_the_chapters_settings(capsys):
  assert main(["train", "matching", "--model", "transformer_nndl", "--show-config"]) == 0
  shown = capsys.readouterr().out.splitlines()
  assert [line for line in CHAPTER if line not in shown] == []
  # The chapter's exercise: more blocks.
  assert main(["train", "matching", "--model", "transformer_nndl", "--model.num_layers", "2",
               "--data.vocab_file", "vocab.txt", "--show-config"]) == 0
  shown = capsys.readouterr().out.splitlines()
  assert "model.num_layers = 2" in shown and "data.vocab_file = 'vocab.txt'" in shown


def _bert_like_vocab(path) -> int:
  """A vocab.txt laid out as bert-base-chinese's ([PAD] first, [unused..], [UNK], [CLS], [SEP],
  [MASK], then characters): every CJK unified ideograph. Returns its number of lines."""
  lines = ["[PAD]", "[unused1]", "[unused2]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "!", "?"]
  lines += [chr(c) for c in range(0x4E00, 0x9FA6)]
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return len(lines)


def test_a_tiny_run_reads_the_bert_vocabulary_and_trains_in_order(tmp_path):
  lines = _bert_like_vocab(tmp_path / "vocab.txt")
  cfg = configs.transformer_nndl()
  cfg.experiment, cfg.model_name = "matching", "transformer_nndl"
  cfg = config_lib.override(cfg, [
      "--model.embed_dim=12", "--model.num_heads=2", "--model.ffn_hidden=14",
      "--model.num_layers=1", "--data.max_len=4", "--data.boundaries", "2", "4",
      f"--data.vocab_file={tmp_path / 'vocab.txt'}", f"--data.prepared_dir={tmp_path / 'data'}",
      "--train.batch_size=16", "--train.num_steps=2", "--train.eval_every=None",
      "--train.progress_bar=False"])
  task = MatchingTask(cfg)
  vocab = task.data.vocab
  assert len(vocab) == lines and vocab.id_to_token(0) == "<pad>" and vocab.token_to_id("一") == 9
  # Unshuffled: consecutive training pairs in order, each padded to the smallest boundary that
  # holds its longest sentence (test_batching checks that rule with more boundaries).
  batches = task.train_batches()
  for k in range(3):
    batch = next(batches)
    np.testing.assert_array_equal(batch["index"], np.arange(16 * k, 16 * k + 16))
    width = 2 if max(batch["a_len"].max(), batch["b_len"].max()) <= 2 else 4
    assert batch["a"].shape == batch["b"].shape == (16, width)
    assert batch["pair"].shape == (16, 2 * width + 3)
    assert np.all(batch["pair"][:, 0] == 2) and np.all(batch["segments"][:, 0] == 0)
  result = trainer.train(task, cfg, str(tmp_path / "run"))
  assert result.step == 2 and result.state.params["embed"]["embedding"].shape == (lines, 12)
  assert "pooler" not in result.state.params  # the [CLS] vector goes straight to the classifier
  for split in ("dev", "test"):
    assert 0.0 <= result.results[split]["accuracy"] <= 1.0


def test_a_missing_vocab_file_is_a_usage_error(capsys, tmp_path):
  assert main(["train", "matching", "--model", "transformer_nndl", "--data.vocab_file",
               str(tmp_path / "vocab.txt"), "--workdir", str(tmp_path / "run")]) == 2
  assert capsys.readouterr().err.strip().endswith(
      f"vocab_file: {tmp_path / 'vocab.txt'} is not a file (bert-base-chinese's vocab.txt, one "
      "token a line)")
