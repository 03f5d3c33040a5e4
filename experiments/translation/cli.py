"""The translation commands: `translate` (`predict translation`) and `evaluate --pairs`.

    python -m experiments translate "I won!" "Go." --workdir runs/translation-transformer \
        [--beam-size 4] [--length-penalty 0.6] [--tsv [--num-results 3]] [--heatmap attention.png]

Every decoding command (`translate`, `evaluate --pairs`, the test evaluation) uses the run's own
beam and length penalty (data.beam_size, data.length_penalty in its config.json) unless
--beam-size / --length-penalty say otherwise (--beam-size 1: greedy search); `--help` lists the
named runs' values. --num-results N above the run's beam widens the beam to N.
    python -m experiments translate --input-file english.txt --workdir RUN > french.txt
    python -m experiments evaluate --workdir RUN --pairs pairs.tsv [--beam-size 4]

`translate` writes exactly one line per input, in input order: the best translation. With --tsv each
line is `translation<TAB>score<TAB>input` (the input as an excerpt, console.echo; the score: the
log-probability, length-penalized for beam search with a penalty), and --num-results N writes N such
lines per input, best first. Inputs come from the arguments, --input-file or standard input, one per
line, and are translated in batches (a progress bar on standard error). A header line, unknown
source words (d2l's words only) and where heatmaps were saved are notes on standard error. --heatmap
saves the source-target attention of each best translation as a PNG.

`evaluate --pairs FILE` scores a run on your own English-French pairs: FILE is UTF-8 text, one pair
a line, `English<TAB>French` (a sentence on several lines has several references); a first line that
names the columns (PAIR_HEADER: `english<TAB>french`, `en<TAB>fr`, `source<TAB>target`) is skipped
with a note. It prints JSON: cased sacreBLEU, lowercased BLEU and chrF of the translations (beam
search with the run's beam and length penalty unless --beam-size / --length-penalty say otherwise; 1
is greedy search) with the sacreBLEU signature of each.
"""

from __future__ import annotations

import argparse
import json

from experiments import cli_flags
from experiments import plots
from experiments import runs
from experiments.console import Console
from experiments.console import UsageError
from experiments.console import MAX_LINE_BYTES
from experiments.console import cut_notice
from experiments.console import echo
from experiments.console import header_note
from experiments.console import input_batches
from experiments.console import input_errors
from experiments.console import open_lines
from experiments.seq2seq import configs as seq2seq_configs
from experiments.translation.configs import CONFIGS
from experiments.translation.task import Translation
from pipelines.sources import is_header


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The translation command's own flags (experiments/cli.py gives --heatmap, --input-file ...)."""
  cli_flags.add_decoding_arguments(parser)
  parser.add_argument("--length-penalty", type=float, default=None,
                      help="GNMT length penalty alpha for beam search (default: the run's "
                      "data.length_penalty)")
  parser.epilog = seq2seq_configs.decoding_defaults(CONFIGS)
  parser.add_argument("--tsv", action="store_true",
                      help="write translation<TAB>score<TAB>input lines (--num-results N: N per "
                      "input) instead of the translations alone")


def predict(args: argparse.Namespace, console: Console) -> int:
  """Translates args.inputs with the run in args.workdir; returns the exit status."""
  check_options(args)
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir, experiment="translation",
                      command="translate")
  for batch in input_batches(args):
    answer(run, batch, console)
  return 0


def check_options(args: argparse.Namespace) -> None:
  """The UsageError of a combination of --beam-size, --num-results, --tsv and --length-penalty
  that cannot be decoded (before any run is loaded)."""
  if (args.beam_size is not None and args.beam_size < 1) or args.num_results < 1:
    raise UsageError(f"--beam-size and --num-results must be at least 1, got {args.beam_size} "
                     f"and {args.num_results}")
  if args.num_results > 1 and not args.tsv:
    raise UsageError("--num-results above 1 needs --tsv (without it every input gets exactly "
                     "one line, its best translation)")
  if args.beam_size is not None and args.beam_size < args.num_results:
    raise UsageError(f"--num-results {args.num_results} needs a beam of at least "
                     f"{args.num_results}, got --beam-size {args.beam_size}")
  if args.beam_size == 1 and args.length_penalty is not None:
    raise UsageError("--length-penalty applies to beam search only, not to --beam-size 1 "
                     "(greedy search)")


def format_translation(translation: Translation, tsv: bool) -> list[str]:
  """The lines `translate` prints for one input: its best translation, or with `tsv` one
  `translation<TAB>score<TAB>input` line per alternative, best first."""
  if not tsv:
    return [translation.text]
  return [f"{text}\t{value:.4f}\t{echo(translation.source)}"
          for text, value in zip(translation.alternatives, translation.alternative_scores)]


def answer(run: runs.Run, args: argparse.Namespace, console: Console) -> list[Translation]:
  """What `predict` does once the options are checked and the run loaded (the explorer calls it
  too): translates args.inputs, prints the lines through `console`, returns the translations."""
  task = run.task
  if getattr(args, "heatmap", None) and not task.model.has_attention:
    raise UsageError(f"--heatmap: the run's model ({task.config.model_name or 'translation'}) is "
                     "the encoder-decoder without attention, so it has no heatmap to draw; "
                     "leave out --heatmap")
  most = task.config.data.max_src_len - 1  # the source's tokens the model reads (then eos)
  first = getattr(args, "first_number", 1)
  for number, text in enumerate(args.inputs, start=first):
    total = len(task.text.tokenize(text))
    if total > most:
      console.note(cut_notice(number, text, most, total, "tokens", "data.max_src_len - 1"))
  beam, alpha = decoding(task.config.data, args.beam_size, args.length_penalty, args.num_results)
  num_results = args.num_results
  search = ("greedy search" if beam == 1 else
            f"beam search, beam {beam}, length penalty {alpha:g}")
  score = "log-probability" if alpha == 0 else "length-penalized log-probability"
  with input_errors():  # an input with nothing to translate
    translations = task.translate(run.params, list(args.inputs), beam_size=beam,
                                  num_results=num_results, length_penalty=alpha,
                                  with_attention=bool(args.heatmap), progress=True)
  columns = f"translation, {score}, input" if args.tsv else "translation"
  if first == 1:
    console.note(f"# {task.config.model_name} from {args.workdir} ({args.checkpoint} "
                 f"checkpoint, step {run.step}), {search}: {columns}")
  paths = plots.numbered_paths(args.heatmap, len(translations), first,
                               getattr(args, "numbered", None))
  for translation, path in zip(translations, paths):
    for line in format_translation(translation, args.tsv):
      console.print(line)
    if translation.unknown_source:
      console.note(f"unknown source words (read as <unk>): "
                   f"{', '.join(translation.unknown_source)}")
    if path is not None:
      task.draw_heatmap(translation, path)
      console.note(f"heatmap saved to {path}")
  return translations


def decoding(data, beam_size: int | None, length_penalty: float | None,
             num_results: int = 1) -> tuple[int, float]:
  """The (beam, length penalty) a command decodes with: the flags where given, else the run's
  data.beam_size and data.length_penalty; the beam widened to num_results, the penalty 0 for
  greedy search (beam 1)."""
  beam = max(data.beam_size if beam_size is None else beam_size, num_results)
  alpha = data.length_penalty if length_penalty is None else length_penalty
  return beam, (alpha if beam > 1 else 0.0)


# The names a header line of a pairs file may give each column (pipelines.sources.is_header).
PAIR_HEADER = (("english", "en", "eng", "source", "src"),
               ("french", "fr", "fra", "target", "tgt", "reference", "ref"))


def read_pairs(path: str, max_line_bytes: int = MAX_LINE_BYTES,
               on_header=None) -> tuple[list[str], list[str]]:
  """The (English, French) pairs of a TSV file, one `English<TAB>French` pair a line, read line by
  line; a first line that is a header (PAIR_HEADER, e.g. `english<TAB>french`) is skipped and
  handed to `on_header`.

  Raises:
    UsageError: a line without exactly two tab-separated fields, or with an empty one (naming
      the line), a line over max_line_bytes or not UTF-8 text, or a file with no pairs.
  """
  sources, references = [], []
  for number, line in enumerate(open_lines(path, max_line_bytes=max_line_bytes), start=1):
    fields = line.split("\t")
    if number == 1 and is_header(fields, PAIR_HEADER):
      if on_header is not None:
        on_header(line)
      continue
    if len(fields) != 2:
      raise UsageError(f"{path}, line {number}: expected English<TAB>French (two fields), got "
                       f"{len(fields)} field{'s' if len(fields) != 1 else ''}: {line[:60]!r}")
    if not fields[0].strip() or not fields[1].strip():
      side = "English" if not fields[0].strip() else "French"
      raise UsageError(f"{path}, line {number}: the {side} side is empty")
    sources.append(fields[0])
    references.append(fields[1])
  if not sources:
    raise UsageError(f"{path} holds no pairs")
  return sources, references


def evaluate_pairs(args: argparse.Namespace, console: Console) -> int:
  """Scores the run in args.workdir on the pairs of args.pairs; prints the scores as JSON."""
  if args.beam_size is not None and args.beam_size < 1:
    raise UsageError(f"--beam-size must be at least 1, got {args.beam_size}")
  if args.beam_size == 1 and args.length_penalty is not None:
    raise UsageError("--length-penalty applies to beam search only, not to --beam-size 1 "
                     "(greedy search)")
  limit = getattr(args, "max_line_bytes", MAX_LINE_BYTES)
  sources, references = read_pairs(args.pairs, limit,
                                  lambda line: console.note(header_note(args.pairs, line)))
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir, experiment="translation",
                      command="evaluate --pairs")
  beam, alpha = decoding(run.task.config.data, args.beam_size, args.length_penalty)
  with input_errors():
    scores = run.task.score_pairs(run.params, sources, references, beam_size=beam,
                                  length_penalty=alpha, progress=True)
  console.print(json.dumps({
      "experiment": run.config.experiment, "model": run.config.model_name,
      "checkpoint": args.checkpoint, "step": run.step, "pairs": args.pairs,
      "lines": len(sources), "sources": scores.sources, "beam_size": beam,
      "length_penalty": alpha, "metrics": scores.figures(), "signatures": scores.signatures},
      indent=2, ensure_ascii=False))
  return 0
