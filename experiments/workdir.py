"""Work directories: one training run at a time in each, and only the experiment they belong to.

`check_experiment` refuses a work directory whose config.json names another experiment (every
command that takes a --workdir calls it through `runs.load_run`, the command line or the trainer),
so a run is never opened by code that expects another kind of task.

The training lock (`WorkdirLock`) is what `train` takes before it writes anything:

`<workdir>/train.lock` is locked with `fcntl.flock` (exclusive, non-blocking) for as long as the
run lasts, and holds the holder's host, process id, command and start time so that a refused
second start can name it. flock rather than a file created with O_EXCL, because the kernel
releases a flock lock when its process ends in any way (SIGKILL, a crash, the OOM killer): a run
killed with -9 never leaves a lock that blocks the next start, and no process id has to be judged
alive or reused. The file itself stays; a clean end empties it, so a start that finds it still
naming a process knows that the process died holding it and says that it takes the lock over.

Read-only commands (evaluate, predict, the experiments' module commands) never take it. With
several processes only process 0 takes it (they share the directory). On file systems where flock
does not work (some network mounts) the lock cannot be taken and the run is refused with the
reason, rather than run unprotected.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time

from experiments.console import UsageError

LOCK_FILE = "train.lock"
CONFIG_FILE = "config.json"


class WrongExperimentError(UsageError):
  """The work directory holds a run of another experiment (exit status 2)."""


def saved_experiment(workdir: str) -> str | None:
  """The experiment named by `workdir`/config.json (None: no such file, or it cannot be read;
  whoever reads the run reports that)."""
  try:
    with open(os.path.join(workdir, CONFIG_FILE), encoding="utf-8") as f:
      saved = json.load(f)
  except (OSError, ValueError):
    return None
  experiment = saved.get("experiment") if isinstance(saved, dict) else None
  return experiment if isinstance(experiment, str) and experiment else None


def check_experiment(workdir: str, experiment: str, command: str) -> None:
  """Raises WrongExperimentError when `workdir` holds a run of another experiment than
  `experiment` (`command` names what was asked, e.g. 'predict sentiment')."""
  found = saved_experiment(workdir)
  if found is not None and found != experiment:
    raise WrongExperimentError(
        f"{workdir} holds a {found!r} run (its {CONFIG_FILE} says so), but `{command}` needs a "
        f"{experiment!r} run: give the --workdir of a {experiment} run (or a new --workdir to "
        "train one)")


class WorkdirLockedError(UsageError):
  """Another training run holds the work directory (the command line exits with status 2)."""


def _describe(holder: dict) -> str:
  if not holder:
    return "another process (it has not written its name yet)"
  started = holder.get("started")
  since = (f", running since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))}"
           if isinstance(started, (int, float)) else "")
  return f"process {holder.get('pid')} on host {holder.get('host')}{since}"


def _read_holder(fd: int) -> dict:
  os.lseek(fd, 0, os.SEEK_SET)
  data = b""
  while chunk := os.read(fd, 4096):
    data += chunk
  try:
    holder = json.loads(data.decode("utf-8")) if data.strip() else {}
  except ValueError:
    return {"pid": "?", "host": "? (unreadable lock file)"}
  return holder if isinstance(holder, dict) else {}


class WorkdirLock:
  """The training lock of one work directory; use as a context manager or acquire()/release().

  Args:
    workdir: the run's directory (created if missing).
    note: takes one line for the person at the terminal (the takeover of a dead holder's lock).
  """

  def __init__(self, workdir: str, note=None):
    self.path = os.path.join(os.path.abspath(workdir), LOCK_FILE)
    self.note = note or (lambda line: None)
    self._fd: int | None = None

  def acquire(self) -> None:
    """Takes the lock, or raises WorkdirLockedError naming the holder."""
    os.makedirs(os.path.dirname(self.path), exist_ok=True)
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      try:
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
          raise WorkdirLockedError(f"cannot lock {self.path} ({e.strerror}): this file system "
                                   "does not support the lock that keeps two trainings apart; "
                                   "use a --workdir on a local disk") from None
        holder = {}
        for _ in range(20):  # the holder writes its name right after locking
          holder = _read_holder(fd)
          if holder:
            break
          time.sleep(0.01)
        raise WorkdirLockedError(
            f"{os.path.dirname(self.path)} is in use by another training run: {_describe(holder)} "
            f"holds {self.path}. Wait for it to end (or stop it), or train in another --workdir"
        ) from None
      finally:
        os.close(fd)
    previous = _read_holder(fd)
    if previous:
      self.note(f"Took over the lock {self.path} from {_describe(previous)}, which ended without "
                "releasing it (killed or crashed)")
    me = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(),
          "command": " ".join(sys.argv)[:300]}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(me) + "\n").encode("utf-8"))
    os.fsync(fd)
    self._fd = fd

  def release(self) -> None:
    """Empties the file (a clean end) and unlocks it."""
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    try:
      os.ftruncate(fd, 0)
    finally:
      os.close(fd)  # closing the descriptor releases the flock lock

  def __enter__(self) -> WorkdirLock:
    self.acquire()
    return self

  def __exit__(self, *exc) -> None:
    self.release()
