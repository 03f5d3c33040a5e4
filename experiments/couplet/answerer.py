"""How a couplet run answers one upper line for the attention explorer (experiments/answers.py):
what the `couplet` command prints, the lower lines and their scores, and the attention of the
best one."""

from __future__ import annotations

import argparse
from typing import Any

from experiments import runs
from experiments.answers import Answerer
from experiments.answers import Limits
from experiments.answers import Option
from experiments.console import Console
from experiments.couplet import cli
from experiments.seq2seq.answerer import decoding_options
from experiments.seq2seq.answerer import seq2seq_maps

FORM_FLAGS = ("free", "force_punct", "no_copy", "keep_pattern")


def options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  return {**decoding_options(run, limits),
          "free": Option("free", "bool", False, help="no length constraint"),
          "force_punct": Option("force_punct", "bool", False,
                                help="the upper line's punctuation at the same positions"),
          "no_copy": Option("no_copy", "bool", False,
                            help="never the upper line's character at the same position"),
          "keep_pattern": Option("keep_pattern", "bool", False,
                                 help="repeat characters exactly where the upper line does")}


def answer(run: runs.Run, text: str, chosen: dict[str, Any], console: Console
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  args = argparse.Namespace(
      inputs=[text], workdir=run.workdir, checkpoint=run.checkpoint, heatmap=None,
      beam_size=chosen["beam_size"], length_penalty=chosen["length_penalty"],
      num_results=chosen["num_results"] or 1,
      **{flag: bool(chosen[flag]) for flag in FORM_FLAGS})
  cli.check_options(args)
  generation = cli.answer(run, args, console)[0]
  task = run.task
  output = {"upper": generation.upper, "chars": list(generation.chars),
            "results": [{"text": cli.spaced_like(generation.upper, line), "score": float(score)}
                        for line, score in zip(generation.lines, generation.scores)],
            "unknown": list(generation.unknown)}
  _, src = task.encode_upper(generation.upper)
  best = generation.tokens[0]
  maps = task.attention_maps(run.params, src, task.vocab.encode(best))
  return output, seq2seq_maps(maps, generation.chars + ["</s>"], task.ended_tokens(best),
                              ["<s>", *best])


ANSWERER = Answerer("text", options, answer)
