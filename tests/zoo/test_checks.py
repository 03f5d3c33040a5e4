"""zoo.checks: the public argument checks, chiefly the shared integer rule `positive_int`."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from zoo import checks


@pytest.mark.parametrize("value, minimum", [
    (1, 1), (7, 1), (0, 0), (5, 5), (np.int32(3), 1), (np.int64(0), 0), (np.uint8(2), 2),
])
def test_positive_int_accepts_python_and_numpy_integers_at_or_above_minimum(value, minimum):
  assert checks.positive_int(value, "size", minimum=minimum) is None


@pytest.mark.parametrize("value, minimum, shown", [
    (0, 1, "0"),
    (-3, 1, "-3"),
    (-1, 0, "-1"),
    (4, 5, "4"),
    (np.int32(0), 1, "np.int32(0)"),
    (True, 1, "True"),  # bool is an int subclass, but not a count
    (False, 0, "False"),
    (2.0, 1, "2.0"),  # whole floats still cannot be static shapes
    ("3", 1, "'3'"),
    (None, 1, "None"),
])
def test_positive_int_rejects_with_the_agreed_message(value, minimum, shown):
  message = f"size must be an integer >= {minimum}, got {shown}"
  with pytest.raises(ValueError) as info:
    checks.positive_int(value, "size", minimum=minimum)
  assert str(info.value) == message


def test_positive_int_defaults_to_a_minimum_of_one():
  checks.positive_int(1, "beam_size")
  with pytest.raises(ValueError, match=r"^beam_size must be an integer >= 1, got 0$"):
    checks.positive_int(0, "beam_size")


def test_positive_int_rejects_arrays():
  # A 0-d jax array is a traced value in jit, never a static size.
  with pytest.raises(ValueError, match="max_len must be an integer >= 1"):
    checks.positive_int(jnp.int32(3), "max_len")


def test_array_checks_name_the_argument_and_show_what_arrived():
  tokens = np.zeros((3,), np.int32)
  with pytest.raises(ValueError, match=r"^tokens: expected an array of rank 2, got shape \(3,\) "
                                       r"and dtype int32$"):
    checks.rank(tokens, 2, "tokens")
  with pytest.raises(ValueError, match="mask: expected a boolean array"):
    checks.boolean(tokens, "mask")
  with pytest.raises(ValueError, match=r"lengths must lie in \[0, 5\].*from 0 to 6"):
    checks.lengths_in_range(np.array([0, 6, 2]), "lengths", 5)
