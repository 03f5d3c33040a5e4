"""benchmarks/bench_prepare.py's count checks: every dataset has its expected counts."""

from __future__ import annotations

import pytest

from benchmarks import bench_prepare
from pipelines import datasets


def _report(name, splits, skipped=None):
  return datasets.PrepareReport(name=name, config="full", path="", source="", splits=splits,
                                skipped=skipped or {}, skipped_examples={}, split_rule="",
                                built=True, seconds=1.0)


def test_every_dataset_has_expected_counts_and_its_grouping_splits_exist():
  assert set(bench_prepare.EXPECTED) == set(datasets.NAMES)
  for name, (_, splits) in bench_prepare.GROUP_KEY.items():
    assert set(splits) <= set(datasets.SPLITS[name])


@pytest.mark.parametrize("splits, skipped, problems", [
    ({"train": 27_467, "validation": 3_434, "test": 3_433, "unlabelled": 3_861}, {}, []),
    ({"train": 27_460, "validation": 3_434, "test": 3_433, "unlabelled": 3_861},
     {"empty sentence": 7}, []),
    ({"train": 27_466, "validation": 3_434, "test": 3_433, "unlabelled": 3_861}, {},
     ["34,333 labelled kept + 0 skipped != 34,334"]),
    ({"train": 27_467, "validation": 3_434, "test": 3_433}, {}, ["unlabelled None != 3,861"]),
])
def test_question_pairs_counts_labelled_and_unlabelled_pairs(monkeypatch, splits, skipped,
                                                             problems):
  monkeypatch.setattr(bench_prepare, "GROUP_KEY", {})  # no prepared data to read here
  report = _report("question_pairs", splits, skipped)
  assert bench_prepare.check("question_pairs", report, data_dir=None) == problems
