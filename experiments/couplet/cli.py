"""The `couplet` command (`predict couplet`): lower lines for upper lines from a trained run.

    python -m experiments couplet "晚风摇树树还挺" [--workdir runs/couplet-lstm] [--num-results 3]
        [--beam-size 10] [--free] [--force-punct] [--no-copy] [--keep-pattern]
        [--heatmap attention.png]

For each upper line it prints the best lower line, one line per upper line in order (so a file of
upper lines becomes a file of lower lines); with --num-results N the N best lines of the beam, one
per line as "rank<TAB>line<TAB>log-probability" (the beam is widened to N if it is smaller), and a
blank line between the upper lines. By default every lower line has exactly as many characters as
its upper line (the length constraint of zoo.search); --free lets the model end the line where it
likes. --force-punct puts the upper line's punctuation marks at their positions and no mark
elsewhere; --no-copy forbids the upper line's character at the same position; --keep-pattern
repeats characters exactly where the upper line does (风风雨雨 answered by 年年岁岁) and nowhere
else (zoo.search's forced, banned, tied and distinct positions, built by experiments.couplet.form);
all combine with --free. --heatmap saves
the attention of the best line over the upper line (numbered -1, -2 ... for several upper lines).
Spaces in an upper line are kept at the same places in its lower lines (the model reads the
characters alone). Unknown characters (each once, separated by spaces) and saved files are noted
on standard error. The beam and length penalty are the run's own (data.beam_size,
data.length_penalty) unless --beam-size / --length-penalty say otherwise; `--help` lists the
named runs' values.
"""

from __future__ import annotations

import argparse

from experiments import cli_flags
from experiments import plots
from experiments import runs
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import cut_notice
from experiments.console import input_batches
from experiments.console import input_errors
from experiments.couplet.configs import CONFIGS
from experiments.couplet.form import FormOptions
from experiments.couplet.task import Generation
from pipelines import text as text_lib
from experiments.seq2seq import configs as seq2seq_configs


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The couplet command's own flags (experiments/cli.py gives --beam-size, --heatmap ...)."""
  parser.add_argument("--free", action="store_true",
                      help="no length constraint: the model decides where the line ends")
  parser.add_argument("--force-punct", action="store_true",
                      help="keep the upper line's punctuation: the same marks at the same "
                           "positions, none elsewhere")
  parser.add_argument("--no-copy", action="store_true",
                      help="never repeat the upper line's character at the same position")
  parser.add_argument("--keep-pattern", action="store_true",
                      help="repeat characters exactly where the upper line repeats them, and "
                           "nowhere else")
  parser.add_argument("--length-penalty", type=float, default=None,
                      help="GNMT length penalty alpha of the beam search (default: the run's "
                      "data.length_penalty)")
  parser.epilog = seq2seq_configs.decoding_defaults(CONFIGS)


def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
  """The couplet command's flags: the beam and the number of results, then `add_arguments`."""
  cli_flags.add_decoding_arguments(parser)
  add_arguments(parser)


def form_options(args: argparse.Namespace) -> FormOptions:
  """The decoding constraints the flags ask for."""
  return FormOptions(exact_length=not args.free, force_punct=args.force_punct,
                     no_copy=args.no_copy, keep_pattern=args.keep_pattern)


def spaced_like(upper: str, line: str) -> str:
  """`line` with the upper line's spaces at the same places: the model reads and writes characters
  alone, so "风 雨" answered by "年岁" prints "年 岁" (spaces past the line's end are dropped)."""
  chars = iter(line)
  out, left = [], len(line)
  for char in upper:
    if not left:
      break
    if char.isspace():
      out.append(char)
    else:
      out.append(next(chars))
      left -= 1
  return "".join(out) + "".join(chars)


def first_characters(upper: str, count: int) -> str:
  """The beginning of `upper` that holds its first `count` characters (spaces do not count)."""
  seen = 0
  for end, char in enumerate(upper):
    if not char.isspace():
      if seen == count:
        return upper[:end]
      seen += 1
  return upper


def predict(args: argparse.Namespace, console: Console) -> int:
  """Generates lower lines for args.inputs with the run in args.workdir; returns the exit status."""
  check_options(args)
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir, experiment="couplet",
                      command="couplet")
  for batch in input_batches(args):
    answer(run, batch, console)
  return 0


def check_options(args: argparse.Namespace) -> None:
  """The UsageError of a --num-results or --beam-size below 1 (before any run is loaded)."""
  if args.num_results < 1 or (args.beam_size is not None and args.beam_size < 1):
    raise UsageError(f"--num-results and --beam-size must be at least 1, got {args.num_results} "
                     f"and {args.beam_size}")


def format_generation(generation: Generation, num_results: int) -> list[str]:
  """The lines `couplet` prints for one upper line: its best lower line, or with num_results > 1
  one `rank<TAB>line<TAB>log-probability` line per result (without the blank line between upper
  lines)."""
  if num_results == 1:
    return [spaced_like(generation.upper, generation.lines[0])]
  return [f"{rank}\t{spaced_like(generation.upper, line)}\t{score:.4f}"
          for rank, (line, score) in enumerate(zip(generation.lines, generation.scores), start=1)]


def answer(run: runs.Run, args: argparse.Namespace, console: Console) -> list[Generation]:
  """What `predict` does once the options are checked and the run loaded (the explorer calls it
  too): cuts too long upper lines (with a note), generates, prints the lines through `console`
  and returns the generations (args.inputs is replaced by the upper lines as read)."""
  most = run.task.config.data.max_len - 1  # the characters the model reads (then eos)
  first = getattr(args, "first_number", 1)
  uppers = []
  for number, upper in enumerate(args.inputs, start=first):
    total = len(text_lib.couplet_tokenize(upper))
    if total > most:  # cut, with a note, as every experiment does with a too long input
      console.note(cut_notice(number, upper, most, total, "characters", "data.max_len - 1"))
      upper = first_characters(upper, most)
    uppers.append(upper)
  args.inputs = uppers
  with input_errors():  # an empty upper line
    generations = run.task.generate(run.params, list(args.inputs), num_results=args.num_results,
                                    beam_size=args.beam_size, options=form_options(args),
                                    length_penalty=args.length_penalty, progress=True)
  paths = plots.numbered_paths(args.heatmap, len(generations), first,
                               getattr(args, "numbered", None))
  for i, (generation, path) in enumerate(zip(generations, paths), start=first - 1):
    if i and args.num_results > 1:
      console.print("")
    for line in format_generation(generation, args.num_results):
      console.print(line)
    if generation.unknown:
      console.note(f"characters outside the vocabulary (read as <unk>): "
                   f"{' '.join(dict.fromkeys(generation.unknown))}")
    if path is not None:
      run.task.draw_heatmap(run.params, generation, path)
      console.note(f"attention heatmap saved to {path}")
  return generations
