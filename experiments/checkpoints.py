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

Every checkpoint carries `checksums.json`: the size and sha256 of each of its files, written by
process 0 into Orbax's temporary directory once every process has written its part and before the
directory is renamed to its step, so a committed checkpoint always has it. Before anything is
restored the files are checked against it (`verify`): a file missing, cut short or changed on disk
makes the checkpoint damaged. Training sets a damaged checkpoint aside (moved, never deleted, into
`<workdir>/set_aside/`) and resumes from the newest intact one (`resume_point`); loading a run for
evaluation or prediction refuses it (`CheckpointDamagedError`). A checkpoint written before
checksums existed (no checksums.json, and a meta that does not promise one) still loads, with a
note that it was not verified.

Before restoring, the stored shapes and dtypes are compared with those the current configuration
expects; a mismatch raises `CheckpointMismatchError` naming every differing parameter path, instead
of an anonymous shape error from deep inside the restore.

A save that fails in Orbax's background thread (disk full, permissions, an I/O error) is reported
by `check_for_errors`, which the training loop calls after every step, as one
`CheckpointSaveError` naming the checkpoint, the cause and the newest complete checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import sys
import threading
import time
from typing import Any, Callable, Iterator

import jax
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from experiments.train_state import TrainState

LATEST_DIR = "checkpoints"
BEST_DIR = "best"
MANIFEST_FILE = "checksums.json"  # in every step folder
MANIFEST_KEY = "checksums"  # in a latest checkpoint's meta: the promise that it has a manifest
SET_ASIDE_DIR = "set_aside"  # damaged checkpoints are moved here, never deleted
_TMP_SUFFIX = ".orbax-checkpoint-tmp"
_HASH_CHUNK = 1 << 20
# Orbax's step metadata gains its commit time after the rename, i.e. after the manifest is written:
# that file is hashed as JSON without the key (any other change, or unreadable JSON, is damage).
_VOLATILE_JSON = {"_CHECKPOINT_METADATA": ("commit_timestamp_nsecs",)}


class CheckpointMismatchError(ValueError):
  """The checkpoint was written by a model of a different configuration."""


class CheckpointDamagedError(ValueError):
  """A checkpoint failed verification or could not be read (nothing was loaded from it)."""


class CheckpointSaveError(ValueError):
  """A checkpoint could not be written (disk full, permissions, an I/O error)."""


@dataclasses.dataclass(frozen=True)
class Verdict:
  """What `verify` found in one step folder.

  Attributes:
    path: the step folder.
    problem: why it cannot be trusted (None when it can).
    verified: its checksums were checked and matched (False for a checkpoint written before
      checksums existed, which `problem` None still lets load).
  """
  path: str
  problem: str | None
  verified: bool

  @property
  def usable(self) -> bool:
    return self.problem is None


def _sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    while chunk := f.read(_HASH_CHUNK):
      digest.update(chunk)
  return digest.hexdigest()


_JSON_READ_TRIES = 20  # Orbax rewrites _CHECKPOINT_METADATA in its own thread: read it again
_JSON_READ_PAUSE_S = 0.05  # while it is being written (empty or cut short), for up to a second


def _json_digest(path: str, volatile: tuple[str, ...]) -> str:
  """sha256 of a JSON file's content without its `volatile` keys, in a canonical form.

  A file that does not parse is read again a few times over about a second before the
  json.JSONDecodeError goes out: Orbax rewrites such a file (its commit timestamp) from a thread
  of its own, and a read in between sees it empty or cut short.
  """
  for attempt in range(_JSON_READ_TRIES):
    try:
      with open(path, encoding="utf-8") as f:
        data = json.load(f)
      break
    except json.JSONDecodeError:
      if attempt == _JSON_READ_TRIES - 1:
        raise
      time.sleep(_JSON_READ_PAUSE_S)
  if not isinstance(data, dict):
    raise ValueError(f"{path} does not hold a JSON object")
  kept = {k: v for k, v in data.items() if k not in volatile}
  return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def _entry(folder: str, rel: str) -> dict[str, Any]:
  """The manifest's entry of one file: its size and sha256 (for a file Orbax changes after the
  commit, the sha256 of its JSON without the changing keys, and no size)."""
  path = os.path.join(folder, rel)
  if rel in _VOLATILE_JSON:
    return {"json_sha256": _json_digest(path, _VOLATILE_JSON[rel]),
            "ignored_keys": list(_VOLATILE_JSON[rel])}
  return {"size": os.path.getsize(path), "sha256": _sha256(path)}


def _problem(folder: str, rel: str, entry: dict[str, Any]) -> str | None:
  """What is wrong with one file against its manifest entry (None: nothing)."""
  path = os.path.join(folder, rel)
  if not os.path.isfile(path):
    return f"{rel} is missing"
  if "json_sha256" in entry:
    try:
      same = _json_digest(path, tuple(entry.get("ignored_keys", ()))) == entry["json_sha256"]
    except (OSError, ValueError):
      return f"{rel} is not the JSON that was saved"
    return None if same else f"{rel} differs from what was saved (sha256 mismatch)"
  actual = os.path.getsize(path)
  if actual != int(entry["size"]):
    return f"{rel} has {actual} bytes, {int(entry['size'])} were saved"
  if _sha256(path) != entry["sha256"]:
    return f"{rel} differs from what was saved (sha256 mismatch)"
  return None


def _files_of(folder: str) -> list[str]:
  """Every file under `folder` (relative, '/'-separated, sorted), except the manifest."""
  found = []
  for root, dirs, files in os.walk(folder):
    dirs.sort()
    for name in files:
      rel = os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/")
      if rel != MANIFEST_FILE:
        found.append(rel)
  return sorted(found)


def write_manifest(folder: str) -> None:
  """Writes `folder`/checksums.json: {'files': {relative path: {'size', 'sha256'}}}, atomically
  (a temporary file, flushed to disk, then renamed)."""
  files = {rel: _entry(folder, rel) for rel in _files_of(folder)}
  path = os.path.join(folder, MANIFEST_FILE)
  with open(path + ".part", "w", encoding="utf-8") as f:
    json.dump({"algorithm": "sha256", "files": files}, f, indent=1, sort_keys=True)
    f.flush()
    os.fsync(f.fileno())
  os.replace(path + ".part", path)


def _promised_manifest(folder: str) -> bool | None:
  """Whether the checkpoint's own meta says it was saved with a manifest (None: the meta cannot be
  read). Best checkpoints keep their dev metrics in meta; they promise one by the same key."""
  try:
    with open(os.path.join(folder, "meta", "metadata"), encoding="utf-8") as f:
      meta = json.load(f)
  except (OSError, ValueError):
    return None
  return isinstance(meta, dict) and MANIFEST_KEY in meta


def verify(folder: str) -> Verdict:
  """Checks a committed step folder against its checksums.json.

  A checkpoint without checksums.json is accepted unverified only when its meta can be read and
  does not promise one (it was written before checksums existed); otherwise the missing file is
  damage.
  """
  manifest_path = os.path.join(folder, MANIFEST_FILE)
  if not os.path.exists(manifest_path):
    promised = _promised_manifest(folder)
    if promised is None:
      return Verdict(folder, f"its {MANIFEST_FILE} and its meta/metadata are missing or "
                     "unreadable", False)
    if promised:
      return Verdict(folder, f"its {MANIFEST_FILE} is missing", False)
    return Verdict(folder, None, False)
  try:
    with open(manifest_path, encoding="utf-8") as f:
      files = json.load(f)["files"]
    for rel, entry in sorted(files.items()):
      problem = _problem(folder, str(rel), entry)
      if problem is not None:
        return Verdict(folder, problem, False)
  except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    return Verdict(folder, f"its {MANIFEST_FILE} is unreadable ({type(e).__name__})", False)
  if not files:
    return Verdict(folder, f"its {MANIFEST_FILE} lists no files", False)
  return Verdict(folder, None, True)


def _as_saved(meta: Any) -> Any:
  """A checkpoint's meta as its caller saved it (without the manifest's promise)."""
  if isinstance(meta, dict):
    meta = {k: v for k, v in meta.items() if k != MANIFEST_KEY}
  return meta


def _committed_steps(directory: str) -> list[int]:
  """The steps Orbax has committed in `directory` (folders named by their bare step number)."""
  names = os.listdir(directory) if os.path.isdir(directory) else []
  return sorted(int(name) for name in names if name.isdigit())


class _OrbaxErrorFilter(logging.Filter):
  """Drops Orbax's own error logs (each a full traceback, several per failed save): every such
  failure reaches the caller as an exception, reported once (CheckpointSaveError,
  CheckpointDamagedError)."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not (record.levelno >= logging.ERROR and
                f"{os.sep}orbax{os.sep}" in (record.pathname or ""))


_ORBAX_ERRORS = _OrbaxErrorFilter()


class _OrbaxTaskFilter(logging.Filter):
  """Drops asyncio's 'Task exception was never retrieved' for Orbax's write tasks, logged when
  the tasks of a failed save are collected (often at exit, after the error line): installed once a
  save has failed, whose error is reported already."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not (record.levelno >= logging.ERROR and "orbax" in record.getMessage())


_ORBAX_TASKS = _OrbaxTaskFilter()
_MUTE_S = 0.5  # how long the writes of a failed save are given to fail


class _QuietThreads:
  """sys.stderr while a Checkpoints is open: when a save fails, its remaining TensorStore writes
  fail in their own threads, and their callbacks, finding Orbax's event loop closed, each print a
  traceback ('RuntimeError: Event loop is closed'), before or after the main thread has reported
  the failure. Such tracebacks from threads other than the main one are dropped (a thread's
  writes are held from 'Traceback' to the exception's line to tell); once a save has failed
  (`after_failure`), everything other threads write is dropped. The main thread's lines, and
  every other thread's other lines, go through."""

  def __init__(self, stream):
    self._stream = stream
    self._held = threading.local()
    self.after_failure = False

  def write(self, text: str) -> int:
    if threading.current_thread() is threading.main_thread():
      return self._stream.write(text)
    if self.after_failure:
      return len(text)
    held = getattr(self._held, "text", "")
    if not held and not text.startswith("Traceback (most recent call last)"):
      return self._stream.write(text)
    held += text
    lines = held.splitlines()
    ended = held.endswith("\n") and len(lines) > 1 and not lines[-1].startswith((" ", "\t"))
    if not ended:
      self._held.text = held
      return len(text)
    self._held.text = ""
    if lines[-1].strip() != "RuntimeError: Event loop is closed":
      self._stream.write(held)
    return len(text)

  def __getattr__(self, name: str):
    return getattr(self._stream, name)


@contextlib.contextmanager
def _muted_stderr(active: bool) -> Iterator[None]:
  """While a failed save's other writes are still failing (as Checkpoints closes), file descriptor
  2 goes to /dev/null, for what reaches it below Python's sys.stderr; the failure itself is
  reported once, by the CheckpointSaveError."""
  if not active:
    yield
    return
  sys.stderr.flush()
  saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, 2)
  try:
    yield
    time.sleep(_MUTE_S)
  finally:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)


def _cause(error: BaseException) -> str:
  """A failed save's cause in a few words: TensorStore's long message reduced to the file it was
  writing and the operating system's error, else the error's first line."""
  text = str(error)
  code = re.search(r"os_error_code='?(\d+)", text)
  if code is None:
    if isinstance(error, OSError) and error.errno:  # a write of Python's own (metadata files)
      where = f" writing {error.filename}" if error.filename else ""
      return f"{os.strerror(error.errno)} (errno {error.errno}){where}"
    return _first_line(error)
  number = int(code.group(1))
  path = re.search(r'Failed writing: "([^"]+)"', text) or re.search(r'"(/[^"]+)"', text)
  where = f" writing {path.group(1)}" if path else ""
  return f"{os.strerror(number)} (errno {number}){where}"


def _first_line(error: BaseException, limit: int = 300) -> str:
  text = str(error).strip().splitlines()
  line = text[0] if text else type(error).__name__
  return line if len(line) <= limit else line[:limit] + "..."


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
    self.asynchronous = asynchronous
    logging.getLogger("absl").addFilter(_ORBAX_ERRORS)  # once: a filter is added only once
    self._quiet = None
    if not isinstance(sys.stderr, _QuietThreads):
      self._quiet = sys.stderr = _QuietThreads(sys.stderr)
    # The step each manager is saving: its manifest is written into that step's temporary folder.
    self._saving: dict[str, int | None] = {LATEST_DIR: None, BEST_DIR: None}
    # Orbax saves in a background thread in both modes (its hook that runs just before the commit
    # needs that); without `asynchronous`, every save waits for its commit.
    # Naming the handlers lets a new process read a checkpoint's metadata before restoring it.
    self.latest = ocp.CheckpointManager(
        os.path.join(self.workdir, LATEST_DIR),
        item_handlers={"state": ocp.StandardCheckpointHandler(),
                       "meta": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=True,
            async_options=self._async_options(LATEST_DIR),
            multiprocessing_options=_barriers_named(LATEST_DIR)))
    self.best = ocp.CheckpointManager(
        os.path.join(self.workdir, BEST_DIR),
        item_handlers={"params": ocp.StandardCheckpointHandler(),
                       "meta": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(
            max_to_keep=1, create=True, best_fn=lambda metrics: metrics[best_metric],
            best_mode=best_mode, keep_checkpoints_without_metrics=False,
            enable_async_checkpointing=True, async_options=self._async_options(BEST_DIR),
            multiprocessing_options=_barriers_named(BEST_DIR)))
    self._best_metric_checked = False
    self.unverified: list[str] = []  # checkpoints loaded without checksums to check (old ones)
    self._failed = False  # a save failed (CheckpointSaveError was raised)

  def _async_options(self, kind: str) -> ocp.AsyncOptions:
    """Orbax's hook that runs in process 0 once every process has written its part of a save and
    before the temporary folder is renamed to the step: the manifest is written there, so it is
    committed together with the files it describes."""

    def write_the_manifest() -> None:
      step = self._saving[kind]
      if step is None:
        return
      folder = os.path.join(self.workdir, kind, f"{step}{_TMP_SUFFIX}")
      if not os.path.isdir(folder):
        parent = os.path.join(self.workdir, kind)
        candidates = [name for name in os.listdir(parent)
                      if name.startswith(f"{step}{_TMP_SUFFIX}")]
        if len(candidates) != 1:
          raise FileNotFoundError(f"the temporary folder of step {step} in {parent} was not found")
        folder = os.path.join(parent, candidates[0])
      write_manifest(folder)

    return ocp.AsyncOptions(post_finalization_callback=write_the_manifest)

  def _saved(self, manager: ocp.CheckpointManager) -> None:
    if not self.asynchronous:
      manager.wait_until_finished()

  # -- verification --------------------------------------------------------------------------------

  def folder(self, kind: str, step: int) -> str:
    return os.path.join(self.workdir, kind, str(step))

  def verify(self, kind: str, step: int) -> Verdict:
    """`verify` of the committed checkpoint `step` of `kind` (LATEST_DIR or BEST_DIR)."""
    return verify(self.folder(kind, step))

  def set_aside(self, kind: str, step: int) -> str:
    """Moves a damaged checkpoint out of Orbax's reach into <workdir>/set_aside/ (never deleting
    it) and returns where it went. Only process 0 moves; the others return the same path."""
    parent = os.path.join(self.workdir, SET_ASIDE_DIR)
    target = os.path.join(parent, f"{kind}-{step}")
    number = 1
    while os.path.exists(target):
      number += 1
      target = os.path.join(parent, f"{kind}-{step}.{number}")
    if jax.process_index() == 0:
      os.makedirs(parent, exist_ok=True)
      os.replace(self.folder(kind, step), target)
    return target

  def _set_aside_all(self, damaged: list[tuple[str, int, Verdict]], resume_step: int | None,
                     note: Callable[[str], None]) -> None:
    """Sets the damaged checkpoints aside, one line each, and lets the managers see it. With
    several processes, every one has read the folders before process 0 moves any, and none goes
    on before the moves are done."""
    if jax.process_count() > 1:
      multihost_utils.sync_global_devices("checkpoints verified")
    for kind, step, verdict in damaged:
      where = self.set_aside(kind, step)
      if kind == BEST_DIR:
        note(f"Best checkpoint {verdict.path} is damaged ({verdict.problem}): set aside as "
             f"{where}; the best is chosen again from the evaluations from now on")
      else:
        note(f"Checkpoint {verdict.path} is damaged ({verdict.problem}): set aside as {where}; "
             f"resuming from step {resume_step}")
    if jax.process_count() > 1:
      multihost_utils.sync_global_devices("checkpoints set aside")
    self.latest.reload()
    self.best.reload()

  def resume_point(self, abstract_state: TrainState, sharding, *,
                   note: Callable[[str], None],
                   check_meta: Callable[[dict[str, Any], str], None] | None = None,
                   ) -> tuple[TrainState, dict[str, Any], Verdict] | None:
    """Restores the newest intact latest checkpoint for training to resume from.

    Every checkpoint newer than it that fails verification or cannot be read is set aside, each
    named in one line through `note`; a damaged best checkpoint is set aside too (the best is then
    chosen again from later evaluations). A checkpoint written before checksums existed is used
    with a note.

    Args:
      abstract_state: the TrainState of ShapeDtypeStructs of the current configuration.
      sharding: where the restored arrays go.
      note: takes one line for the person at the terminal.
      check_meta: called with a candidate's meta and its path before its state is restored (e.g.
        the process-count check); what it raises is not damage and propagates.

    Returns:
      (state, meta, verdict) of the checkpoint resumed from, or None when there is none.

    Raises:
      CheckpointDamagedError: there are latest checkpoints, but none is intact (nothing is moved).
      CheckpointMismatchError: the newest intact checkpoint belongs to another configuration.
    """
    damaged_best = [(BEST_DIR, step, verdict) for step in self.best.all_steps()
                     if not (verdict := self.verify(BEST_DIR, step)).usable]
    found = []
    chosen, chosen_step = None, None
    for step in sorted(self.latest.all_steps(), reverse=True):
      verdict = self.verify(LATEST_DIR, step)
      if verdict.usable:
        try:
          meta = self.read_meta(step)
        except Exception as e:  # pylint: disable=broad-except
          verdict = Verdict(verdict.path, f"its meta cannot be read: {_first_line(e)}", False)
      if verdict.usable:
        if check_meta is not None:
          check_meta(meta, verdict.path)
        try:
          state, meta = self.restore(abstract_state, sharding, step)
        except CheckpointMismatchError:
          raise
        except Exception as e:  # pylint: disable=broad-except
          verdict = Verdict(verdict.path, f"it cannot be read: {_first_line(e)}", False)
      if verdict.usable:
        chosen, chosen_step = (state, meta, verdict), step
        break
      found.append((step, verdict))
    if found and chosen is None:
      listed = "; ".join(f"step {step}: {verdict.problem}" for step, verdict in found)
      raise CheckpointDamagedError(
          f"no intact checkpoint in {os.path.join(self.workdir, LATEST_DIR)} ({listed}); nothing "
          "was changed. Move that folder away to train this run from the start, or use a new "
          "--workdir")
    damaged = damaged_best + [(LATEST_DIR, step, verdict) for step, verdict in found]
    if damaged:
      self._set_aside_all(damaged, chosen_step, note)
    if chosen is not None and not chosen[2].verified:
      note(f"Checkpoint {chosen[2].path} was written before checkpoints carried checksums: it is "
           "loaded unverified")
    return chosen

  def check_for_errors(self) -> None:
    """Raises CheckpointSaveError if a save has failed in the background (disk full, permissions,
    an I/O error), naming the checkpoint, the cause and the newest complete checkpoint."""
    for kind, manager in ((LATEST_DIR, self.latest), (BEST_DIR, self.best)):
      try:
        manager.check_for_errors()
        # Orbax's own finalising thread may have taken the error over; once no save is in
        # progress, waiting returns at once and raises it.
        if self._saving[kind] is not None and not manager.is_saving_in_progress():
          manager.wait_until_finished()
      except Exception as e:  # pylint: disable=broad-except
        raise self._save_error(kind, e) from None

  def _save_error(self, kind: str, error: BaseException) -> CheckpointSaveError:
    self._failed = True
    if not isinstance(sys.stderr, _QuietThreads):
      sys.stderr = _QuietThreads(sys.stderr)
    sys.stderr.after_failure = True  # it stays so: the process is about to end
    logging.getLogger("asyncio").addFilter(_ORBAX_TASKS)
    step = self._saving[kind]
    what = (f"the {'best ' if kind == BEST_DIR else ''}checkpoint of step {step} "
            f"({self.folder(kind, step)})" if step is not None else f"a checkpoint in "
            f"{os.path.join(self.workdir, kind)}")
    committed = [s for s in _committed_steps(os.path.join(self.workdir, LATEST_DIR))
                 if s != step]
    newest = (f"the newest complete checkpoint is step {committed[-1]} in "
              f"{os.path.join(self.workdir, LATEST_DIR)}" if committed else
              "no complete checkpoint had been written")
    return CheckpointSaveError(
        f"saving {what} failed: {_cause(error)}. Training stopped; {newest}. Fix the cause "
        "(free disk space, permissions) and run the same command again to resume from it")

  # -- latest --------------------------------------------------------------------------------------

  def latest_step(self) -> int | None:
    return self.latest.latest_step()

  def save(self, state: TrainState, meta: dict[str, Any]) -> None:
    """Saves the state with its JSON `meta` under its step (a step already saved is left as is)."""
    step = int(jax.device_get(state.step))
    if step in self.latest.all_steps():
      return
    try:
      self.latest.wait_until_finished()  # the previous save's failure is reported as such
      self._saving[LATEST_DIR] = step
      self.latest.save(step, force=True, args=ocp.args.Composite(
          state=ocp.args.StandardSave(_state_tree(state)),
          meta=ocp.args.JsonSave(dict(meta, **{MANIFEST_KEY: MANIFEST_FILE}))))
      self._saved(self.latest)
    except CheckpointSaveError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      raise self._save_error(LATEST_DIR, e) from None

  def read_meta(self, step: int) -> dict[str, Any]:
    """The JSON metadata of the latest-checkpoint `step`, without restoring its state."""
    return _as_saved(self.latest.restore(step, args=ocp.args.Composite(
        meta=ocp.args.JsonRestore()))["meta"])

  def restore(self, abstract_state: TrainState, sharding, step: int | None = None, *,
              check: bool = False) -> tuple[TrainState, dict[str, Any]]:
    """Restores the latest (or the given) checkpoint into the structure of `abstract_state`.

    Args:
      abstract_state: a TrainState of ShapeDtypeStructs (e.g. from jax.eval_shape) for the current
        configuration.
      sharding: where the restored arrays go (the replicated sharding).
      step: which checkpoint; None = the latest.
      check: verify its checksums first (`resume_point` verifies before it calls this).

    Returns:
      (state, meta).

    Raises:
      CheckpointMismatchError: the stored shapes differ from the current configuration's.
      CheckpointDamagedError: with `check`, the checkpoint failed verification or cannot be read.
    """
    step = self.latest.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(f"no checkpoint in {os.path.join(self.workdir, LATEST_DIR)}")
    if check:
      self._check_intact(LATEST_DIR, step)
    target = _state_tree(abstract_state)
    stored = self.latest.item_metadata(step)["state"]
    check_compatible(target, getattr(stored, "tree", stored),
                     f"checkpoint {os.path.join(self.workdir, LATEST_DIR, str(step))}")
    with self._read_errors(LATEST_DIR, step, check):
      restored = self.latest.restore(step, args=ocp.args.Composite(
          state=ocp.args.StandardRestore(_abstract(target, sharding)),
          meta=ocp.args.JsonRestore()))
    tree = restored["state"]
    state = TrainState(step=tree["step"], params=tree["params"], opt_state=tree["opt_state"],
                       rng=jax.random.wrap_key_data(tree["rng"]))
    return state, _as_saved(restored["meta"])

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
      try:
        saved = self.best.metrics(step) or {}
      except Exception:  # pylint: disable=broad-except
        continue  # unreadable: damage, which verification reports before the checkpoint is used
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
    try:
      self._saving[BEST_DIR] = step
      self.best.save(step, force=True, metrics={self.best_metric: value},
                     args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                             meta=ocp.args.JsonSave(dict(
                                                 metrics, step=step,
                                                 **{MANIFEST_KEY: MANIFEST_FILE}))))
      self.best.wait_until_finished()  # the next comparison reads it back
    except Exception as e:  # pylint: disable=broad-except
      raise self._save_error(BEST_DIR, e) from None
    return True

  def restore_best_params(self, abstract_params, sharding, *, check: bool = False
                          ) -> tuple[Any, dict[str, Any]]:
    """The best parameters and their metrics; FileNotFoundError when none was saved. With `check`,
    the checksums are verified first (CheckpointDamagedError when they fail)."""
    step = self.best_step()
    if step is None:
      raise FileNotFoundError(f"no best checkpoint in {os.path.join(self.workdir, BEST_DIR)}")
    if check:
      self._check_intact(BEST_DIR, step)
    stored = self.best.item_metadata(step)["params"]
    check_compatible({"params": abstract_params}, {"params": getattr(stored, "tree", stored)},
                     f"best checkpoint {os.path.join(self.workdir, BEST_DIR, str(step))}")
    with self._read_errors(BEST_DIR, step, check):
      restored = self.best.restore(step, args=ocp.args.Composite(
          params=ocp.args.StandardRestore(_abstract(abstract_params, sharding)),
          meta=ocp.args.JsonRestore()))
    return restored["params"], _as_saved(restored["meta"])

  def _check_intact(self, kind: str, step: int) -> None:
    verdict = self.verify(kind, step)
    if not verdict.usable:
      raise CheckpointDamagedError(
          f"checkpoint {verdict.path} is damaged ({verdict.problem}); nothing was loaded from it. "
          "Choose another with --checkpoint (best, latest or a kept step), or run `train` with the "
          "run's command: it sets damaged checkpoints aside and resumes from the newest intact one")
    if not verdict.verified:
      self.unverified.append(verdict.path)

  @contextlib.contextmanager
  def _read_errors(self, kind: str, step: int, active: bool):
    """With `active`, turns a failure to read a checkpoint into CheckpointDamagedError."""
    if not active:
      yield
      return
    try:
      yield
    except (CheckpointMismatchError, CheckpointDamagedError):
      raise
    except Exception as e:  # pylint: disable=broad-except
      raise CheckpointDamagedError(
          f"checkpoint {self.folder(kind, step)} cannot be read ({_first_line(e)}); nothing was "
          "loaded from it") from None

  # -- lifecycle -----------------------------------------------------------------------------------

  def wait(self) -> None:
    for kind, manager in ((LATEST_DIR, self.latest), (BEST_DIR, self.best)):
      try:
        manager.wait_until_finished()
      except Exception as e:  # pylint: disable=broad-except
        raise self._save_error(kind, e) from None

  def close(self, quiet: bool = False) -> None:
    """Waits for the saves in flight and closes the managers; `quiet` (when an error is already on
    its way out) swallows a failed save's error instead of raising it a second time."""
    with _muted_stderr(quiet and self._failed):
      for manager in (self.latest, self.best):
        try:
          manager.close()
        except Exception:  # pylint: disable=broad-except
          if not quiet:
            raise
    if self._quiet is not None and sys.stderr is self._quiet and not self._quiet.after_failure:
      sys.stderr = self._quiet._stream  # pylint: disable=protected-access
