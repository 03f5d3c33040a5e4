"""`python -m experiments report couplet`: scores a trained couplet run on whole splits, for
docs/RESULTS.md.

    python -m experiments report couplet --workdir runs/couplet-lstm_cpu [--splits dev test]
        [--checkpoint best] [--limit N] [--force-punct] [--no-copy] [--keep-pattern]
        [--forms NAME ...] [--beam-size K] [--oracle] [--out report.json]

For each split: perplexity (exp of the mean NLL per target token, eos included) and, for beam
search (the run's beam size, or --beam-size) under each decoding form, the scores of
experiments.couplet.metrics (character BLEU, BLEU-1, BLEU-2, exact-length rate and the form rates)
over every couplet of the split (or the first --limit), with the decoding time. The forms, keyed
by form.FormOptions.name: 'free' (no constraint), 'length' (exact length), then each flagged
constraint with the length alone ('length+punct' for --force-punct, 'length+nocopy' for
--no-copy, 'length+pattern' for --keep-pattern) and, with two flags or more, all of them together
('length+punct+nocopy+pattern' with the three), so each constraint's effect shows on its own;
--forms NAME ... scores only the forms named (any of FORM_NAMES, in report order) instead of those
the flags give. With --oracle, each form also has 'oracle': the same scores for the line of each
beam closest to its reference (metrics.oracle_lines), the most any reranking of that n-best could
reach (it reads the reference: a diagnostic, not a decoder). Under 'reference': the reference
lines' own form rates (ref_*: how often human lower lines break each rule), the level to compare
the models' with. Then the samples of `CoupletTask.samples`. Writes the JSON to --out (default
<workdir>/report.json) and prints it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import Any, Sequence

from experiments import registry
from experiments import runs
from experiments import trainer
from experiments.cli_flags import checkpoint_choice
from experiments.console import Console
from experiments.console import UsageError
from experiments.couplet import metrics
from experiments.couplet.form import FormOptions
from experiments.couplet.task import CoupletTask


def report_forms(force_punct: bool = False, no_copy: bool = False,
                 keep_pattern: bool = False) -> list[FormOptions]:
  """The decoding forms the report scores (see the module docstring), in report order."""
  flags = {"force_punct": force_punct, "no_copy": no_copy, "keep_pattern": keep_pattern}
  forms = [FormOptions(exact_length=False), FormOptions()]
  forms += [FormOptions(**{name: True}) for name, on in flags.items() if on]
  if sum(flags.values()) >= 2:
    forms.append(FormOptions(**flags))
  return forms


FORM_NAMES = tuple(form.name for form in report_forms(True, True, True))


def named_forms(names: Sequence[str]) -> list[FormOptions]:
  """The forms called `names` (each in FORM_NAMES), in report order."""
  unknown = sorted(set(names) - set(FORM_NAMES))
  if unknown:
    raise ValueError(f"unknown decoding form(s) {', '.join(map(repr, unknown))}: choose from "
                     f"{', '.join(FORM_NAMES)}")
  return [form for form in report_forms(True, True, True) if form.name in names]


def score_run(task: CoupletTask, params: Any, splits: Sequence[str], limit: int | None = None,
              forms: Sequence[FormOptions] = tuple(report_forms()),
              beam_size: int | None = None, oracle: bool = False) -> dict[str, Any]:
  """The report's numbers for `splits` under each of `forms` (see the module docstring), decoded
  with beam `beam_size` (None: the run's config.data.beam_size); with `oracle`, also the n-best
  oracle's scores under each form's 'oracle'."""
  out: dict[str, Any] = {}
  for split in splits:
    started = time.time()
    teacher_forced = trainer.evaluate(task, params, split, extra=False)
    result: dict[str, Any] = {"perplexity": math.exp(teacher_forced["nll"])}
    result["perplexity_s"] = round(time.time() - started, 1)
    for options in forms:
      started = time.time()
      decoded = task.decode_split(params, split, limit, options=options, beam_size=beam_size)
      decode_s = round(time.time() - started, 1)
      scores, _ = task.score_decoded(split, decoded)
      result[options.name] = {**_own_scores(scores), "decode_s": decode_s}
      if oracle:
        result[options.name]["oracle"] = _own_scores(task.score_decoded(split, decoded,
                                                                        oracle=True)[0])
    result["reference"] = {**scores.reference, "count": scores.count}  # the same for every form
    out[split] = result
  return out


def _own_scores(scores: metrics.CoupletScores) -> dict[str, float]:
  """The lines' scores and count, without the references' rates (reported once per split)."""
  return {name: value for name, value in scores.as_dict().items()
          if name not in metrics.REFERENCE_NAMES}


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The report's flags."""
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--splits", nargs="+", default=["dev", "test"], choices=("dev", "test"))
  parser.add_argument("--checkpoint", type=checkpoint_choice, default="best",
                      metavar="best|latest|STEP")
  parser.add_argument("--limit", type=int, default=None,
                      help="score only the first N couplets of each split (default: all)")
  parser.add_argument("--data-dir", help="where the run's data lives, if moved")
  parser.add_argument("--force-punct", action="store_true",
                      help="also score decoding that keeps the upper line's punctuation "
                           "('length+punct')")
  parser.add_argument("--no-copy", action="store_true",
                      help="also score decoding without same-position copies ('length+nocopy')")
  parser.add_argument("--keep-pattern", action="store_true",
                      help="also score decoding that keeps the upper line's repetition pattern "
                           "('length+pattern')")
  parser.add_argument("--forms", nargs="+", choices=FORM_NAMES, metavar="NAME",
                      help="score only these decoding forms, instead of those the three flags "
                           f"give (any of: {', '.join(FORM_NAMES)})")
  parser.add_argument("--beam-size", type=int, default=None,
                      help="the beam of every decode (default: the run's data.beam_size)")
  parser.add_argument("--oracle", action="store_true",
                      help="also score each form's n-best oracle: the hypothesis of each beam "
                           "closest to the reference (sentence BLEU-2), a bound on reranking")
  parser.add_argument("--out", help="the JSON file to write (default <workdir>/report.json)")


def chosen_forms(args: argparse.Namespace) -> list[FormOptions]:
  """The forms the flags ask for.

  Raises:
    UsageError: --forms together with a form flag.
  """
  if args.forms and (args.force_punct or args.no_copy or args.keep_pattern):
    raise UsageError("--forms names the forms itself: leave out --force-punct, --no-copy and "
                     "--keep-pattern")
  if args.forms:
    return named_forms(args.forms)
  return report_forms(args.force_punct, args.no_copy, args.keep_pattern)


def run(args: argparse.Namespace, console: Console) -> int:
  """Scores the run, writes the JSON to --out and prints it."""
  for flag, value in (("--beam-size", args.beam_size), ("--limit", args.limit)):
    if value is not None and value < 1:
      raise UsageError(f"{flag} must be at least 1, got {value}")
  forms = chosen_forms(args)
  loaded = runs.load_run(args.workdir, args.checkpoint, args.data_dir, experiment="couplet",
                         command="report couplet")
  task, params = loaded.task, loaded.params
  report = {"workdir": os.path.abspath(args.workdir), "model": task.config.model_name,
            "checkpoint": args.checkpoint, "step": loaded.step,
            "beam_size": args.beam_size or task.config.data.beam_size, "limit": args.limit,
            "splits": score_run(task, params, args.splits, args.limit, forms, args.beam_size,
                                args.oracle),
            "samples": task.samples(params)}
  text = json.dumps(report, ensure_ascii=False, indent=2)
  with open(args.out or os.path.join(args.workdir, "report.json"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  console.print(text)
  return 0


COMMAND = registry.Command(help="score a trained couplet run on whole splits (JSON)",
                           add_arguments=add_arguments, run=run,
                           description=__doc__.split("\n\n")[0])
