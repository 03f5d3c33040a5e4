"""Runs by name, and trained runs loaded back: what commands and notebooks call.

    cfg = runs.make_config("sentiment", "bilstm_attn_additive", overrides=["--train.num_epochs=1"])
    result = runs.train_named("sentiment", "bilstm_attn_additive")      # trainer.train on it
    run = runs.load_run("runs/sentiment-bilstm_attn_additive")          # task, params, step, config
    run.task.predict(run.params, ["a fine film"])
    runs.evaluate_run("runs/sentiment-bilstm_attn_additive", split="test")

`load_run` is the one inference loader of the project: it rebuilds the run's Config from its
config.json, builds the experiment's task, loads the artifacts the run saved beside its
checkpoints (vocabularies: see Task.ARTIFACTS) and restores the best (or latest) parameters. So
predicting needs the run's directory and nothing else; the training data is opened only when an
artifact is missing (a run saved before artifacts were written at the start of training) or when
`evaluate_run` reads a split.

Every checkpoint is verified against its checksums before it is read (experiments/checkpoints.py):
a damaged one is refused (`CheckpointDamagedError`, naming the file) rather than loaded, and one
written before checksums existed is loaded with a `RunNote` warning (the command line prints it as
a note). With `experiment=`, a run of another experiment is refused (`WrongExperimentError`, exit
status 2 on the command line) before anything is built.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Any, Sequence

import jax

from experiments import config as config_lib
from experiments import fitting
from experiments import registry
from experiments import trainer
from experiments import workdir as workdir_lib
from experiments.checkpoints import Checkpoints
from experiments.config import Config
from experiments.parallel import DataParallel
from experiments.task import FittedTask
from experiments.task import Task
from experiments.train_state import make_init
from experiments.train_state import make_optimizer

CHECKPOINT_CHOICES = ("best", "latest")


class RunNote(UserWarning):
  """Something the person loading a run should know, that does not stop it (the command line
  prints it as a note on standard error): e.g. a checkpoint loaded without checksums to verify."""


warnings.filterwarnings("always", category=RunNote)  # every load says it, not only the first


def default_workdir(config: Config) -> str:
  """runs/<experiment>-<model>: where a named run writes unless told otherwise."""
  return os.path.join("runs", f"{config.experiment}-{config.model_name}")


def make_config(experiment: str, model: str | None = None, *, data_dir: str | None = None,
                overrides: Sequence[str] = ()) -> Config:
  """The named run's config with the data directory and command-line overrides applied.

  Args:
    experiment: a registered experiment, e.g. 'sentiment'.
    model: one of its named runs (None: its default).
    data_dir: the data (None: the sample shipped with the package).
    overrides: command-line words, e.g. ['--train.num_epochs=1', '--optimizer.learning_rate',
      '3e-4'] (see config.override).

  Raises:
    ValueError: an unknown experiment or model, an override that does not fit (config.ConfigError),
      or engine settings that cannot work.
  """
  cfg = registry.get_config(experiment, model)
  if data_dir is not None:
    cfg.data_dir = data_dir
  cfg = config_lib.override(cfg, overrides)
  trainer.validate_config(cfg)
  return cfg


def make_task(config: Config) -> Task:
  """The task of `config.experiment`, built from `config`."""
  return registry.get_experiment(config.experiment).make_task(config)


def train_named(experiment: str, model: str | None = None, *, data_dir: str | None = None,
                workdir: str | None = None, overrides: Sequence[str] = (),
                devices: Sequence[jax.Device] | None = None) -> trainer.TrainResult:
  """Trains a registered experiment's named run (what `python -m experiments train` does)."""
  cfg = make_config(experiment, model, data_dir=data_dir, overrides=overrides)
  return trainer.train(make_task(cfg), cfg, workdir or default_workdir(cfg), devices=devices)


def load_config(workdir: str) -> Config:
  """The Config a run in `workdir` was trained with (from its config.json).

  Raises:
    FileNotFoundError: `workdir` holds no config.json.
    ValueError: the config.json names an unknown experiment or model, or a setting the named run
      does not have.
  """
  path = os.path.join(workdir, trainer.CONFIG_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} does not exist: is {workdir} the --workdir of a training run?")
  with open(path, encoding="utf-8") as f:
    try:
      saved = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path} is not valid JSON ({e}); was it cut short?") from None
  for key in ("experiment", "model_name"):
    if not saved.get(key):
      raise ValueError(f"{path} has no {key!r}: it was not written by `python -m experiments "
                       "train`")
  cfg = registry.get_config(saved["experiment"], saved["model_name"])
  return config_lib.update_from_dict(cfg, saved)


def is_checkpoint_choice(which: str) -> bool:
  """Whether `which` names a checkpoint: 'best', 'latest' or a step number ('175')."""
  return which in CHECKPOINT_CHOICES or (isinstance(which, str) and which.isdigit())


def restore_params(task: Task, config: Config, workdir: str, which: str = "best",
                   devices: Sequence[jax.Device] | None = None) -> tuple[Any, int]:
  """The parameters of a run: its best checkpoint, its latest ('latest'), or a step's ('175').

  With which='best' and no best checkpoint, the latest one is used. A step must be one of the
  kept latest checkpoints (the last `train.keep_checkpoints` saves; one is saved at every epoch's
  end), e.g. to score each epoch of a short run on test.

  Returns:
    (params on the devices, replicated; the step they come from); for a fitted model
    (task.FittedTask), (the model, 0).
  """
  if not is_checkpoint_choice(which):
    raise ValueError(f"which must be 'best', 'latest' or a step number, got {which!r}")
  if isinstance(task, FittedTask):  # one fitted model, no steps: experiments/fitting.py
    if which not in CHECKPOINT_CHOICES:  # as a step that was not kept: a path that is not there
      raise FileNotFoundError(f"{workdir} holds a fitted model, no checkpoint of step {which}: "
                              "load it as best or latest")
    return fitting.load_model(workdir), 0
  dp = DataParallel(devices)
  tx, _ = make_optimizer(config.optimizer, total_steps=1)  # opt_state shapes need no run length
  abstract = jax.eval_shape(make_init(task, tx), jax.random.key(0), task.example_batch())
  tc = config.train
  ckpts = Checkpoints(workdir, keep=tc.keep_checkpoints, best_metric=tc.best_metric,
                      best_mode=tc.best_mode)
  try:
    if which == "best" and ckpts.best_step() is not None:
      params, meta = ckpts.restore_best_params(abstract.params, dp.replicated, check=True)
      return params, int(meta["step"])
    if which.isdigit():
      kept = ckpts.latest.all_steps()
      if int(which) not in kept:
        raise FileNotFoundError(f"no checkpoint of step {int(which)} in {workdir}; the kept steps "
                                f"are {sorted(kept)}")
      state, _ = ckpts.restore(abstract, dp.replicated, int(which), check=True)
      return state.params, int(which)
    if ckpts.latest_step() is None:
      raise FileNotFoundError(f"no checkpoint in {workdir}")
    state, _ = ckpts.restore(abstract, dp.replicated, check=True)
    return state.params, int(jax.device_get(state.step))
  finally:
    for path in ckpts.unverified:
      warnings.warn(RunNote(f"note: checkpoint {path} was written before checkpoints carried "
                            "checksums: it is loaded unverified"), stacklevel=3)
    ckpts.close()


@dataclasses.dataclass
class Run:
  """A trained run loaded back.

  Attributes:
    task: the experiment's task, with the run's artifacts (vocabularies) loaded.
    params: the parameters, on the host (a fitted run's: its model, task.FittedTask).
    step: the step they come from (0 for a fitted model).
    config: the run's Config.
    workdir: the run's directory.
    checkpoint: 'best', 'latest' or a step number, as asked.
  """
  task: Task
  params: Any
  step: int
  config: Config
  workdir: str
  checkpoint: str


def load_run(workdir: str, checkpoint: str = "best", data_dir: str | None = None, *,
             experiment: str | None = None, command: str | None = None) -> Run:
  """Loads a trained run for inference: task (with its saved artifacts), parameters and step.

  Args:
    workdir: the run's directory (its --workdir).
    checkpoint: 'best' (the best dev checkpoint, else the latest), 'latest', or the step of a
      kept checkpoint ('175').
    data_dir: where the run's data lives now, if it moved (only read when an artifact is missing).
    experiment: the experiment the caller needs; a run of another one is refused.
    command: names the caller in that refusal (default: `predict <experiment>`).

  Raises:
    WrongExperimentError: the run belongs to another experiment than `experiment`.
    CheckpointDamagedError: the checkpoint asked for failed verification or cannot be read.
  """
  if experiment is not None:
    workdir_lib.check_experiment(workdir, experiment, command or f"predict {experiment}")
  config = load_config(workdir)
  if data_dir is not None:
    config.data_dir = data_dir
  task = make_task(config)
  task.load_artifacts(workdir)
  params, step = restore_params(task, config, workdir, checkpoint)
  if not isinstance(task, FittedTask):
    params = jax.device_get(params)
  return Run(task, params, step, config, workdir, checkpoint)


def load_init_from(workdir: str, experiment: str, checkpoint: str, train_command: str, *,
                   task_class: type, kind: str, vocab: Any) -> Run:
  """The pretraining run a `model.init_from` setting names, loaded for its parameters (also while
  the caller's `init` is being traced: the checkpoint is read at once), after checking that it is
  a run of `task_class` whose vocabulary's tokens are `vocab`'s.

  Args:
    workdir: the setting's value.
    experiment: the experiment the run must belong to.
    checkpoint: 'best', 'latest' or a step.
    train_command: how to train one, for the message of a missing directory.
    task_class: the task class a pretraining run of the kind has.
    kind: what the messages call such a run, e.g. 'a pretraining run (transformer_mlm)'.
    vocab: the caller's vocabulary (with `tokens`).

  Raises:
    ValueError: naming model.init_from and what is wrong (no directory, another kind of run,
      another vocabulary).
    WrongExperimentError: the run belongs to another experiment.
  """
  if not os.path.isdir(workdir):
    raise ValueError(f"model.init_from: {workdir} is not a directory; train it first with "
                     f"{train_command}")
  with jax.ensure_compile_time_eval():
    run = load_run(workdir, checkpoint, experiment=experiment,
                   command=f"train {experiment} --model.init_from")
  if not isinstance(run.task, task_class):
    raise ValueError(f"model.init_from: {workdir} is a {run.config.model_name} run, not {kind}")
  if run.task.vocab.tokens != vocab.tokens:
    raise ValueError(f"model.init_from: {workdir} was pretrained with another vocabulary "
                     f"({len(run.task.vocab)} tokens, this run's has {len(vocab)}); pretrain "
                     f"with the same data options")
  return run


def evaluate_run(workdir: str, split: str = "test", checkpoint: str = "best",
                 data_dir: str | None = None) -> dict[str, Any]:
  """Evaluates a trained run's best (latest, or a step's) parameters on `split` ('dev' or 'test'):
  its metrics, and the signatures of those that have one (Task.metric_signatures)."""
  run = load_run(workdir, checkpoint, data_dir)
  metrics = trainer.evaluate(run.task, run.params, split)
  return {"experiment": run.config.experiment, "model": run.config.model_name, "split": split,
          "checkpoint": checkpoint, "step": run.step, "metrics": metrics,
          "signatures": run.task.metric_signatures(split)}
