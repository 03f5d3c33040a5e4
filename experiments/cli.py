"""The command line: `python -m experiments <command> ...` (parsing and printing only).

  train <experiment> [--model NAME] [--data-dir PATH] [--workdir DIR] [--SECTION.FIELD VALUE ...]
        [--show-config] [--coordinator-address HOST:PORT --num-processes N --process-id I |
        --distributed]
      Trains a named run; rerunning the same command resumes it. `train <experiment> --help`
      lists the experiment's models (one line each) and the settings of its config
      (experiments/train_help.py). Any setting of the run's config
      is overridden by its dotted path (`--optimizer.learning_rate=3e-4 --train.num_epochs 4`;
      parsed by tyro, see experiments/config.py). --show-config prints the settings and exits.
      With the multi-process flags (experiments/distributed.py) it is one process of a run over
      several hosts; every process gets the same command apart from --process-id.
  evaluate --workdir DIR [--split test] [--checkpoint best|latest|STEP] [--data-dir PATH]
      Evaluates a trained run and prints its metrics (and the signatures of those that have one)
      as JSON (STEP: one of the kept checkpoints, e.g. each epoch's end of a short run).
  evaluate --workdir DIR --pairs FILE [--beam-size N] [--length-penalty A]
           [--checkpoint best|latest|STEP]
      Scores a trained run on your own examples instead of a split, for the experiments that
      take them (translation: a TSV of English<TAB>French pairs), and prints the scores as JSON.
  predict <experiment> [INPUT ...] [--input-file PATH] [--workdir DIR] [--heatmap PNG]
          [--beam-size N] [--num-results N]    (the last two: experiments that decode)
      Runs a trained model on the inputs: the INPUT arguments, or one per line of --input-file
      ('-': standard input), or the lines piped into standard input (each experiment's cli.py
      says what it prints). A file or pipe is read line by line and answered in batches as it
      comes (console.input_batches), so its length does not matter; a line longer than
      --max-line-bytes (default 1 MiB) stops the command with status 2.
  <alias> INPUT ...
      The shorthands experiments declare: `translate` = `predict translation`, `couplet` =
      `predict couplet`, `classify` = `predict sentiment`.
  list
      The registered experiments and their models.
  <command> <experiment> [...]
      The commands experiments add for work over their trained runs that is not a model's
      (registry.Experiment.commands): `report couplet` and `report matching` (a run scored on
      whole splits), `ensemble matching` (trained runs stacked by a regression fitted on dev),
      `ensemble sentiment` (a run blended with NBSVM, paragraph vectors and saved members),
      `blend sentiment` (saved members blended on dev, nothing refitted),
      `table couplet` (random couplets side by side), `by-length translation`
      (BLEU by source length), `pseudo-label sentiment` (a run's labels for IMDB's unlabelled
      reviews, a self-training student's data); `<command> <experiment> --help` gives each one's
      flags.
  serve --workdir RUN [--workdir RUN ...] [--host 127.0.0.1] [--port 8000] [--max-chars 5000]
        [--body-timeout 10] [--max-connections 200]
      The attention explorer (experiments/explorer/): a local web page over the trained runs, at
      http://127.0.0.1:8000/ by default: each run's answer to an input as `predict` prints it,
      and every attention of its model as heatmaps (every layer and head), two runs side by side,
      and the zoo page (one zoo attention on typed numbers). Every run is loaded before the
      server starts; a --workdir that is missing or not a run is refused (exit 2), one whose
      checkpoint is damaged too (exit 1, as predict).
      Binds 127.0.0.1 unless --host says otherwise (with a note: others may then reach it);
      nothing is fetched from the internet. Ctrl-C stops it.

Experiments are found by the registry (experiments/registry.py): this module names none of them.
What the commands print goes through experiments.console.Console (results on stdout, notes on
stderr).

Exit status, the same rule in every command of the project (README, "Exit status"): 0 done; 2 a
usage or input error, found before any work: bad arguments, a path that does not exist (a
--workdir that holds no run, a --data-dir without the data), input that cannot be read (an empty
line, a corrupt archive); 1 a failure while running (NaN loss, a checkpoint of another model, a
batch size the devices cannot split); 128 + the signal number when SIGTERM (143) or SIGINT (130)
stopped training after saving a checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Sequence, TextIO

from experiments import config as config_lib
from experiments import distributed
from experiments import registry
from experiments import runs
from experiments import train_help
from experiments import trainer
from experiments import workdir as workdir_lib
from experiments.cli_flags import add_predict_arguments
from experiments.cli_flags import checkpoint_choice
from experiments.checkpoints import CheckpointMismatchError
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import MAX_LINE_BYTES
from experiments.console import InputLines
from experiments.console import add_line_limit_argument
from experiments.console import open_lines
from pipelines.sources import SourceError


def read_inputs(args: argparse.Namespace, stdin: TextIO | None = None) -> list[str] | InputLines:
  """The inputs of a predict command: its INPUT arguments (a list), or the lines of --input-file
  or of standard input, read as they are iterated (InputLines: memory does not grow with the
  file, and each experiment answers them batch by batch, console.input_batches).

  Raises:
    UsageError: no inputs at all, inputs from two places, or a file that cannot be opened (now);
      while iterating: an empty line, a line over --max-line-bytes, or text that is not UTF-8
      (naming the file and line).
  """
  stdin = stdin or sys.stdin
  if args.inputs and args.input_file:
    raise UsageError("give the inputs either as arguments or with --input-file, not both")
  if args.inputs:
    return list(args.inputs)
  if args.input_file is None and stdin.isatty():
    raise UsageError("no inputs: give them as arguments, with --input-file PATH, or pipe them "
                     "into standard input, one per line")
  path = "-" if args.input_file in (None, "-") else args.input_file
  return InputLines(open_lines(path, stdin, getattr(args, "max_line_bytes", MAX_LINE_BYTES)))


def _pairs_decoding_defaults(experiments: dict[str, registry.Experiment]) -> str | None:
  """For `evaluate --help`: the beam and length penalty each named run of the experiments that
  take --pairs decodes with when the flags are left out (its data.beam_size, data.length_penalty)."""
  named = []
  for name, exp in sorted(experiments.items()):
    if exp.evaluate_pairs is None:
      continue
    for model, make in exp.configs.items():
      data = make().data
      if hasattr(data, "beam_size") and hasattr(data, "length_penalty"):
        named.append(f"{name} {model} beam {data.beam_size}, length penalty "
                     f"{data.length_penalty:g}")
  if not named:
    return None
  return ("With --pairs, decoding uses the run's own data.beam_size and data.length_penalty "
          "unless --beam-size / --length-penalty say otherwise; the named runs': "
          + "; ".join(named) + ".")


def _add_train_options(train: argparse.ArgumentParser) -> None:
  """The train command's flags beside the experiment (its config overrides are tyro's)."""
  train.add_argument("--model", help="the named run within the experiment (default: its default)")
  train.add_argument("--data-dir", help="the data (default: the sample shipped with the package)")
  train.add_argument("--workdir", help="checkpoints, logs and results (default: runs/<experiment>-"
                     "<model>)")
  train.add_argument("--show-config", action="store_true", help="print the settings and exit")
  distributed.add_arguments(train)


def build_parser(experiments: dict[str, registry.Experiment]) -> argparse.ArgumentParser:
  """The parser of every command, with a predict subcommand and the aliases of each experiment."""
  parser = argparse.ArgumentParser(
      prog="python -m experiments", description="Train and use the attention zoo's experiments.",
      epilog="Exit status: 0 ok, 2 a usage or input error (bad arguments, a missing --workdir "
      "or --data-dir, unreadable input), 1 a failure while running, 128+signal when stopped.")
  parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                      help="import MODULE first (it may register more experiments)")
  commands = parser.add_subparsers(dest="command", required=True)

  train = commands.add_parser(
      "train", help="train a named run (resumes from --workdir)", allow_abbrev=False,
      add_help=False, epilog="Any config setting is overridden by its dotted path, e.g. "
      "--optimizer.learning_rate=3e-4 --train.num_epochs 4 --data.boundaries 64 128 256 "
      "--train.progress_bar False; --show-config lists them all with their values. "
      "`train EXPERIMENT --help` lists the experiment's models and settings.")
  train.add_argument("-h", "--help", action=train_help.ExperimentHelp,
                     add_options=_add_train_options)
  train.add_argument("experiment")
  _add_train_options(train)

  evaluate = commands.add_parser("evaluate", help="evaluate a trained run",
                                 epilog=_pairs_decoding_defaults(experiments))
  evaluate.add_argument("--workdir", required=True)
  evaluate.add_argument("--split", default="test", choices=("dev", "test"))
  evaluate.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                        metavar="best|latest|STEP")
  evaluate.add_argument("--data-dir")
  evaluate.add_argument("--pairs", metavar="FILE", help="score the run on your own examples "
                        "instead of a split (translation: English<TAB>French, one pair a line)")
  evaluate.add_argument("--beam-size", type=int, help="with --pairs: the beam (1: greedy; "
                        "default: the run's own data.beam_size)")
  evaluate.add_argument("--length-penalty", type=float, help="with --pairs: GNMT's length "
                        "penalty alpha for beam search (default: the run's own "
                        "data.length_penalty)")
  add_line_limit_argument(evaluate)

  predict = commands.add_parser("predict", help="run a trained model on inputs")
  per_experiment = predict.add_subparsers(dest="experiment", required=True, metavar="experiment")
  for name, exp in sorted(experiments.items()):
    if exp.predict is None:
      continue
    subparsers = [per_experiment.add_parser(name, help=exp.description or None)]
    for alias in exp.aliases:
      subparsers.append(commands.add_parser(alias, help=f"same as `predict {name}`"))
      subparsers[-1].set_defaults(experiment=name)
    for sub in subparsers:
      add_predict_arguments(sub)
      if exp.add_predict_arguments is not None:
        exp.add_predict_arguments(sub)

  commands.add_parser("list", help="list the experiments and their models")
  _add_experiment_commands(commands, experiments)

  serve = commands.add_parser("serve", help="the attention explorer: a local web page over "
                              "trained runs")
  serve.add_argument("--workdir", action="append", required=True, metavar="RUN",
                     help="a trained run's directory (repeat for several runs)")
  serve.add_argument("--host", default="127.0.0.1", help="the address to bind (default "
                     "127.0.0.1: this machine only)")
  serve.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
  serve.add_argument("--max-chars", type=int, default=5000, help="the most characters of one "
                     "input text (default 5000)")
  serve.add_argument("--body-timeout", type=float, default=10.0, metavar="SECONDS",
                     help="drop a request whose body has not arrived this long after its headers "
                     "(408; default 10)")
  serve.add_argument("--max-connections", type=int, default=200, metavar="N",
                     help="answer 503 to new requests while N connections are open or N "
                     "requests running (default 200)")
  return parser


BUILTIN_COMMANDS = ("train", "evaluate", "predict", "list", "serve")


def experiment_commands(experiments: dict[str, registry.Experiment]
                        ) -> dict[str, dict[str, registry.Command]]:
  """Command name -> {experiment name: its Command}: the commands experiments add
  (registry.Experiment.commands).

  Raises:
    ValueError: a command named like a built-in command or an experiment's alias.
  """
  taken = {name: "a built-in command" for name in BUILTIN_COMMANDS}
  taken.update({alias: f"the {name} experiment's alias" for name, exp in experiments.items()
                for alias in exp.aliases})
  out: dict[str, dict[str, registry.Command]] = {}
  for name, exp in sorted(experiments.items()):
    for command, declared in exp.commands.items():
      if command in taken:
        raise ValueError(f"the {name} experiment's command {command!r} is already "
                         f"{taken[command]}; name it otherwise")
      out.setdefault(command, {})[name] = declared
  return out


def _add_experiment_commands(commands, experiments: dict[str, registry.Experiment]) -> None:
  """`<command> <experiment> ...` for every command an experiment adds."""
  for command, owners in sorted(experiment_commands(experiments).items()):
    parser = commands.add_parser(command, help="; ".join(f"{name}: {declared.help}"
                                                         for name, declared in owners.items()))
    per_experiment = parser.add_subparsers(dest="experiment", required=True,
                                           metavar="experiment")
    for name, declared in owners.items():
      sub = per_experiment.add_parser(name, help=declared.help,
                                      description=declared.description or declared.help)
      declared.add_arguments(sub)
      sub.set_defaults(experiment_command=declared)


def _list(experiments: dict[str, registry.Experiment], console: Console) -> int:
  for name, exp in sorted(experiments.items()):
    models = ", ".join(f"{m}*" if m == exp.default_model else m for m in exp.configs)
    console.print(f"{name}: {models}")
  if not experiments:
    console.print("no experiments registered")
  return 0


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _serve(args: argparse.Namespace, console: Console) -> int:
  """`serve`: loads every run (a refused one: exit 2 before the server starts), then serves."""
  # Only this command needs the explorer and its web libraries.
  from experiments.explorer import service  # pylint: disable=g-import-not-at-top
  try:
    explorer = service.Explorer(args.workdir, service.Limits(max_chars=args.max_chars))
  except service.RunRefusedError as e:
    console.error(str(e))
    return 1 if e.damaged else 2  # a damaged checkpoint fails as predict's does
  for note in explorer.notes:
    console.note(note)
  import uvicorn  # pylint: disable=g-import-not-at-top
  from experiments.explorer import app as app_lib  # pylint: disable=g-import-not-at-top
  from experiments.explorer import server  # pylint: disable=g-import-not-at-top
  if args.host not in LOCAL_HOSTS:
    console.note(f"note: binding {args.host}, not 127.0.0.1: other machines that reach this "
                 "address can use the explorer")
  runs_served = ", ".join(f"{r['experiment']} {r['model']}" for r in explorer.describe())
  console.note(f"serving {runs_served} at http://{args.host}:{args.port}/ (Ctrl-C stops)")
  uvicorn.Server(server.server_config(
      app_lib.create_app(explorer), args.host, args.port, body_timeout_s=args.body_timeout,
      max_connections=args.max_connections, max_body_bytes=app_lib.MAX_BODY_BYTES)).run()
  return 0


def _evaluate_pairs(args: argparse.Namespace, console: Console) -> int:
  """`evaluate --pairs`: hands the run to its experiment's evaluate_pairs."""
  experiment = registry.get_experiment(runs.load_config(args.workdir).experiment)
  if experiment.evaluate_pairs is None:
    raise UsageError(f"the {experiment.name} experiment does not score examples of your own "
                     "(--pairs); evaluate a split with --split instead")
  return int(experiment.evaluate_pairs(args, console) or 0)


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
  """Runs one command; returns the exit status (argparse exits with 2 on bad arguments)."""
  console = console or Console()
  argv = list(sys.argv[1:] if argv is None else argv)
  pre = argparse.ArgumentParser(add_help=False)
  pre.add_argument("--import", dest="imports", action="append", default=[])
  known, _ = pre.parse_known_args(argv)
  experiments = registry.load_experiments(known.imports)
  parser = build_parser(experiments)
  # The train command's config overrides (--train.num_epochs 4 ...) are left over for tyro.
  args, overrides = parser.parse_known_args(argv)
  if overrides and args.command != "train":
    parser.error(f"unrecognized arguments: {' '.join(overrides)}")
  if "--set" in overrides:
    parser.error("--set KEY=VALUE is gone: override a setting by its dotted path, e.g. "
                 "--optimizer.learning_rate=3e-4 (see --show-config for the names)")
  if args.command == "list":
    return _list(experiments, console)
  if args.command == "serve":
    if not 0 <= args.port <= 65535:
      parser.error(f"--port must lie in [0, 65535], got {args.port}")
    if args.max_chars < 1:
      parser.error(f"--max-chars must be at least 1, got {args.max_chars}")
    if not args.body_timeout > 0 or args.max_connections < 1:
      parser.error(f"--body-timeout must be above 0 and --max-connections at least 1, got "
                   f"{args.body_timeout:g} and {args.max_connections}")
    return _serve(args, console)

  # Argument errors (unknown experiment, model or config key, bad value) exit with status 2.
  try:
    if args.command == "train":
      cfg = runs.make_config(args.experiment, args.model, data_dir=args.data_dir,
                             overrides=overrides)
      if args.show_config:
        console.print(config_lib.describe(cfg))
        return 0
      processes = distributed.options_from_args(args)
    elif args.command == "evaluate" and args.pairs is None:
      given = [flag for flag, value in (("--beam-size", args.beam_size),
                                        ("--length-penalty", args.length_penalty))
               if value is not None]
      if given:  # a split's evaluation decodes as the run was trained to
        raise ValueError(f"{' and '.join(given)} apply to --pairs only; a split is evaluated "
                         "with the run's own decoding settings")
    elif hasattr(args, "experiment_command"):
      pass  # an experiment's own command checks its own arguments
    elif args.command == "predict" or hasattr(args, "inputs"):
      exp = registry.get_experiment(args.experiment)
      if args.workdir is None:
        args.workdir = runs.default_workdir(exp.config(args.model))
      elif args.model is not None:  # it would be ignored: the run in --workdir names its model
        raise ValueError("--model only chooses the default --workdir (runs/<experiment>-<model>); "
                         "with --workdir the run's own model is used: leave --model out")
  except ValueError as e:
    parser.error(str(e))

  # Failures of the run itself exit with status 1 and a message (no traceback). ValueError covers
  # what is found only once the task exists: missing or corrupt data (pipelines' SourceError), a
  # checkpoint of another model, a batch size the devices cannot split, an unknown best_metric.
  # The library's notes (runs.RunNote: a checkpoint loaded unverified) go to the console.
  previous_show = warnings.showwarning
  warnings.showwarning = _notes_to(console, previous_show)
  try:
    if args.command == "train":
      distributed.initialize(processes, report=console.error)
      result = trainer.train(runs.make_task(cfg), cfg, args.workdir or runs.default_workdir(cfg))
      return 0 if result.interrupted is None else 128 + int(result.interrupted)
    if hasattr(args, "experiment_command"):
      return int(args.experiment_command.run(args, console) or 0)
    if args.command == "evaluate" and args.pairs is not None:
      return _evaluate_pairs(args, console)
    if args.command == "evaluate":
      console.print(json.dumps(runs.evaluate_run(args.workdir, args.split, args.checkpoint,
                                                 args.data_dir), indent=2))
      return 0
    command = (f"predict {args.experiment}" if args.command == "predict" else args.command)
    workdir_lib.check_experiment(args.workdir, args.experiment, command)
    args.inputs = read_inputs(args)
    return int(exp.predict(args, console) or 0)
  except (UsageError, SourceError, FileNotFoundError) as e:
    # Input errors: a path the command names that does not exist (a --workdir without a run, a
    # --data-dir without the data) or input data that cannot be read.
    console.error(str(e))
    return 2
  except (trainer.NonFiniteLossError, CheckpointMismatchError, ValueError, FileNotFoundError,
          distributed.DistributedInitError) as e:
    console.error(str(e))
    return 1
  finally:
    warnings.showwarning = previous_show


def _notes_to(console: Console, show):
  """A warnings.showwarning that writes runs.RunNote warnings as notes and hands others on."""

  def show_note(message, category, *rest, **kwargs):
    if issubclass(category, runs.RunNote):
      console.note(str(message))
    else:
      show(message, category, *rest, **kwargs)

  return show_note
