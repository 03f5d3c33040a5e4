"""What translation's and couplet's answers for the attention explorer share (experiments/
answers.py): the decoding options, with the run's own defaults, and the maps of
Seq2SeqTask.attention_maps labelled with their tokens."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from experiments import runs
from experiments.answers import Limits
from experiments.answers import Option
from experiments.answers import attention_map


def decoding_options(run: runs.Run, limits: Limits) -> dict[str, Option]:
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


def seq2seq_maps(maps: Mapping[str, np.ndarray], source_tokens: Sequence[str],
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
