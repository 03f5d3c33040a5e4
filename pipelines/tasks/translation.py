"""fra-eng translation: English -> French pairs with d2l's preprocessing, two vocabularies."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from pipelines import text as text_lib
from pipelines.checks import positive_int
from pipelines.tasks.common import check_boundaries, quarter_boundaries
from pipelines.tasks.seq2seq import Seq2SeqData


@dataclasses.dataclass(frozen=True)
class TranslationOptions:
  """How fra-eng pairs become ids.

  Attributes:
    max_src_len, max_tgt_len: the largest 'src' and 'tgt_in' widths, eos/bos included: longer
      texts keep their first max - 1 tokens (counted). 24 fits about 99.9% of the pairs.
    boundaries: bucket widths, one sequence for both sides or a mapping {'src': ..., 'tgt': ...},
      ascending and ending at the maximum lengths; None: `default_boundaries` when it ends at the
      maximum length, else four equal steps.
    min_freq, max_size: vocabulary options (see Vocab.build); min_freq 2 as d2l.
    reverse: translate French -> English instead of English -> French.
  """
  max_src_len: int = 24
  max_tgt_len: int = 24
  boundaries: Any = None
  min_freq: int = 2
  max_size: int | None = None
  reverse: bool = False
  default_boundaries = (8, 12, 16, 24)  # half the sentences have at most 7 tokens

  def __post_init__(self):
    for name in ("max_src_len", "max_tgt_len"):
      positive_int(getattr(self, name), name, minimum=2)  # one token and eos/bos
    given = self.boundaries
    if not isinstance(given, Mapping):
      given = {"src": given, "tgt": given}
    unknown = set(given) - {"src", "tgt"}
    if unknown:
      raise ValueError(f"boundaries: expected the keys 'src' and 'tgt', got {sorted(given)}")
    out = {}
    for side, max_len in (("src", self.max_src_len), ("tgt", self.max_tgt_len)):
      default = (self.default_boundaries if self.default_boundaries[-1] == max_len
                 else quarter_boundaries(max_len))
      out[side] = check_boundaries(given.get(side) or default, max_len, f"boundaries[{side!r}]")
    object.__setattr__(self, "boundaries", out)


class TranslationData(Seq2SeqData):
  """English -> French with d2l's fra-eng preprocessing; separate source and target vocabularies.

  Options: TranslationOptions (max_src_len=24, max_tgt_len=24, boundaries, min_freq=2,
  max_size, reverse=False).
  """

  task = "fra_eng"
  fields = ("en", "fr")
  options_class = TranslationOptions
  tokenize = staticmethod(text_lib.fra_eng_tokenize)
  detokenize = staticmethod(text_lib.fra_eng_detokenize)
