"""The registry of experiments: what an experiment declares, and how the engine finds it.

An experiment is a Python package (or module) that registers one `Experiment` when imported:

    registry.register(registry.Experiment(
        name="sentiment",
        make_task=SentimentTask,                     # Config -> Task (experiments/task.py)
        configs={"bilstm_mean": bilstm_mean, ...},   # model name -> Config (one named run each)
        default_model="bilstm_mean",
        add_predict_arguments=cli.add_arguments,     # optional: its `predict` command
        predict=cli.predict,
        aliases=("classify",),                       # optional extra top-level commands
        answerer=answerer.ANSWERER,                  # optional: served by the explorer
        commands={"report": report.COMMAND}))        # optional: its own commands (`report <name>`)
                                                     # (and evaluate_pairs, see Experiment)

The engine never names an experiment. It finds them
  * among the packages inside `experiments/` (every one that registers an experiment on import;
    the TOOL_PACKAGES, such as the explorer, are not experiments and are never imported here),
  * through the entry-point group `attention_zoo.experiments` of installed distributions
    (`[project.entry-points."attention_zoo.experiments"] myexp = "mypackage.myexp"`),
  * by import: an unknown experiment name is imported as a module (`train mypackage.myexp`, or
    `train myexp` with the module importable), and so is every `--import MODULE`.
experiments/template/ is a complete experiment to copy (see its README).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import inspect
import pkgutil
import re
import textwrap
from typing import Any, Callable, Iterable, Mapping

from experiments.answers import Answerer
from experiments.config import Config

ENTRY_POINT_GROUP = "attention_zoo.experiments"
SUMMARY_CHARS = 100  # the longest line Experiment.summary gives


@dataclasses.dataclass(frozen=True)
class Command:
  """A command an experiment adds to `python -m experiments` beside predict, for work over its
  trained runs that is not a model's (a report on whole splits, a table of samples):
  `python -m experiments <name> <experiment> ...`, where <name> is its key in
  Experiment.commands (one command name may serve several experiments: `report couplet`,
  `report matching`).

  Attributes:
    help: one line for --help.
    add_arguments: adds the command's own flags to its parser.
    run: `run(args, console) -> int`: does the work, printing through the console
      (experiments.console.Console); raises console.UsageError for the user's mistake (exit 2, as
      does a FileNotFoundError), ValueError for a failure while running (exit 1).
    description: the longer text of its --help (default: `help`).
  """
  help: str
  add_arguments: Callable[[argparse.ArgumentParser], None]
  run: Callable[[argparse.Namespace, Any], int]
  description: str = ""


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A registered experiment.

  Attributes:
    name: the name used on the command line ('sentiment').
    make_task: builds the task from a config (usually the Task subclass itself).
    configs: model name -> function returning that named run's Config.
    default_model: the model trained when the command line gives no --model.
    predict: optional `predict(args, console) -> int` for `python -m experiments predict <name>`:
      args is the argparse.Namespace (inputs, workdir, checkpoint, data_dir, heatmap and the
      experiment's own flags; beam_size and num_results where its add_predict_arguments calls
      experiments.cli_flags.add_decoding_arguments), console the experiments.console.Console that
      everything it prints goes through; it returns the exit status.
    add_predict_arguments: optional function adding the experiment's own flags to its predict
      parser.
    evaluate_pairs: optional `evaluate_pairs(args, console) -> int` for `python -m experiments
      evaluate --workdir RUN --pairs FILE`: scores a run of this experiment on the user's own
      examples (args: workdir, pairs, checkpoint, data_dir, beam_size), printing through console.
    aliases: extra top-level commands meaning `predict <name>` ('translate', 'couplet').
    description: one line for --help.
    answerer: optional experiments.answers.Answerer: how a run answers one input for the attention
      explorer (`serve`); a run of an experiment without one is not served.
    commands: name -> Command: the experiment's own commands over its runs (`python -m
      experiments <name> <experiment> ...`).
  """
  name: str
  make_task: Callable[[Config], Any]
  configs: Mapping[str, Callable[[], Config]]
  default_model: str
  predict: Callable[[argparse.Namespace, Any], int] | None = None
  add_predict_arguments: Callable[[argparse.ArgumentParser], None] | None = None
  evaluate_pairs: Callable[[argparse.Namespace, Any], int] | None = None
  aliases: tuple[str, ...] = ()
  description: str = ""
  answerer: Answerer | None = None
  commands: Mapping[str, Command] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    if self.default_model not in self.configs:
      raise ValueError(f"experiment {self.name!r}: default_model {self.default_model!r} is not one "
                       f"of its models ({', '.join(self.configs)})")

  def config(self, model: str | None = None) -> Config:
    """The named run's config, with `experiment` and `model_name` filled in."""
    model = self.default_model if model is None else model
    if model not in self.configs:
      raise ValueError(f"unknown model {model!r} for experiment {self.name!r}; known models: "
                       f"{', '.join(sorted(self.configs))}")
    cfg = self.configs[model]()
    cfg.experiment, cfg.model_name = self.name, model
    return cfg

  def summary(self, model: str, width: int = SUMMARY_CHARS) -> str:
    """One line on the named run `model`: the first sentence of its function's docstring,
    shortened to `width` characters at a word ('' for a function without a docstring)."""
    paragraph = (inspect.getdoc(self.configs[model]) or "").split("\n\n")[0]
    sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", " ".join(paragraph.split()), maxsplit=1)[0]
    return textwrap.shorten(sentence, width, placeholder=" ...") if sentence else ""


_EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment, *, replace: bool = False) -> Experiment:
  """Adds `experiment` to the registry (the same name twice is an error unless `replace`)."""
  if experiment.name in _EXPERIMENTS and not replace:
    raise ValueError(f"an experiment named {experiment.name!r} is already registered")
  _EXPERIMENTS[experiment.name] = experiment
  return experiment


def unregister(name: str) -> None:
  _EXPERIMENTS.pop(name, None)


# Packages inside experiments/ that are tools over trained runs, not experiments: discovery never
# imports them (the explorer's web server and its libraries are loaded by `serve` alone).
TOOL_PACKAGES = frozenset({"explorer"})


def builtin_modules() -> list[str]:
  """The packages inside experiments/ (each may register an experiment when imported; a shared
  package such as seq2seq registers none), less the TOOL_PACKAGES."""
  package = importlib.import_module("experiments")
  return [f"experiments.{info.name}" for info in pkgutil.iter_modules(package.__path__)
          if info.ispkg and info.name not in TOOL_PACKAGES]


def entry_point_modules() -> list[str]:
  """The modules installed distributions declare in the `attention_zoo.experiments` group."""
  return [ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]


def load_experiments(extra_modules: Iterable[str] = ()) -> dict[str, Experiment]:
  """Imports the built-in, entry-point and `extra_modules` experiments; returns the registry."""
  for module in (*builtin_modules(), *entry_point_modules(), *extra_modules):
    importlib.import_module(module)
  return dict(_EXPERIMENTS)


def _import_candidate(module: str) -> Any:
  """The module, or None when `module` itself does not exist (its own failing imports raise)."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
      return None
    raise


def get_experiment(name: str) -> Experiment:
  """The registered experiment `name`, importing its module if nothing registered it yet.

  `name` is an experiment's name (found among the built-in packages, or a module of that name) or
  a module path whose import registers an experiment (`mypackage.myexp`; its `EXPERIMENT`).

  Raises:
    ValueError: listing the known experiments, when no module registers `name`.
  """
  if name in _EXPERIMENTS:
    return _EXPERIMENTS[name]
  builtin = f"experiments.{name}"
  for module_name in ([builtin] if builtin in builtin_modules() else []) + [name]:
    module = _import_candidate(module_name)
    if name in _EXPERIMENTS:
      return _EXPERIMENTS[name]
    found = getattr(module, "EXPERIMENT", None)
    if isinstance(found, Experiment) and _EXPERIMENTS.get(found.name) is found:
      return found
  known = ", ".join(sorted(_EXPERIMENTS)) or "none registered"
  raise ValueError(f"unknown experiment {name!r}; known experiments: {known} (an experiment of "
                   "your own is found by its module path, or with --import MODULE)")


def get_config(experiment: str, model: str | None = None) -> Config:
  """The config of a named run, e.g. get_config('sentiment', 'bilstm_attn_additive')."""
  return get_experiment(experiment).config(model)
