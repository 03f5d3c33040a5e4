"""How a sentiment run answers one review for the attention explorer (experiments/answers.py):
what `predict sentiment --weights` prints (`predict sentiment` for a model without attention, which
has no weights to print), the label, its probability, the words and their weights, and the model's
attention (the pooling row, or each self-attention layer)."""

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
from experiments.sentiment import cli


def options(run: runs.Run, limits: Limits) -> dict[str, Option]:
  del run, limits  # `predict sentiment` has no options of its own
  return {}


def answer(run: runs.Run, text: str, chosen: dict[str, Any], console: Console
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  del chosen
  args = argparse.Namespace(inputs=[text], workdir=run.workdir, checkpoint=run.checkpoint,
                            heatmap=None, weights=run.task.has_attention)
  prediction = cli.answer(run, args, console)[0]
  output = {"label": prediction.label_name, "probability": float(prediction.probability),
            "words": list(prediction.words), "unknown": list(prediction.unknown),
            "weights": ([] if prediction.word_weights is None  # a model without attention
                        else [float(w) for w in prediction.word_weights])}
  maps = []
  for name, weights in run.task.attention_maps(run.params, prediction).items():
    if name == "pooling":
      maps.append(attention_map(name, "pooling", weights, [POOL_QUERY], prediction.words))
    else:
      maps.append(attention_map(name, "self", weights, prediction.words, prediction.words))
  return output, maps


ANSWERER = Answerer("text", options, answer)
