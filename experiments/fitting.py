"""Runs whose model is fitted in one call, not trained by gradient steps (task.FittedTask).

`trainer.train` hands a FittedTask here (inside the same workdir lock, after the same experiment
check); `runs.load_run` loads its model back with `load_model`. Layout of such a run:

  config.json     the run's Config, as every run's
  <artifacts>     the task's vocabularies (Task.ARTIFACTS), as every run's
  model/model.pkl the fitted model, pickled (scikit-learn's and gensim's objects as they are)
  model/checksums.json   the size and sha256 of every file of model/ (checkpoints.write_manifest)
  results.json    dev and test metrics, the fit's record ('fit'), time, machine, config

The model is written into `model.part/` with its manifest, then renamed to `model/`, so a fit
killed at any point leaves the previous model (or none) and never a half-written one; rerunning
the command fits again (the fits are deterministic for a given config and seed). Before anything
is unpickled the files are checked against the manifest: a missing, cut-short or changed file is
refused with `CheckpointDamagedError` naming it. Pickles run code when loaded: load the runs you
or the project made, as you would run their code.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from typing import Any, Callable

import jax

from experiments import checkpoints
from experiments import config as config_lib
from experiments import metrics_log
from experiments import workdir as workdir_lib
from experiments.checkpoints import CheckpointDamagedError
from experiments.config import Config
from experiments.console import UsageError
from experiments.task import FittedTask

MODEL_DIR = "model"
MODEL_FILE = "model.pkl"
_PARTIAL_SUFFIX = ".part"


def model_folder(workdir: str) -> str:
  """Where a fitted run keeps its model (and the model's checksums.json)."""
  return os.path.join(workdir, MODEL_DIR)


def check_kind(workdir: str, fitted: bool, command: str) -> None:
  """Refuses to fit into a directory that holds a trained run's checkpoints, or to train by steps
  into one that holds a fitted model (the two would mix in one run).

  Raises:
    UsageError: naming the directory and what it holds.
  """
  if fitted:
    held = [name for name in (checkpoints.LATEST_DIR, checkpoints.BEST_DIR)
            if os.path.isdir(os.path.join(workdir, name))]
    if held:
      raise UsageError(f"{workdir} holds a run trained by gradient steps ({held[0]}/); `{command}` "
                       "fits its model without them: give it another --workdir")
  elif os.path.isdir(model_folder(workdir)):
    raise UsageError(f"{workdir} holds a fitted model ({MODEL_DIR}/); `{command}` trains by "
                     "gradient steps: give it another --workdir")


def save_model(model: Any, workdir: str) -> str:
  """Pickles `model` into workdir/model/ with its manifest, replacing an earlier model only once
  the new one is complete; returns the folder."""
  folder = model_folder(workdir)
  partial = folder + _PARTIAL_SUFFIX
  shutil.rmtree(partial, ignore_errors=True)  # left by a fit killed while saving
  os.makedirs(partial)
  with open(os.path.join(partial, MODEL_FILE), "wb") as f:
    pickle.dump(model, f, protocol=pickle.HIGHEST_PROTOCOL)
    f.flush()
    os.fsync(f.fileno())
  checkpoints.write_manifest(partial)
  if os.path.isdir(folder):
    shutil.rmtree(folder)
  os.replace(partial, folder)
  return folder


def load_model(workdir: str) -> Any:
  """The model a fitted run saved, after checking its files against their manifest.

  Raises:
    FileNotFoundError: the run has no model/ folder (it was never fitted to the end).
    CheckpointDamagedError: a file of model/ is missing, cut short or changed, or the manifest
      itself is missing or unreadable (the message names the file).
  """
  folder = model_folder(workdir)
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"{workdir} holds no fitted model ({MODEL_DIR}/ is missing): was its "
                            "training run to the end?")
  if not os.path.exists(os.path.join(folder, checkpoints.MANIFEST_FILE)):
    raise CheckpointDamagedError(f"the fitted model {folder} is damaged: its "
                                 f"{checkpoints.MANIFEST_FILE} is missing")
  verdict = checkpoints.verify(folder)
  if not verdict.usable:
    raise CheckpointDamagedError(f"the fitted model {folder} is damaged: {verdict.problem}")
  with open(os.path.join(folder, MODEL_FILE), "rb") as f:
    return pickle.load(f)


def fit_run(task: FittedTask, config: Config, workdir: str,
            say: Callable[[str], None]) -> dict[str, Any]:
  """Fits `task`'s model, saves it with the config and artifacts, evaluates dev and test and writes
  results.json (whose contents it returns). The caller holds the workdir's lock."""
  if jax.process_count() > 1:
    raise ValueError(f"{config.experiment} {config.model_name} is fitted in one process; start "
                     "it without the multi-process flags")
  started = time.time()
  os.makedirs(workdir, exist_ok=True)
  config_dict = config_lib.to_dict(config)
  say(f"Fitting {config.experiment} {config.model_name} in {workdir} (no gradient steps)")
  with open(os.path.join(workdir, workdir_lib.CONFIG_FILE), "w", encoding="utf-8") as f:
    json.dump(config_dict, f, indent=2)
    f.write("\n")
  task.save_artifacts(workdir)
  model, record = task.fit(say)
  save_model(model, workdir)
  dev = task.evaluate_model(model, "dev")
  test = task.evaluate_model(model, "test")
  elapsed = time.time() - started
  results = {
      "experiment": config.experiment, "model": config.model_name, "test": test, "dev": dev,
      "signatures": {}, "best": None, "test_params": "fitted", "steps": 0, "epochs": 0,
      "fit": record, "wall_time_s": round(elapsed, 3), "machine": metrics_log.machine_info(),
      "config": config_dict, "workdir": workdir,
      "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
  }
  metrics_log.write_results(workdir, results)
  shown = "  ".join(f"{k} {v:.4f}" for k, v in sorted(test.items()))
  say(f"Test (fitted model): {shown}  [{elapsed:.1f} s]")
  return results
