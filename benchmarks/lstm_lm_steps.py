"""What the LSTM language model's runs (`train sentiment --model lstm_lm` and
`lstm_lm_classifier`) cost on this machine: the seconds of one pretraining step and of one
fine-tuning step at each bucket width, and from them the time of the recipe's steps, so that a run
measured on one machine can be priced on another.

    python -m benchmarks.lstm_lm_steps [--steps 3] [--dtype float32] [--hidden-size 1024] \
        [--embed-dim 256] [--vocab 28632] [--window 256] [--batch-size 128] [--lm-steps 5406] \
        [--adversarial 0.6] [--json out.json]

Each step is the engine's (the runs' tasks, lm_tasks.py, in the engine's jitted and donated loop
step with its metric sums) on random ids of the full vocabulary (the cost does not depend on the
ids), timed as the median of `--steps` steps after one to compile. With --adversarial, the
fine-tuning step is the adversarial one (model.adversarial: two forward and backward passes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np

from benchmarks import common
from experiments import steps
from experiments import train_state
from experiments.parallel import DataParallel
from experiments.sentiment import lm_configs
from experiments.sentiment import lstm_lm
from experiments.sentiment.lm_tasks import make_task
from pipelines.vocab import SPECIALS
from pipelines.vocab import Vocab


def _time(fn, args, steps: int) -> float:
  """The median seconds of `steps` calls of fn(*args) after one call to compile."""
  jax.block_until_ready(fn(*args))
  times = []
  for _ in range(steps):
    started = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - started)
  return statistics.median(times)


def _trunk(model: lstm_lm.ModelConfig) -> dict[str, Any]:
  return {"embed_dim": model.embed_dim, "hidden_size": model.hidden_size,
          "num_layers": model.num_layers, "word_dropout": model.word_dropout, "vocab_cap": None}


def _task(name: str, model_config: Any, dtype: str, batch_size: int, vocab: int):
  """The run `name`'s task with this model config, over a vocabulary of `vocab` ids (no data)."""
  config = lm_configs.CONFIGS[name]()
  config.experiment, config.model_name, config.model = "sentiment", name, model_config
  config.train.batch_size, config.train.dtype = batch_size, dtype
  words = [f"w{i}" for i in range(vocab - len(SPECIALS))]
  return make_task(config, artifacts={"vocab": Vocab(words), "bigram_vocab": None})


def engine_step(task, batch: dict[str, np.ndarray]) -> Callable[[], None]:
  """One update of the engine's training loop (its jitted, donated loop step: the train step and
  the metric sums) of `task` on `batch`, as a callable that waits for it."""
  dp = DataParallel(jax.devices()[:1])
  tx, schedule = train_state.make_optimizer(task.config.optimizer, 8000)
  batch = dp.shard_batch(batch)
  train_step = steps.make_train_step(task, tx, schedule)
  state = dp.jit_init(train_state.make_init(task, tx))(jax.random.key(0), batch)
  _, metrics = jax.eval_shape(train_step, state, batch)
  acc = dp.replicate(steps.init_accumulator(
      jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), metrics)))
  loop_step = dp.jit_train_step(steps.make_loop_step(train_step), num_carried=2)
  carried = [state, acc]

  def run():
    carried[:] = loop_step(*carried, batch)
    jax.block_until_ready(carried)

  return run


def lm_step_seconds(vocab: int, model: lstm_lm.ModelConfig, window: int, batch_size: int,
                    steps_timed: int) -> float:
  """The median seconds of the `lstm_lm` run's step on `batch_size` windows of `window` ids."""
  task = _task("lstm_lm", lm_configs.LSTMLanguageModelConfig(**_trunk(model), window=window),
               model.dtype, batch_size, vocab)
  ids = np.random.default_rng(0).integers(4, vocab, (batch_size, window + 1)).astype(np.int32)
  run = engine_step(task, {"inputs": ids[:, :-1], "targets": ids[:, 1:],
                           "weight": np.ones(batch_size, np.float32)})
  return _time(run, (), steps_timed)


def finetune_step_seconds(vocab: int, model: lstm_lm.ModelConfig, batch_size: int, width: int,
                          steps_timed: int, adversarial: float = 0.0) -> float:
  """The median seconds of the `lstm_lm_classifier` run's step on `batch_size` reviews of
  `width` ids (with `adversarial`, the adversarial step)."""
  task = _task("lstm_lm_classifier", lm_configs.LSTMClassifierConfig(
      **_trunk(model), init_from=None, read_len=width, widths=(width,), head=None,
      adversarial=adversarial), model.dtype, batch_size, vocab)
  rng = np.random.default_rng(0)
  run = engine_step(task, {
      "tokens": rng.integers(4, vocab, (batch_size, width)).astype(np.int32),
      "tokens_len": np.full(batch_size, width, np.int32),
      "label": rng.integers(0, 2, batch_size).astype(np.int32),
      "row": np.arange(batch_size, dtype=np.int64), "weight": np.ones(batch_size, np.float32)})
  return _time(run, (), steps_timed)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.lstm_lm_steps",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--steps", type=int, default=3, help="timed steps (after one compile)")
  parser.add_argument("--vocab", type=int, default=28632, help="V (the README chain's: 28,632)")
  parser.add_argument("--embed-dim", type=int, default=256)
  parser.add_argument("--hidden-size", type=int, default=1024)
  parser.add_argument("--dtype", choices=sorted(lstm_lm.DTYPES), default="float32")
  parser.add_argument("--window", type=int, default=256, help="the pretraining's window L")
  parser.add_argument("--batch-size", type=int, default=128,
                      help="the pretraining's windows per step")
  parser.add_argument("--finetune-batch-size", type=int, default=64,
                      help="the fine-tuning's reviews per step")
  parser.add_argument("--lm-steps", type=int, default=5406,
                      help="the pretraining's steps to price (the H200 run's: 5,406)")
  parser.add_argument("--widths", type=int, nargs="+", default=[256, 512])
  parser.add_argument("--adversarial", type=float, default=0.0, metavar="EPS",
                      help="price the adversarial fine-tuning step of this norm (default: 0)")
  parser.add_argument("--json", help="write the figures here too")
  args = parser.parse_args(argv)
  if args.steps < 1 or args.lm_steps < 1:
    parser.error(f"--steps and --lm-steps must be >= 1, got {args.steps} and {args.lm_steps}")
  if not args.adversarial >= 0:
    parser.error(f"--adversarial must be >= 0 (0: the plain step), got {args.adversarial}")
  if list(args.widths) != sorted(set(args.widths)) or args.widths[0] < 1:
    parser.error(f"--widths must be positive and ascending, got {args.widths}")
  model = lstm_lm.ModelConfig(args.embed_dim, args.hidden_size, dtype=args.dtype)
  record = {"machine": common.machine(), "settings": vars(args) | {"json": None}}
  record["lm_step_s"] = lm_step_seconds(args.vocab, model, args.window, args.batch_size,
                                        args.steps)
  record["lm_hours"] = record["lm_step_s"] * args.lm_steps / 3600
  record["lm_tokens_per_s"] = args.batch_size * args.window / record["lm_step_s"]
  print(f"pretraining step ({args.batch_size} x {args.window}): "
        f"{record['lm_step_s']:.3f} s ({record['lm_tokens_per_s']:,.0f} tokens/s); "
        f"{args.lm_steps} steps: {record['lm_hours']:.2f} h", flush=True)
  record["finetune_step_s"] = {}
  for width in args.widths:
    seconds = finetune_step_seconds(args.vocab, model, args.finetune_batch_size, width,
                                    args.steps, args.adversarial)
    record["finetune_step_s"][width] = seconds
    print(f"fine-tuning step ({args.finetune_batch_size} x {width}): {seconds:.3f} s",
          flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(record, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
