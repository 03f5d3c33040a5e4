"""Tiny runs on the shipped samples that several test modules train."""

from __future__ import annotations

from experiments import config as config_lib
from experiments import trainer
from experiments.sentiment import configs
from experiments.sentiment.task import SentimentTask


def train_sample_ngram_run(root, max_len: int, boundaries: tuple[int, int], steps: int) -> str:
  """Trains an ngram_attn run (embeddings of 8) for `steps` steps of 32 on the shipped IMDB sample,
  its prepared data under root/'data', into root/'run'; returns the run's directory."""
  cfg = configs.CONFIGS["ngram_attn"]()
  cfg.experiment, cfg.model_name = "sentiment", "ngram_attn"
  cfg = config_lib.override(cfg, [
      "--model.embed_dim=8", f"--data.max_len={max_len}", "--data.boundaries",
      *map(str, boundaries), "--data.prepared_dir", str(root / "data"),
      f"--train.num_steps={steps}", "--train.batch_size=32", "--train.progress_bar=False"])
  workdir = str(root / "run")
  trainer.train(SentimentTask(cfg), cfg, workdir)
  return workdir
