"""Scores a trained couplet run on whole splits, for docs/RESULTS.md.

    python -m experiments.couplet.report --workdir runs/couplet-lstm_cpu [--splits dev test]
        [--checkpoint best] [--limit N] [--out report.json]

For each split: perplexity (exp of the mean NLL per target token, eos included) and, for beam
search (the run's beam size) with and without the length constraint, character BLEU,
exact-length rate, copy rate and copied-character rate over every couplet of the split (or the
first --limit), with the decoding time; also the reference lines' own copy rates (how often a
human lower line repeats a character of its upper line at the same position), and the samples of
`CoupletTask.samples`. Writes the JSON to --out (default <workdir>/report.json) and prints it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, Sequence

from experiments import runs
from experiments import trainer
from experiments.console import Console
from experiments.couplet import metrics
from experiments.couplet.task import CoupletTask


def reference_scores(task: CoupletTask, split: str, limit: int | None) -> dict[str, float]:
  """Copy rates of the reference lower lines themselves (a baseline for the models')."""
  data = task.data.splits[split].sequences
  count = len(data["src"]) if limit is None else min(limit, len(data["src"]))
  uppers = [task.vocab.decode(data["src"][i]) for i in range(count)]
  lowers = [task.vocab.decode(data["tgt_out"][i]) for i in range(count)]
  return {"copy_rate": metrics.copy_rate(lowers, uppers),
          "copied_chars": metrics.copied_char_rate(lowers, uppers), "count": count}


def score_run(task: CoupletTask, params: Any, splits: Sequence[str],
              limit: int | None = None) -> dict[str, Any]:
  """The report's numbers for `splits` (see the module docstring)."""
  out: dict[str, Any] = {}
  for split in splits:
    started = time.time()
    teacher_forced = trainer.evaluate(task, params, split, extra=False)
    result: dict[str, Any] = {"perplexity": math.exp(teacher_forced["nll"])}
    result["perplexity_s"] = round(time.time() - started, 1)
    for constrained, name in ((True, "constrained"), (False, "free")):
      started = time.time()
      scores, _ = task.score_split(params, split, limit, constrained=constrained)
      result[name] = scores.as_dict()
      result[name]["decode_s"] = round(time.time() - started, 1)
    result["reference"] = reference_scores(task, split, limit)
    out[split] = result
  return out


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.couplet.report",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--splits", nargs="+", default=["dev", "test"], choices=("dev", "test"))
  parser.add_argument("--checkpoint", choices=runs.CHECKPOINT_CHOICES, default="best")
  parser.add_argument("--limit", type=int, default=None,
                      help="score only the first N couplets of each split (default: all)")
  parser.add_argument("--data-dir", help="where the run's data lives, if moved")
  parser.add_argument("--out", help="the JSON file to write (default <workdir>/report.json)")
  args = parser.parse_args(argv)
  run = runs.load_run(args.workdir, args.checkpoint, args.data_dir)
  task, params = run.task, run.params
  report = {"workdir": os.path.abspath(args.workdir), "model": task.config.model_name,
            "checkpoint": args.checkpoint, "step": run.step,
            "beam_size": task.config.data.beam_size, "limit": args.limit,
            "splits": score_run(task, params, args.splits, args.limit),
            "samples": task.samples(params)}
  text = json.dumps(report, ensure_ascii=False, indent=2)
  with open(args.out or os.path.join(args.workdir, "report.json"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  Console().print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
