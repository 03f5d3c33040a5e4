"""benchmarks/explorer.py's harness without a trained run: its inputs and its markdown."""

from benchmarks import explorer


def test_inputs_are_the_sizes_the_goal_names():
  review, described = explorer.request_for({"experiment": "sentiment"})
  assert 220 <= len(review["input"].split()) <= 240 and "words" in described
  translation, _ = explorer.request_for({"experiment": "translation"})
  assert len(translation["input"].split()) == 20
  assert translation["options"] == {"beam_size": 4}
  pair, _ = explorer.request_for({"experiment": "matching"})
  assert set(pair["input"]) == {"a", "b"}


def test_percentile_and_markdown():
  assert explorer.percentile([0.3, 0.1, 0.2, 0.4], 90) == 0.4
  assert explorer.percentile([0.3, 0.1, 0.2, 0.4], 50) == 0.2
  row = {"workdir": "runs/quickstart", "experiment": "sentiment", "model": "bilstm_attn_dot",
         "input": "IMDB review, 233 words (260 tokens)", "shape": "pooling 1x1x1x256",
         "bytes": 25_000, "bytes_lists": 90_000, "median_s": 0.0331,
         "lists_median_s": 0.05, "min_s": 0.013, "p90_s": 0.12, "max_s": 0.121,
         "direct_median_s": 0.012, "repeats": 15}
  machine = {"cpu": "AMD EPYC", "cores": 2, "jax": "0.10.2", "date": "2026-11-27 02:31 UTC"}
  text = explorer.markdown({"machine": machine, "load_before": [1.0, 2.0, 3.0],
                            "load_after": [1.5, 2.0, 3.0], "warmup": 3, "repeats": 15,
                            "rows": [row]}, "python -m benchmarks.explorer --workdir W")
  assert "`python -m benchmarks.explorer --workdir W`" in text
  assert "| sentiment `bilstm_attn_dot` (runs/quickstart) | IMDB review, 233 words" in text
  assert "| 25 kB / 90 kB | 0.033 s | 0.013 / 0.120 / 0.121 s | 0.050 s | 0.012 s |" in text
  assert "1.0, 2.0, 3.0 before" in text
  assert all(len(line) <= 100 for line in text.splitlines() if not line.startswith("|"))
