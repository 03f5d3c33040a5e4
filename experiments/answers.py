"""How a tool over trained runs (the attention explorer, `serve`) asks a run for its answer to one
input: what an experiment declares in its registry entry (`Experiment.answerer`), so that the tool
names no experiment.

    Answerer(input='text' | 'pair',
             options=lambda run, limits: {name: Option, ...},   # its predict flags, typed
             answer=lambda run, value, options, console: (output, maps),
             refuses=lambda run: None | 'the reason')            # optional

An answer runs the experiment's own command code (its cli.py `answer`, what `predict` runs once
the run is loaded) with a ListConsole, so the console's lines are exactly what the command prints;
`output` holds the structured fields beside them (a label and its probability, the beam's
results ...) and `maps` every attention of the model, each made by `attention_map`. Bad input
is an InputError (TooLargeError over the Limits) whose message names the field and the problem.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np

from experiments.console import excerpt

POOL_QUERY = "[pool]"  # the query label of a pooling attention's one row


class AnswerError(ValueError):
  """A request a run cannot answer; the message names what was wrong."""


class InputError(AnswerError):
  """An input or option of the wrong type, empty, out of range, or one the model cannot read."""


class TooLargeError(InputError):
  """An input over the tool's limits (Limits)."""


@dataclasses.dataclass(frozen=True)
class Limits:
  """What one request may ask for.

  Attributes:
    max_chars: the most characters of one text (each side of a pair).
    max_beam: the largest beam (beam_size) of the decoding experiments.
    max_results: the most results (num_results) per input.
  """
  max_chars: int = 5000
  max_beam: int = 16
  max_results: int = 16


@dataclasses.dataclass(frozen=True)
class Option:
  """One option of a run's answer, mirroring a flag of the experiment's predict command.

  Attributes:
    name: the JSON name (the flag's dest: 'beam_size' for --beam-size).
    type: 'bool', 'int', 'float' or 'choice'.
    default: what the command uses when the flag is left out (for a run's own setting, its value).
    minimum, maximum: the allowed range of an int or float (inclusive).
    choices: the values of a 'choice'.
    help: one line for the page.
  """
  name: str
  type: str
  default: Any
  minimum: float | None = None
  maximum: float | None = None
  choices: tuple[Any, ...] | None = None
  help: str = ""

  def describe(self) -> dict[str, Any]:
    """The option as /api/runs lists it."""
    out = {"type": self.type, "default": self.default, "help": self.help}
    if self.minimum is not None:
      out["min"] = self.minimum
    if self.maximum is not None:
      out["max"] = self.maximum
    if self.choices is not None:
      out["choices"] = list(self.choices)
    return out

  def check(self, value: Any) -> Any:
    """`value` if it is of this option's type and within its range; else an InputError."""
    where = f"options.{self.name}"
    if self.type == "bool":
      if not isinstance(value, bool):
        raise InputError(f"{where} must be true or false, got {shown(value)}")
      return value
    if self.type == "choice":
      if value not in self.choices:
        raise InputError(f"{where} must be one of {list(self.choices)}, got {shown(value)}")
      return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      raise InputError(f"{where} must be a{'n integer' if self.type == 'int' else ' number'}, "
                       f"got {shown(value)}")
    if self.type == "int" and not isinstance(value, int):
      raise InputError(f"{where} must be an integer, got {shown(value)}")
    if not math.isfinite(value):
      raise InputError(f"{where} must be a finite number, got {value}")
    if ((self.minimum is not None and value < self.minimum) or
        (self.maximum is not None and value > self.maximum)):
      raise InputError(f"{where} must lie in [{self.minimum}, {self.maximum}], got {value}")
    return value


def shown(value: Any) -> str:
  """A JSON value for a message: its type and a short excerpt."""
  kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
          list: "a list", dict: "an object", type(None): "null"}.get(type(value), "a value")
  if value is None:
    return kind
  return f"{kind} {excerpt(value, 40) if isinstance(value, str) else repr(value)[:40]}"


def attention_map(name: str, kind: str, weights: np.ndarray, query_tokens: Sequence[str],
                  key_tokens: Sequence[str]) -> dict[str, Any]:
  """One attention as the API gives it.

  Args:
    name: what the model calls it ('self_attention', 'cross_attention', 'a_to_b' ...).
    kind: 'pooling', 'self' or 'cross'.
    weights: float (L, H, Q, K), already cut to the real tokens.
    query_tokens: the Q tokens of the rows.
    key_tokens: the K tokens of the columns.
  """
  weights = np.asarray(weights, np.float32)
  if weights.ndim != 4 or weights.shape[2:] != (len(query_tokens), len(key_tokens)):
    raise ValueError(f"attention {name!r}: weights of shape {weights.shape} do not match "
                     f"{len(query_tokens)} query and {len(key_tokens)} key tokens (L, H, Q, K)")
  return {"name": name, "kind": kind, "layers": int(weights.shape[0]),
          "heads": int(weights.shape[1]), "query_tokens": list(query_tokens),
          "key_tokens": list(key_tokens), "weights": weights}


@dataclasses.dataclass(frozen=True)
class Answerer:
  """How an experiment's runs answer one input for a tool (the module docstring).

  Attributes:
    input: 'text' (the value is one string) or 'pair' (a tuple of two strings).
    options: (run, limits) -> {name: Option}: the flags of its predict command a tool offers, with
      the run's own defaults.
    answer: (run, value, options, console) -> (output, maps): `options` checked against the spec
      (None: the flag left out); `output` a JSON-able dict, `maps` a list of `attention_map`s; a
      console.UsageError for input the model cannot read.
    refuses: optional run -> None, or why that run cannot answer ('a pretraining run ...').
  """
  input: str
  options: Callable[[Any, Limits], dict[str, Option]]
  answer: Callable[..., tuple[dict[str, Any], list[dict[str, Any]]]]
  refuses: Callable[[Any], str | None] | None = None

  def __post_init__(self):
    if self.input not in ("text", "pair"):
      raise ValueError(f"Answerer.input must be 'text' or 'pair', got {self.input!r}")
