"""Batched, jit-compiled greedy and beam search for the translation models, and the `translate`
command.

    python -m experiments translate "I won !" "Go ." --workdir runs/translation-transformer \
        [--beam 4] [--num-results 3] [--length-penalty 0.6] [--heatmap attention.png]

prints one line per input (the best translation, its score: the log-probability, length-penalized
for beam search with a penalty, and the input), the other beam hypotheses below it with
--num-results, and with --heatmap saves the source-target attention of
the best translation as a PNG (numbered out-1.png, out-2.png ... for several inputs).

`search` is compiled once per model configuration, beam size and padded batch shape; the
parameters are an argument of the compiled program, so decoding with new parameters (at every dev
evaluation) does not compile again.
"""

from __future__ import annotations

import argparse
import functools
import os
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from experiments.translation import models
from pipelines.vocab import BOS_ID, EOS_ID
from zoo.search import beam_search
from zoo.search import greedy_search


class Hypotheses(NamedTuple):
  """Decoded hypotheses, best first, as numpy arrays.

  Attributes:
    tokens: int32 (B, W, T): target ids (bos excluded), eos at `lengths`, pad after it.
    lengths: int32 (B, W): tokens before eos.
    scores: float32 (B, W): the ranking score (summed log-probabilities, length-penalized for
      beam search with a length penalty).
  """
  tokens: np.ndarray
  lengths: np.ndarray
  scores: np.ndarray


@functools.partial(jax.jit, static_argnames=("model", "max_len", "beam_size"))
def search(params: Any, src: jax.Array, src_len: jax.Array, length_penalty: jax.Array, *,
           model: models.Translator, max_len: int, beam_size: int):
  """Greedy (beam_size 1) or beam search of a batch: (tokens (B, W, T), lengths, scores)."""
  state = model.init_decode_state(params, src, src_len, max_len)

  def step(state, tokens):
    return model.decode_step(params, state, tokens)

  if beam_size == 1:
    out = greedy_search(step, state, bos_id=BOS_ID, eos_id=EOS_ID, max_len=max_len)
    return out.tokens[:, None], out.lengths[:, None], out.scores[:, None]
  out = beam_search(step, state, beam_size=beam_size, bos_id=BOS_ID, eos_id=EOS_ID,
                    max_len=max_len, length_penalty=length_penalty)
  return out.tokens, out.lengths, out.scores


class Decoder:
  """Greedy (beam_size 1) and beam search over a Translator.

  The search is compiled once per (model configuration, max_len, beam size, batch shape), and
  shared by every Decoder of an equal model.

  Args:
    model: the translation model.
    max_len: T, the most target tokens emitted per sentence (eos included).
  """

  def __init__(self, model: models.Translator, max_len: int):
    self.model, self.max_len = model, max_len

  def __call__(self, params: Any, src: np.ndarray, src_len: np.ndarray, beam_size: int = 1,
               length_penalty: float = 0.0) -> Hypotheses:
    """Decodes a batch.

    Args:
      params: the model parameters.
      src: int32 (B, S) source ids (each ending with eos), padded with 0.
      src_len: int32 (B,) source lengths (eos included).
      beam_size: 1 for greedy search, W > 1 for beam search.
      length_penalty: GNMT's alpha (beam search only; a traced value, no recompilation).

    Returns:
      Hypotheses with W = beam_size.
    """
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
      raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    found = search(params, np.asarray(src, np.int32), np.asarray(src_len, np.int32),
                   np.float32(length_penalty), model=self.model, max_len=self.max_len,
                   beam_size=beam_size)
    return Hypotheses(*jax.device_get(found))


def heatmap_paths(path: str, count: int) -> list[str]:
  """`path` for one input; path with -1, -2, ... before the extension for several."""
  if count == 1:
    return [path]
  stem, ext = os.path.splitext(path)
  return [f"{stem}-{i}{ext or '.png'}" for i in range(1, count + 1)]


def add_translate_arguments(parser: argparse.ArgumentParser) -> None:
  """The translation experiment's own flags (the engine gives --beam-size, --num-results...)."""
  parser.add_argument("--length-penalty", type=float, default=None,
                      help="GNMT length penalty alpha for beam search (default: the run's)")


def translate_command(args: argparse.Namespace, print_fn: Callable[[str], None] = print) -> int:
  """`python -m experiments translate ...` (arguments as in experiments/__main__.py)."""
  from experiments.translation import task as task_lib  # pylint: disable=g-import-not-at-top
  task, params, step = task_lib.load_run(args.workdir, args.checkpoint,
                                         getattr(args, "data_dir", None))
  beam = args.beam_size or 1
  num_results = max(1, min(args.num_results or 1, beam))
  alpha = getattr(args, "length_penalty", None)
  if beam == 1:
    alpha, search = 0.0, "greedy search"
  else:
    alpha = task.config.data.length_penalty if alpha is None else alpha
    search = f"beam search, beam {beam}, length penalty {alpha:g}"
  score = "log-probability" if alpha == 0 else "length-penalized log-probability"
  translations = task.translate(params, list(args.inputs), beam_size=beam,
                                num_results=num_results, length_penalty=alpha,
                                with_attention=bool(args.heatmap))
  print_fn(f"# {task.config.model_name} from {args.workdir} ({args.checkpoint} checkpoint, step "
           f"{step}), {search}: translation, {score}, input")
  paths = ([None] * len(translations) if not args.heatmap
           else heatmap_paths(args.heatmap, len(translations)))
  for translation, path in zip(translations, paths):
    print_fn(f"{translation.text}\t{translation.score:.4f}\t{translation.source}")
    for rank, (text, score) in enumerate(zip(translation.alternatives[1:],
                                             translation.alternative_scores[1:]), start=2):
      print_fn(f"  {rank}. {text}\t{score:.4f}")
    if translation.unknown_source:
      print_fn(f"  unknown source words (read as <unk>): {', '.join(translation.unknown_source)}")
    if path is not None:
      task.draw_heatmap(translation, path)
      print_fn(f"  heatmap saved to {path}")
  return 0

