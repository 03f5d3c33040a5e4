"""Follow-ups to the reliability review: each test pins a problem that docs/RELIABILITY.md once
listed as found and that is now fixed.

  * a raw-data path that does not exist is refused even when an earlier full build could be reused;
  * best checkpoints chosen by one metric, opened under another, are a ValueError naming both;
  * TensorBoard logging does not import torch (tensorboardX would, for about 2 s of CPU per run).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from experiments import checkpoints
from experiments.checkpoints import Checkpoints
from pipelines import datasets
from pipelines import tasks
from pipelines.sources import SourceError

# 40 distinct English sentences with their French: enough that the hash split puts some of them in
# each of train, validation and test.
_PAIRS = "".join(f"We have {n} cats.\tNous avons {n} chats.\n" for n in range(3, 43))


def test_a_missing_source_is_refused_although_a_full_build_exists(tmp_path):
  pairs = tmp_path / "fra.txt"
  pairs.write_text(_PAIRS, encoding="utf-8")
  prepared = tmp_path / "prepared"
  # Builds the full dataset and the task's tokenized cache: both could be reused without a source.
  tasks.TranslationData.load(source=pairs, data_dir=prepared, min_freq=1)
  typo = tmp_path / "fra.tx"
  message = rf"fra_eng source {re.escape(str(typo))} does not exist\. no raw data for fra_eng"
  for use in (lambda: datasets.prepare("fra_eng", source=typo, data_dir=prepared),
              lambda: datasets.load("fra_eng", "test", source=typo, data_dir=prepared),
              lambda: tasks.TranslationData.load(source=typo, data_dir=prepared, min_freq=1)):
    with pytest.raises(SourceError, match=message):
      use()
  # The path it was built from is still accepted, and its build reused.
  report = datasets.prepare("fra_eng", source=pairs, data_dir=prepared)
  assert not report.built and report.splits == {
      split: len(datasets.load("fra_eng", split, source=pairs, data_dir=prepared))
      for split in datasets.SPLITS["fra_eng"]}
  assert sum(report.splits.values()) == 40 and min(report.splits.values()) > 0
  assert os.path.isdir(os.path.join(report.path, "tokenized"))


def _best_by_accuracy(workdir) -> None:
  """A best checkpoint of step 4 chosen by dev/accuracy (0.75, 'max'), as the toy run saves it."""
  ckpts = Checkpoints(workdir, best_metric="dev/accuracy", best_mode="max", asynchronous=False)
  assert ckpts.save_best(4, {"w": np.arange(5, dtype=np.float32)},
                         {"dev/accuracy": 0.75, "dev/loss": 0.5})
  ckpts.close()


def test_best_checkpoints_of_another_metric_are_refused_naming_both(tmp_path):
  _best_by_accuracy(tmp_path)
  best_dir = re.escape(str(tmp_path / "best"))
  for kwargs, asked in (({}, "dev/loss"), ({"best_metric": "dev/bleu"}, "dev/bleu")):
    ckpts = Checkpoints(tmp_path, asynchronous=False, **kwargs)
    try:
      assert ckpts.latest_step() is None  # the latest checkpoints do not depend on the metric
      for use in (ckpts.best_step, ckpts.best_value, ckpts.check_best_metric,
                  lambda: ckpts.save_best(6, {"w": np.zeros(5, np.float32)},
                                          {"dev/accuracy": 0.9, "dev/loss": 0.1, "dev/bleu": 3.0}),
                  lambda: ckpts.restore_best_params({"w": np.zeros(5, np.float32)}, None)):
        with pytest.raises(ValueError, match=(
            rf"{best_dir} holds the best checkpoint chosen by 'dev/accuracy' \(step 4\), not by "
            rf"best_metric '{asked}': open it with the best_metric and best_mode of the run")):
          use()
    finally:
      ckpts.close()
  # Nothing was saved by the refused calls; under the metric it was saved with, the run opens and
  # its best checkpoint reads back.
  ckpts = Checkpoints(tmp_path, best_metric="dev/accuracy", best_mode="max", asynchronous=False)
  try:
    assert ckpts.best.all_steps() == [4]
    assert (ckpts.best_step(), ckpts.best_value()) == (4, 0.75)
    assert not ckpts.is_better(0.5) and ckpts.is_better(0.8)
  finally:
    ckpts.close()


# Run in a fresh interpreter whose `torch` is a stand-in (so the test means the same whether or not
# the real torch is installed): logs a few metrics, reads the event files back, and reports whether
# torch was imported for it and whether it can still be imported afterwards.
_LOG_AND_READ_BACK = r"""
import glob, json, os, struct, sys
from experiments import metrics_log
workdir = sys.argv[1]
logger = metrics_log.MetricsLogger(workdir, console=lambda line: None)
logger.write(3, "train", {"loss": 0.25, "accuracy": 0.5})
logger.write(5, "dev", {"loss": 0.125})
logger.close()
imported = "torch" in sys.modules
import torch
from tensorboardX.proto import event_pb2
scalars = []
for path in glob.glob(os.path.join(workdir, metrics_log.TENSORBOARD_DIR, "events.out.tfevents.*")):
  with open(path, "rb") as f:
    data = f.read()
  while data:  # TFRecord: length (8 bytes), its CRC (4), the Event, the Event's CRC (4)
    (n,) = struct.unpack("<Q", data[:8])
    event = event_pb2.Event.FromString(data[12:12 + n])
    data = data[16 + n:]
    scalars += [[event.step, v.tag, v.simple_value] for v in event.summary.value]
print(json.dumps({"imported": imported, "stand_in": torch.STAND_IN, "scalars": sorted(scalars)}))
"""


def test_tensorboard_logging_does_not_import_torch(tmp_path):
  stand_in = tmp_path / "site" / "torch"
  stand_in.mkdir(parents=True)
  (stand_in / "__init__.py").write_text("STAND_IN = True\nTensor = type('Tensor', (), {})\n")
  path = os.pathsep.join(p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p)
  done = subprocess.run([sys.executable, "-c", _LOG_AND_READ_BACK, str(tmp_path / "run")],
                        env=dict(os.environ, PYTHONPATH=path, JAX_PLATFORMS="cpu"),
                        capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode == 0, done.stderr
  report = json.loads(done.stdout.splitlines()[-1])
  assert report == {"imported": False, "stand_in": True, "scalars": [
      [3, "train/accuracy", 0.5], [3, "train/loss", 0.25], [5, "dev/loss", 0.125]]}


def test_a_failed_saves_cause_names_the_os_error_and_its_file():
  cause = checkpoints._cause  # pylint: disable=protected-access
  # TensorStore's long message, reduced to the file and the operating system's error.
  store = RuntimeError('INTERNAL: Error writing local file "/w/checkpoints/5/x": '
                       "[OS error: File too large] [os_error_code=27] "
                       'Failed writing: "/w/checkpoints/5/x"')
  assert cause(store) == "File too large (errno 27) writing /w/checkpoints/5/x"
  # A write of Python's own: the OSError's number, and its file when it carries one.
  assert cause(OSError(27, "File too large", "/w/m.json")) == (
      "File too large (errno 27) writing /w/m.json")
  assert cause(OSError(27, "File too large")) == "File too large (errno 27)"
  assert cause(ValueError("bad\nmore")) == "bad"
