"""Fixtures of the reliability tests: the uninterrupted toy run the other runs are compared with."""

from __future__ import annotations

import pytest

import toy_runs


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory):
  """The toy run trained once, start to end, in this process (toy_runs.OVERRIDES, seed 0)."""
  return toy_runs.train(tmp_path_factory.mktemp("reference"))
