"""Training across processes with jax.distributed, on this machine: two processes on 127.0.0.1
with two CPU devices each train the toy run (tests/experiments/engine_toy.py) that one process with
the four devices of tests/conftest.py trains in this process.

Each two-process start runs `python -m experiments train toy` twice, as process 0 and process 1,
with a free loopback port, a shared persistent compilation cache and this process's matmul
precision; every subprocess has a timeout. `pytest -k multihost` selects these tests.

Exactness: the two layouts compute the same sums, but the gradient all-reduce adds the four
devices' parts in another order (within each process first, then across them with gloo), so their
numbers may differ in the last bits: losses and parameters are compared within a relative 1e-5.
Two runs of the same two-process layout (one interrupted and resumed) agree bit for bit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import engine_toy
from experiments import cli
from experiments import config as config_lib
from experiments import distributed
from experiments import heartbeats
from experiments import metrics_log
from experiments import runs
from experiments import trainer
from experiments.checkpoints import Checkpoints
from experiments.console import ListConsole

engine_toy.enable_compilation_cache()

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TIMEOUT_S = 90.0  # per start of both processes; generous for a loaded 2-core machine
HEARTBEAT_S = 4.0
RTOL = 1e-5
# 2 epochs of 5 steps of 12 examples; logs every 2 steps, checkpoints every 3 and at epoch ends.
OVERRIDES = ("--train.num_epochs=2", "--train.log_every=2", "--train.checkpoint_every=3",
             "--train.progress_bar=False")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _environment() -> dict[str, str]:
  flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
           if not f.startswith("--xla_force_host_platform_device_count")]
  return dict(
      os.environ,
      XLA_FLAGS=" ".join(flags + ["--xla_force_host_platform_device_count=2"]),
      JAX_PLATFORMS="cpu",
      PYTHONPATH=os.pathsep.join(p for p in (HERE, ROOT, os.environ.get("PYTHONPATH")) if p),
      PYTHONUNBUFFERED="1",
      JAX_DEFAULT_MATMUL_PRECISION=str(jax.config.jax_default_matmul_precision),
      JAX_COMPILATION_CACHE_DIR=str(jax.config.jax_compilation_cache_dir),
      JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")


def _train_argv(workdir: str, extra=()) -> list[str]:
  return [sys.executable, "-m", "experiments", "--import", "engine_toy", "train", "toy",
          "--workdir", workdir, *OVERRIDES, *extra]


def _start_both(workdir, tmp_path, extra=(), name="start") -> list[tuple[int, str]]:
  """Runs the toy training as processes 0 and 1; returns their (exit status, output)."""
  port = _free_port()
  procs, logs = [], []
  for process_id in range(2):
    log = tmp_path / f"{name}-{process_id}.log"
    logs.append(log)
    argv = _train_argv(str(workdir), extra) + [
        "--coordinator-address", f"127.0.0.1:{port}", "--num-processes", "2",
        "--process-id", str(process_id), "--heartbeat-timeout", str(HEARTBEAT_S),
        "--init-timeout", "60"]
    with open(log, "w", encoding="utf-8") as out:
      procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    env=_environment(), cwd=str(tmp_path)))
  deadline = time.monotonic() + TIMEOUT_S
  try:
    for proc in procs:
      proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
        proc.wait()
  outputs = [log.read_text(encoding="utf-8") for log in logs]
  assert all(proc.returncode is not None for proc in procs), outputs
  return [(proc.returncode, out) for proc, out in zip(procs, outputs)]


def _records(workdir) -> list[dict]:
  path = os.path.join(os.fspath(workdir), metrics_log.METRICS_FILE)
  return [{k: v for k, v in r.items() if k != "time"} for r in metrics_log.read_metrics(path)]


def _config(extra=()) -> config_lib.Config:
  return config_lib.override(engine_toy.EXPERIMENT.config("mlp"), [*OVERRIDES, *extra])


def _params(workdir, which="latest"):
  cfg = _config()
  params, step = runs.restore_params(engine_toy.ToyTask(cfg), cfg, os.fspath(workdir), which)
  return jax.device_get(params), step


def _assert_params(expected, actual, rtol: float) -> None:
  want = jax.tree_util.tree_leaves_with_path(expected)
  for (path, a), b in zip(want, jax.tree.leaves(actual)):
    if rtol:
      np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-7, err_msg=jax.tree_util.keystr(path))
    else:
      np.testing.assert_array_equal(b, a, err_msg=jax.tree_util.keystr(path))


def _assert_records(expected, actual, rtol: float) -> None:
  assert [(r["step"], r["split"], sorted(r)) for r in actual] == \
      [(r["step"], r["split"], sorted(r)) for r in expected]
  for want, have in zip(expected, actual):
    numbers = {k: v for k, v in want.items() if k != "split"}
    assert {k: have[k] for k in numbers} == pytest.approx(numbers, rel=rtol, abs=1e-7), (want, have)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
  """The toy run in this process, on four devices: the reference."""
  workdir = tmp_path_factory.mktemp("one-process")
  cfg = _config()
  return trainer.train(engine_toy.ToyTask(cfg), cfg, str(workdir))


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
  """The same run as two processes of two devices each: (workdir, [(status, output)] * 2)."""
  tmp_path = tmp_path_factory.mktemp("two-processes")
  workdir = tmp_path / "run"
  ends = _start_both(workdir, tmp_path)
  assert [status for status, _ in ends] == [0, 0], "\n-----\n".join(out for _, out in ends)
  return workdir, ends


def test_multihost_two_processes_train_as_one_process_with_four_devices(one_process,
                                                                        two_processes):
  workdir, ((_, out0), (_, out1)) = two_processes
  # Process 0 prints and writes the run's files, once; process 1 says nothing of the training.
  assert re.search(r"^\[test \] step 10 ", out0, re.M) and "Test (best parameters)" in out0
  assert not re.search(r"^\[(train|dev|test)", out1, re.M), out1
  records = _records(workdir)
  _assert_records(_records(one_process.workdir), records, RTOL)
  assert [r["split"] for r in records].count("test") == 1
  with open(workdir / metrics_log.RESULTS_FILE, encoding="utf-8") as f:
    results = json.load(f)
  assert results["test"] == pytest.approx(one_process.results["test"], rel=RTOL)
  assert results["best"]["step"] == one_process.results["best"]["step"]
  assert results["machine"]["process_count"] == 2 and results["machine"]["device_count"] == 4
  assert results["machine"]["local_device_count"] == 2
  # Every process took part in the Orbax saves; the checkpoints hold the whole state.
  latest, step = _params(workdir)
  assert step == 10
  _assert_params(jax.device_get(one_process.state.params), latest, RTOL)
  best, best_step = _params(workdir, "best")
  assert best_step == results["best"]["step"]
  ckpts = Checkpoints(str(workdir))
  try:
    assert ckpts.latest.all_steps() == [9, 10]
    assert ckpts.read_meta(10)["topology"] == {"process_count": 2, "device_count": 4,
                                               "local_device_count": 2}
  finally:
    ckpts.close()


def test_multihost_stops_together_and_a_dead_process_is_named_and_the_run_resumes(two_processes,
                                                                                 tmp_path):
  reference, _ = two_processes
  workdir = tmp_path / "run"
  # 1. SIGTERM reaches process 1 alone, while it draws batch 3 (during step 2): both processes
  # agree to stop after the same step, save it together and exit with 128 + 15.
  ends = _start_both(workdir, tmp_path, ["--data.signal_at_batch=3", "--data.fault_process=1"],
                     "sigterm")
  assert [status for status, _ in ends] == [143, 143], ends
  stopped = re.findall(r"^Stopped by SIGTERM at step (\d+); a checkpoint was saved", ends[0][1],
                       re.M)
  assert len(stopped) == 1 and 2 <= int(stopped[0]) <= 4, ends[0][1]
  stop_step = int(stopped[0])
  assert _params(workdir)[1] == stop_step

  # 2. Process 1 is killed (SIGKILL) while it draws batch 7 (during step 6): process 0 stops
  # within the heartbeat timeout, naming it and the last complete checkpoint.
  started = time.monotonic()
  ends = _start_both(workdir, tmp_path, ["--data.kill_at_batch=7", "--data.fault_process=1"], "kill")
  assert ends[1][0] == -9, ends[1][1]
  status0, out0 = ends[0]
  assert status0 == distributed.PEER_FAILURE_STATUS, out0
  message = re.search(r"^error: process 1 of 2 sent no heartbeat for 4 s \(--heartbeat-timeout\): "
                      r"it failed, died or hangs \(see its output\)\. Process 0 stops too\. The "
                      r"last complete "
                      r"checkpoint, step (\d+) in (.*), is good: start every process again with "
                      r"the same command to resume from it\.$", out0, re.M)
  assert message, out0
  assert f"Resuming {workdir} from step {stop_step}" in out0
  kept = int(message.group(1))
  assert message.group(2) == str(workdir / "checkpoints")
  assert stop_step <= kept <= 6
  assert time.monotonic() - started < TIMEOUT_S

  # 3. Both start again: they resume from that checkpoint and end bit for bit where the
  # uninterrupted two-process run ended (same layout, same order of every sum).
  ends = _start_both(workdir, tmp_path, name="resume")
  assert [status for status, _ in ends] == [0, 0], ends
  assert f"Resuming {workdir} from step {kept}" in ends[0][1]
  _assert_params(_params(reference)[0], _params(workdir)[0], rtol=0)
  _assert_params(_params(reference, "best")[0], _params(workdir, "best")[0], rtol=0)
  assert _records(workdir) == _records(reference)


def test_multihost_resume_with_another_process_count_is_refused(two_processes, tmp_path):
  reference, _ = two_processes
  workdir = tmp_path / "copy"
  shutil.copytree(reference, workdir)
  before = sorted(os.listdir(workdir))
  cfg = _config()
  with pytest.raises(distributed.TopologyMismatchError,
                     match=r"checkpoint .*/checkpoints/10 was written by 2 processes \(4 devices\), "
                     r"but this run has 1 \(4 devices\)\. Resume it with --num-processes 2, or "
                     r"train afresh in a new --workdir"):
    trainer.train(engine_toy.ToyTask(cfg), cfg, str(workdir))
  assert sorted(os.listdir(workdir)) == before
  console = ListConsole()
  assert cli.main(["--import", "engine_toy", "train", "toy", "--workdir", str(workdir)],
                  console) == 1
  assert "written by 2 processes" in console.notes[-1]


def test_multihost_unreachable_coordinator_fails_fast_naming_it(tmp_path):
  address = f"127.0.0.1:{_free_port()}"  # nothing listens there
  console = ListConsole()
  started = time.monotonic()
  status = cli.main(["--import", "engine_toy", "train", "toy", "--workdir", str(tmp_path / "run"),
                     "--coordinator-address", address, "--num-processes", "2", "--process-id",
                     "1", "--init-timeout", "1.5"], console)
  assert time.monotonic() - started < 15
  assert status == 1
  assert re.fullmatch(
      rf"error: the coordinator at {re.escape(address)} could not be reached within "
      r"--init-timeout 1\.5 s \(.*\)\. Start process 0 with the same --coordinator-address, check "
      r"the host name and port, and that no firewall blocks it", console.notes[-1]), console.notes
  assert not jax.distributed.is_initialized()
  assert not os.path.exists(tmp_path / "run")


def test_multihost_a_process_waiting_for_the_others_stops_after_the_init_timeout(tmp_path):
  # Process 0 serves the coordinator, but process 1 never comes.
  address = f"127.0.0.1:{_free_port()}"
  argv = _train_argv(str(tmp_path / "run")) + [
      "--coordinator-address", address, "--num-processes", "2", "--process-id", "0",
      "--init-timeout", "2"]
  done = subprocess.run(argv, env=_environment(), cwd=str(tmp_path), capture_output=True,
                        text=True, timeout=TIMEOUT_S, check=False)
  assert done.returncode == distributed.PEER_FAILURE_STATUS, done.stderr
  assert (f"error: not all 2 processes joined the coordinator at {address} within --init-timeout "
          "2 s; start every process (--process-id 0 .. N-1) with the same --coordinator-address "
          "and --num-processes") in done.stderr.splitlines()
  assert not os.path.exists(tmp_path / "run" / "checkpoints")


@pytest.mark.parametrize("flags, env, message", [
    (["--num-processes", "2", "--process-id", "0"], {},
     r"missing: --coordinator-address\. On a cluster"),
    (["--coordinator-address", "10.1.2.3:8476"], {"JAX_PROCESS_ID": "1"},
     r"missing: --num-processes\. On a cluster"),
    (["--coordinator-address", "10.1.2.3"], {"JAX_NUM_PROCESSES": "3", "JAX_PROCESS_ID": "1"},
     r"--coordinator-address must be HOST:PORT with a port in 1\.\.65535, got '10\.1\.2\.3'"),
    (["--coordinator-address", "h:1", "--num-processes", "3", "--process-id", "3"], {},
     r"--process-id must lie in \[0, 3\) for --num-processes 3, got 3"),
    ([], {"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "two", "JAX_PROCESS_ID": "0"},
     r"\$JAX_NUM_PROCESSES must be an integer \(it stands for --num-processes\), got 'two'"),
    (["--distributed", "--heartbeat-timeout", "0"], {},
     r"--heartbeat-timeout must be a positive number of seconds, got 0\.0"),
])
def test_multihost_bad_settings_name_the_flag(flags, env, message, monkeypatch, capsys):
  for name in (distributed.ENV_ADDRESS, distributed.ENV_NUM_PROCESSES, distributed.ENV_PROCESS_ID):
    monkeypatch.delenv(name, raising=False)
  for name, value in env.items():
    monkeypatch.setenv(name, value)
  with pytest.raises(SystemExit) as exit_info:
    cli.main(["--import", "engine_toy", "train", "toy", *flags], ListConsole())
  assert exit_info.value.code == 2
  assert re.search(message, capsys.readouterr().err)


def test_multihost_settings_from_flags_and_environment():
  parser = cli.build_parser({})
  args = parser.parse_args(["train", "toy", "--process-id", "1", "--init-timeout", "7"])
  env = {"JAX_COORDINATOR_ADDRESS": "10.1.2.3:8476", "JAX_NUM_PROCESSES": "3",
         "JAX_PROCESS_ID": "2"}
  assert distributed.options_from_args(args, env) == distributed.Options(
      "10.1.2.3:8476", 3, 1, detect=False, init_timeout_s=7.0,
      heartbeat_timeout_s=distributed.DEFAULT_HEARTBEAT_TIMEOUT_S)
  assert distributed.options_from_args(parser.parse_args(["train", "toy"]), {}) is None
  detect = distributed.options_from_args(parser.parse_args(["train", "toy", "--distributed"]), {})
  assert detect == distributed.Options(None, None, None, detect=True)


def test_multihost_silent_peers_are_those_whose_beat_stood_still():
  seen = {1: (None, 0.0), 2: (None, 0.0), 3: (None, 0.0)}
  assert heartbeats.silent_peers({1: "1", 2: "1"}, seen, now=1.0, timeout=2.5) == []
  assert seen == {1: ("1", 1.0), 2: ("1", 1.0), 3: (None, 0.0)}
  # Process 3 never beat: silent once the timeout has passed since the watch began.
  assert heartbeats.silent_peers({1: "2", 2: "1"}, seen, now=2.9, timeout=2.5) == [3]
  # Process 2's beat stood still for 3.3 s; process 1 finished and is no longer watched.
  assert heartbeats.silent_peers({1: heartbeats.FINISHED, 2: "1", 3: "1"}, seen, now=4.3,
                                 timeout=2.5) == [2]
  assert heartbeats.silent_peers({1: heartbeats.FINISHED, 2: "2", 3: "2"}, seen, now=30.0,
                                 timeout=2.5) == []
