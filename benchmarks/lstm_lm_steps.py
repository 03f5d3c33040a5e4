"""What the LSTM language-model recipe (experiments/sentiment/lstm_lm.py) costs on this machine:
the seconds of one pretraining step and of one fine-tuning step at each bucket width, and from
them the time of the recipe's steps, so that a run measured on one machine can be priced on
another.

    python -m benchmarks.lstm_lm_steps [--steps 3] [--dtype float32] [--hidden-size 1024] \
        [--embed-dim 256] [--vocab 28632] [--window 256] [--batch-size 128] [--lm-steps 5406] \
        [--reviews runs/imdb_lm/reviews.npz] [--adversarial 0.6] [--json out.json]

Each step is the recipe's own (lstm_lm.lm_train_step and lstm_lm.classifier_train_step, which
pretrain and finetune call) on random ids of the full vocabulary (the
cost does not depend on the ids), timed as the median of `--steps` steps after one to compile.
With --reviews, the fine-tuning epoch's batches are counted per bucket from the real reviews
(lstm_lm's batcher), and the epoch is priced as the sum over its batches. With --adversarial, the
fine-tuning step is the adversarial one (finetune's --adversarial: two forward and backward
passes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from experiments.sentiment import lstm_lm


def _time(fn, args, steps: int) -> float:
  """The median seconds of `steps` calls of fn(*args) after one call to compile."""
  jax.block_until_ready(fn(*args))
  times = []
  for _ in range(steps):
    started = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - started)
  return statistics.median(times)


def lm_step_seconds(vocab: int, model: lstm_lm.ModelConfig, config: lstm_lm.PretrainConfig,
                    steps: int) -> float:
  net = lstm_lm.LanguageModel(vocab, model, config.output_dropout)
  params = net.init(jax.random.PRNGKey(0), jnp.ones((1, 8), jnp.int32))["params"]
  optimizer = lstm_lm.optimizer_for(config.clip)
  step = lstm_lm.lm_train_step(net, optimizer)
  ids = np.random.default_rng(0).integers(4, vocab, (config.batch_size, config.window + 1))
  return _time(step, (params, optimizer.init(params), ids[:, :-1], ids[:, 1:],
                      jax.random.PRNGKey(1), 1e-3), steps)


def finetune_step_seconds(vocab: int, model: lstm_lm.ModelConfig, batch_size: int, width: int,
                          steps: int, adversarial: float = 0.0) -> float:
  net = lstm_lm.Classifier(vocab, model)
  params = net.init(jax.random.PRNGKey(0), jnp.ones((1, 8), jnp.int32),
                    jnp.full((1,), 8))["params"]
  optimizer = lstm_lm.optimizer_for(lstm_lm.FinetuneConfig.clip)
  step = lstm_lm.classifier_train_step(net, optimizer, adversarial)
  rng = np.random.default_rng(0)
  tokens = rng.integers(4, vocab, (batch_size, width))
  lengths = np.full(batch_size, width)
  labels = rng.integers(0, 2, batch_size)
  weight = np.ones(batch_size, np.float32)
  return _time(step, (params, optimizer.init(params), tokens, lengths, labels, weight,
                      jax.random.PRNGKey(1), 1e-3), steps)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.lstm_lm_steps",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--steps", type=int, default=3, help="timed steps (after one compile)")
  parser.add_argument("--vocab", type=int, default=28632, help="V (the README chain's: 28,632)")
  parser.add_argument("--embed-dim", type=int, default=256)
  parser.add_argument("--hidden-size", type=int, default=1024)
  parser.add_argument("--dtype", choices=sorted(lstm_lm.DTYPES), default="float32")
  parser.add_argument("--window", type=int, default=lstm_lm.PretrainConfig.window,
                      help="the pretraining's window L")
  parser.add_argument("--batch-size", type=int, default=lstm_lm.PretrainConfig.batch_size,
                      help="the pretraining's windows per step")
  parser.add_argument("--lm-steps", type=int, default=5406,
                      help="the pretraining's steps to price (the H200 run's: 5,406)")
  parser.add_argument("--widths", type=int, nargs="+", default=[256, 512])
  parser.add_argument("--epochs", type=int, default=5, help="fine-tuning epochs to price")
  parser.add_argument("--reviews", help="export_reviews' file: count the epoch's batches")
  parser.add_argument("--adversarial", type=float, default=0.0, metavar="EPS",
                      help="price finetune's adversarial step of this norm (default: 0, none)")
  parser.add_argument("--json", help="write the figures here too")
  args = parser.parse_args(argv)
  if args.steps < 1 or args.lm_steps < 1 or args.epochs < 1:
    parser.error(f"--steps, --lm-steps and --epochs must be >= 1, got {args.steps}, "
                 f"{args.lm_steps} and {args.epochs}")
  if not args.adversarial >= 0:
    parser.error(f"--adversarial must be >= 0 (0: the plain step), got {args.adversarial}")
  if list(args.widths) != sorted(set(args.widths)) or args.widths[0] < 1:
    parser.error(f"--widths must be positive and ascending, got {args.widths}")
  model = lstm_lm.ModelConfig(args.embed_dim, args.hidden_size, dtype=args.dtype)
  pretraining = lstm_lm.PretrainConfig(window=args.window, batch_size=args.batch_size)
  finetuning = lstm_lm.FinetuneConfig(max_len=max(args.widths), widths=tuple(args.widths))
  record = {"machine": common.machine(), "settings": vars(args) | {"json": None}}
  record["lm_step_s"] = lm_step_seconds(args.vocab, model, pretraining, args.steps)
  record["lm_hours"] = record["lm_step_s"] * args.lm_steps / 3600
  record["lm_tokens_per_s"] = pretraining.batch_size * pretraining.window / record["lm_step_s"]
  print(f"pretraining step ({pretraining.batch_size} x {pretraining.window}): "
        f"{record['lm_step_s']:.3f} s ({record['lm_tokens_per_s']:,.0f} tokens/s); "
        f"{args.lm_steps} steps: {record['lm_hours']:.2f} h", flush=True)
  record["finetune_step_s"] = {}
  for width in args.widths:
    seconds = finetune_step_seconds(args.vocab, model, finetuning.batch_size, width, args.steps,
                                    args.adversarial)
    record["finetune_step_s"][width] = seconds
    print(f"fine-tuning step ({finetuning.batch_size} x {width}): {seconds:.3f} s", flush=True)
  if args.reviews:
    reviews = lstm_lm.load_reviews(args.reviews)
    batcher = lstm_lm._classifier_batcher(  # pylint: disable=protected-access
        reviews.ids["train"], reviews.labels["train"], finetuning)
    plan = batcher.epoch_plan(0, 0)
    counts = {w: sum(1 for bucket, _ in plan if batcher.boundaries["tokens"][bucket] == w)
              for w in args.widths}
    epoch_s = sum(counts[w] * record["finetune_step_s"][w] for w in args.widths)
    record |= {"batches_per_epoch": counts, "finetune_epoch_min": epoch_s / 60,
               "finetune_min": args.epochs * epoch_s / 60}
    print(f"a fine-tuning epoch ({counts} batches by width): {epoch_s / 60:.1f} min; "
          f"{args.epochs} epochs: {args.epochs * epoch_s / 60:.1f} min", flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(record, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
