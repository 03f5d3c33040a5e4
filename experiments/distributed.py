"""Training as one process per host: `jax.distributed` set up from flags, the environment or the
cluster, and the checks that keep a multi-process run honest.

    python -m experiments train sentiment --coordinator-address 10.0.0.1:1234 --num-processes 2 \\
        --process-id 0            # on the first host; --process-id 1 on the second
    srun python -m experiments train sentiment --distributed         # SLURM (or Open MPI, ...)

Nothing here runs unless asked: without these flags and variables a run is the single process it
always was. When asked, `initialize` calls `jax.distributed.initialize` once, before anything
touches a device; afterwards `jax.devices()` lists every process's devices, the engine's mesh spans
them all (experiments/parallel.py) and each process feeds its slice of every batch.

Failures are bounded in time and name what went wrong, because JAX's own answer to each is to
abort the process with a C++ stack trace after its (long) timeouts:
  * a coordinator that cannot be reached within --init-timeout: `CoordinatorUnreachableError`
    naming the address and the timeout, before JAX is asked to connect;
  * processes that never all join: the waiting ones stop after --init-timeout saying so;
  * a process that dies mid-run: the others stop after --heartbeat-timeout naming it
    (experiments/heartbeats.py);
  * a checkpoint written by another number of processes: `TopologyMismatchError` on resume.

The environment variables JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID stand for
the flags (a flag wins).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import sys
import threading
import time
from typing import Any, Callable, Mapping

import jax

from experiments import heartbeats

ENV_ADDRESS = "JAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"
DEFAULT_INIT_TIMEOUT_S = 300.0
DEFAULT_HEARTBEAT_TIMEOUT_S = 100.0
# Exit status of a process stopped because its peers never joined or one of them died.
PEER_FAILURE_STATUS = 1


class DistributedInitError(RuntimeError):
  """The processes of a multi-process run could not be connected."""


class CoordinatorUnreachableError(DistributedInitError):
  """No coordinator answered at the given address within the initialisation timeout."""


class TopologyMismatchError(ValueError):
  """A checkpoint was written by another number of processes than the run resuming it."""


@dataclasses.dataclass(frozen=True)
class Options:
  """How to join a multi-process run (None fields: JAX detects them from the cluster).

  Attributes:
    coordinator_address: 'host:port' of process 0's coordinator.
    num_processes: how many processes take part.
    process_id: this process's index in [0, num_processes).
    detect: let JAX's cluster detection (SLURM, Open MPI, Kubernetes, Cloud TPU) fill what is None.
    init_timeout_s: how long to wait for the coordinator and for every process to join.
    heartbeat_timeout_s: how long a silent process is waited for before the others stop.
  """
  coordinator_address: str | None
  num_processes: int | None
  process_id: int | None
  detect: bool = False
  init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S
  heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The flags of a multi-process run (see the module docstring)."""
  group = parser.add_argument_group(
      "several processes (one per host)",
      f"Give all three of the first flags (or ${ENV_ADDRESS}, ${ENV_NUM_PROCESSES}, "
      f"${ENV_PROCESS_ID}), or --distributed on a cluster JAX recognises. Without them the run is "
      "one process on this host's devices.")
  group.add_argument("--coordinator-address", metavar="HOST:PORT",
                     help="where process 0 serves the coordinator (every process gives the same)")
  group.add_argument("--num-processes", type=int, metavar="N", help="how many processes take part")
  group.add_argument("--process-id", type=int, metavar="I", help="this process, 0 .. N-1")
  group.add_argument("--distributed", action="store_true",
                     help="let JAX detect the cluster (SLURM, Open MPI, Kubernetes, Cloud TPU) for "
                     "whatever the flags above leave out")
  group.add_argument("--init-timeout", type=float, default=DEFAULT_INIT_TIMEOUT_S, metavar="S",
                     help="seconds to wait for the coordinator and for all processes to join "
                     "(default %(default)g)")
  group.add_argument("--heartbeat-timeout", type=float, default=DEFAULT_HEARTBEAT_TIMEOUT_S,
                     metavar="S", help="seconds without a heartbeat after which a process counts "
                     "as dead and the others stop (default %(default)g)")


def _int_setting(value: int | None, flag: str, env_name: str, environ: Mapping[str, str]
                 ) -> int | None:
  if value is not None:
    return value
  text = environ.get(env_name)
  if text is None or not text.strip():
    return None
  try:
    return int(text)
  except ValueError:
    raise ValueError(f"${env_name} must be an integer (it stands for {flag}), got "
                     f"{text!r}") from None


def options_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None
                      ) -> Options | None:
  """The multi-process settings of a command line, or None for a single-process run.

  Raises:
    ValueError: some but not all of address, count and id given (without --distributed), or one
      of them out of range; the message names the flag or variable.
  """
  environ = os.environ if environ is None else environ
  address = args.coordinator_address or environ.get(ENV_ADDRESS) or None
  count = _int_setting(args.num_processes, "--num-processes", ENV_NUM_PROCESSES, environ)
  process_id = _int_setting(args.process_id, "--process-id", ENV_PROCESS_ID, environ)
  given = {"--coordinator-address": address, "--num-processes": count, "--process-id": process_id}
  if not args.distributed and all(v is None for v in given.values()):
    return None
  missing = [flag for flag, value in given.items() if value is None]
  if missing and not args.distributed:
    raise ValueError(
        f"a multi-process run needs --coordinator-address, --num-processes and --process-id (or "
        f"${ENV_ADDRESS}, ${ENV_NUM_PROCESSES}, ${ENV_PROCESS_ID}); missing: {', '.join(missing)}. "
        "On a cluster JAX recognises (SLURM, Open MPI, ...), --distributed finds them")
  if address is not None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
      raise ValueError(f"--coordinator-address must be HOST:PORT with a port in 1..65535, got "
                       f"{address!r}")
  if count is not None and count < 1:
    raise ValueError(f"--num-processes must be at least 1, got {count}")
  if process_id is not None and (process_id < 0 or (count is not None and process_id >= count)):
    raise ValueError(f"--process-id must lie in [0, {count}) for --num-processes {count}, got "
                     f"{process_id}")
  for flag, seconds in (("--init-timeout", args.init_timeout),
                        ("--heartbeat-timeout", args.heartbeat_timeout)):
    if not seconds > 0:
      raise ValueError(f"{flag} must be a positive number of seconds, got {seconds}")
  return Options(address, count, process_id, detect=bool(args.distributed),
                 init_timeout_s=float(args.init_timeout),
                 heartbeat_timeout_s=float(args.heartbeat_timeout))


def wait_for_coordinator(address: str, timeout_s: float) -> None:
  """Returns once a TCP connection to `address` ('host:port') succeeds; retries until `timeout_s`.

  Raises:
    CoordinatorUnreachableError: nothing accepted a connection there within `timeout_s`.
  """
  host, _, port = address.rpartition(":")
  host = host.strip("[]")
  deadline = time.monotonic() + timeout_s
  last_error: OSError | None = None
  while True:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
      break
    try:
      with socket.create_connection((host, int(port)), timeout=min(remaining, 2.0)):
        return
    except OSError as e:
      last_error = e
      time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
  raise CoordinatorUnreachableError(
      f"the coordinator at {address} could not be reached within --init-timeout {timeout_s:g} s "
      f"({last_error or 'timed out'}). Start process 0 with the same --coordinator-address, check "
      "the host name and port, and that no firewall blocks it")


def _error_to_stderr(message: str) -> None:
  sys.stderr.write(f"error: {message}\n")
  sys.stderr.flush()


def _jax_timeout(seconds: float) -> int:
  """JAX's own timeout for one of ours: long enough that ours always fires first."""
  return int(2 * seconds) + 10


_watchdog: heartbeats.PeerWatchdog | None = None


def initialize(options: Options | None,
               report: Callable[[str], None] | None = None) -> None:
  """Joins the multi-process run `options` describes (None: nothing happens).

  Call it once per process, before anything touches a device. Besides `jax.distributed`, this
  starts the heartbeats by which a dead process is noticed (experiments/heartbeats.py) and turns
  off JAX's preemption service, whose SIGTERM handler would otherwise swallow the signal the
  training loop stops on.

  Args:
    options: from `options_from_args`.
    report: where a fatal message goes when this process must stop from a background thread
      (default: stderr); the process then exits with status 1.

  Raises:
    CoordinatorUnreachableError: the coordinator did not answer within the init timeout.
    DistributedInitError: JAX refused the settings (no cluster detected, port taken, ...).
  """
  global _watchdog
  if options is None:
    return
  if jax.distributed.is_initialized():
    raise DistributedInitError("jax.distributed is initialized already: call initialize once")

  report = report or _error_to_stderr

  def stop(message: str) -> None:
    """Ends this process at once: its main thread may be stuck in JAX, beyond any exception."""
    report(message)
    os._exit(PEER_FAILURE_STATUS)  # pylint: disable=protected-access

  timeout = options.init_timeout_s
  if options.coordinator_address and options.process_id not in (None, 0):
    wait_for_coordinator(options.coordinator_address, timeout)
  jax.config.update("jax_enable_preemption_service", False)
  where = options.coordinator_address or "the address JAX detected"
  count = f"{options.num_processes} " if options.num_processes else ""
  guard = threading.Timer(timeout, stop, args=(
      f"not all {count}processes joined the coordinator at {where} within --init-timeout "
      f"{timeout:g} s; start every process (--process-id 0 .. N-1) with the same "
      "--coordinator-address and --num-processes",))
  guard.daemon = True
  guard.start()
  try:
    jax.distributed.initialize(
        options.coordinator_address, options.num_processes, options.process_id,
        cluster_detection_method=None if options.detect else "deactivate",
        initialization_timeout=_jax_timeout(timeout),
        heartbeat_timeout_seconds=_jax_timeout(options.heartbeat_timeout_s))
  except (ValueError, RuntimeError) as e:
    hint = (" (--distributed found no cluster environment: give --coordinator-address, "
            "--num-processes and --process-id)" if options.detect else "")
    raise DistributedInitError(f"jax.distributed.initialize failed at {where}: {e}{hint}") from e
  finally:
    guard.cancel()
  check_local_devices()
  if jax.process_count() > 1:
    _watchdog = heartbeats.PeerWatchdog(
        jax.process_index(), jax.process_count(), options.heartbeat_timeout_s, stop,
        coordinator=options.coordinator_address or "the coordinator")
    _watchdog.start()


def check_local_devices() -> None:
  """Raises DistributedInitError unless every process has as many devices as this one (a batch
  is split evenly over processes and then over their devices)."""
  local = jax.local_device_count()
  counts: dict[int, int] = {}
  for device in jax.devices():
    counts[device.process_index] = counts.get(device.process_index, 0) + 1
  if set(counts.values()) != {local}:
    shown = ", ".join(f"process {p}: {n}" for p, n in sorted(counts.items()))
    raise DistributedInitError(f"every process must have the same number of devices, got {shown}")


def set_failure_note(note: Callable[[], str] | None) -> None:
  """What to add when this process stops because a peer died (e.g. the last good checkpoint)."""
  if _watchdog is not None:
    _watchdog.note = note


def mark_finished() -> None:
  """Tells the other processes that this one ended its work normally (it may now exit without
  their stopping); a no-op in a single-process run."""
  if _watchdog is not None:
    _watchdog.mark_finished()


def is_primary() -> bool:
  """Whether this process writes the run's files (metrics, config, plots): process 0."""
  return jax.process_index() == 0


def topology_meta() -> dict[str, int]:
  """The run's layout, kept in every checkpoint's metadata."""
  return {"process_count": jax.process_count(), "device_count": jax.device_count(),
          "local_device_count": jax.local_device_count()}


def check_topology(meta: Mapping[str, Any] | None, where: str) -> None:
  """Raises TopologyMismatchError when a checkpoint was written by another number of processes.

  The data position, the running sums and Orbax's layout are those of the processes that wrote
  the checkpoint; resuming with another count would not continue the same run, so it is refused
  rather than silently changed. Checkpoints written before the layout was recorded pass.

  Args:
    meta: the checkpoint's `topology_meta()` (None when it has none).
    where: names the checkpoint in the message.
  """
  if not meta:
    return
  saved, now = int(meta["process_count"]), jax.process_count()
  if saved != now:
    raise TopologyMismatchError(
        f"{where} was written by {saved} process{'es' if saved != 1 else ''} "
        f"({meta.get('device_count', '?')} devices), but this run has {now} "
        f"({jax.device_count()} devices). Resume it with --num-processes {saved}, or train "
        "afresh in a new --workdir")
