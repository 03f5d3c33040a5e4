"""Heartbeats between the processes of a multi-process run, so that a dead one is named.

When one process of a `jax.distributed` run dies, the others wait for it inside their next
collective, which never returns; JAX itself ends them only after its own heartbeat timeout, with a
C++ abort. Here every process runs a daemon thread that, every `interval` seconds, bumps its own
counter in JAX's coordination key-value store and reads everyone's with one call. A peer whose
counter has not moved for `timeout` seconds (and that has not said it finished) is taken for dead:
the watching process stops with a message naming it. JAX's timeout is set longer (see
experiments/distributed.py), so this message comes first.

The thread needs only the coordination client, never the main thread: it works while the main
thread is blocked in a collective, which is exactly when it is needed. Process 0 hosts the
coordinator; when it dies the store is gone and JAX ends the other processes itself at once
("Terminating process because the JAX distributed service detected fatal errors").
"""

from __future__ import annotations

import atexit
import threading
import time
from typing import Any, Callable

PREFIX = "attention_zoo/heartbeat/"
FINISHED = "finished"


def jax_client() -> Any:
  """JAX's coordination client (orbax.checkpoint.multihost reaches it the same way)."""
  from jax._src import distributed  # pylint: disable=g-import-not-at-top
  client = distributed.global_state.client
  if client is None:
    raise RuntimeError("jax.distributed is not initialized")
  return client


def silent_peers(beats: dict[int, str], seen: dict[int, tuple[str | None, float]], now: float,
                 timeout: float) -> list[int]:
  """The peers that have neither finished nor changed their beat for more than `timeout` seconds.

  Args:
    beats: process id -> its latest value in the store (a counter, or FINISHED); absent before
      its first beat.
    seen: process id -> (the value last seen, when it was first seen), for every peer watched;
      updated in place.
    now: the current monotonic time, in seconds.
    timeout: seconds of silence that mean dead.
  """
  silent = []
  for peer, (last_value, since) in sorted(seen.items()):
    value = beats.get(peer)
    if value == FINISHED:
      continue
    if value != last_value:
      seen[peer] = (value, now)
    elif now - since > timeout:
      silent.append(peer)
  return silent


class PeerWatchdog:
  """Heartbeats of this process and the watch over its peers (a daemon thread).

  Args:
    process_id: this process.
    num_processes: how many there are.
    timeout: seconds without a heartbeat after which a peer counts as dead.
    stop: called with the message when a peer is dead or the coordinator is lost; it must end
      the process (the main thread may be stuck in a collective with the dead peer).
    coordinator: the coordinator's address, for the message when it is lost.
    client: the coordination client (default: JAX's).

  Attributes:
    note: called for a sentence to append to the message (the last good checkpoint), or None.
  """

  def __init__(self, process_id: int, num_processes: int, timeout: float,
               stop: Callable[[str], None], coordinator: str = "the coordinator",
               client: Any = None):
    self.process_id, self.num_processes, self.timeout = process_id, num_processes, timeout
    self.interval = min(max(timeout / 5, 0.05), 5.0)
    self.coordinator = coordinator
    self.note: Callable[[], str] | None = None
    self._stop_process = stop
    self._client = client if client is not None else jax_client()
    self._done = threading.Event()
    self._finished = False
    self._count = 0
    self._lock = threading.Lock()  # a beat in flight never overwrites FINISHED
    self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)

  def start(self) -> None:
    self._beat()
    self._thread.start()
    # Before JAX's own exit handler (atexit runs the last registered first): a process that has
    # returned from its work no longer beats, so one that failed alone is noticed by the others
    # while it waits for them in JAX's shutdown barrier.
    atexit.register(self.close)

  def mark_finished(self) -> None:
    """Tells the peers this process ended its work normally; they stop watching it."""
    with self._lock:
      self._finished = True
      self._client.key_value_set(self._key(self.process_id), FINISHED, allow_overwrite=True)

  def close(self) -> None:
    self._done.set()
    if self._thread.is_alive():
      self._thread.join(timeout=self.interval + 5)

  def _key(self, process_id: int) -> str:
    return f"{PREFIX}{process_id}"

  def _beat(self) -> None:
    with self._lock:
      if self._finished:
        return
      self._count += 1
      self._client.key_value_set(self._key(self.process_id), str(self._count),
                                 allow_overwrite=True)

  def _read(self) -> dict[int, str]:
    beats = {}
    for key, value in self._client.key_value_dir_get(PREFIX):
      beats[int(key.rsplit("/", 1)[-1])] = value
    return beats

  def _run(self) -> None:
    started = time.monotonic()
    peers = [p for p in range(self.num_processes) if p != self.process_id]
    seen: dict[int, tuple[str | None, float]] = {p: (None, started) for p in peers}
    while not self._done.wait(self.interval):
      try:
        self._beat()
        beats = self._read()
      except Exception as e:  # pylint: disable=broad-except
        if self._done.is_set():
          return
        self._fail(f"process {self.process_id} lost the coordinator at {self.coordinator} "
                   f"(process 0): {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return
      dead = silent_peers(beats, seen, time.monotonic(), self.timeout)
      if dead and not self._done.is_set():
        names = ", ".join(map(str, dead))
        self._fail(f"process{'es' if len(dead) > 1 else ''} {names} of {self.num_processes} sent "
                   f"no heartbeat for {self.timeout:g} s (--heartbeat-timeout): it failed, died or "
                   f"hangs (see its output). Process {self.process_id} stops too.")
        return

  def _fail(self, message: str) -> None:
    if self.note is not None:
      try:
        message = f"{message} {self.note()}"
      except Exception:  # pylint: disable=broad-except
        pass
    self._stop_process(message)
