"""Interrupted training, restarted with the same command, ends exactly as an uninterrupted run.

One training command (`python -m experiments train toy ...`, the engine's toy task, 20 steps) runs
in a subprocess and is interrupted three times, each time restarted with the very same command:

  1. SIGKILL while two checkpoints are written but not committed: the latest one of step 4 and the
     best one of step 5 (the first dev evaluation);
  2. SIGKILL at a random moment (a seeded random logged step, then a random delay);
  3. SIGTERM at a random moment: the run saves, says where it stopped and exits with 143;
then a last start runs to the end. Its parameters (last and best), metrics.jsonl records and
results equal the uninterrupted run's bit for bit. After every interruption the latest committed
checkpoint loads, the uncommitted ones are never used (the next start resumes from the committed
one) and, by the end, none is left on disk.

A second, in-process test covers Ctrl-C: once, it stops like SIGTERM (checkpoint, status 130 on
the command line); twice, it stops at once.

The save window is hit on purpose with tests/reliability/commit_gate.py, imported into the
subprocess with `--import commit_gate`: while a gate file lists a checkpoint, Orbax's final rename
of its temporary directory waits, so the kill lands with the checkpoint written but not committed.
The subprocesses share a persistent compilation cache (JAX_COMPILATION_CACHE_DIR) with this
process and its matmul precision, so they run the very programs the reference run ran, loaded
instead of compiled again.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import jax
import pytest

import commit_gate
import engine_toy
import toy_runs
from experiments import metrics_log
from experiments import runs
from experiments import trainer
from experiments.checkpoints import BEST_DIR
from experiments.checkpoints import LATEST_DIR
from experiments.checkpoints import Checkpoints

SEED = 8  # chooses the random kill moments
TIMEOUT_S = 180.0  # per start; generous for a loaded machine
TMP_SUFFIX = ".orbax-checkpoint-tmp"


def _environment(gate: str) -> dict[str, str]:
  paths = [toy_runs.TOY_DIR, toy_runs.HERE, os.environ.get("PYTHONPATH", "")]
  return dict(
      os.environ,  # XLA_FLAGS (4 fake devices) and JAX_PLATFORMS as in this process
      PYTHONPATH=os.pathsep.join(p for p in paths if p),
      PYTHONUNBUFFERED="1",
      JAX_PLATFORMS="cpu",
      JAX_DEFAULT_MATMUL_PRECISION=str(jax.config.jax_default_matmul_precision),
      JAX_COMPILATION_CACHE_DIR=str(jax.config.jax_compilation_cache_dir),
      JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
      RELIABILITY_COMMIT_GATE=gate)


class Start:
  """One start of the training command in a subprocess; its output is collected line by line."""

  def __init__(self, argv: list[str], env: dict[str, str], cwd: str, resume: int | None):
    self.expected_resume = resume  # the step the start should resume from (None: from scratch)
    self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env=env, cwd=cwd)
    self.lines: list[str] = []
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self) -> None:
    for line in self.proc.stdout:
      self.lines.append(line.rstrip("\n"))

  @property
  def output(self) -> str:
    return "\n".join(self.lines)

  def logged(self, step: int) -> bool:
    return any(line.startswith(f"[train] step {step} ") for line in list(self.lines))

  def wait_for(self, condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
      if self.proc.poll() is not None:
        self._reader.join()
        raise AssertionError(f"the run ended with status {self.proc.returncode} before {what}:\n"
                             f"{self.output}")
      if time.monotonic() > deadline:
        self.proc.kill()
        raise AssertionError(f"timed out waiting until {what}:\n{self.output}")
      time.sleep(0.002)

  def finish(self) -> int:
    try:
      self.proc.wait(timeout=TIMEOUT_S)
    finally:
      if self.proc.poll() is None:
        self.proc.kill()
    self._reader.join()
    return self.proc.returncode

  def send(self, signum: int) -> int:
    self.proc.send_signal(signum)
    return self.finish()

  def matches(self, pattern: str) -> list[int]:
    """The integers captured by `pattern` in the lines of the output."""
    found = (re.search(pattern, line) for line in self.lines)
    return [int(m.group(1)) for m in found if m]

  def check_resumed(self) -> None:
    resumed = self.matches(r"^Resuming .* from step (\d+)")
    assert resumed == ([] if self.expected_resume is None else [self.expected_resume]), self.output


def _tmp_dirs(workdir: str) -> list[str]:
  return sorted(os.path.join(kind, name) for kind in (LATEST_DIR, BEST_DIR)
                if os.path.isdir(os.path.join(workdir, kind))
                for name in os.listdir(os.path.join(workdir, kind)) if TMP_SUFFIX in name)


def _committed(workdir: str) -> tuple[int | None, int | None]:
  ckpts = Checkpoints(workdir, best_metric="dev/accuracy", best_mode="max")
  try:
    return ckpts.latest_step(), ckpts.best_step()
  finally:
    ckpts.close()


def _kill_inside_saves(start: Start, gate: str, entries: list[str]) -> list[str]:
  """Holds the commits of `entries` ('best/5') open, SIGKILLs the run there, returns their
  temporary directories (still on disk, never committed)."""
  with open(gate, "w", encoding="utf-8") as f:
    f.write(" ".join(entries))
  markers = [commit_gate.held_marker(gate, entry) for entry in entries]
  start.wait_for(lambda: all(map(os.path.exists, markers)), f"{entries} are being saved")
  assert start.send(signal.SIGKILL) == -signal.SIGKILL, start.output
  held = []
  for marker in markers:
    with open(marker, encoding="utf-8") as f:
      held.append(f.read())
    os.remove(marker)
  os.remove(gate)
  for path in held:
    assert os.path.isdir(path), f"the kill was meant to land inside the save of {path}"
  return held


def _signal_after_random_step(start: Start, last: int, signum: int, rng: random.Random) -> None:
  """Sends `signum` a random 0-50 ms after a random logged step in (resume step, last]."""
  after = start.expected_resume or 0
  steps = [s for s in toy_runs.LOG_STEPS if after < s <= last]
  step = rng.choice(steps or [s for s in toy_runs.LOG_STEPS if s > after][:1])
  start.wait_for(lambda: start.logged(step), f"step {step} is logged")
  time.sleep(rng.uniform(0, 0.05))
  start.proc.send_signal(signum)


def _check_latest_loads(workdir: str) -> int | None:
  """The latest committed step, after checking that its parameters load."""
  latest, _ = _committed(workdir)
  if latest is not None:
    params, step = toy_runs.restore(workdir, "latest")
    assert step == latest and jax.tree.leaves(params)
  return latest


def test_killed_and_stopped_runs_resume_to_the_uninterrupted_result(reference_run, tmp_path):
  rng = random.Random(SEED)
  workdir, gate = str(tmp_path / "run"), str(tmp_path / "gate")
  argv = [sys.executable, "-m", "experiments", "--import", "engine_toy", "--import", "commit_gate",
          "train", "toy", "--workdir", workdir]
  for override in toy_runs.OVERRIDES:
    argv += [override]
  env = _environment(gate)

  def start(resume: int | None) -> Start:
    return Start(argv, env, str(tmp_path), resume)

  # 1. SIGKILL while the latest checkpoint of step 4 and the best one of step 5 (the first dev
  # evaluation) are both written but not committed: the next start resumes from step 2.
  run = start(None)
  held = _kill_inside_saves(run, gate, [f"{LATEST_DIR}/4", f"{BEST_DIR}/5"])
  run.check_resumed()
  assert sorted(os.path.relpath(p, workdir) for p in held) == _tmp_dirs(workdir)
  assert _committed(workdir) == (2, None)
  resume = _check_latest_loads(workdir)

  # 2. SIGKILL at a random moment after a random early logged step.
  run = start(resume)
  _signal_after_random_step(run, 8, signal.SIGKILL, rng)
  assert run.finish() == -signal.SIGKILL, run.output
  run.check_resumed()
  resume = _check_latest_loads(workdir)

  # 3. SIGTERM at a random moment: a checkpoint of the step reached is saved, exit status 143.
  run = start(resume)
  _signal_after_random_step(run, 14, signal.SIGTERM, rng)
  assert run.finish() == 128 + signal.SIGTERM, run.output
  run.check_resumed()
  stopped = run.matches(r"^Stopped by SIGTERM at step (\d+)")
  assert len(stopped) == 1 and stopped[0] < toy_runs.TOTAL_STEPS, run.output
  assert _check_latest_loads(workdir) == stopped[0]
  assert not os.path.exists(os.path.join(workdir, metrics_log.RESULTS_FILE))

  # 4. The same command once more runs to the end.
  run = start(stopped[0])
  assert run.finish() == 0, run.output
  run.check_resumed()

  # Everything equals the uninterrupted run, and no uncommitted directory is left behind.
  assert toy_runs.records(workdir) == toy_runs.records(reference_run.workdir)
  params, step = toy_runs.restore(workdir, "latest")
  assert step == toy_runs.TOTAL_STEPS
  toy_runs.assert_same_params(reference_run.state.params, params)
  best_params, best_step = toy_runs.restore(workdir, "best")
  reference_best, reference_best_step = toy_runs.restore(reference_run.workdir, "best")
  assert best_step == reference_best_step
  toy_runs.assert_same_params(reference_best, best_params)
  with open(os.path.join(workdir, metrics_log.RESULTS_FILE), encoding="utf-8") as f:
    results = json.load(f)
  for key in ("test", "dev", "best", "steps", "test_params"):
    assert results[key] == reference_run.results[key], key
  assert _tmp_dirs(workdir) == []


class _CtrlCBatches(engine_toy.ToyBatches):
  """The toy's batches; drawing batch 6 (while step 5 runs) delivers a SIGINT, as Ctrl-C would."""

  pressed = False

  def __next__(self):
    # Once only: a prefetch that draws batch 6 again after the run stopped must not deliver a
    # second SIGINT to whatever the test process is doing then.
    if not self.pressed and self.epoch * self.per_epoch + self.position == 6:
      self.pressed = True
      signal.raise_signal(signal.SIGINT)
    return super().__next__()


class _CtrlCTask(engine_toy.ToyTask):

  def train_batches(self):
    tc = self.config.train
    return _CtrlCBatches(self.splits["train"], tc.batch_size, tc.seed, self.config.data)


def test_ctrl_c_saves_and_stops_and_twice_stops_at_once(tmp_path):
  cfg = runs.make_config("toy", "mlp", overrides=toy_runs.OVERRIDES)
  stopped = trainer.train(_CtrlCTask(cfg), cfg, str(tmp_path))
  assert stopped.interrupted == signal.SIGINT and 5 <= stopped.step < toy_runs.TOTAL_STEPS
  assert stopped.results is None  # the command line turns this into exit status 130
  assert _committed(str(tmp_path))[0] == stopped.step
  # A second Ctrl-C does not wait for the step to end.
  before = signal.getsignal(signal.SIGINT)
  with trainer.StopSignals() as stop:
    signal.raise_signal(signal.SIGINT)
    assert stop.received == signal.SIGINT
    with pytest.raises(KeyboardInterrupt):
      signal.raise_signal(signal.SIGINT)
  assert signal.getsignal(signal.SIGINT) is before


# The LSTM language model's pretraining (`train sentiment --model lstm_lm`), tiny, on the shipped
# IMDB sample: 40 steps of 64 windows of 8 tokens, a checkpoint every 10.
LM_OVERRIDES = ("--model.embed_dim=8", "--model.hidden_size=12", "--model.vocab_cap=500",
                "--model.window=8", "--data.max_len=8", "--train.batch_size=64",
                "--train.num_steps=40", "--train.log_every=10", "--train.checkpoint_every=10",
                "--optimizer.warmup_steps=5", "--train.progress_bar=False")


def test_a_killed_language_model_pretraining_resumes_to_the_uninterrupted_result(tmp_path):
  rng = random.Random(SEED)
  reference = runs.train_named("sentiment", "lstm_lm", workdir=str(tmp_path / "reference"),
                               overrides=list(LM_OVERRIDES))
  workdir = str(tmp_path / "run")
  argv = [sys.executable, "-m", "experiments", "train", "sentiment", "--model", "lstm_lm",
          "--workdir", workdir, *LM_OVERRIDES]
  run = Start(argv, _environment(str(tmp_path / "gate")), str(tmp_path), None)
  step = rng.choice([20, 30])  # a checkpoint (of step 10 or later) is committed by then
  run.wait_for(lambda: run.logged(step), f"step {step} is logged")
  time.sleep(rng.uniform(0, 0.05))
  assert run.send(signal.SIGKILL) == -signal.SIGKILL, run.output
  kept = _committed(workdir)[0]
  assert kept is not None and step - 10 <= kept < 40, run.output
  run = Start(argv, _environment(str(tmp_path / "gate")), str(tmp_path), kept)
  assert run.finish() == 0, run.output
  run.check_resumed()
  params = runs.load_run(workdir, "latest").params
  toy_runs.assert_same_params(reference.state.params, params)
  assert toy_runs.records(workdir)[-8:] == toy_runs.records(reference.workdir)[-8:]
  with open(os.path.join(workdir, metrics_log.RESULTS_FILE), encoding="utf-8") as f:
    results = json.load(f)
  for key in ("test", "dev", "best", "steps"):
    assert results[key] == reference.results[key], key
