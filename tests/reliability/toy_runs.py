"""The training run the reliability tests interrupt, repeat and compare: the engine's toy task.

The toy (tests/experiments/engine_toy.py) is a synthetic classification task with an embedding,
a hidden layer and dropout; its whole run takes well under a second once compiled, so the tests
spend their time on what they check, not on training. Its data order, initialisation and dropout
keys all follow `train.seed`, so exactness is a real test.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

import jax
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOY_DIR = os.path.join(os.path.dirname(HERE), "experiments")
if TOY_DIR not in sys.path:
  sys.path.insert(0, TOY_DIR)

import engine_toy  # noqa: E402  (needs TOY_DIR on the path)
from experiments import metrics_log  # noqa: E402
from experiments import runs  # noqa: E402
from experiments import trainer  # noqa: E402

engine_toy.enable_compilation_cache()

# 4 epochs of 5 steps (20 updates); training metrics logged every 2 steps and at epoch ends;
# latest checkpoints every 2 steps and at epoch ends (2 kept); a dev evaluation, and a best
# checkpoint when dev accuracy improves, at every epoch end.
OVERRIDES = ("--train.num_epochs=4", "--train.log_every=2", "--train.checkpoint_every=2",
             "--train.progress_bar=False")
TOTAL_STEPS = 20
LOG_STEPS = (2, 4, 5, 6, 8, 10, 12, 14, 15, 16, 18, 20)


def train(workdir, extra: Sequence[str] = ()) -> trainer.TrainResult:
  """Trains the toy run in this process, as `python -m experiments train toy` would."""
  return runs.train_named("toy", "mlp", workdir=os.fspath(workdir), overrides=[*OVERRIDES, *extra])


def records(workdir) -> list[dict[str, Any]]:
  """The metrics.jsonl records of a run without their wall-clock 'time'."""
  path = os.path.join(os.fspath(workdir), metrics_log.METRICS_FILE)
  return [{k: v for k, v in r.items() if k != "time"} for r in metrics_log.read_metrics(path)]


def restore(workdir, which: str = "latest", extra: Sequence[str] = ()) -> tuple[Any, int]:
  """(parameters on the host, step) of a run's latest or best checkpoint."""
  cfg = runs.make_config("toy", "mlp", overrides=[*OVERRIDES, *extra])
  task = engine_toy.ToyTask(cfg)
  params, step = runs.restore_params(task, cfg, os.fspath(workdir), which)
  return jax.device_get(params), step


def assert_same_params(expected, actual) -> None:
  """Bit-for-bit equality of two parameter trees, naming the first differing leaf."""
  want = jax.tree_util.tree_leaves_with_path(jax.device_get(expected))
  have = jax.tree_util.tree_leaves_with_path(jax.device_get(actual))
  assert [p for p, _ in want] == [p for p, _ in have]
  for (path, a), (_, b) in zip(want, have):
    np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))
