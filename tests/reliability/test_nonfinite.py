"""A NaN or inf loss stops training at once, names the step, and leaves only good checkpoints.

The engine sums a flag into its on-device metrics at every step and checks it before anything is
logged, evaluated or saved (trainer.NonFiniteLossError). What is checked here, beyond the engine's
own test (tests/experiments/test_trainer.py, NaN at step 7 with the checkpoints 4 and 5 kept):

  * through the command line: exit status 1 and the message naming the step, no traceback; the
    kept checkpoint is the resume point once the cause is removed, and the resumed run ends bit
    for bit where a run that never saw the NaN ends (so the kept checkpoint is really good);
  * a NaN before the first checkpoint, and one at the very last step (nothing of it is saved, no
    results are written, the best checkpoint is an earlier one);
  * a real divergence (float16 computation with a learning rate far too high), where the step
    named is the first non-finite one, checked by replaying the steps from the kept checkpoint.
"""

from __future__ import annotations

import math
import os

import jax
import numpy as np
import pytest

import engine_toy
import toy_runs
from experiments import metrics_log
from experiments import runs
from experiments import steps
from experiments import trainer
from experiments.cli import main
from experiments.checkpoints import Checkpoints
from experiments.parallel import DataParallel
from experiments.train_state import TrainState
from experiments.train_state import make_optimizer


def _checkpoints(workdir) -> Checkpoints:
  return Checkpoints(os.fspath(workdir), best_metric="dev/accuracy", best_mode="max")


def _assert_finite(params) -> None:
  assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(params))


def test_cli_stops_with_status_1_and_resumes_from_the_good_checkpoint(reference_run, tmp_path,
                                                                      capsys):
  workdir = str(tmp_path)
  argv = ["train", "toy", "--workdir", workdir]
  for override in toy_runs.OVERRIDES:
    argv += [override]
  # Batch 6 (0-based) makes the loss of step 7 NaN; the check before the step-8 log finds it.
  assert main(argv + ["--data.nan_at_batch=6"]) == 1
  err = capsys.readouterr().err
  assert err.startswith("error: Training stopped at step 7: the loss became nan. Nothing from "
                        "step 7 on was saved; the last good checkpoint, step 6, is kept in "
                        f"{os.path.join(workdir, 'checkpoints')}.")
  assert "Traceback" not in err
  assert max(r["step"] for r in toy_runs.records(workdir)) == 6
  params, step = toy_runs.restore(workdir, "latest")
  assert step == 6
  _assert_finite(params)

  # The same command without the fault resumes from step 6 and ends where a clean run ends.
  assert main(argv) == 0
  out = capsys.readouterr().out
  assert (f"Resuming {workdir} from step 6 with changed settings: data.nan_at_batch: 6 -> None"
          in out)
  assert toy_runs.records(workdir) == toy_runs.records(reference_run.workdir)
  params, _ = toy_runs.restore(workdir, "latest")
  toy_runs.assert_same_params(reference_run.state.params, params)


def test_nan_at_the_first_step_leaves_no_checkpoint(tmp_path):
  with pytest.raises(trainer.NonFiniteLossError) as info:
    toy_runs.train(tmp_path, ["--data.nan_at_batch=0"])
  assert info.value.step == 1 and info.value.checkpoint_step is None
  assert "Training stopped at step 1: the loss became nan" in str(info.value)
  assert "no checkpoint had been written yet" in str(info.value)
  ckpts = _checkpoints(tmp_path)
  assert ckpts.latest_step() is None and ckpts.best_step() is None
  ckpts.close()
  assert toy_runs.records(tmp_path) == []


def test_nan_at_the_last_step_saves_nothing_of_it(tmp_path):
  # Two epochs: 10 steps, checkpoints every 2 steps and at step 5, a best one at step 5.
  last = 10
  faulty = ["--train.num_epochs=2", f"--data.nan_at_batch={last - 1}"]
  with pytest.raises(trainer.NonFiniteLossError, match=rf"at step {last}: the loss became nan"
                     ) as info:
    toy_runs.train(tmp_path, faulty)
  assert info.value.checkpoint_step == last - 2
  ckpts = _checkpoints(tmp_path)
  assert ckpts.latest.all_steps() == [last - 4, last - 2] and ckpts.best_step() == 5
  ckpts.close()
  assert not os.path.exists(os.path.join(tmp_path, metrics_log.RESULTS_FILE))
  assert max(r["step"] for r in toy_runs.records(tmp_path)) == last - 2
  for which in ("latest", "best"):
    _assert_finite(toy_runs.restore(tmp_path, which, faulty)[0])


def test_divergence_is_caught_at_the_first_nonfinite_step(tmp_path):
  # float16 activations overflow once Adam at learning rate 10 has blown the weights up. The
  # guard against a finite divergence (test_damage.py) would stop the run earlier; it is off here,
  # so that the NaN guard's step is what is checked.
  diverging = ["--train.dtype=float16", "--optimizer.learning_rate=10",
               "--train.divergence_factor=None"]
  with pytest.raises(trainer.NonFiniteLossError) as info:
    toy_runs.train(tmp_path, diverging)
  bad, kept = info.value.step, info.value.checkpoint_step
  assert not math.isfinite(info.value.value)
  assert f"Training stopped at step {bad}: the loss became {info.value.value}" in str(info.value)
  assert kept is not None and kept < bad

  # Replaying from the kept checkpoint with the engine's own step program, one fresh metric sum
  # per step: the objective is finite up to step bad - 1 and not at step bad.
  cfg = runs.make_config("toy", "mlp", overrides=[*toy_runs.OVERRIDES, *diverging])
  task = engine_toy.ToyTask(cfg)
  tx, schedule = make_optimizer(cfg.optimizer, trainer.total_steps(cfg, task.steps_per_epoch))
  train_step = steps.make_train_step(task, tx, schedule)
  sample = task.example_batch()
  abstract = jax.eval_shape(lambda rng, batch: TrainState.create(task.init(rng, batch), tx, rng),
                            jax.random.key(0), sample)
  dp = DataParallel()
  ckpts = _checkpoints(tmp_path)
  state, meta = ckpts.restore(abstract, dp.replicated)
  ckpts.close()
  assert int(state.step) == kept
  _assert_finite(jax.device_get(state.params))
  zeros = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype),
                       jax.eval_shape(train_step, abstract, sample)[1])
  loop_step = dp.jit_train_step(steps.make_loop_step(train_step), num_carried=2)
  batches = task.train_batches()
  batches.set_state(meta["data"])
  objectives = []
  for _ in range(kept, bad):
    acc = dp.replicate(steps.init_accumulator(zeros))
    state, acc = loop_step(state, acc, dp.shard_batch(next(batches)))
    objectives.append(float(acc["metrics"]["objective"][0]))
  assert all(map(math.isfinite, objectives[:-1])) and not math.isfinite(objectives[-1]), objectives
  # The records logged before the stop are all finite and end at the kept checkpoint.
  logged = toy_runs.records(tmp_path)
  assert logged and max(r["step"] for r in logged) <= kept
  assert all(math.isfinite(v) for r in logged for v in r.values() if isinstance(v, float))
