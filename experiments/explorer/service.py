"""The explorer's service: trained runs that answer one input at a time, as plain JSON-able dicts.

    explorer = Explorer(["runs/sentiment-bilstm_attn_additive", "runs/translation-transformer"])
    explorer.describe()            # [{'id': '0', 'experiment': 'sentiment', 'options': {...}}, ...]
    explorer.answer("1", "I won!", {"beam_size": 4, "tsv": True, "num_results": 3})

No web library is imported here (experiments/explorer/app.py puts this on HTTP). Each run is
loaded once with `runs.load_run(workdir, 'best')`; a directory that is missing, holds no run, or
whose checkpoint fails verification is refused when the Explorer is built (RunRefusedError,
naming the directory and why).

An answer is computed by the experiment's Answerer, which its registry entry carries
(`Experiment.answerer`, experiments/answers.py; this module names no experiment): it runs the
experiment's own command code, its cli.py `answer` (what `python -m experiments predict
<experiment>` runs once the run is loaded), with the options and a ListConsole, so
`output['lines']` are exactly
the lines the command prints on standard output for that input and those options, and
`output['notes']` what it prints on standard error. Beside them come the structured fields the
page draws (a label and its probability, the words and their weights, the beam's translations
and scores ...) and `attention`: every attention of the model as a list of maps

    {'name': str, 'kind': 'pooling' | 'self' | 'cross', 'layers': L, 'heads': H,
     'query_tokens': [Q tokens], 'key_tokens': [K tokens], 'weights': (L, H, Q, K) nested lists}

(or, asked for with weights_format='float32', 'weights': {'dtype': 'float32', 'shape': [L, H, Q,
K], 'base64': the little-endian float32 bytes}: the same values, a quarter of the text)

cut to the real tokens (no padding), each row a distribution over its valid keys (a causal
decoder row over the inputs up to its own).

Requests are answered one model call at a time (a lock around every call into a run), and every
input is bounded (Limits): a text's characters, the beam, the number of results; bad input is an
InputError (or TooLargeError, UnknownRunError) whose message names the field and the problem.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import threading
import unicodedata
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from experiments import registry
from experiments import runs
from experiments.answers import AnswerError
from experiments.answers import Answerer
from experiments.answers import InputError
from experiments.answers import Limits
from experiments.answers import Option
from experiments.answers import TooLargeError
from experiments.answers import shown
from experiments.checkpoints import CheckpointDamagedError
from experiments.checkpoints import CheckpointMismatchError
from experiments.console import ListConsole
from experiments.console import UsageError
from experiments.console import excerpt

# The request errors are experiments.answers' (an experiment's answer raises them too); these
# names are the explorer's API (app.py maps them to HTTP statuses).
ExplorerError = AnswerError
__all__ = ["ExplorerError", "InputError", "TooLargeError", "UnknownRunError", "RunRefusedError",
           "Limits", "Option", "Explorer", "check_options", "check_text", "check_pair",
           "encode_weights"]


class UnknownRunError(ExplorerError):
  """A run id the explorer does not serve."""


class RunRefusedError(ExplorerError):
  """A --workdir that cannot be served: missing, not a run, damaged, or of a model that does not
  predict (named with the reason). `damaged`: its checkpoint failed verification or does not fit
  the model (the command line's failure while running, exit 1; the others are input errors)."""

  def __init__(self, message: str, damaged: bool = False):
    super().__init__(message)
    self.damaged = damaged


def check_options(spec: Mapping[str, Option], given: Any) -> dict[str, Any]:
  """The options of a request checked against a run's `spec`: every name known, every value of
  its type and range; null or left out = the command's default (None: the flag not given)."""
  if given is None:
    given = {}
  if not isinstance(given, dict):
    raise InputError(f"options must be an object of name: value, got {shown(given)}")
  unknown = sorted(set(given) - set(spec))
  if unknown:
    known = ", ".join(spec) or "none"
    raise InputError(f"unknown option{'s' if len(unknown) > 1 else ''} "
                     f"{', '.join(map(repr, unknown))}; this run's options: {known}")
  return {name: None if given.get(name) is None else option.check(given[name])
          for name, option in spec.items()}


# ---- inputs ----------------------------------------------------------------------------------


ALLOWED_CONTROLS = frozenset("\t\n\r")


def check_text(value: Any, field: str, limits: Limits, *, one_line: bool = False) -> str:
  """A text input: a non-empty string of at most limits.max_chars characters, without control
  characters (TAB and line breaks allowed unless `one_line`) or unpaired surrogates."""
  if not isinstance(value, str):
    raise InputError(f"{field} must be a string, got {shown(value)}")
  if not value.strip():
    raise InputError(f"{field} is empty: type some text")
  if len(value) > limits.max_chars:
    raise TooLargeError(f"{field} has {len(value):,} characters; the limit is "
                        f"{limits.max_chars:,}")
  allowed = frozenset() if one_line else ALLOWED_CONTROLS
  for position, char in enumerate(value):
    category = unicodedata.category(char)
    if category == "Cs":
      raise InputError(f"{field} holds an unpaired surrogate (U+{ord(char):04X}) at character "
                       f"{position}: not valid Unicode text")
    if category == "Cc" and char not in allowed:
      raise InputError(f"{field} holds the control character U+{ord(char):04X} at character "
                       f"{position}: only text can be explored")
  return value


def check_pair(value: Any, limits: Limits) -> tuple[str, str]:
  """A pair input: {'a': text, 'b': text}, each a one-line text (check_text)."""
  if not isinstance(value, dict):
    raise InputError(f"input must be an object {{\"a\": text, \"b\": text}} for a pair, got "
                     f"{shown(value)}")
  extra = sorted(set(value) - {"a", "b"})
  if extra:
    raise InputError(f"input has unknown field{'s' if len(extra) > 1 else ''} "
                     f"{', '.join(map(repr, extra))}; a pair is {{\"a\": text, \"b\": text}}")
  for side in ("a", "b"):
    if side not in value:
      raise InputError(f"input.{side} is missing; a pair is {{\"a\": text, \"b\": text}}")
  return (check_text(value["a"], "input.a", limits, one_line=True),
          check_text(value["b"], "input.b", limits, one_line=True))


# ---- attention maps --------------------------------------------------------------------------


WEIGHTS_FORMATS = ("lists", "float32")


def encode_weights(weights: np.ndarray, weights_format: str) -> Any:
  """A map's float32 (L, H, Q, K) weights for JSON: nested lists ('lists'), or ('float32')
  {'dtype': 'float32', 'shape': [L, H, Q, K], 'base64': the little-endian float32 bytes in C
  order}, the same values in about a quarter of the text and without formatting a float each."""
  if weights_format == "lists":
    return weights.astype(float).tolist()
  return {"dtype": "float32", "shape": list(weights.shape),
          "base64": base64.b64encode(np.ascontiguousarray(weights, "<f4").tobytes()).decode()}


# ---- the explorer ----------------------------------------------------------------------------


@dataclasses.dataclass
class Served:
  """One loaded run: its id, the run, how its experiment answers (registry), its options."""
  id: str
  run: runs.Run
  answerer: Answerer
  options: dict[str, Option]


def load(workdir: str, notes: list[str]) -> tuple[runs.Run, Answerer]:
  """runs.load_run(workdir, 'best') for serving, with its experiment's Answerer (the registry's
  `Experiment.answerer`); a RunRefusedError naming `workdir` and why. What the loader warns about
  (runs.RunNote: a checkpoint loaded unverified) is added to `notes`."""
  try:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always", runs.RunNote)  # an unverified old checkpoint still serves
      run = runs.load_run(workdir, "best", None)
    notes.extend(str(w.message) for w in caught if issubclass(w.category, runs.RunNote))
  except FileNotFoundError as e:
    if not os.path.isdir(workdir):
      raise RunRefusedError(f"--workdir {workdir}: no such directory") from None
    raise RunRefusedError(f"--workdir {workdir} is not a training run: {e}") from None
  except (CheckpointDamagedError, CheckpointMismatchError) as e:
    raise RunRefusedError(f"--workdir {workdir}: {e}", damaged=True) from None
  except ValueError as e:
    raise RunRefusedError(f"--workdir {workdir} cannot be loaded: {e}") from None
  answerer = registry.get_experiment(run.config.experiment).answerer
  if answerer is None:
    served = sorted(name for name, experiment in registry.load_experiments().items()
                    if experiment.answerer is not None)
    raise RunRefusedError(f"--workdir {workdir} is a {run.config.experiment!r} run; the explorer "
                          f"serves {', '.join(served)}")
  reason = answerer.refuses(run) if answerer.refuses is not None else None
  if reason is not None:
    raise RunRefusedError(f"--workdir {workdir} is {reason}")
  return run, answerer


class Explorer:
  """Trained runs served one request at a time.

  Args:
    workdirs: the runs' directories (their ids are '0', '1', ... in this order).
    limits: what one request may ask for.

  Raises:
    RunRefusedError: for the first directory that cannot be served (naming it and why).
  """

  def __init__(self, workdirs: Sequence[str], limits: Limits = Limits()):
    if not workdirs:
      raise RunRefusedError("no --workdir given: name at least one trained run")
    self.limits = limits
    self._lock = threading.Lock()
    self.runs: dict[str, Served] = {}
    self.notes: list[str] = []  # what loading the runs warned about, for the command to print
    for number, workdir in enumerate(workdirs):
      run, answerer = load(workdir, self.notes)
      self.runs[str(number)] = Served(str(number), run, answerer, answerer.options(run, limits))

  def describe(self) -> list[dict[str, Any]]:
    """Every served run as /api/runs lists it."""
    return [{"id": s.id, "workdir": s.run.workdir, "experiment": s.run.config.experiment,
             "model": s.run.config.model_name, "step": int(s.run.step),
             "options": {name: o.describe() for name, o in s.options.items()},
             "input": s.answerer.input} for s in self.runs.values()]

  def served(self, run_id: Any) -> Served:
    """The run `run_id` serves; UnknownRunError otherwise."""
    if not isinstance(run_id, str) or run_id not in self.runs:
      raise UnknownRunError(f"unknown run id {excerpt(str(run_id), 40)}; the runs are "
                            f"{', '.join(self.runs)} (GET /api/runs lists them)")
    return self.runs[run_id]

  def answer(self, run_id: Any, value: Any, options: Any = None,
             weights_format: Any = "lists") -> dict[str, Any]:
    """The run's answer to one input with its attention (see the module docstring); each map's
    weights as `encode_weights` writes them in `weights_format` ('lists' or 'float32').

    Raises:
      UnknownRunError, InputError, TooLargeError: naming what was wrong.
    """
    served = self.served(run_id)
    if weights_format not in WEIGHTS_FORMATS:
      raise InputError(f"weights_format must be one of {', '.join(WEIGHTS_FORMATS)}, got "
                       f"{shown(weights_format)}")
    checked = check_options(served.options, options)
    if served.answerer.input == "pair":
      value = check_pair(value, self.limits)
    else:
      value = check_text(value, "input", self.limits)
    console = ListConsole()
    with self._lock:
      try:
        output, maps = served.answerer.answer(served.run, value, checked, console)
      except UsageError as e:
        raise InputError(_option_names(str(e))) from None
    for m in maps:
      m["weights"] = encode_weights(m["weights"], weights_format)
    return {"run": served.id, "experiment": served.run.config.experiment,
            "output": {"lines": list(console.lines), "notes": list(console.notes), **output},
            "attention": maps}


def _option_names(message: str) -> str:
  """A command's message with its flags named as the API names the options
  ('--beam-size' -> 'beam_size')."""
  for flag in ("--beam-size", "--num-results", "--length-penalty", "--threshold", "--tsv"):
    message = message.replace(flag, flag[2:].replace("-", "_"))
  return message
