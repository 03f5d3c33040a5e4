"""Tiny runs of every experiment on the shipped samples, each trained once per test session.

Each is a named run cut to a few steps of a model a few units wide (one device, quick compiles):
the numbers are meaningless, what is tested is that the explorer answers as the command line
does and that its attention maps are the model's.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
from collections.abc import Iterator, Mapping

import jax
import pytest

from experiments import metrics_log
from experiments import runs
from experiments import trainer

ONE_STEP = ("--train.num_steps=1", "--train.batch_size=8", "--train.eval_batch_size=256",
            "--train.log_every=1", "--train.progress_bar=False")

TINY_RUNS = {
    # name: (experiment, model, overrides)
    "sentiment_transformer": ("sentiment", "transformer", (
        "--model.embed_dim=8", "--model.num_layers=2", "--model.num_heads=2",
        "--model.ffn_hidden=8", "--data.max_len=24", "--data.boundaries", "24")),
    "sentiment_pooling": ("sentiment", "ngram_attn", (  # with its word bigrams
        "--model.embed_dim=8", "--data.max_len=24", "--data.boundaries", "24")),
    "translation_transformer": ("translation", "transformer", (
        "--data.vocab_size=1501", "--model.model_dim=8", "--model.num_heads=2",
        "--model.ffn_hidden=8", "--model.num_encoder_layers=2", "--model.num_decoder_layers=1",
        "--data.max_src_len=8", "--data.max_tgt_len=8", "--data.boundaries=8",
        "--data.decode_batch_size=8", "--data.beam_size=3", "--data.dev_bleu_examples=2",
        "--data.test_bleu_examples=2")),
    "couplet_lstm": ("couplet", "lstm", (
        "--model.embed_dim=8", "--model.hidden_size=8", "--model.num_layers=1",
        "--data.max_len=10", "--data.boundaries=10", "--data.dev_decode_examples=2",
        "--data.test_decode_examples=0", "--data.beam_size=3", "--data.decode_batch_size=8")),
    "matching_esim": ("matching", "esim", (
        "--model.embed_dim=8", "--model.hidden_size=4", "--data.max_len=12",
        "--data.boundaries=12")),
    "matching_transformer": ("matching", "transformer", (
        "--model.embed_dim=8", "--model.num_layers=2", "--model.num_heads=2",
        "--model.ffn_hidden=8", "--data.max_len=12", "--data.boundaries=12")),
}


def train_tiny(root, name: str) -> str:
  """Trains TINY_RUNS[name] into root/name; returns the run's directory."""
  experiment, model, overrides = TINY_RUNS[name]
  cfg = runs.make_config(experiment, model, overrides=[*ONE_STEP, *overrides])
  workdir = str(root / name)
  task = runs.make_task(cfg)
  task.on_train_end = lambda params, workdir: None  # the demo heatmaps and samples: not needed
  trainer.train(task, cfg, workdir, devices=jax.devices()[:1])
  return workdir


class TinyRuns(Mapping[str, str]):
  """name -> the directory of that tiny run under `root`, trained on first use.

  Training holds a lock file per run (fcntl.flock), so pytest-xdist's workers, which share `root`,
  train each run once between them: the first to ask trains it, another asking meanwhile waits and
  then reads it. A run whose results.json is missing (a session stopped while training) is trained
  again from its last checkpoint.
  """

  def __init__(self, root: pathlib.Path):
    self.root = root

  def __getitem__(self, name: str) -> str:
    if name not in TINY_RUNS:
      raise KeyError(f"no tiny run {name!r}; there are {', '.join(TINY_RUNS)}")
    workdir = self.root / name
    self.root.mkdir(parents=True, exist_ok=True)
    with open(self.root / f"{name}.lock", "w", encoding="utf-8") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      if not (workdir / metrics_log.RESULTS_FILE).exists():
        jax.config.update("jax_disable_most_optimizations", True)  # compile fast, run little
        try:
          train_tiny(self.root, name)
        finally:
          jax.config.update("jax_disable_most_optimizations", False)
    return str(workdir)

  def __iter__(self) -> Iterator[str]:
    return iter(TINY_RUNS)

  def __len__(self) -> int:
    return len(TINY_RUNS)


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> TinyRuns:
  """The tiny runs, each trained when a test first asks for it, once per test session (shared by
  pytest-xdist's workers: their temporary folders have one parent).

  With $ZOO_EXPLORER_RUNS set, the runs are kept in that folder and reused by later sessions (for
  working on the explorer).
  """
  kept = os.environ.get("ZOO_EXPLORER_RUNS")
  if kept:
    return TinyRuns(pathlib.Path(kept))
  base = tmp_path_factory.getbasetemp()
  shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
  return TinyRuns(shared / "explorer_runs")
