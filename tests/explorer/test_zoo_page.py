"""The zoo page's numbers: zoo's own functions and modules, checked on a hand-computed case."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import zoo
from experiments.explorer import zoo_page
from zoo import scoring

Q, K, D, DV = 3, 5, 4, 2  # odd, all different


def _inputs(seed: int = 0):
  rng = np.random.default_rng(seed)
  return (rng.normal(size=(Q, D)).round(3).tolist(), rng.normal(size=(K, D)).round(3).tolist(),
          rng.normal(size=(K, DV)).round(3).tolist())


def test_dot_score_by_hand():
  # q = (1, 0); keys (1, 0), (0, 1), (1, 1): scores 1, 0, 1; the first 2 keys valid:
  # weights e / (e + 1), 1 / (e + 1), 0; output 1 * w0 + 2 * w1.
  out = zoo_page.compute("dot", [[1, 0]], [[1, 0], [0, 1], [1, 1]], [[1], [2], [3]], 2, 0)
  w0, w1 = math.e / (math.e + 1), 1 / (math.e + 1)
  assert out["scores"] == [[1.0, 0.0, 1.0]]
  np.testing.assert_allclose(out["weights"], [[w0, w1, 0.0]], rtol=1e-6)
  assert out["weights"][0][2] == 0.0  # exactly zero past the valid length
  np.testing.assert_allclose(out["output"], [[w0 + 2 * w1]], rtol=1e-6)


@pytest.mark.parametrize("score", scoring.SCORE_NAMES)
@pytest.mark.parametrize("valid_len", [K, 3, [5, 1, 0]])
def test_every_score_equals_zoo_called_directly(score, valid_len):
  queries, keys, values = _inputs()
  out = zoo_page.compute(score, queries, keys, values, valid_len, seed=7)
  q, k, v = (np.asarray(x, np.float32)[None] for x in (queries, keys, values))
  lens = np.asarray([valid_len] if isinstance(valid_len, int) else [valid_len], np.int32)
  module = zoo.Attention(score=score)
  variables = module.init(jax.random.key(7), q, k, v, valid_lens=lens)
  context, weights = module.apply(variables, q, k, v, valid_lens=lens)
  scorer_params = variables.get("params", {}).get("scorer", {})
  scores = scoring.make_score(score).apply({"params": scorer_params}, q, k)
  np.testing.assert_array_equal(np.asarray(out["scores"], np.float32), np.asarray(scores)[0])
  np.testing.assert_array_equal(np.asarray(out["weights"], np.float32),
                                np.asarray(zoo.masked_softmax(scores, lens))[0])
  np.testing.assert_allclose(out["weights"], np.asarray(weights)[0], atol=1e-7)
  np.testing.assert_array_equal(np.asarray(out["output"], np.float32), np.asarray(context)[0])
  assert np.asarray(out["scores"]).shape == (Q, K)
  assert np.asarray(out["output"]).shape == (Q, DV)
  lens_per_row = [valid_len] * Q if isinstance(valid_len, int) else valid_len
  for row, n in zip(out["weights"], lens_per_row):
    assert sum(row) == pytest.approx(1.0 if n else 0.0, abs=1e-6)
    assert all(w == 0.0 for w in row[n:])


def test_the_seed_draws_the_parameters():
  queries, keys, values = _inputs()
  first = zoo_page.compute("additive", queries, keys, values, K, seed=1)
  again = zoo_page.compute("additive", queries, keys, values, K, seed=1)
  other = zoo_page.compute("additive", queries, keys, values, K, seed=2)
  assert first == again and first["scores"] != other["scores"]


@pytest.mark.parametrize("change, message", [
    ({"score": "cosine"}, "score must be one of dot, scaled_dot"),
    ({"score": 3}, "score must be one of"),
    ({"queries": []}, "queries must be a non-empty list"),
    ({"queries": "1, 2"}, "queries must be a non-empty list"),
    ({"queries": [[1, 2], [1]]}, "queries[1] has 1 numbers, queries[0] has 2"),
    ({"queries": [[1, "2"]]}, "queries[0][1] must be a number, got str"),
    ({"queries": [[1, True]]}, "queries[0][1] must be a number, got bool"),
    ({"queries": [[1, float("inf")]]}, "queries[0][1] must be a finite number"),
    ({"queries": [[1]] * 65}, "queries has 65 rows; at most 64"),
    ({"keys": [[1, 0, 0]] * 3}, "the dot score needs queries and keys of one width"),
    ({"values": [[1]] * 2}, "values has 2 rows but keys has 3"),
    ({"values": [[]] * 3}, "values[0] must be a non-empty list"),
    ({"valid_len": 4}, "valid_len must lie in [0, 3], got 4"),
    ({"valid_len": -1}, "valid_len must lie in [0, 3]"),
    ({"valid_len": 1.5}, "valid_len must be an integer, got float"),
    ({"valid_len": [1, 2]}, "valid_len has 2 lengths; give one per query (1)"),
    ({"valid_len": ["1"]}, "valid_len[0] must be an integer, got str"),
    ({"seed": -1}, "seed must lie in [0, 2147483647]"),
    ({"seed": "0"}, "seed must be an integer, got str"),
])
def test_bad_fields_are_named(change, message):
  request = {"score": "dot", "queries": [[1, 0]], "keys": [[1, 0], [0, 1], [1, 1]],
             "values": [[1], [2], [3]], "valid_len": 2, "seed": 0, **change}
  with pytest.raises(zoo_page.ZooInputError) as e:
    zoo_page.compute(**request)
  assert message in str(e.value)
