"""Chinese couplets: upper line -> lower line, one character per token, one shared vocabulary."""

from __future__ import annotations

import dataclasses

from pipelines import text as text_lib
from pipelines.tasks.seq2seq import Seq2SeqData
from pipelines.tasks.translation import TranslationOptions


@dataclasses.dataclass(frozen=True)
class CoupletOptions(TranslationOptions):
  """How couplets become ids: as TranslationOptions, with couplet defaults.

  The longest line has 32 characters (+ eos/bos = 33); the median 7, 90% at most 17. `reverse`
  generates upper lines from lower lines.
  """
  max_src_len: int = 33
  max_tgt_len: int = 33
  default_boundaries = (8, 12, 18, 33)


class CoupletData(Seq2SeqData):
  """Chinese couplets, upper line -> lower line, character tokens, one shared vocabulary.

  Pairs whose lines differ in length are left out and counted ('skipped_unequal'). Options:
  CoupletOptions (max_src_len=33, max_tgt_len=33, boundaries, min_freq=2, max_size).
  """

  task = "couplet"
  fields = ("upper", "lower")
  options_class = CoupletOptions
  tokenize = staticmethod(text_lib.couplet_tokenize)
  detokenize = staticmethod(text_lib.couplet_detokenize)
  shared_vocab = True

  def _check_pairs(self, toks: dict) -> tuple[dict, int]:
    upper, lower = toks["upper"], toks["lower"]
    equal = [i for i, (u, l) in enumerate(zip(upper, lower)) if len(u) == len(l)]
    if len(equal) == len(upper):
      return toks, 0
    return ({"upper": [upper[i] for i in equal], "lower": [lower[i] for i in equal]},
            len(upper) - len(equal))
