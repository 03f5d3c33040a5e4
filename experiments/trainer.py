"""The training loop shared by every experiment (loading trained runs back: experiments/runs.py).

`train(task, config, workdir)` runs one named configuration to the end (a task.FittedTask, whose
model is fitted in one call, is handed to experiments/fitting.py instead, in the same lock):

  * parameters are initialised (or the latest checkpoint is restored, together with the data
    position, the running metric sums and the elapsed time), then one jitted, donated, sharded step
    per batch runs while the next batches are already on their way to the devices;
  * every `log_every` steps (and at epoch ends) the summed metrics are read from the device once,
    written to the console, metrics.jsonl and TensorBoard;
  * at epoch ends (and every `eval_every` steps) the dev split is evaluated and the parameters are
    kept apart when `best_metric` improves;
  * every `checkpoint_every` steps, at epoch ends, at the last step and when SIGTERM or SIGINT
    arrives, a checkpoint is written; after a signal the loop stops cleanly;
  * a NaN or inf loss (or gradient norm) stops training with `NonFiniteLossError` naming the step;
    it is detected before anything after it is saved, so the last checkpoint on disk is good; so
    does a loss that stays finite but climbs far above its running level (`DivergedLossError`,
    the rule in `DivergenceGuard`);
  * only one training runs in a work directory (experiments/workdir.py's lock), and only on a run
    of its own experiment; the newest intact checkpoint is resumed from, damaged ones are set
    aside (experiments/checkpoints.py); a save that fails stops training at the next step;
  * at the end the test split is evaluated with the best (or last) parameters, and results.json
    (with the task's metric signatures beside the figures), config.json and curves.png are
    written.

Several processes (experiments/distributed.py) run this same loop in lockstep over one global mesh:
each feeds its slice of every batch and evaluates its slice of every split (the sums are global,
so nothing is counted twice), all of them take part in every Orbax save and restore, and only
process 0 writes the other files (metrics, config.json, vocabularies, results, plots) and prints.
A stop is agreed (`parallel.StopAgreement`): a signal to any process stops all of them after the
same step, with the same checkpoint; a NaN is seen by all at once (the sums are global).

An interrupted run restarted with the same command finishes with the same parameters and the same
metrics.jsonl records (apart from their 'time') as an uninterrupted one, bit for bit on the CPU.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np
import tqdm

from experiments import config as config_lib
from experiments import distributed
from experiments import fitting
from experiments import metrics_log
from experiments import plots
from experiments import steps
from experiments import workdir as workdir_lib
from experiments.checkpoints import Checkpoints
from experiments.checkpoints import Verdict
from experiments.config import Config
from experiments.parallel import DataParallel
from experiments.parallel import StopAgreement
from experiments.task import FittedTask
from experiments.task import Task
from experiments.train_state import TrainState
from experiments.train_state import make_init
from experiments.train_state import make_optimizer

CONFIG_FILE = "config.json"
CURVES_FILE = "curves.png"


class NonFiniteLossError(RuntimeError):
  """Training produced a NaN or infinite loss or gradient norm.

  Attributes:
    step: the 1-based number of the first update whose loss (or gradient) was not finite.
    value: the loss at that step.
    checkpoint_step: the last checkpoint on disk (all good), or None.
  """

  def __init__(self, step: int, value: float, checkpoint_step: int | None, directory: str, *,
               verdict: Verdict | None = None, advice: str | None = None):
    self.step, self.value, self.checkpoint_step = step, value, checkpoint_step
    what = (f"the loss became {value}" if not math.isfinite(value) else
            f"the gradient norm became NaN or inf (loss {value})")
    super().__init__(
        f"Training stopped at step {step}: {what}. Nothing from step {step} on was saved; "
        f"{_kept(checkpoint_step, directory, verdict)}. "
        f"{advice or 'Try ' + ', '.join(_REMEDIES) + '.'}")


# The remedies named when the run's settings are not known.
_REMEDIES = ("a lower optimizer.learning_rate", "gradient clipping (optimizer.grad_clip_norm=1.0)",
             "a warm-up", "or train.dtype=float32")


def _kept(checkpoint_step: int | None, directory: str, verdict: Verdict | None) -> str:
  """What the stopped run leaves to resume from: a checkpoint is called good only once verified."""
  if checkpoint_step is None:
    return "no checkpoint had been written yet"
  if verdict is None or verdict.verified:
    return f"the last good checkpoint, step {checkpoint_step}, is kept in {directory}"
  if verdict.usable:
    return (f"the last checkpoint, step {checkpoint_step}, is kept in {directory} (written before "
            "checkpoints carried checksums, so not verified)")
  return (f"the newest checkpoint, step {checkpoint_step} in {directory}, is damaged "
          f"({verdict.problem}): the next start sets it aside and resumes from an older intact one")


class DivergedLossError(NonFiniteLossError):
  """The training loss stayed finite but rose far above its running level (DivergenceGuard).

  Attributes (besides NonFiniteLossError's): start, the first step of the interval whose mean
  crossed the limit, and limit.
  """

  def __init__(self, step: int, start: int, value: float, limit: float, rule: str,
               checkpoint_step: int | None, directory: str, *, verdict: Verdict | None = None,
               advice: str | None = None):
    RuntimeError.__init__(  # pylint: disable=non-parent-init-called
        self, f"Training stopped at step {step}: the loss diverged: the mean training objective "
        f"of steps {start}-{step} is {value:.4g}, above {limit:.4g} ({rule}). Nothing from these "
        f"steps was logged or saved; {_kept(checkpoint_step, directory, verdict)}. "
        f"{advice or 'Try ' + ', '.join(_REMEDIES) + '.'}")
    self.step, self.value, self.checkpoint_step = step, value, checkpoint_step
    self.start, self.limit = start, limit


class DivergenceGuard:
  """Stops a run whose loss stays finite but climbs far above its running level.

  The rule: the mean training objective over a logging interval (or over the steps of one so far,
  checked before every dev evaluation and checkpoint) must not exceed
  `max(factor * lowest, first)`, where `first` is the objective of the run's first step (the
  untrained model) and `lowest` the lowest of it and of every interval mean logged since. A loss
  ten times (the default `train.divergence_factor`) its best level that is also worse than where
  training started has undone what was learned: Adam at learning rate 1e6 takes the toy's loss
  from 0.7 to 1e18 within two steps. The project's recorded runs stay far below the limit
  (docs/RELIABILITY.md: at most 2.2 times the lowest, never above the first). Nothing is judged
  while the lowest is not positive. The state goes into every checkpoint, so a resumed run judges
  as the uninterrupted one would; resumed from a checkpoint written without it, `first` is the
  first step after the resume.

  Args:
    factor: train.divergence_factor (None turns the guard off).
    state: the state saved in a checkpoint's meta (None: a new run, or an older checkpoint).
  """

  def __init__(self, factor: float | None, state: dict[str, Any] | None = None):
    self.factor = factor
    state = state or {}
    self.first, self.lowest = state.get("first"), state.get("lowest")

  def limit(self) -> float | None:
    if self.factor is None or self.first is None or not self.lowest or self.lowest <= 0:
      return None
    return max(self.factor * self.lowest, self.first)

  def rule(self) -> str:
    return (f"the larger of train.divergence_factor {self.factor:g} times its lowest level so far, "
            f"{self.lowest:.4g}, and the first step's, {self.first:.4g}")

  def exceeded(self, mean: float) -> bool:
    limit = self.limit()
    return limit is not None and math.isfinite(mean) and mean > limit

  def update(self, mean: float) -> None:
    """Takes the first step's objective, then each logged interval's mean, into the level."""
    if not math.isfinite(mean):
      return
    if self.first is None:
      self.first = mean
    self.lowest = mean if self.lowest is None else min(self.lowest, mean)

  def state(self) -> dict[str, Any]:
    return {"first": self.first, "lowest": self.lowest}


def remedies(config: Config) -> str:
  """The remedies for a diverging run that its settings leave open (none it already uses)."""
  opt, tc = config.optimizer, config.train
  tips = [f"a lower optimizer.learning_rate (now {opt.learning_rate:g})"]
  tips.append("gradient clipping (optimizer.grad_clip_norm=1.0)" if opt.grad_clip_norm is None
              else f"a tighter optimizer.grad_clip_norm (now {opt.grad_clip_norm:g})")
  if opt.warmup_steps == 0:
    tips.append("a warm-up (optimizer.warmup_steps)")
  if tc.dtype != "float32":
    tips.append(f"train.dtype=float32 (now {tc.dtype})")
  return "Try " + ", ".join(tips[:-1]) + (", or " if len(tips) > 1 else "") + tips[-1] + "."


def _after_resume_advice(bad_step: int, resume_step: int, verdict: Verdict | None,
                         changes: list[str], workdir: str) -> str:
  """The advice when the loss fails within the first steps after a resume: the run was healthy up
  to the checkpoint, so the checkpoint (or what changed on resuming) is the suspect."""
  how = ("its checksums match what was saved" if verdict is not None and verdict.verified else
         "it was written before checkpoints carried checksums, so it could not be verified")
  changed = (f"the settings changed on resuming ({'; '.join(changes)})" if changes else
             "no setting changed on resuming")
  return (f"This came {bad_step - resume_step} step(s) after resuming from step {resume_step}, "
          f"and the run was healthy up to that checkpoint ({how}; {changed}): suspect the "
          "checkpoint or the changed settings before the learning rate. To resume from an older "
          f"checkpoint, move checkpoints/{resume_step} out of {workdir} (into set_aside/) and run "
          "the same command again.")


@dataclasses.dataclass
class TrainResult:
  """What `train` returns.

  Attributes:
    state: the final TrainState (on the devices); None for a fitted model (task.FittedTask).
    step: the number of updates done.
    interrupted: the signal number that stopped the run early (None when it ran to the end).
    results: the contents of results.json (None when interrupted, and in processes other than 0,
      which do not write it).
    workdir: the run's directory.
  """
  state: TrainState | None
  step: int
  interrupted: int | None
  results: dict[str, Any] | None
  workdir: str


class StopSignals:
  """Turns SIGTERM and SIGINT into a flag the loop checks after each step.

  A second SIGINT (Ctrl-C pressed twice) raises KeyboardInterrupt at once. Outside the main thread
  signals cannot be caught, and the context does nothing.
  """

  def __init__(self, signums: Sequence[int] = (signal.SIGTERM, signal.SIGINT)):
    self.signums = tuple(signums)
    self.received: int | None = None
    self._previous: dict[int, Any] = {}

  def _handle(self, signum, frame):
    del frame
    if self.received is not None and signum == signal.SIGINT:
      raise KeyboardInterrupt
    self.received = signum

  def __enter__(self) -> StopSignals:
    if threading.current_thread() is threading.main_thread():
      for signum in self.signums:
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc) -> None:
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    self._previous.clear()


def total_steps(config: Config, steps_per_epoch: int) -> int:
  if steps_per_epoch <= 0:
    raise ValueError(f"the task has {steps_per_epoch} steps per epoch; it needs at least one "
                     "training batch")
  total = config.train.num_steps
  if total is None:
    total = config.train.num_epochs * steps_per_epoch
  if total <= 0:
    raise ValueError(f"nothing to train: train.num_steps = {config.train.num_steps}, "
                     f"train.num_epochs = {config.train.num_epochs}")
  return total


def plan_line(config: Config, steps_per_epoch: int, total: int) -> str:
  """The run's first line: how many steps it takes and which setting decided it."""
  epochs = total / steps_per_epoch
  if config.train.num_steps is not None:
    return (f"Training {total:,} steps: train.num_steps = {config.train.num_steps} (about "
            f"{epochs:.3g} epochs of {steps_per_epoch:,} steps; train.num_epochs has no effect "
            "while train.num_steps is set)")
  return (f"Training {total:,} steps: train.num_epochs = {config.train.num_epochs} epochs of "
          f"{steps_per_epoch:,} steps (train.num_steps is None)")


def validate_config(config: Config) -> None:
  """Raises ValueError for engine settings that cannot work (intervals < 1, non-dev best_metric)."""
  tc = config.train
  for name in ("log_every", "checkpoint_every", "keep_checkpoints", "prefetch"):
    if getattr(tc, name) < 1:
      raise ValueError(f"train.{name} must be at least 1, got {getattr(tc, name)}")
  if tc.eval_every is not None and tc.eval_every < 1:
    raise ValueError(f"train.eval_every must be None (epoch ends) or at least 1, got "
                     f"{tc.eval_every}")
  if not tc.best_metric.startswith("dev/"):
    raise ValueError(f"train.best_metric must name a dev metric such as 'dev/accuracy', got "
                     f"{tc.best_metric!r}")


def check_best_metric(task: Task, best_metric: str, eval_metrics: dict[str, Any]) -> None:
  """Raises ValueError, before any training, for a best_metric that no dev evaluation will report.

  Args:
    task: the task (its `extra_metric_names('dev')` are the metrics its extra_eval adds).
    best_metric: train.best_metric, e.g. 'dev/accuracy'.
    eval_metrics: the metric pairs of one evaluation step (abstract values are enough).
  """
  names = sorted(f"dev/{name}" for name in (*eval_metrics, *task.extra_metric_names("dev")))
  if best_metric not in names:
    raise ValueError(f"train.best_metric {best_metric!r} is not among the dev metrics of the task "
                     f"({', '.join(names)}); set it to one of them")


def _acc_to_json(acc) -> dict[str, Any]:
  host = jax.device_get(acc)
  return {"metrics": {k: [float(t), float(c)] for k, (t, c) in host["metrics"].items()},
          "first_bad_step": int(host["first_bad_step"]), "bad_value": float(host["bad_value"])}


def _acc_from_json(data: dict[str, Any], dp: DataParallel):
  acc = {"metrics": {k: (np.float32(t), np.float32(c)) for k, (t, c) in data["metrics"].items()},
         "first_bad_step": np.int32(data["first_bad_step"]),
         "bad_value": np.float32(data["bad_value"])}
  return dp.replicate(acc)


def _config_changes(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
  changes = []
  for key in sorted(set(old) | set(new)):
    a, b = old.get(key), new.get(key)
    if isinstance(a, dict) and isinstance(b, dict):
      changes.extend(_config_changes(a, b, f"{prefix}{key}."))
    elif a != b:
      changes.append(f"{prefix}{key}: {a!r} -> {b!r}")
  return changes


class _Evaluator:
  """Evaluates parameters on a split with one jitted, sharded step per batch."""

  def __init__(self, task: Task, dp: DataParallel):
    self.task, self.dp = task, dp
    self.eval_step = dp.jit_eval_step(steps.make_eval_step(task))
    self.add = jax.jit(steps.add_metrics)

  def __call__(self, params, split: str, extra: bool = True) -> dict[str, float]:
    """The weighted means of the task's metrics over `split`, and with `extra` its extra_eval's."""
    sums = None
    for batch in self.task.eval_batches(split):
      metrics = self.eval_step(params, self.dp.shard_batch(batch))
      sums = metrics if sums is None else self.add(sums, metrics)
    if sums is None:
      raise ValueError(f"the {split!r} split of the task produced no evaluation batches")
    result = steps.means(sums)
    if not extra:
      return result
    added = self.task.extra_eval(self.dp.local_copy(params), split, dict(result))
    expected = set(self.task.extra_metric_names(split))
    if set(added) != expected:
      raise RuntimeError(f"{type(self.task).__name__}.extra_eval({split!r}) returned the metrics "
                         f"{sorted(added)}, but its extra_metric_names({split!r}) declares "
                         f"{sorted(expected)}; make the two agree")
    clash = expected & set(result)
    if clash:
      raise RuntimeError(f"{type(self.task).__name__}.extra_eval({split!r}) returns {sorted(clash)}, "
                         "which the evaluation step already reports")
    result.update(added)
    return result


def evaluate(task: Task, params, split: str, devices: Sequence[jax.Device] | None = None, *,
             extra: bool = True) -> dict[str, float]:
  """Weighted means of the task's metrics over `split`, plus its extra_eval metrics (decoding,
  BLEU ...) unless `extra` is False. For a FittedTask, `params` is its fitted model and the
  metrics are its evaluate_model's."""
  if isinstance(task, FittedTask):
    return task.evaluate_model(params, split)
  dp = DataParallel(devices)
  return _Evaluator(task, dp)(dp.replicate(params), split, extra)


def _committed_steps_note(directory: str) -> Callable[[], str]:
  """The watchdog's note when a peer dies: which checkpoint a restart resumes from."""

  def note() -> str:
    # Orbax renames a checkpoint to its bare step number only once every process has written it.
    names = os.listdir(directory) if os.path.isdir(directory) else []
    committed = sorted(int(name) for name in names if name.isdigit())
    if not committed:
      return "No checkpoint had been written yet."
    return (f"The last complete checkpoint, step {committed[-1]} in {directory}, is good: start "
            "every process again with the same command to resume from it.")

  return note


def train(task: Task, config: Config, workdir: str, *,
          devices: Sequence[jax.Device] | None = None,
          console: Callable[[str], None] | None = None) -> TrainResult:
  """Trains `task` as `config` says in `workdir`, holding the directory's training lock (process 0)
  for the whole run; the work itself is `_train`'s (its docstring has the details).

  Raises:
    WorkdirLockedError: another training run holds `workdir` (nothing was read or written).
    WrongExperimentError: `workdir` holds a run of another experiment.
    UsageError: `workdir` holds a fitted model and `task` trains by steps, or the other way round
      (fitting.check_kind).
    and what `_train` raises.
  """
  workdir = os.path.abspath(workdir)
  workdir_lib.check_experiment(workdir, config.experiment, f"train {config.experiment}")
  fitting.check_kind(workdir, isinstance(task, FittedTask), f"train {config.experiment} --model "
                     f"{config.model_name}")
  if isinstance(task, FittedTask):  # fitted in one call (experiments/fitting.py), no steps
    with workdir_lib.WorkdirLock(workdir, note=console or print):
      results = fitting.fit_run(task, config, workdir, console or print)
    return TrainResult(None, 0, None, results, workdir)
  if not distributed.is_primary():
    return _train(task, config, workdir, devices=devices, console=console)
  with workdir_lib.WorkdirLock(workdir, note=console or print):
    return _train(task, config, workdir, devices=devices, console=console)


def _train(task: Task, config: Config, workdir: str, *,
           devices: Sequence[jax.Device] | None = None,
           console: Callable[[str], None] | None = None) -> TrainResult:
  """Trains `task` as `config` says, checkpointing into `workdir` and resuming from it.

  Args:
    task: the experiment's task, built from `config`.
    config: the run's configuration.
    workdir: the run's directory; holding checkpoints from an earlier start, the run resumes.
      With several processes, a directory every process sees (a shared file system).
    devices: the devices to train on (None = all devices, of every process).
    console: where console lines go (default: above the progress bar, or stdout); only process 0
      prints.

  Returns:
    A TrainResult.

  Raises:
    NonFiniteLossError: the loss became NaN or inf (DivergedLossError: far above its level).
    CheckpointMismatchError: workdir holds a checkpoint of a different model configuration.
    CheckpointDamagedError: workdir holds checkpoints, but none is intact.
    CheckpointSaveError: a checkpoint could not be written.
    TopologyMismatchError: workdir holds a checkpoint written by another number of processes.
  """
  run = _Training(task, config, workdir, devices, console)
  run.restore_or_init()
  run.write_run_files()
  run.prepare_loop()
  try:
    result = run.loop()
  except BaseException:
    # The error on its way out is the one to report: a failed save is not raised a second time.
    run.close(failed=True)
    raise
  run.close(failed=False)
  distributed.mark_finished()
  return result


class _Training:
  """One start of a training run, in the named steps `_train` takes one after the other: the plan
  (this constructor: devices, optimizer, the abstract state; nothing read or written yet),
  `restore_or_init`, `write_run_files`, `prepare_loop`, `loop` (each step: `train_step`,
  `log_interval`, `evaluate_dev`, `save`) and `close`. Every attribute is one of the run's
  variables, shared between the steps."""

  def __init__(self, task: Task, config: Config, workdir: str,
               devices: Sequence[jax.Device] | None, console: Callable[[str], None] | None):
    self.started = time.time()
    self.task, self.config, self.tc = task, config, config.train
    self.workdir = os.path.abspath(workdir)
    os.makedirs(self.workdir, exist_ok=True)
    validate_config(config)
    self.dp = DataParallel(devices)
    self.dp.check_batch_size(self.tc.batch_size, "train.batch_size")
    self.steps_per_epoch = task.steps_per_epoch
    self.total = total_steps(config, self.steps_per_epoch)
    tx, schedule = make_optimizer(config.optimizer, self.total)
    self.config_dict = config_lib.to_dict(config)
    self.primary = distributed.is_primary()
    self._open_console(console)
    self.rng = jax.random.key(self.tc.seed)
    self.sample = task.example_batch()
    self.init = make_init(task, tx)
    abstract_state = jax.eval_shape(self.init, self.rng, self.sample)
    self.train_step = steps.make_train_step(task, tx, schedule)
    _, self.abstract_metrics = jax.eval_shape(self.train_step, abstract_state, self.sample)
    check_best_metric(task, self.tc.best_metric,
                      jax.eval_shape(steps.make_eval_step(task), abstract_state.params,
                                     self.sample))
    self.abstract_state = abstract_state

  def _open_console(self, console: Callable[[str], None] | None) -> None:
    """The progress bar and `say` (process 0 only), and the plan's first line."""
    # The bar redraws its line with carriage returns: only on a terminal, never into a log file.
    self.show_bar = self.tc.progress_bar and self.primary and sys.stderr.isatty()
    self.bar = tqdm.tqdm(total=self.total, disable=not self.show_bar, dynamic_ncols=True,
                         unit="step")
    self.say = console or (self.bar.write if self.show_bar else print)
    if not self.primary:
      self.say = lambda line: None
    self.say(plan_line(self.config, self.steps_per_epoch, self.total))

  def new_acc(self):
    """Zero metric sums on the devices."""
    return self.dp.replicate(steps.init_accumulator(
        jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), self.abstract_metrics)))

  def restore_or_init(self) -> None:
    """The newest intact checkpoint restored (the state, the data position, the metric sums, the
    guard, the elapsed time), or fresh parameters."""
    tc, dp, workdir = self.tc, self.dp, self.workdir
    self.ckpts = Checkpoints(workdir, keep=tc.keep_checkpoints, best_metric=tc.best_metric,
                             best_mode=tc.best_mode)
    self.ckpts.check_best_metric()  # a resumed run keeps its metric: checked before any write
    distributed.set_failure_note(_committed_steps_note(os.path.join(workdir, "checkpoints")))
    self.batches = self.task.train_batches()
    self.elapsed_before = 0.0
    resumed = self.ckpts.resume_point(
        self.abstract_state, dp.replicated, note=self.say,
        check_meta=lambda meta, where: distributed.check_topology(meta.get("topology"),
                                                                  f"checkpoint {where}"))
    self.resume_step, self.resume_verdict, self.changes = None, None, []
    self.guard = DivergenceGuard(tc.divergence_factor)
    if resumed is not None:
      self.state, meta, self.resume_verdict = resumed
      self.resume_step = int(jax.device_get(self.state.step))
      self.batches.set_state(meta["data"])
      self.guard = DivergenceGuard(tc.divergence_factor, meta.get("divergence"))
      self.acc = _acc_from_json(meta["acc"], dp)
      self.elapsed_before = float(meta.get("elapsed", 0.0))
      self.changes = _config_changes(config_lib.with_current_names(meta.get("config", {})),
                                     self.config_dict)
      self.say(f"Resuming {workdir} from step {int(self.state.step)}" +
               (f" with changed settings: {'; '.join(self.changes)}" if self.changes else ""))
    else:
      self.state = dp.jit_init(self.init)(self.rng, dp.shard_batch(self.sample))
      self.acc = self.new_acc()
    self.advice = remedies(self.config)

  def write_run_files(self) -> None:
    """config.json and the task's artifacts (process 0)."""
    if not self.primary:
      return
    # Written only now: a checkpoint that does not fit has raised above and left the run untouched.
    with open(os.path.join(self.workdir, CONFIG_FILE), "w", encoding="utf-8") as f:
      json.dump(self.config_dict, f, indent=2)
      f.write("\n")
    # What predicting needs besides the parameters (vocabularies), before the first step, so that
    # a run stopped at any point can already be loaded back (runs.load_run).
    self.task.save_artifacts(self.workdir)

  def prepare_loop(self) -> None:
    """The logger, the jitted loop step, the evaluator and the loop's counters."""
    self.step = int(jax.device_get(self.state.step))
    self.bar.update(self.step)
    self.logger = (metrics_log.MetricsLogger(self.workdir, start_step=self.step, console=self.say)
                   if self.primary else metrics_log.NullLogger())
    self.loop_step = self.dp.jit_train_step(steps.make_loop_step(self.train_step), num_carried=2)
    self.evaluator = _Evaluator(self.task, self.dp)
    self.agree_to_stop = StopAgreement(self.dp)
    self.last_dev: dict[str, float] | None = None
    self.position = self.batches.get_state()
    self.topology = distributed.topology_meta()
    self.interval_start = self.step + 1  # the first step of the logging interval being summed

  def kept(self) -> tuple[int | None, Verdict | None]:
    """The newest checkpoint once its save has finished, and what verifying it found."""
    self.ckpts.wait()
    kept_step = self.ckpts.latest_step()
    return kept_step, (self.ckpts.verify("checkpoints", kept_step) if kept_step is not None
                       else None)

  def advice_for(self, bad_step: int) -> str:
    if self.resume_step is not None and bad_step <= self.resume_step + self.tc.log_every:
      return _after_resume_advice(bad_step, self.resume_step, self.resume_verdict, self.changes,
                                  self.workdir)
    return self.advice

  def check_finite(self, mean: float | None = None) -> None:
    """Raises when the loss became NaN or inf, or (DivergenceGuard) climbed far above its level;
    `mean` is the interval's mean objective when the caller has read it already."""
    acc, guard, checkpoints = self.acc, self.guard, os.path.join(self.workdir, "checkpoints")
    bad = int(jax.device_get(acc["first_bad_step"]))
    if bad != steps.NO_BAD_STEP:
      kept_step, verdict = self.kept()
      raise NonFiniteLossError(bad, float(jax.device_get(acc["bad_value"])), kept_step,
                               checkpoints, verdict=verdict, advice=self.advice_for(bad))
    if guard.limit() is None:
      return
    if mean is None:
      mean = steps.means({"objective": acc["metrics"]["objective"]})["objective"]
    if guard.exceeded(mean):
      kept_step, verdict = self.kept()
      raise DivergedLossError(self.step, self.interval_start, mean, guard.limit(), guard.rule(),
                              kept_step, checkpoints, verdict=verdict,
                              advice=self.advice_for(self.interval_start))

  def save(self) -> None:
    """A checkpoint of the state and everything an exact resume needs."""
    self.check_finite()
    self.ckpts.save(self.state, {
        "data": self.position, "acc": _acc_to_json(self.acc), "config": self.config_dict,
        "elapsed": self.elapsed_before + time.time() - self.started,
        "epoch": self.step / self.steps_per_epoch, "topology": self.topology,
        "divergence": self.guard.state()})

  def loop(self) -> TrainResult:
    """Steps until the last, or until a signal stops every process; then the test evaluation."""
    interrupted = None
    with StopSignals() as stop:
      stream = self.dp.prefetch(self.batches, size=self.tc.prefetch)
      while self.step < self.total:
        self.train_step_once(stream)
        stopping = self.agree_to_stop(stop.received)
        step, tc = self.step, self.tc
        epoch_end = step % self.steps_per_epoch == 0
        last = step == self.total
        if step % tc.log_every == 0 or epoch_end or last:
          self.log_interval()
        if (tc.eval_every and step % tc.eval_every == 0) or epoch_end or last:
          self.evaluate_dev()
        if step % tc.checkpoint_every == 0 or epoch_end or last or stopping is not None:
          self.save()
        if stopping is not None and not last:
          interrupted = stopping
          self.say(f"Stopped by {signal.Signals(interrupted).name} at step {step}; a checkpoint "
                   "was saved. Run the same command again to resume.")
          break
    self.ckpts.wait()
    if interrupted is not None:
      return TrainResult(self.state, self.step, interrupted, None, self.workdir)
    results = _finish(self.task, self.config, self.workdir, self.state, self.ckpts,
                      self.evaluator, self.dp, self.logger, self.last_dev,
                      self.elapsed_before + time.time() - self.started, self.steps_per_epoch,
                      self.total, self.say)
    return TrainResult(self.state, self.step, None, results, self.workdir)

  def train_step_once(self, stream) -> None:
    """One update on the next batch."""
    try:
      batch, self.position = next(stream)
    except StopIteration:
      raise RuntimeError(f"the training iterator ended after step {self.step}; "
                         "Task.train_batches must yield batches endlessly, epoch after epoch"
                         ) from None
    self.state, self.acc = self.loop_step(self.state, self.acc, batch)
    self.step += 1
    self.ckpts.check_for_errors()  # a save that failed in the background stops the run here
    if self.guard.first is None:  # the untrained model's loss: the guard's reference (once)
      self.guard.update(steps.means({"objective": self.acc["metrics"]["objective"]})["objective"])
    self.bar.update(1)

  def log_interval(self) -> None:
    """The interval's mean training metrics checked, logged, and the sums started again."""
    train_metrics = steps.means(self.acc["metrics"])
    self.check_finite(train_metrics["objective"])
    self.guard.update(train_metrics["objective"])
    self.interval_start = self.step + 1
    self.logger.write(self.step, "train", train_metrics, epoch=self.step / self.steps_per_epoch,
                      echo=not self.show_bar)
    self.bar.set_postfix(loss=f"{train_metrics.get('loss', train_metrics['objective']):.4f}")
    self.acc = self.new_acc()

  def evaluate_dev(self) -> None:
    """The dev split evaluated and logged; the best parameters kept."""
    self.check_finite()
    self.last_dev = self.evaluator(self.state.params, "dev")
    self.logger.write(self.step, "dev", self.last_dev, epoch=self.step / self.steps_per_epoch)
    if self.ckpts.save_best(self.step, self.state.params,
                            {f"dev/{k}": v for k, v in self.last_dev.items()}):
      self.say(f"New best {self.tc.best_metric} = "
               f"{self.last_dev[self.tc.best_metric.split('/', 1)[-1]]:.4f} at step {self.step}")

  def close(self, failed: bool) -> None:
    """The bar, the logger and the checkpoints closed (after a failure, quietly: the error on its
    way out is the one to report)."""
    self.bar.close()
    self.logger.close()
    if failed:
      self.ckpts.close(quiet=True)
    else:
      self.ckpts.wait()
      self.ckpts.close()


def _finish(task, config, workdir, state, ckpts, evaluator, dp, logger, last_dev, elapsed,
            steps_per_epoch, total, say) -> dict[str, Any] | None:
  """The test evaluation with the chosen parameters (every process), then results.json and the
  curves (process 0, which returns the results; the others return None)."""
  tc = config.train
  params, chosen, best = state.params, "last", None
  if ckpts.best_step() is not None:
    best = {"step": ckpts.best_step(), "metric": tc.best_metric, "value": ckpts.best_value()}
    if tc.test_with == "best":
      params, _ = ckpts.restore_best_params(
          jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state.params),
          dp.replicated)
      chosen = "best"
  test = evaluator(params, "test")
  if not distributed.is_primary():
    return None
  logger.write(total, "test", test, epoch=total / steps_per_epoch)
  if last_dev is None:
    dev_records = [r for r in metrics_log.read_metrics(logger.path) if r["split"] == "dev"]
    last_dev = ({k: v for k, v in dev_records[-1].items()
                 if k not in ("step", "split", "epoch", "time")} if dev_records else {})
  results = {
      "experiment": config.experiment, "model": config.model_name, "test": test, "dev": last_dev,
      "signatures": {split: signatures for split in ("dev", "test")
                     if (signatures := task.metric_signatures(split))},
      "best": best, "test_params": chosen, "steps": total, "epochs": total / steps_per_epoch,
      "wall_time_s": round(elapsed, 3), "machine": metrics_log.machine_info(),
      "config": config_lib.to_dict(config), "workdir": workdir,
      "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
  }
  metrics_log.write_results(workdir, results)
  try:
    plots.plot_curves(logger.path, os.path.join(workdir, CURVES_FILE),
                      title=f"{config.experiment} {config.model_name}".strip(),
                      best_metric=tc.best_metric, best_mode=tc.best_mode)
  except ValueError as e:  # nothing plottable (e.g. no metric logged twice) is not fatal
    say(f"No curves drawn: {e}")
  task.on_train_end(dp.local_copy(params), workdir)
  shown = "  ".join(f"{k} {v:.4f}" for k, v in sorted(test.items()))
  say(f"Test ({chosen} parameters): {shown}  [{elapsed:.1f} s]")
  return results
