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
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from experiments import steps
from experiments import train_state
from experiments.parallel import DataParallel
from experiments.sentiment import lm_configs
from experiments.sentiment import lstm_lm
from experiments.sentiment.lm_tasks import LanguageModelTask
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


def engine_lm_task(vocab: int, model: lstm_lm.ModelConfig, window: int, batch_size: int,
                   output_dropout: float = 0.2) -> LanguageModelTask:
  """The `lstm_lm` run's task at these sizes, over a vocabulary of `vocab` ids (no data read)."""
  config = lm_configs.CONFIGS["lstm_lm"]()
  config.experiment, config.model_name = "sentiment", "lstm_lm"
  config.model = lm_configs.LSTMLanguageModelConfig(
      embed_dim=model.embed_dim, hidden_size=model.hidden_size, num_layers=model.num_layers,
      word_dropout=model.word_dropout, vocab_cap=None, window=window,
      output_dropout=output_dropout)
  config.train.batch_size, config.train.dtype = batch_size, model.dtype
  words = [f"w{i}" for i in range(vocab - len(SPECIALS))]
  return LanguageModelTask(config, artifacts={"vocab": Vocab(words), "bigram_vocab": None})


def _lm_batch(vocab: int, window: int, batch_size: int) -> dict[str, np.ndarray]:
  ids = np.random.default_rng(0).integers(4, vocab, (batch_size, window + 1)).astype(np.int32)
  return {"inputs": ids[:, :-1], "targets": ids[:, 1:],
          "weight": np.ones(batch_size, np.float32)}


def engine_lm_step(vocab: int, model: lstm_lm.ModelConfig, window: int, batch_size: int
                   ) -> Callable[[], Any]:
  """One update of the engine's training loop (its jitted, donated loop step: the train step and
  the metric sums) on a batch of random ids, as a callable that waits for it."""
  task = engine_lm_task(vocab, model, window, batch_size)
  dp = DataParallel(jax.devices()[:1])
  tx, schedule = train_state.make_optimizer(task.config.optimizer, 8000)
  batch = dp.shard_batch(_lm_batch(vocab, window, batch_size))
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


def side_lm_step(vocab: int, model: lstm_lm.ModelConfig, window: int, batch_size: int
                 ) -> Callable[[], Any]:
  """One update of lstm_lm.py pretrain's loop (its jitted step, the next key split off and the
  learning rate computed on the host) on the same batch, as a callable that waits for it."""
  net = lstm_lm.LanguageModel(vocab, model, 0.2)
  params = net.init(jax.random.PRNGKey(0), jnp.ones((1, 8), jnp.int32))["params"]
  optimizer = lstm_lm.optimizer_for(1.0)
  step = lstm_lm.lm_train_step(net, optimizer)
  batch = _lm_batch(vocab, window, batch_size)
  carried = [params, optimizer.init(params), jax.random.PRNGKey(1), 0]

  def run():
    params, opt_state, key, done = carried
    key, step_key = jax.random.split(key)
    lr = lstm_lm.warmup_cosine(done, 8000, 2e-3, 200)
    params, opt_state, loss = step(params, opt_state, batch["inputs"], batch["targets"],
                                   step_key, lr)
    jax.block_until_ready(loss)
    carried[:] = [params, opt_state, key, done + 1]

  return run


def lm_step_seconds(vocab: int, model: lstm_lm.ModelConfig, config: lstm_lm.PretrainConfig,
                    steps: int) -> float:
  """The median seconds of the engine's language-model step (`engine_lm_step`)."""
  run = engine_lm_step(vocab, model, config.window, config.batch_size)
  return _time(lambda: run(), (), steps)


def side_by_side(vocab: int, model: lstm_lm.ModelConfig, window: int, batch_size: int,
                 settings: common.Settings) -> dict[str, Any]:
  """The engine's language-model step and lstm_lm.py's, timed round-robin in one process
  (common.time_side_by_side): {'engine_s', 'side_loop_s', 'ratio': engine / side loop}."""
  times = common.time_side_by_side(
      {"engine": engine_lm_step(vocab, model, window, batch_size),
       "side_loop": side_lm_step(vocab, model, window, batch_size)}, settings)
  return {"engine_s": times["engine"], "side_loop_s": times["side_loop"],
          "ratio": common.ratio(times["side_loop"], times["engine"])}


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
  parser.add_argument("--side-by-side", action="store_true",
                      help="only time the engine's language-model step beside lstm_lm.py "
                           "pretrain's, round-robin in this process, and print their ratio")
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
  if args.side_by_side:
    record |= side_by_side(args.vocab, model, args.window, args.batch_size,
                           common.Settings(repeats=max(args.steps, 3)))
    print(f"pretraining step ({args.batch_size} x {args.window}): the engine's "
          f"{record['engine_s']:.4f} s, lstm_lm.py's {record['side_loop_s']:.4f} s: "
          f"side loop / engine = {record['ratio']:.3f}", flush=True)
    if args.json:
      with open(args.json, "w") as f:
        json.dump(record, f, indent=1)
    return 0
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
