"""The explorer's service: trained runs that answer one input at a time, as plain JSON-able dicts.

    explorer = Explorer(["runs/sentiment-bilstm_attn_additive", "runs/translation-transformer"])
    explorer.describe()            # [{'id': '0', 'experiment': 'sentiment', 'options': {...}}, ...]
    explorer.answer("1", "I won!", {"beam_size": 4, "tsv": True, "num_results": 3})

No web library is imported here (experiments/explorer/app.py puts this on HTTP). Each run is
loaded once with `runs.load_run(workdir, 'best')`; a directory that is missing, holds no run, or
whose checkpoint fails verification is refused when the Explorer is built (RunRefusedError,
naming the directory and why).

An answer is computed by the experiment's own command code: its cli.py `answer(run, args,
console)` (what `python -m experiments predict <experiment>` runs once the run is loaded) with
an argparse namespace built from the options and a ListConsole, so `output['lines']` are exactly
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

import argparse
import base64
import dataclasses
import math
import os
import threading
import unicodedata
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from experiments import runs
from experiments.checkpoints import CheckpointDamagedError
from experiments.checkpoints import CheckpointMismatchError
from experiments.console import ListConsole
from experiments.console import UsageError
from experiments.console import excerpt
from experiments.couplet import cli as couplet_cli
from experiments.matching import cli as matching_cli
from experiments.sentiment import cli as sentiment_cli
from experiments.translation import cli as translation_cli

POOL_QUERY = "[pool]"  # the query label of a pooling attention's one row


class ExplorerError(ValueError):
  """A request the explorer cannot answer; the message names what was wrong."""


class InputError(ExplorerError):
  """An input or option of the wrong type, empty, out of range, or one the model cannot read."""


class TooLargeError(InputError):
  """An input over the explorer's limits (Limits)."""


class UnknownRunError(ExplorerError):
  """A run id the explorer does not serve."""


class RunRefusedError(ExplorerError):
  """A --workdir that cannot be served: missing, not a run, damaged, or of a model that does not
  predict (named with the reason). `damaged`: its checkpoint failed verification or does not fit
  the model (the command line's failure while running, exit 1; the others are input errors)."""

  def __init__(self, message: str, damaged: bool = False):
    super().__init__(message)
    self.damaged = damaged


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


# ---- options ---------------------------------------------------------------------------------


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
        raise InputError(f"{where} must be true or false, got {_shown(value)}")
      return value
    if self.type == "choice":
      if value not in self.choices:
        raise InputError(f"{where} must be one of {list(self.choices)}, got {_shown(value)}")
      return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      raise InputError(f"{where} must be a{'n integer' if self.type == 'int' else ' number'}, "
                       f"got {_shown(value)}")
    if self.type == "int" and not isinstance(value, int):
      raise InputError(f"{where} must be an integer, got {_shown(value)}")
    if not math.isfinite(value):
      raise InputError(f"{where} must be a finite number, got {value}")
    if ((self.minimum is not None and value < self.minimum) or
        (self.maximum is not None and value > self.maximum)):
      raise InputError(f"{where} must lie in [{self.minimum}, {self.maximum}], got {value}")
    return value


def _shown(value: Any) -> str:
  """A JSON value for a message: its type and a short excerpt."""
  kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
          list: "a list", dict: "an object", type(None): "null"}.get(type(value), "a value")
  if value is None:
    return kind
  return f"{kind} {excerpt(value, 40) if isinstance(value, str) else repr(value)[:40]}"


def check_options(spec: Mapping[str, Option], given: Any) -> dict[str, Any]:
  """The options of a request checked against a run's `spec`: every name known, every value of
  its type and range; null or left out = the command's default (None: the flag not given)."""
  if given is None:
    given = {}
  if not isinstance(given, dict):
    raise InputError(f"options must be an object of name: value, got {_shown(given)}")
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
    raise InputError(f"{field} must be a string, got {_shown(value)}")
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
                     f"{_shown(value)}")
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


WEIGHTS_FORMATS = ("lists", "float32")


def encode_weights(weights: np.ndarray, weights_format: str) -> Any:
  """A map's float32 (L, H, Q, K) weights for JSON: nested lists ('lists'), or ('float32')
  {'dtype': 'float32', 'shape': [L, H, Q, K], 'base64': the little-endian float32 bytes in C
  order}, the same values in about a quarter of the text and without formatting a float each."""
  if weights_format == "lists":
    return weights.astype(float).tolist()
  return {"dtype": "float32", "shape": list(weights.shape),
          "base64": base64.b64encode(np.ascontiguousarray(weights, "<f4").tobytes()).decode()}


def _seq2seq_maps(maps: Mapping[str, np.ndarray], source_tokens: Sequence[str],
                  output_tokens: Sequence[str], decoder_inputs: Sequence[str]
                  ) -> list[dict[str, Any]]:
  """The maps of Seq2SeqTask.attention_maps with their tokens: rows cut to the output tokens
  (a hypothesis cut at the length limit has no eos row)."""
  rows = len(output_tokens)
  labelled = {"encoder_self_attention": ("self", source_tokens, source_tokens),
              "decoder_self_attention": ("self", decoder_inputs[:rows], decoder_inputs[:rows]),
              "cross_attention": ("cross", output_tokens, source_tokens)}
  out = []
  for name in ("encoder_self_attention", "decoder_self_attention", "cross_attention"):
    if name in maps:
      kind, queries, keys = labelled[name]
      weights = maps[name][:, :, :len(queries), :len(keys)]
      out.append(attention_map(name, kind, weights, queries, keys))
  return out


# ---- the experiments -------------------------------------------------------------------------


def _sentiment_options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  del run, limits  # `predict sentiment` has no options of its own
  return {}


def _sentiment_answer(run: runs.Run, text: str, options: dict[str, Any], console: ListConsole
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  del options
  args = argparse.Namespace(inputs=[text], workdir=run.workdir, checkpoint=run.checkpoint,
                            heatmap=None)
  prediction = sentiment_cli.answer(run, args, console)[0]
  output = {"label": prediction.label_name, "probability": float(prediction.probability),
            "words": list(prediction.words), "unknown": list(prediction.unknown),
            "weights": ([] if prediction.word_weights is None  # a model without attention
                        else [float(w) for w in prediction.word_weights])}
  maps = []
  for name, weights in run.task.attention_maps(run.params, prediction).items():
    if name == "pooling":
      maps.append(attention_map(name, "pooling", weights, [POOL_QUERY], prediction.words))
    else:
      maps.append(attention_map(name, "self", weights, prediction.words, prediction.words))
  return output, maps


def _decoding_options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  """--beam-size, --num-results and --length-penalty, with the run's own defaults."""
  data = run.config.data
  return {
      "beam_size": Option("beam_size", "int", int(data.beam_size), 1, limits.max_beam,
                          help="beam width (1: greedy search)"),
      "num_results": Option("num_results", "int", 1, 1, limits.max_results,
                            help="how many results per input (the beam widens to it)"),
      "length_penalty": Option("length_penalty", "float", float(data.length_penalty), 0.0, 10.0,
                               help="GNMT length penalty alpha of beam search (not with beam 1)"),
  }


def _translation_options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  return {**_decoding_options(run, limits),
          "tsv": Option("tsv", "bool", False, help="translation<TAB>score<TAB>input lines "
                        "(needed for num_results above 1)")}


def _translation_answer(run: runs.Run, text: str, options: dict[str, Any], console: ListConsole
                        ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  args = argparse.Namespace(inputs=[text], workdir=run.workdir, checkpoint=run.checkpoint,
                            heatmap=None, beam_size=options["beam_size"],
                            length_penalty=options["length_penalty"],
                            num_results=options["num_results"] or 1,
                            tsv=bool(options["tsv"]))
  translation_cli.check_options(args)
  translation = translation_cli.answer(run, args, console)[0]
  beam, alpha = translation_cli.decoding(run.task.config.data, args.beam_size,
                                         args.length_penalty, args.num_results)
  output = {"translations": [{"text": t, "score": float(s)} for t, s in
                             zip(translation.alternatives, translation.alternative_scores)],
            "source_tokens": list(translation.source_tokens),
            "tokens": list(translation.tokens),
            "unknown_source": list(translation.unknown_source),
            "beam_size": beam, "length_penalty": alpha}
  maps = run.task.attention_maps(run.params, translation.source_ids, translation.target_ids)
  inputs = ["<bos>", *translation.tokens]
  return output, _seq2seq_maps(maps, translation.source_tokens, translation.tokens, inputs)


def _couplet_options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  return {**_decoding_options(run, limits),
          "free": Option("free", "bool", False, help="no length constraint"),
          "force_punct": Option("force_punct", "bool", False,
                                help="the upper line's punctuation at the same positions"),
          "no_copy": Option("no_copy", "bool", False,
                            help="never the upper line's character at the same position"),
          "keep_pattern": Option("keep_pattern", "bool", False,
                                 help="repeat characters exactly where the upper line does")}


def _couplet_answer(run: runs.Run, text: str, options: dict[str, Any], console: ListConsole
                    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  args = argparse.Namespace(
      inputs=[text], workdir=run.workdir, checkpoint=run.checkpoint, heatmap=None,
      beam_size=options["beam_size"], length_penalty=options["length_penalty"],
      num_results=options["num_results"] or 1,
      **{flag: bool(options[flag]) for flag in ("free", "force_punct", "no_copy",
                                                "keep_pattern")})
  couplet_cli.check_options(args)
  generation = couplet_cli.answer(run, args, console)[0]
  task = run.task
  output = {"upper": generation.upper, "chars": list(generation.chars),
            "results": [{"text": couplet_cli.spaced_like(generation.upper, line),
                         "score": float(score)}
                        for line, score in zip(generation.lines, generation.scores)],
            "unknown": list(generation.unknown)}
  _, src = task.encode_upper(generation.upper)
  best = generation.tokens[0]
  maps = task.attention_maps(run.params, src, task.vocab.encode(best))
  return output, _seq2seq_maps(maps, generation.chars + ["</s>"], task.ended_tokens(best),
                               ["<s>", *best])


def _matching_options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  del run, limits
  return {"threshold": Option("threshold", "float", 0.5, 0.0, 1.0,
                              help="label 1 where p(same) >= this")}


def _matching_answer(run: runs.Run, pair: tuple[str, str], options: dict[str, Any],
                     console: ListConsole) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  threshold = 0.5 if options["threshold"] is None else float(options["threshold"])
  args = argparse.Namespace(inputs=list(pair), input_file=None, workdir=run.workdir,
                            checkpoint=run.checkpoint, heatmap=None, threshold=threshold,
                            layer=-1, head=None)
  matching_cli.check_options(args)
  pairs = matching_cli.parse_pairs(list(pair), None)
  prediction = matching_cli.answer(run, pairs, args, console)[0]
  a, b = prediction.tokens
  output = {"label": int(prediction.probability >= threshold),
            "probability": float(prediction.probability), "threshold": threshold,
            "tokens": {"a": list(a), "b": list(b)},
            "unknown": {"a": list(prediction.unknown[0]), "b": list(prediction.unknown[1])}}
  weights = prediction.attention
  maps = []
  if "self_attention" in weights:
    packed = ["[CLS]", *a, "[SEP]", *b, "[SEP]"]
    maps.append(attention_map("self_attention", "self", weights["self_attention"], packed,
                              packed))
  for name, queries, keys in (("a_to_b", a, b), ("b_to_a", b, a)):
    if name in weights:
      maps.append(attention_map(name, "cross", weights[name][None, None], queries, keys))
  for name, keys in (("a_pooling", a), ("b_pooling", b)):
    if name in weights:
      maps.append(attention_map(name, "pooling", weights[name][None, None, None], [POOL_QUERY],
                                keys))
  return output, maps


@dataclasses.dataclass(frozen=True)
class Kind:
  """How the explorer serves one experiment: its input, options and answer."""
  input: str  # 'text' or 'pair'
  options: Callable[[runs.Run, Limits], dict[str, Option]]
  answer: Callable[..., tuple[dict[str, Any], list[dict[str, Any]]]]


KINDS: dict[str, Kind] = {
    "sentiment": Kind("text", _sentiment_options, _sentiment_answer),
    "translation": Kind("text", _translation_options, _translation_answer),
    "couplet": Kind("text", _couplet_options, _couplet_answer),
    "matching": Kind("pair", _matching_options, _matching_answer),
}


# ---- the explorer ----------------------------------------------------------------------------


@dataclasses.dataclass
class Served:
  """One loaded run: its id, the run, how it is served, its options."""
  id: str
  run: runs.Run
  kind: Kind
  options: dict[str, Option]


def load(workdir: str, notes: list[str]) -> runs.Run:
  """runs.load_run(workdir, 'best') for serving; a RunRefusedError naming `workdir` and why.
  What the loader warns about (runs.RunNote: a checkpoint loaded unverified) is added to
  `notes`."""
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
  if run.config.experiment not in KINDS:
    raise RunRefusedError(f"--workdir {workdir} is a {run.config.experiment!r} run; the explorer "
                          f"serves {', '.join(KINDS)}")
  if run.task.__class__.__name__ == "PretrainTask":  # matching's masked language model
    raise RunRefusedError(f"--workdir {workdir} is a pretraining run ({run.config.model_name}): "
                          "it does not classify pairs; serve a classifier fine-tuned from it")
  return run


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
      run = load(workdir, self.notes)
      kind = KINDS[run.config.experiment]
      self.runs[str(number)] = Served(str(number), run, kind, kind.options(run, limits))

  def describe(self) -> list[dict[str, Any]]:
    """Every served run as /api/runs lists it."""
    return [{"id": s.id, "workdir": s.run.workdir, "experiment": s.run.config.experiment,
             "model": s.run.config.model_name, "step": int(s.run.step),
             "options": {name: o.describe() for name, o in s.options.items()},
             "input": s.kind.input} for s in self.runs.values()]

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
                       f"{_shown(weights_format)}")
    checked = check_options(served.options, options)
    if served.kind.input == "pair":
      value = check_pair(value, self.limits)
    else:
      value = check_text(value, "input", self.limits)
    console = ListConsole()
    with self._lock:
      try:
        output, maps = served.kind.answer(served.run, value, checked, console)
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
