"""pipelines.checks.positive_int: zoo's integer rule, and every pipelines option that follows it."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines import checks, tasks
from pipelines.batching import Batcher
from pipelines.vocab import Vocab
from zoo import checks as zoo_checks

VALUES = [1, 7, 0, -3, 4, 5, np.int32(3), np.int64(0), np.uint8(2), np.int16(-1), True, False,
          2.0, 2.5, "3", None, [3]]


def _outcome(check, value, minimum):
  try:
    check(value, "size", minimum=minimum)
  except ValueError as e:
    return str(e)
  return "accepted"


@pytest.mark.parametrize("minimum", [0, 1, 5])
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_rule_and_the_message_are_zoos(value, minimum):
  assert _outcome(checks.positive_int, value, minimum) == _outcome(zoo_checks.positive_int,
                                                                   value, minimum)


@pytest.mark.parametrize("value, minimum, shown", [
    (0, 1, "0"), (-3, 0, "-3"), (4, 5, "4"), (np.int32(0), 1, "np.int32(0)"), (True, 1, "True"),
    (False, 0, "False"), (2.0, 1, "2.0"), ("3", 1, "'3'"), (None, 1, "None"),
])
def test_refusals_name_the_option_and_the_value(value, minimum, shown):
  with pytest.raises(ValueError) as info:
    checks.positive_int(value, "max_len", minimum=minimum)
  assert str(info.value) == f"max_len must be an integer >= {minimum}, got {shown}"


@pytest.mark.parametrize("value", [7, np.int64(9), np.uint16(13)], ids=repr)
def test_python_and_numpy_integers_pass(value):
  assert checks.positive_int(value, "max_len") is None


@pytest.mark.parametrize("make, message", [
    (lambda: tasks.SentimentOptions(max_len=12.0), "max_len must be an integer >= 1, got 12.0"),
    (lambda: tasks.SentimentOptions(max_len=True), "max_len must be an integer >= 1, got True"),
    (lambda: tasks.SentimentOptions(split_seed=-1), "split_seed must be an integer >= 0, got -1"),
    (lambda: tasks.SentimentOptions(split_seed=0.5),
     "split_seed must be an integer >= 0, got 0.5"),
    (lambda: tasks.TranslationOptions(max_src_len=9.0),
     "max_src_len must be an integer >= 2, got 9.0"),
    (lambda: tasks.CoupletOptions(max_tgt_len="33"),
     "max_tgt_len must be an integer >= 2, got '33'"),
    (lambda: Vocab.build([["a"]], min_freq=3.0), "min_freq must be an integer >= 1, got 3.0"),
    (lambda: Vocab.build([["a"]], max_size=3), "max_size must be an integer >= 4, got 3"),
    (lambda: Batcher({"tokens": [[1], [2, 3], [4]]}, boundaries=(5,), batch_size=3.0,
                     process_index=0, process_count=1),
     "batch_size must be an integer >= 1, got 3.0"),
    (lambda: Batcher({"tokens": [[1], [2, 3], [4]]}, boundaries=(5,), batch_size=3,
                     process_index=0, process_count=1).train_batches(seed=1.5),
     "seed must be an integer >= 0, got 1.5"),
])
def test_pipelines_options_follow_the_rule(make, message):
  with pytest.raises(ValueError) as info:
    make()
  assert str(info.value) == message


def test_numpy_integer_options_are_accepted():
  options = tasks.TranslationOptions(max_src_len=np.int64(11), max_tgt_len=np.int32(13))
  assert options.boundaries == {"src": (2, 5, 8, 11), "tgt": (3, 6, 9, 13)}
  assert tasks.SentimentOptions(max_len=np.int16(17), split_seed=np.int64(5)).max_len == 17
