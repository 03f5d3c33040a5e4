"""The explorer's zoo page: one zoo attention on numbers the user types, no trained run needed.

    compute("dot", queries=[[1, 0]], keys=[[1, 0], [0, 1], [1, 1]], values=[[1], [2], [3]],
            valid_len=2, seed=0)
    -> {'scores': [[1.0, 0.0, 1.0]], 'weights': [[0.731.., 0.268.., 0.0]], 'output': [[1.268..]]}

The numbers are zoo's own: the score module of that name (zoo.make_score; its parameters, for
the scores that have some, drawn by zoo.Attention's initializer from `seed`) gives the scores
(Q, K) of every query against every key, unmasked; zoo.masked_softmax (d2l's semantics: keys at
or past a query's valid length get weight exactly 0, a valid length of 0 gives a zero row) the
weights (Q, K); and zoo.Attention with the same parameters the output (Q, Dv), the weighted
average of the values. Every field is checked first (ZooInputError naming it).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import zoo
from zoo import scoring

MAX_ROWS = 64  # the most queries or keys
MAX_WIDTH = 64  # the widest query, key or value vector
MAX_SEED = 2**31 - 1


class ZooInputError(ValueError):
  """A field of the zoo page's request of the wrong type or shape; the message names it."""


def _matrix(value: Any, field: str) -> np.ndarray:
  """A non-empty (rows, width) list of lists of finite numbers as float32."""
  if not isinstance(value, list) or not value:
    raise ZooInputError(f"{field} must be a non-empty list of rows (a matrix), got "
                        f"{type(value).__name__}")
  if len(value) > MAX_ROWS:
    raise ZooInputError(f"{field} has {len(value)} rows; at most {MAX_ROWS}")
  width = None
  for i, row in enumerate(value):
    if not isinstance(row, list) or not row:
      raise ZooInputError(f"{field}[{i}] must be a non-empty list of numbers")
    if width is None:
      width = len(row)
      if width > MAX_WIDTH:
        raise ZooInputError(f"{field} rows have {width} numbers; at most {MAX_WIDTH}")
    elif len(row) != width:
      raise ZooInputError(f"{field}[{i}] has {len(row)} numbers, {field}[0] has {width}: every "
                          "row must have the same width")
    for j, x in enumerate(row):
      if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ZooInputError(f"{field}[{i}][{j}] must be a number, got {type(x).__name__}")
      if not math.isfinite(x):
        raise ZooInputError(f"{field}[{i}][{j}] must be a finite number, got {x}")
  return np.asarray(value, np.float32)


def _integer(value: Any, field: str, low: int, high: int) -> int:
  if isinstance(value, bool) or not isinstance(value, int):
    raise ZooInputError(f"{field} must be an integer, got {type(value).__name__}")
  if not low <= value <= high:
    raise ZooInputError(f"{field} must lie in [{low}, {high}], got {value}")
  return value


def _valid_lens(value: Any, num_queries: int, num_keys: int) -> np.ndarray:
  """int32 (1,) from one length for every query, or (1, Q) from one per query; None: all K."""
  if value is None:
    return np.asarray([num_keys], np.int32)
  if isinstance(value, list):
    if len(value) != num_queries:
      raise ZooInputError(f"valid_len has {len(value)} lengths; give one per query ({num_queries}"
                          ") or one integer for all")
    lens = [_integer(x, f"valid_len[{i}]", 0, num_keys) for i, x in enumerate(value)]
    return np.asarray([lens], np.int32)
  return np.asarray([_integer(value, "valid_len", 0, num_keys)], np.int32)


def compute(score: Any, queries: Any, keys: Any, values: Any, valid_len: Any = None,
            seed: Any = 0) -> dict[str, list[list[float]]]:
  """One attention of queries (Q, D) over keys (K, Dk) and values (K, Dv).

  Args:
    score: one of zoo.SCORE_NAMES.
    queries: Q rows of D numbers.
    keys: K rows of Dk numbers (Dk = D for 'dot' and 'scaled_dot').
    values: K rows of Dv numbers.
    valid_len: keys each query may attend to (the first ones): one integer in [0, K] for all
      queries, a list of Q of them, or None for all K.
    seed: the seed of the score's parameters (additive, bilinear, concat), in [0, 2**31 - 1].

  Returns:
    {'scores': (Q, K) unmasked, 'weights': (Q, K) masked softmax, 'output': (Q, Dv)} as lists.

  Raises:
    ZooInputError: naming the field of the wrong type, shape or range.
  """
  if not isinstance(score, str) or score not in scoring.SCORE_NAMES:
    raise ZooInputError(f"score must be one of {', '.join(scoring.SCORE_NAMES)}, got {score!r}")
  q = _matrix(queries, "queries")  # (Q, D)
  k = _matrix(keys, "keys")  # (K, Dk)
  v = _matrix(values, "values")  # (K, Dv)
  if len(v) != len(k):
    raise ZooInputError(f"values has {len(v)} rows but keys has {len(k)}: one value per key")
  if scoring.score_class(score).requires_equal_widths and q.shape[1] != k.shape[1]:
    raise ZooInputError(f"the {score} score needs queries and keys of one width: queries rows "
                        f"have {q.shape[1]} numbers, keys rows {k.shape[1]}")
  lens = _valid_lens(valid_len, len(q), len(k))
  seed = _integer(seed, "seed", 0, MAX_SEED)
  module = zoo.Attention(score=score)
  inputs = (q[None], k[None], v[None])  # a batch of one: (1, Q, D), (1, K, Dk), (1, K, Dv)
  variables = module.init(jax.random.key(seed), *inputs, valid_lens=lens)
  output, _ = module.apply(variables, *inputs, valid_lens=lens)  # (1, Q, Dv)
  scorer = scoring.make_score(score)
  scorer_params = variables.get("params", {}).get("scorer", {})
  scores = scorer.apply({"params": scorer_params}, q[None], k[None])  # (1, Q, K)
  weights = zoo.masked_softmax(scores, jnp.asarray(lens))  # (1, Q, K)
  as_lists = lambda x: np.asarray(x, np.float64)[0].tolist()
  return {"scores": as_lists(scores), "weights": as_lists(weights), "output": as_lists(output)}
