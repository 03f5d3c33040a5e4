"""Orbax checkpoints: the latest few for resuming, and the best by a dev metric kept apart.

Layout under the work directory:
  checkpoints/<step>/state  the TrainState (params, opt_state, step, rng as raw key data)
  checkpoints/<step>/meta   JSON: data iterator position, running metric sums, best value, config
  best/<step>/params        the parameters of the best dev evaluation so far
  best/<step>/meta          JSON: the dev metrics of that evaluation

Orbax writes each checkpoint to a temporary directory and renames it when complete, so a run killed
in the middle of a save resumes from the previous complete checkpoint.
With several processes (experiments/distributed.py) every process calls the same saves and
restores; Orbax writes each replicated array once, the JSON metadata from process 0, and renames
the checkpoint only when every process has written its part, so a process that dies during a save
leaves the previous checkpoint as the latest complete one.

Before restoring, the stored shapes and dtypes are compared with those the current configuration
expects; a mismatch raises `CheckpointMismatchError` naming every differing parameter path, instead
of an anonymous shape error from deep inside the restore.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from experiments.train_state import TrainState

LATEST_DIR = "checkpoints"
BEST_DIR = "best"


class CheckpointMismatchError(ValueError):
  """The checkpoint was written by a model of a different configuration."""


def _key_name(key) -> str:
  for attr in ("key", "idx", "name"):
    if hasattr(key, attr):
      return str(getattr(key, attr))
  return str(key)


def _shapes_by_path(tree) -> dict[str, tuple[tuple[int, ...], str]]:
  """'params/Dense_0/kernel' -> (shape, dtype name) for every array leaf of `tree`."""
  leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
  return {"/".join(_key_name(k) for k in path): (tuple(leaf.shape), str(leaf.dtype))
          for path, leaf in leaves}


def check_compatible(expected, stored, what: str) -> None:
  """Raises CheckpointMismatchError unless two trees have the same paths, shapes and dtypes.

  Args:
    expected: the tree the current configuration builds (arrays or ShapeDtypeStructs).
    stored: the checkpoint's tree metadata (leaves with .shape and .dtype).
    what: names the checkpoint in the message.
  """
  want, have = _shapes_by_path(expected), _shapes_by_path(stored)
  problems = []
  for path in sorted(set(want) | set(have)):
    if path not in have:
      problems.append(f"  {path}: expected {want[path][0]} {want[path][1]}, missing from the "
                      "checkpoint")
    elif path not in want:
      problems.append(f"  {path}: in the checkpoint {have[path][0]} {have[path][1]}, not in the "
                      "current model")
    elif want[path] != have[path]:
      problems.append(f"  {path}: the current model has shape {want[path][0]} {want[path][1]}, "
                      f"the checkpoint has shape {have[path][0]} {have[path][1]}")
  if problems:
    raise CheckpointMismatchError(
        f"{what} does not fit the current model configuration ({len(problems)} mismatching "
        "parameter paths):\n" + "\n".join(problems[:20]) +
        ("\n  ..." if len(problems) > 20 else "") +
        "\nUse the configuration that wrote it, or a new --workdir.")


def _state_tree(state: TrainState) -> dict[str, Any]:
  """The TrainState as the dict that is saved (typed keys become their raw uint32 data)."""
  if isinstance(state.rng, jax.ShapeDtypeStruct):  # an abstract state (restore target)
    rng = jax.eval_shape(jax.random.key_data, state.rng)
  else:
    rng = jax.random.key_data(state.rng)
  return {"step": state.step, "params": state.params, "opt_state": state.opt_state, "rng": rng}


def _abstract(tree, sharding) -> Any:
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)


def _barriers_named(prefix: str) -> ocp.options.MultiprocessingOptions:
  """Orbax options giving a manager's cross-process barriers their own names: with several
  processes, the latest manager's background commit and the best manager's save meet at barriers
  that would otherwise share one name and collide ('Barrier ... is already ongoing')."""
  return ocp.options.MultiprocessingOptions(barrier_sync_key_prefix=prefix)


class Checkpoints:
  """The two Orbax managers of a run (latest and best) and the checks around them.

  Args:
    workdir: the run's directory.
    keep: how many latest checkpoints to keep.
    best_metric: the metric name stored with best checkpoints, e.g. 'dev/accuracy'. The best
      checkpoints of a run that selected by another metric are refused (`check_best_metric`).
    best_mode: 'max' or 'min'.
    asynchronous: write in a background thread (training continues meanwhile).
  """

  def __init__(self, workdir: str, *, keep: int = 2, best_metric: str = "dev/loss",
               best_mode: str = "min", asynchronous: bool = True):
    self.workdir = os.path.abspath(workdir)
    self.best_metric, self.best_mode = best_metric, best_mode
    # Naming the handlers lets a new process read a checkpoint's metadata before restoring it.
    self.latest = ocp.CheckpointManager(
        os.path.join(self.workdir, LATEST_DIR),
        item_handlers={"state": ocp.StandardCheckpointHandler(),
                       "meta": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=asynchronous,
            multiprocessing_options=_barriers_named(LATEST_DIR)))
    self.best = ocp.CheckpointManager(
        os.path.join(self.workdir, BEST_DIR),
        item_handlers={"params": ocp.StandardCheckpointHandler(),
                       "meta": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(
            max_to_keep=1, create=True, best_fn=lambda metrics: metrics[best_metric],
            best_mode=best_mode, keep_checkpoints_without_metrics=False,
            enable_async_checkpointing=asynchronous,
            multiprocessing_options=_barriers_named(BEST_DIR)))
    self._best_metric_checked = False

  # -- latest --------------------------------------------------------------------------------------

  def latest_step(self) -> int | None:
    return self.latest.latest_step()

  def save(self, state: TrainState, meta: dict[str, Any]) -> None:
    """Saves the state with its JSON `meta` under its step (a step already saved is left as is)."""
    step = int(jax.device_get(state.step))
    if step in self.latest.all_steps():
      return
    self.latest.save(step, force=True, args=ocp.args.Composite(
        state=ocp.args.StandardSave(_state_tree(state)), meta=ocp.args.JsonSave(meta)))

  def read_meta(self, step: int) -> dict[str, Any]:
    """The JSON metadata of the latest-checkpoint `step`, without restoring its state."""
    return self.latest.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]

  def restore(self, abstract_state: TrainState, sharding, step: int | None = None
              ) -> tuple[TrainState, dict[str, Any]]:
    """Restores the latest (or the given) checkpoint into the structure of `abstract_state`.

    Args:
      abstract_state: a TrainState of ShapeDtypeStructs (e.g. from jax.eval_shape) for the current
        configuration.
      sharding: where the restored arrays go (the replicated sharding).
      step: which checkpoint; None = the latest.

    Returns:
      (state, meta).

    Raises:
      CheckpointMismatchError: the stored shapes differ from the current configuration's.
    """
    step = self.latest.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(f"no checkpoint in {os.path.join(self.workdir, LATEST_DIR)}")
    target = _state_tree(abstract_state)
    stored = self.latest.item_metadata(step)["state"]
    check_compatible(target, getattr(stored, "tree", stored),
                     f"checkpoint {os.path.join(self.workdir, LATEST_DIR, str(step))}")
    restored = self.latest.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(_abstract(target, sharding)), meta=ocp.args.JsonRestore()))
    tree = restored["state"]
    state = TrainState(step=tree["step"], params=tree["params"], opt_state=tree["opt_state"],
                       rng=jax.random.wrap_key_data(tree["rng"]))
    return state, restored["meta"]

  # -- best ----------------------------------------------------------------------------------------

  def check_best_metric(self) -> None:
    """Raises ValueError, naming both metrics, if best/ was chosen by another metric.

    Values of different metrics cannot be compared, nor can Orbax rank a checkpoint by a metric it
    was not saved with, so the best checkpoints are used only under the metric that chose them.
    Every method about the best checkpoint checks this first; the latest checkpoints do not
    depend on it.
    """
    if self._best_metric_checked:
      return
    for step in self.best.all_steps():
      saved = self.best.metrics(step) or {}
      if saved and self.best_metric not in saved:
        raise ValueError(
            f"{os.path.join(self.workdir, BEST_DIR)} holds the best checkpoint chosen by "
            f"{', '.join(map(repr, sorted(saved)))} (step {step}), not by best_metric "
            f"{self.best_metric!r}: open it with the best_metric and best_mode of the run that "
            "saved it (train.best_metric and train.best_mode in its config.json), or use a new "
            "work directory to select by another metric")
    self._best_metric_checked = True

  def best_step(self) -> int | None:
    self.check_best_metric()
    return self.best.best_step()

  def best_value(self) -> float | None:
    """The best metric value saved so far (None before the first best save)."""
    step = self.best_step()
    if step is None:
      return None
    meta = self.best.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
    return float(meta[self.best_metric])

  def is_better(self, value: float) -> bool:
    best = self.best_value()
    if best is None:
      return True
    return value > best if self.best_mode == "max" else value < best

  def save_best(self, step: int, params, metrics: dict[str, float]) -> bool:
    """Saves `params` as the best if metrics[best_metric] beats the best so far; returns whether."""
    if self.best_metric not in metrics:
      raise ValueError(f"best_metric {self.best_metric!r} is not among the evaluation metrics "
                     f"({', '.join(sorted(metrics))}); set train.best_metric to one of them")
    value = float(metrics[self.best_metric])
    if value != value or not self.is_better(value) or step in self.best.all_steps():
      return False
    self.best.save(step, force=True, metrics={self.best_metric: value},
                   args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                           meta=ocp.args.JsonSave(dict(metrics, step=step))))
    self.best.wait_until_finished()  # the next comparison reads it back
    return True

  def restore_best_params(self, abstract_params, sharding) -> tuple[Any, dict[str, Any]]:
    """The best parameters and their metrics; FileNotFoundError when none was saved."""
    step = self.best_step()
    if step is None:
      raise FileNotFoundError(f"no best checkpoint in {os.path.join(self.workdir, BEST_DIR)}")
    stored = self.best.item_metadata(step)["params"]
    check_compatible({"params": abstract_params}, {"params": getattr(stored, "tree", stored)},
                     f"best checkpoint {os.path.join(self.workdir, BEST_DIR, str(step))}")
    restored = self.best.restore(step, args=ocp.args.Composite(
        params=ocp.args.StandardRestore(_abstract(abstract_params, sharding)),
        meta=ocp.args.JsonRestore()))
    return restored["params"], restored["meta"]

  # -- lifecycle -----------------------------------------------------------------------------------

  def wait(self) -> None:
    self.latest.wait_until_finished()
    self.best.wait_until_finished()

  def close(self) -> None:
    self.latest.close()
    self.best.close()
