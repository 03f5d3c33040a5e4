"""Follow-ups to the reliability review: each test pins a problem that docs/RELIABILITY.md once
listed as found and that is now fixed.

  * a raw-data path that does not exist is refused even when an earlier full build could be reused;
"""

from __future__ import annotations

import os
import re

import pytest

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
