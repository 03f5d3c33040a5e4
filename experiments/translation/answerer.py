"""How a translation run answers one English sentence for the attention explorer (experiments/
answers.py): what `translate` prints, the beam's translations and scores, and the encoder's,
decoder's and cross attention of the best translation."""

from __future__ import annotations

import argparse
from typing import Any

from experiments import runs
from experiments.answers import Answerer
from experiments.answers import Limits
from experiments.answers import Option
from experiments.console import Console
from experiments.seq2seq.answerer import decoding_options
from experiments.seq2seq.answerer import seq2seq_maps
from experiments.translation import cli


def options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  return {**decoding_options(run, limits),
          "tsv": Option("tsv", "bool", False, help="translation<TAB>score<TAB>input lines "
                        "(needed for num_results above 1)")}


def answer(run: runs.Run, text: str, chosen: dict[str, Any], console: Console
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  args = argparse.Namespace(inputs=[text], workdir=run.workdir, checkpoint=run.checkpoint,
                            heatmap=None, beam_size=chosen["beam_size"],
                            length_penalty=chosen["length_penalty"],
                            num_results=chosen["num_results"] or 1,
                            tsv=bool(chosen["tsv"]))
  cli.check_options(args)
  translation = cli.answer(run, args, console)[0]
  beam, alpha = cli.decoding(run.task.config.data, args.beam_size, args.length_penalty,
                             args.num_results)
  output = {"translations": [{"text": t, "score": float(s)} for t, s in
                             zip(translation.alternatives, translation.alternative_scores)],
            "source_tokens": list(translation.source_tokens),
            "tokens": list(translation.tokens),
            "unknown_source": list(translation.unknown_source),
            "beam_size": beam, "length_penalty": alpha}
  maps = run.task.attention_maps(run.params, translation.source_ids, translation.target_ids)
  inputs = ["<bos>", *translation.tokens]
  return output, seq2seq_maps(maps, translation.source_tokens, translation.tokens, inputs)


ANSWERER = Answerer("text", options, answer)
