"""The integer rule of the pipelines' options (lengths, sizes, counts, seeds).

It is the rule of zoo.checks.positive_int, word for word in its message, kept here because
pipelines/ does not import zoo/ (tests/test_layers.py): a Python int or a numpy integer scalar at
or above a minimum. A bool is not a count, and a whole float (2.0) is refused too, since these
values become array widths and static shapes downstream.
"""

from __future__ import annotations

import numpy as np


def positive_int(value, name: str, minimum: int = 1) -> None:
  """Raises ValueError naming `name` and `value` unless `value` is an integer >= `minimum`."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
