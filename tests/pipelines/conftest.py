"""Fixtures for the pipelines tests: the shipped samples, prepared once per session."""

from __future__ import annotations

import pytest

from pipelines import datasets


@pytest.fixture(scope="session")
def prepared_samples(tmp_path_factory):
  """A data_dir holding all three shipped samples prepared ('sample' config); {name: report}."""
  data_dir = tmp_path_factory.mktemp("zoo_data")
  reports = {name: datasets.prepare(name, data_dir=data_dir) for name in datasets.NAMES}
  return data_dir, reports
