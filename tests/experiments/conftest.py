"""Fixtures the experiments' tests share."""

from __future__ import annotations

import jax
import pytest


@pytest.fixture(scope="module")
def quick_compiles():
  """Compiles with most XLA optimizations off, for a module whose models each compile once and
  run a few times; use it with `pytestmark = pytest.mark.usefixtures("quick_compiles")`."""
  jax.config.update("jax_disable_most_optimizations", True)
  yield
  jax.config.update("jax_disable_most_optimizations", False)
