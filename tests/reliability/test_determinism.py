"""Runs are reproducible: the same seed gives the same run bit for bit on the CPU, another seed
gives another run.

`train.seed` drives the parameter initialisation, the dropout keys (folded with the step) and the
order of the training batches; nothing else in a run is random. (The kill test also shows that a
run in a fresh process, resumed several times, equals one trained in this process.)
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np

import toy_runs
from experiments import metrics_log


def _results(workdir):
  with open(os.path.join(workdir, metrics_log.RESULTS_FILE), encoding="utf-8") as f:
    return json.load(f)


def test_same_seed_gives_identical_metrics_and_parameters(reference_run, tmp_path):
  again = toy_runs.train(tmp_path)
  assert toy_runs.records(tmp_path) == toy_runs.records(reference_run.workdir)
  toy_runs.assert_same_params(reference_run.state.params, again.state.params)
  for key in ("test", "dev", "best"):
    assert _results(tmp_path)[key] == _results(reference_run.workdir)[key]


def test_another_seed_gives_other_metrics_and_parameters(reference_run, tmp_path):
  other = toy_runs.train(tmp_path, ["--train.seed=1"])
  ours = toy_runs.records(tmp_path)
  theirs = toy_runs.records(reference_run.workdir)
  assert [(r["step"], r["split"]) for r in ours] == [(r["step"], r["split"]) for r in theirs]
  # Every training record differs (another init, data order and dropout from the first step on).
  for a, b in zip(ours, theirs):
    if a["split"] == "train":
      assert a["loss"] != b["loss"], a["step"]
  for a, b in zip(jax.tree.leaves(jax.device_get(other.state.params)),
                  jax.tree.leaves(jax.device_get(reference_run.state.params))):
    assert not np.array_equal(a, b)
