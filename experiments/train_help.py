"""`python -m experiments train <experiment> --help`: that experiment's models and settings.

The train command's -h/--help is `ExperimentHelp`. With an experiment named before it, the help
lists the experiment's named runs, one line each (registry.Experiment.summary), and the settings a
run's config takes as overrides (--SECTION.FIELD VALUE): the sections of the --model given before
--help, else of the default model. Without an experiment it is the generic train help; an unknown
experiment or model is a usage error (exit 2) naming it. Everything comes from the registry: no
experiment is named here.
"""

from __future__ import annotations

import argparse
import dataclasses
import textwrap
from typing import Callable

from experiments import config as config_lib
from experiments import registry

WIDTH = 100  # the help's line width


def models_text(experiment: registry.Experiment, width: int = WIDTH) -> str:
  """One line per named run: its name (the default starred) and its summary."""
  names = [f"{m}*" if m == experiment.default_model else m for m in experiment.configs]
  column = max(len(n) for n in names) + 2
  room = max(40, width - 2 - column)
  return "\n".join(f"  {shown:<{column}}{experiment.summary(model, room)}".rstrip()
                   for shown, model in zip(names, experiment.configs))


def settings_text(cfg: config_lib.Config, width: int = WIDTH) -> str:
  """The overridable fields of each section of `cfg` (train, optimizer, model, data), by name."""
  parts = config_lib.sections(cfg)
  column = max(len(name) for name in parts) + 2
  lines = []
  for name, section in parts.items():
    fields = ", ".join(f.name for f in dataclasses.fields(section))
    lines += textwrap.wrap(fields, width, initial_indent=f"  {name:<{column}}",
                           subsequent_indent=" " * (2 + column))
  return "\n".join(lines)


def experiment_help(experiment: registry.Experiment, cfg: config_lib.Config) -> str:
  """The text after the options in `train <experiment> --help`: its models, then the settings of
  `cfg`'s model."""
  settings = textwrap.fill(
      f"settings of {cfg.model_name}, each overridden by its dotted path (e.g. "
      "--optimizer.learning_rate=3e-4 --train.num_epochs 4); --show-config prints them with their "
      "values, --model NAME --help another model's:", WIDTH)
  return (f"models (--model NAME; * the default):\n{models_text(experiment)}\n\n"
          f"{settings}\n{settings_text(cfg)}")


class ExperimentHelp(argparse.Action):
  """-h/--help of the train command: the named experiment's help, or the generic one.

  `add_options(parser)` adds the train command's flags other than the experiment, so that the
  experiment's help shows them under its own usage line.
  """

  def __init__(self, option_strings, dest, add_options: Callable[[argparse.ArgumentParser], None],
               **kwargs):
    del dest, kwargs
    super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0,
                     help="show this help and exit (after an experiment: its models and settings)")
    self.add_options = add_options

  def __call__(self, parser, namespace, values, option_string=None):
    name = getattr(namespace, "experiment", None)
    if name is None:
      parser.print_help()
      parser.exit()
    try:
      experiment = registry.get_experiment(name)
      cfg = experiment.config(getattr(namespace, "model", None))
    except ValueError as e:
      parser.error(str(e))
    shown = argparse.ArgumentParser(
        prog=f"{parser.prog} {name}", add_help=False, description=experiment.description or None,
        epilog=experiment_help(experiment, cfg),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    shown.add_argument(*self.option_strings, action="help", help=self.help)
    self.add_options(shown)
    shown.print_help()
    parser.exit()
