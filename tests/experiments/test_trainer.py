"""The training loop end to end on the toy task: resume, NaN guard, checkpoints, outputs."""

from __future__ import annotations

import json
import os
import signal

import jax
import numpy as np
import pytest

import engine_toy
from experiments import config as config_lib
from experiments import metrics_log
from experiments import runs
from experiments import trainer
from experiments.checkpoints import CheckpointMismatchError
from experiments.checkpoints import Checkpoints
from experiments.parallel import DataParallel
from experiments.train_state import make_init

engine_toy.enable_compilation_cache()

# 2 epochs of 5 steps; logs every 2 steps, checkpoints every 3 and at epoch ends, dev eval at epoch
# ends; dropout is on, so the per-step rng matters for exactness.
RUN = ["--train.num_epochs=2", "--train.log_every=2", "--train.checkpoint_every=3"]


def _train(workdir, overrides=(), model="mlp"):
  cfg = config_lib.override(engine_toy.EXPERIMENT.config(model), [*RUN, *overrides])
  return trainer.train(engine_toy.ToyTask(cfg), cfg, str(workdir))


def _records(workdir):
  return [{k: v for k, v in r.items() if k != "time"}
          for r in metrics_log.read_metrics(os.path.join(workdir, metrics_log.METRICS_FILE))]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
  """An uninterrupted run (the reference for the resume test and the source of outputs)."""
  workdir = tmp_path_factory.mktemp("uninterrupted")
  return _train(workdir)


def test_interrupted_run_resumes_bit_for_bit(finished, tmp_path):
  # SIGTERM arrives while batch 6 is drawn (prefetched during step 5): the loop saves and stops.
  stopped = _train(tmp_path, ["--data.signal_at_batch=6"])
  assert stopped.interrupted == signal.SIGTERM and stopped.results is None
  assert 0 < stopped.step < 10
  assert Checkpoints(str(tmp_path)).latest_step() == stopped.step
  resumed = _train(tmp_path)
  assert resumed.interrupted is None and resumed.step == 10
  for a, b in zip(jax.tree_util.tree_leaves_with_path(jax.device_get(finished.state.params)),
                  jax.tree.leaves(jax.device_get(resumed.state.params))):
    np.testing.assert_array_equal(a[1], b, err_msg=jax.tree_util.keystr(a[0]))
  assert _records(tmp_path) == _records(finished.workdir)
  assert resumed.results["test"] == finished.results["test"]
  assert resumed.results["best"] == finished.results["best"]


def test_outputs_of_a_finished_run(finished):
  workdir = finished.workdir
  records = _records(workdir)
  assert [r["step"] for r in records if r["split"] == "train"] == [2, 4, 5, 6, 8, 10]
  assert [r["step"] for r in records if r["split"] == "dev"] == [5, 10]
  assert [r["split"] for r in records][-1] == "test"
  # Later steps learn: the train loss of the second epoch is below the first's.
  train = [r["loss"] for r in records if r["split"] == "train"]
  assert np.mean(train[3:]) < np.mean(train[:3])
  with open(os.path.join(workdir, metrics_log.RESULTS_FILE)) as f:
    results = json.load(f)
  assert results["test"] == finished.results["test"]
  assert set(results["test"]) == {"loss", "accuracy"}
  assert results["machine"]["device_count"] == 4 and results["machine"]["jax"] == jax.__version__
  assert results["config"]["train"]["checkpoint_every"] == 3
  assert results["steps"] == 10 and results["epochs"] == 2.0 and results["wall_time_s"] > 0
  dev_acc = [r["accuracy"] for r in records if r["split"] == "dev"]
  assert results["best"]["value"] == max(dev_acc)
  assert results["best"]["step"] == [5, 10][int(np.argmax(dev_acc))]
  assert os.listdir(os.path.join(workdir, metrics_log.TENSORBOARD_DIR))
  with open(os.path.join(workdir, trainer.CURVES_FILE), "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  # Latest checkpoints: the last two saves (9 by the interval, 10 at the end).
  assert Checkpoints(str(workdir)).latest.all_steps() == [9, 10]
  # The best parameters come back and evaluate to the recorded test metrics.
  again = runs.evaluate_run(str(workdir), "test", "best")
  assert again["metrics"] == pytest.approx(results["test"], rel=1e-6)


def test_nan_loss_stops_naming_the_step_and_keeps_the_good_checkpoint(tmp_path):
  # Batch 6 (0-based) makes the loss NaN at step 7. Logs come every 5 steps, so the bad step is
  # found by the check before the step-8 checkpoint (interval 4), which must not be written.
  with pytest.raises(trainer.NonFiniteLossError, match=r"step 7: the loss became nan") as info:
    _train(tmp_path, ["--data.nan_at_batch=6", "--train.log_every=5", "--train.checkpoint_every=4"])
  assert info.value.step == 7 and info.value.checkpoint_step == 5
  assert "step 5, is kept" in str(info.value)
  ckpts = Checkpoints(str(tmp_path))
  assert ckpts.latest.all_steps() == [4, 5]
  records = _records(tmp_path)
  assert max(r["step"] for r in records) == 5
  # The kept checkpoint is good: finite parameters, and training resumes from it.
  cfg = config_lib.override(engine_toy.toy_config(), RUN)
  task = engine_toy.ToyTask(cfg)
  params, step = runs.restore_params(task, cfg, str(tmp_path), "latest")
  assert step == 5
  assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(jax.device_get(params)))


def test_checkpoint_of_another_model_config_names_the_parameter(finished):
  with pytest.raises(CheckpointMismatchError,
                     match=r"params/Embed_0/embedding: the current model has shape \(13, 14\) "
                     r"float32, the checkpoint has shape \(13, 10\) float32"):
    _train(finished.workdir, model="wide")


def test_checkpoint_restore_into_missing_or_extra_parameters(tmp_path):
  dp = DataParallel()
  cfg = engine_toy.toy_config()
  task = engine_toy.ToyTask(cfg)
  tx = trainer.make_optimizer(cfg.optimizer, 10)[0]
  init = make_init(task, tx)
  state = jax.jit(init)(jax.random.key(0), task.example_batch())
  ckpts = Checkpoints(str(tmp_path), asynchronous=False)
  ckpts.save(state, {"data": {}})
  abstract = jax.eval_shape(init, jax.random.key(0), task.example_batch())
  extra = dict(abstract.params, Extra_0={"bias": jax.ShapeDtypeStruct((3,), np.float32)})
  with pytest.raises(CheckpointMismatchError, match=r"params/Extra_0/bias: expected \(3,\) "
                     r"float32, missing from the checkpoint"):
    ckpts.restore(abstract.replace(params=extra), dp.replicated)
  fewer = {k: v for k, v in abstract.params.items() if k != "Dense_1"}
  with pytest.raises(CheckpointMismatchError, match=r"params/Dense_1/kernel: in the checkpoint "
                     r"\(16, 2\) float32, not in the current model"):
    ckpts.restore(abstract.replace(params=fewer), dp.replicated)
  restored, meta = ckpts.restore(abstract, dp.replicated)
  assert meta == {"data": {}}
  np.testing.assert_array_equal(jax.random.key_data(restored.rng), jax.random.key_data(state.rng))
  ckpts.close()


class _ToyWithExtra(engine_toy.ToyTask):
  """The toy task with one metric beyond the batch sums, derived from the engine's means."""

  def __init__(self, config, names=("twice_loss",)):
    super().__init__(config)
    self.names, self.seen = names, []

  def extra_metric_names(self, split):
    return self.names

  def extra_eval(self, params, split, metrics):
    self.seen.append((split, dict(metrics)))
    return {"twice_loss": 2.0 * metrics["loss"]}


def test_extra_eval_gets_the_engines_means_and_its_best_metric_is_checked_first(tmp_path):
  cfg = config_lib.override(engine_toy.EXPERIMENT.config("mlp"),
                            [*RUN, "--train.num_epochs=1", "--train.best_metric=dev/twice_loss",
                             "--train.best_mode=min"])
  task = _ToyWithExtra(cfg)
  result = trainer.train(task, cfg, str(tmp_path / "ok"))
  assert [split for split, _ in task.seen] == ["dev", "test"]
  dev = result.results["dev"]
  assert dev["twice_loss"] == pytest.approx(2 * dev["loss"], rel=1e-6)
  assert task.seen[0][1] == {"loss": dev["loss"], "accuracy": dev["accuracy"]}
  assert result.results["best"]["metric"] == "dev/twice_loss"

  typo = config_lib.override(cfg, ["--train.best_metric=dev/twice_los"])
  with pytest.raises(ValueError, match=r"'dev/twice_los' is not among the dev metrics of the task "
                     r"\(dev/accuracy, dev/loss, dev/twice_loss\)"):
    trainer.train(_ToyWithExtra(typo), typo, str(tmp_path / "typo"))
  assert not os.path.exists(tmp_path / "typo" / "checkpoints")  # failed before the first step


def test_extra_eval_must_return_what_it_declares(tmp_path):
  cfg = config_lib.override(engine_toy.EXPERIMENT.config("mlp"), [*RUN, "--train.num_epochs=1"])
  with pytest.raises(RuntimeError, match=r"returned the metrics \['twice_loss'\], but its "
                     r"extra_metric_names\('dev'\) declares \['bleu'\]"):
    trainer.train(_ToyWithExtra(cfg, names=("bleu",)), cfg, str(tmp_path))
