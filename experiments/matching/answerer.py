"""How a matching run answers one pair of questions for the attention explorer (experiments/
answers.py): what `predict matching` prints, the label and p(same), and the model's attention
(the Transformer's self-attention over the packed pair, the soft alignment both ways, or each
question's pooling). A pretraining run (the masked language model) classifies nothing and is
refused."""

from __future__ import annotations

import argparse
from typing import Any

from experiments import runs
from experiments.answers import POOL_QUERY
from experiments.answers import Answerer
from experiments.answers import Limits
from experiments.answers import Option
from experiments.answers import attention_map
from experiments.console import Console
from experiments.matching import cli
from experiments.matching.task import PretrainTask


def options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  del run, limits
  return {"threshold": Option("threshold", "float", 0.5, 0.0, 1.0,
                              help="label 1 where p(same) >= this")}


def answer(run: runs.Run, pair: tuple[str, str], chosen: dict[str, Any], console: Console
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  threshold = 0.5 if chosen["threshold"] is None else float(chosen["threshold"])
  args = argparse.Namespace(inputs=list(pair), input_file=None, workdir=run.workdir,
                            checkpoint=run.checkpoint, heatmap=None, threshold=threshold,
                            layer=-1, head=None)
  cli.check_options(args)
  pairs = cli.parse_pairs(list(pair), None)
  prediction = cli.answer(run, pairs, args, console)[0]
  a, b = prediction.tokens
  output = {"label": int(prediction.probability >= threshold),
            "probability": float(prediction.probability), "threshold": threshold,
            "tokens": {"a": list(a), "b": list(b)},
            "unknown": {"a": list(prediction.unknown[0]), "b": list(prediction.unknown[1])}}
  weights = prediction.attention
  maps = []
  if "self_attention" in weights:
    packed = ["[CLS]", *a, "[SEP]", *b, "[SEP]"]
    maps.append(attention_map("self_attention", "self", weights["self_attention"], packed,
                              packed))
  for name, queries, keys in (("a_to_b", a, b), ("b_to_a", b, a)):
    if name in weights:
      maps.append(attention_map(name, "cross", weights[name][None, None], queries, keys))
  for name, keys in (("a_pooling", a), ("b_pooling", b)):
    if name in weights:
      maps.append(attention_map(name, "pooling", weights[name][None, None, None], [POOL_QUERY],
                                keys))
  return output, maps


def refuses(run: runs.Run) -> str | None:
  """Why `run` cannot answer a pair: a pretraining run classifies nothing."""
  if isinstance(run.task, PretrainTask):
    return (f"a pretraining run ({run.config.model_name}): it does not classify pairs; serve a "
            "classifier fine-tuned from it")
  return None


ANSWERER = Answerer("pair", options, answer, refuses)
