"""benchmarks/levers.py: its table and its refusals (the timing runs are full-size commands)."""

from __future__ import annotations

import pytest

from benchmarks import common
from benchmarks import levers


def test_markdown_gives_each_rounds_time_and_the_ratio_of_medians():
  measured = dict(machine=common.machine(), rounds=3, steps=7, results={
      "bahdanau_cpu": {"default": [1000.0, 1100.0, 1050.0], "bfloat16": [800.0, 840.0, 880.0],
                       "no_ynn": [1200.0, 1250.0, 1300.0]}})
  text = levers.markdown(measured)
  assert "| bahdanau_cpu | default | (none) | 1,000 / 1,100 / 1,050 | 1.00x |" in text
  assert "| bahdanau_cpu | bfloat16 | bfloat16 compute | 800 / 840 / 880 | 1.25x |" in text
  assert ("| bahdanau_cpu | no_ynn | --xla_cpu_experimental_ynn_fusion_type= | "
          "1,200 / 1,250 / 1,300 | 0.84x |") in text


@pytest.mark.parametrize("argv, message", [
    (["--models", "lstm"], "--models: unknown \\['lstm'\\]"),
    (["--levers", "fast"], "--levers: unknown \\['fast'\\]"),
    (["--rounds", "0"], "--rounds and --steps must be >= 1"),
])
def test_unknown_models_levers_and_counts_are_refused(argv, message):
  with pytest.raises(SystemExit, match=message):
    levers.main(argv)


def test_the_cross_key_value_comparison_decodes_the_same_tokens_both_ways(capsys):
  from benchmarks import decoding_cross_kv  # pylint: disable=import-outside-toplevel
  assert decoding_cross_kv.main(["--quick"]) == 0
  table = capsys.readouterr().out
  assert "| greedy | 8 |" in table and "| beam 2 | 8 |" in table
  assert table.count("| yes |") == 2
