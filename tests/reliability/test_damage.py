"""Damage, concurrency, a full disk, divergence and bad inputs: refused clearly or survived exactly.

  * Every kind of damage to the newest checkpoint (damage_matrix.KINDS: its data file cut or with
    bytes flipped at three offsets, Orbax's _METADATA flipped or deleted, the OCDBT manifest or
    checksums.json deleted) is found by the checksums; the run sets it aside, resumes from the
    newest intact checkpoint and ends bit for bit where the uninterrupted run ends. With no intact
    checkpoint, one refusal and nothing moved; `evaluate` and `predict` refuse a damaged one.
  * A checkpoint written before checksums existed loads, with a note.
  * A second `train` on one work directory is refused (exit status 2, the holder named), also when
    both start at once; a lock left by a dead process is taken over with a note.
  * A full disk stops training with one error line; the same command then resumes exactly.
  * A loss far above its running level stops the run like a NaN; the threshold never fires on the
    project's recorded runs; the advice fits the run's settings, and right after a resume it
    points at the checkpoint.
  * Work directories of another experiment, and input files that are not UTF-8 text, are refused
    naming what is wrong.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import threading

import pytest

import damage_matrix
import toy_runs
from experiments import checkpoints
from experiments import console as console_lib
from experiments import runs
from experiments import trainer
from experiments import workdir as workdir_lib
from experiments.checkpoints import BEST_DIR
from experiments.checkpoints import LATEST_DIR
from experiments.checkpoints import CheckpointDamagedError
from experiments.checkpoints import Checkpoints
from experiments.cli import main
from experiments.console import ListConsole

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEGACY = os.path.join(ROOT, "tests", "fixtures", "legacy_runs")
STOP = ("--data.signal_at_batch=12",)  # SIGTERM while batch 12 is drawn: the run stops at step 11


def _argv(workdir, extra=()) -> list[str]:
  return ["train", "toy", "--workdir", str(workdir), *toy_runs.OVERRIDES, *extra]


def _latest_steps(workdir) -> list[int]:
  ckpts = Checkpoints(str(workdir))
  try:
    return ckpts.latest.all_steps()
  finally:
    ckpts.close()


def _assert_same_as(reference_run, workdir) -> None:
  assert toy_runs.records(workdir) == toy_runs.records(reference_run.workdir)
  for which in ("latest", "best"):
    expected, step = toy_runs.restore(reference_run.workdir, which)
    actual, actual_step = toy_runs.restore(workdir, which)
    assert actual_step == step
    toy_runs.assert_same_params(expected, actual)
  with open(os.path.join(workdir, "results.json"), encoding="utf-8") as f:
    results = json.load(f)
  for key in ("test", "dev", "best", "steps", "test_params"):
    assert results[key] == reference_run.results[key], key


def _stopped_run(workdir) -> list[int]:
  assert main(_argv(workdir, STOP)) == 128 + 15
  steps = _latest_steps(workdir)
  assert steps == [10, 11]
  return steps


@pytest.mark.parametrize("kind", damage_matrix.KINDS)
def test_damaged_newest_checkpoint_is_set_aside_and_the_run_resumes_exactly(
    kind, reference_run, tmp_path, capsys):
  workdir = str(tmp_path / "run")
  _stopped_run(workdir)
  newest = os.path.join(workdir, LATEST_DIR, "11")
  damage_matrix.damage(newest, kind)
  capsys.readouterr()
  assert main(_argv(workdir)) == 0
  out = capsys.readouterr()
  said = [line for line in out.out.splitlines() if line.startswith("Checkpoint ")]
  where = os.path.join(workdir, "set_aside", "checkpoints-11")
  assert len(said) == 1 and said[0].startswith(f"Checkpoint {newest} is damaged (")
  assert said[0].endswith(f"): set aside as {where}; resuming from step 10")
  assert f"Resuming {workdir} from step 10" in out.out and "Traceback" not in out.err
  assert os.path.isdir(where)  # set aside, never deleted
  _assert_same_as(reference_run, workdir)


def test_no_intact_checkpoint_is_refused_and_nothing_is_moved(tmp_path, capsys):
  workdir = str(tmp_path)
  _stopped_run(workdir)
  damage_matrix.damage(os.path.join(workdir, LATEST_DIR, "11"), "data-file-flip-middle")
  damage_matrix.damage(os.path.join(workdir, LATEST_DIR, "10"), "metadata-deleted")
  capsys.readouterr()
  assert main(_argv(workdir)) == 1
  err = capsys.readouterr().err.splitlines()
  assert err == [
      f"error: no intact checkpoint in {os.path.join(workdir, LATEST_DIR)} (step 11: state/d/"
      f"{os.path.basename(damage_matrix.data_file(os.path.join(workdir, LATEST_DIR, '11')))} "
      "differs from what was saved (sha256 mismatch); step 10: state/_METADATA is missing); "
      "nothing was changed. Move that folder away to train this run from the start, or use a "
      "new --workdir"]
  assert _latest_steps(workdir) == [10, 11] and not os.path.exists(
      os.path.join(workdir, "set_aside"))


def test_evaluate_and_predict_refuse_a_damaged_checkpoint(reference_run, tmp_path, capsys):
  workdir = str(tmp_path / "run")
  shutil.copytree(reference_run.workdir, workdir)
  best = os.path.join(workdir, BEST_DIR, os.listdir(os.path.join(workdir, BEST_DIR))[0])
  damage_matrix.damage(best, "data-file-flip-end")
  for argv in (["evaluate", "--workdir", workdir],
               ["predict", "toy", "1 2 3", "--workdir", workdir]):
    assert main(argv) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: checkpoint {best} is damaged (params/d/")
    assert "nothing was loaded from it" in err[0]
  # The latest checkpoints are intact and still load; the damaged best one was not moved.
  assert main(["evaluate", "--workdir", workdir, "--checkpoint", "latest"]) == 0
  assert os.path.isdir(best)
  with pytest.raises(CheckpointDamagedError):
    runs.load_run(workdir)


def test_a_checkpoint_written_before_checksums_loads_with_a_note(reference_run, tmp_path, capsys):
  # A legacy run (saved by the code before the redesign, long before checksums) predicts.
  legacy = str(tmp_path / "legacy")
  shutil.copytree(os.path.join(LEGACY, "sentiment-bilstm_attn_additive"), legacy)
  console = ListConsole()
  assert main(["predict", "sentiment", "a fine film", "--workdir", legacy], console) == 0
  best = os.path.join(legacy, BEST_DIR, os.listdir(os.path.join(legacy, BEST_DIR))[0])
  assert console.notes[0] == (f"note: checkpoint {best} was written before checkpoints carried "
                              "checksums: it is loaded unverified")
  # A toy checkpoint made to look like one of then (no checksums.json, a meta that promises none)
  # is resumed from, with a note, and the run ends exactly.
  workdir = str(tmp_path / "run")
  _stopped_run(workdir)
  newest = os.path.join(workdir, LATEST_DIR, "11")
  os.remove(os.path.join(newest, "checksums.json"))
  meta_path = os.path.join(newest, "meta", "metadata")
  with open(meta_path, encoding="utf-8") as f:
    meta = json.load(f)
  del meta["checksums"]
  with open(meta_path, "w", encoding="utf-8") as f:
    json.dump(meta, f)
  capsys.readouterr()
  assert main(_argv(workdir)) == 0
  out = capsys.readouterr().out
  assert (f"Checkpoint {newest} was written before checkpoints carried checksums: it is loaded "
          "unverified") in out
  assert f"Resuming {workdir} from step 11" in out
  _assert_same_as(reference_run, workdir)


def test_a_second_training_is_refused_naming_the_holder(tmp_path, capsys):
  workdir = str(tmp_path)
  with workdir_lib.WorkdirLock(workdir):
    assert main(_argv(workdir)) == 2
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 1 and err[0].startswith(
      f"error: {workdir} is in use by another training run: process {os.getpid()} on host "
      f"{socket.gethostname()}, running since ")
  assert not os.path.exists(os.path.join(workdir, "config.json"))
  assert not os.path.exists(os.path.join(workdir, LATEST_DIR))
  # Evaluating and predicting never need the lock (here: a finished run, evaluated while held).


def test_a_lock_left_by_a_dead_process_is_taken_over_with_a_note(tmp_path, capsys):
  workdir = str(tmp_path)
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  pid = int(dead.stdout)
  with open(os.path.join(workdir, workdir_lib.LOCK_FILE), "w", encoding="utf-8") as f:
    json.dump({"host": socket.gethostname(), "pid": pid, "started": 1.0e9}, f)
  assert main(_argv(workdir, ["--train.num_epochs=1"])) == 0
  out = capsys.readouterr().out
  assert (f"Took over the lock {os.path.join(workdir, workdir_lib.LOCK_FILE)} from process {pid} "
          f"on host {socket.gethostname()}") in out
  with open(os.path.join(workdir, workdir_lib.LOCK_FILE), encoding="utf-8") as f:
    assert f.read() == ""  # released at the clean end


def _environment() -> dict[str, str]:
  return damage_matrix._environment()  # pylint: disable=protected-access


def test_two_trainings_started_together_one_is_refused(reference_run, tmp_path):
  workdir = str(tmp_path / "run")
  command = damage_matrix._command(workdir)  # pylint: disable=protected-access
  procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=_environment()) for _ in range(2)]
  outputs = [p.communicate(timeout=300)[0] for p in procs]
  statuses = [p.returncode for p in procs]
  assert sorted(statuses) == [0, 2], outputs
  refused = outputs[statuses.index(2)].splitlines()
  assert [line for line in refused if line.startswith("error:")] == [
      line for line in refused if "is in use by another training run" in line]
  assert len(refused) <= 2, refused  # at most the plan line, then the refusal
  _assert_same_as(reference_run, workdir)


def test_a_full_disk_stops_with_one_error_line_and_the_run_resumes_exactly(reference_run,
                                                                          tmp_path):
  workdir = str(tmp_path / "run")
  proc = subprocess.Popen(damage_matrix._command(workdir),  # pylint: disable=protected-access
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=_environment())
  lines = []
  for line in proc.stdout:
    lines.append(line.rstrip("\n"))
    if line.startswith("[train] step 6 "):  # the next save's files outgrow the limit
      resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (4000, 4000))
  assert proc.wait(timeout=300) == 1, lines
  errors = [line for line in lines if line.startswith("error:")]
  assert len(errors) == 1 and not any("Traceback" in line for line in lines), "\n".join(lines)
  assert re.match(rf"error: saving the checkpoint of step (\d+) \({re.escape(workdir)}/"
                  r"checkpoints/\1\) failed: File too large \(errno 27\)"
                  # TensorStore names the file it was writing; a metadata write of Python's own
                  # names it when the error carries it (which of them hits the limit first is
                  # a race).
                  rf"( writing {re.escape(workdir)}/checkpoints/\1\.orbax-checkpoint-tmp/\S+)?"
                  r"\. Training "
                  r"stopped; the newest complete checkpoint is step \d+ in "
                  rf"{re.escape(workdir)}/checkpoints\. Fix the cause \(free disk space, "
                  r"permissions\) and run the same command again to resume from it$",
                  errors[0]), errors[0]
  newest = int(re.search(r"the newest complete checkpoint is step (\d+)", errors[0]).group(1))
  assert max(_latest_steps(workdir)) == newest
  again = subprocess.run(damage_matrix._command(workdir),  # pylint: disable=protected-access
                         capture_output=True, text=True, env=_environment(), timeout=300,
                         check=False)
  assert again.returncode == 0, again.stdout + again.stderr
  assert f"Resuming {workdir} from step {newest}" in again.stdout
  _assert_same_as(reference_run, workdir)


def test_a_finite_divergence_stops_the_run_like_a_nan(tmp_path, capsys):
  workdir = str(tmp_path)
  assert main(_argv(workdir, ["--optimizer.learning_rate=1e6"])) == 1
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 1, err
  found = re.match(r"error: Training stopped at step (\d+): the loss diverged: the mean training "
                   r"objective of steps (\d+)-\1 is (\S+), above (\S+) \(the larger of "
                   r"train\.divergence_factor 10 times its lowest level so far, (\S+), and the "
                   r"first step's, (\S+)\)\. Nothing from these steps was logged or saved; ",
                   err[0])
  assert found, err[0]
  value, limit, lowest, first = map(float, found.groups()[2:])
  assert math.isfinite(value) and value > limit
  assert limit == pytest.approx(max(10 * lowest, first), rel=1e-3) and 0.5 < first < 1.0
  # The advice fits a float32 run without clipping or warm-up.
  assert err[0].endswith("Try a lower optimizer.learning_rate (now 1e+06), gradient clipping "
                         "(optimizer.grad_clip_norm=1.0), or a warm-up (optimizer.warmup_steps).")
  assert "float32" not in err[0]
  # Adam at 1e6 sends the toy's loss from 0.7 to about 1e18 within two steps: caught at the first
  # log, before anything was recorded or saved.
  assert int(found.group(1)) == 2 and toy_runs.records(workdir) == []
  assert not os.path.exists(os.path.join(workdir, "results.json"))


def test_the_divergence_threshold_never_fires_on_the_recorded_runs():
  paths = sorted(glob.glob(os.path.join(ROOT, "docs", "runs", "**", "metrics*.jsonl"),
                           recursive=True))
  judged = 0
  for path in paths:
    with open(path, encoding="utf-8") as f:
      records = [json.loads(line) for line in f if line.strip()]
    train = [r for r in records if r.get("split") == "train"]
    key = "objective" if train and "objective" in train[0] else "loss"
    guard = trainer.DivergenceGuard(10.0)
    for record in train:
      assert not guard.exceeded(record[key]), (path, record["step"], record[key], guard.limit())
      guard.update(record[key])
    judged += len(train) > 1
  assert judged >= 40  # the curves the default was chosen on (docs/RELIABILITY.md)


def test_advice_names_only_remedies_the_run_does_not_use():
  cfg = runs.make_config("toy", "mlp", overrides=[
      "--train.dtype=bfloat16", "--optimizer.grad_clip_norm=1.0",
      "--optimizer.warmup_steps=10", "--optimizer.learning_rate=0.5"])
  assert trainer.remedies(cfg) == ("Try a lower optimizer.learning_rate (now 0.5), a tighter "
                                   "optimizer.grad_clip_norm (now 1), or train.dtype=float32 "
                                   "(now bfloat16).")


def test_a_nan_right_after_a_resume_points_at_the_checkpoint(tmp_path, capsys):
  workdir = str(tmp_path)
  _stopped_run(workdir)
  capsys.readouterr()
  # Batch 11 is the first one after the resume from step 11: step 12's loss is NaN.
  assert main(_argv(workdir, ["--data.nan_at_batch=11"])) == 1
  err = capsys.readouterr().err
  assert err.startswith("error: Training stopped at step 12: the loss became nan. Nothing from "
                        "step 12 on was saved; the last good checkpoint, step 11, is kept in ")
  assert ("This came 1 step(s) after resuming from step 11, and the run was healthy up to that "
          "checkpoint (its checksums match what was saved; the settings changed on resuming "
          "(data.nan_at_batch: None -> 11; data.signal_at_batch: 12 -> None)): suspect the "
          "checkpoint or the changed settings before the learning rate.") in err
  assert "Try a lower" not in err


def test_a_workdir_of_another_experiment_is_refused(tmp_path, capsys):
  sentiment = str(tmp_path / "sentiment")
  shutil.copytree(os.path.join(LEGACY, "sentiment-sanet"), sentiment)
  before = sorted(os.listdir(sentiment))
  for argv, command in ((_argv(sentiment), "train toy"),
                        (["predict", "toy", "1 2", "--workdir", sentiment], "predict toy"),
                        (["toyclassify", "1 2", "--workdir", sentiment], "toyclassify")):
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {sentiment} holds a 'sentiment' run (its config.json says so), but `{command}` "
        "needs a 'toy' run: give the --workdir of a toy run (or a new --workdir to train one)"]
  assert sorted(os.listdir(sentiment)) == before  # nothing written, no lock taken
  with pytest.raises(workdir_lib.WrongExperimentError, match="needs a 'translation' run"):
    runs.load_run(sentiment, experiment="translation", command="translate")


@pytest.mark.parametrize("data, where, what", [
    (b"1 2\n3 4\n5 \xff 6\n", "line 3, column 3", "not valid UTF-8 (byte 0xff)"),
    (b"1 2\n\xef\xbb\xbf3 \xc3\n", "line 2, column 6", "not valid UTF-8 (byte 0xc3)"),
    (b"1 2\n3\0\0\0\n", "line 2, column 2", "a NUL byte: this looks like a binary file"),
])
def test_input_files_that_are_not_utf8_text_are_named_with_their_line(data, where, what,
                                                                      reference_run, tmp_path,
                                                                      capsys):
  path = tmp_path / "inputs.txt"
  path.write_bytes(data)
  assert main(["predict", "toy", "--input-file", str(path), "--workdir",
               reference_run.workdir]) == 2
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 1 and err[0].startswith(f"error: {path}, {where}: {what}")


def test_messages_quote_long_inputs_as_excerpts():
  long = "x" * 100_000
  with pytest.raises(console_lib.UsageError) as info:
    with console_lib.input_errors():
      raise ValueError(f"the text {long!r} has no words to classify")
  message = str(info.value)
  assert message == f"the text {long[:60]!r}... (100,000 characters) has no words to classify"
  assert console_lib.cut_notice(2, long, 256, 20_000, "words", "data.max_len") == (
      f"note: input 2 ({long[:60]!r}... (100,000 characters)) has 20,000 words; this run reads "
      "the first 256 (data.max_len), the rest was not used")


def test_a_damaged_best_checkpoint_is_set_aside_when_training_resumes(tmp_path, capsys):
  workdir = str(tmp_path)
  _stopped_run(workdir)
  best = os.path.join(workdir, BEST_DIR, "10")
  cut = damage_matrix.data_file(best)
  size = os.path.getsize(cut)
  damage_matrix.damage(best, "data-file-cut")
  capsys.readouterr()
  assert main(_argv(workdir)) == 0
  out = capsys.readouterr().out.splitlines()
  where = os.path.join(workdir, "set_aside", "best-10")
  assert [line for line in out if line.startswith("Best checkpoint ")] == [
      f"Best checkpoint {best} is damaged ({os.path.relpath(cut, best)} has {size // 2} bytes, "
      f"{size} were saved): set aside as {where}; the best is chosen again from the evaluations "
      "from now on"]
  # The whole output on failure: this assertion failed once in a full suite on a heavily loaded
  # machine (2026-11-27; it passed alone and in every other run), with nothing to say why.
  assert any(line.startswith(f"Resuming {workdir} from step 11") for line in out), "\n".join(out)
  # The best is chosen again from the evaluations after the resume (steps 15 and 20).
  with open(os.path.join(workdir, "results.json"), encoding="utf-8") as f:
    assert json.load(f)["best"]["step"] in (15, 20)


def test_a_json_file_orbax_is_still_writing_is_read_again(tmp_path, monkeypatch):
  # Orbax rewrites _CHECKPOINT_METADATA from its own thread; the manifest written meanwhile once
  # read it empty and the best checkpoint's save failed ("Expecting value: line 1 column 1").
  path = tmp_path / "_CHECKPOINT_METADATA"
  content = {"commit_timestamp_nsecs": 7, "init_timestamp_nsecs": 3}
  path.write_text("", encoding="utf-8")
  writer = threading.Timer(0.2, lambda: path.write_text(json.dumps(content), encoding="utf-8"))
  writer.start()
  try:
    got = checkpoints._json_digest(str(path), ("commit_timestamp_nsecs",))
  finally:
    writer.join()
  path.write_text(json.dumps(dict(content, commit_timestamp_nsecs=9)), encoding="utf-8")
  assert got == checkpoints._json_digest(str(path), ("commit_timestamp_nsecs",))
  monkeypatch.setattr(checkpoints, "_JSON_READ_PAUSE_S", 0.0)
  path.write_text('{"init_timestamp_nsecs": ', encoding="utf-8")  # stays cut short: damage
  with pytest.raises(json.JSONDecodeError):
    checkpoints._json_digest(str(path), ())
