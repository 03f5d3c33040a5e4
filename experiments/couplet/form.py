"""The form of a couplet as rules on token lists: what metrics.py measures and decoding enforces.

A line is a list of character tokens; an unknown character is the single token "<unk>". A token is
punctuation when each of its characters is in a Unicode punctuation category (P*), and content
when it is neither punctuation nor "<unk>" (an unknown character equals nothing, not even another
one, since the true characters are not known).

  punctuation   punct_positions(line) = {i: line[i] for each punctuation position i}. A lower line
                keeps the upper line's punctuation when the two maps are equal: the same marks at
                the same positions, and none elsewhere (lines of different lengths compare the
                same way; a missing position holds no mark).
  repetition    repeat_pairs(line) = {(i, j): i < j, line[i] == line[j], both content}. A lower
                line repeats unwantedly when it has a pair the upper line lacks (the upper line has
                no repetition at those positions), and keeps the repetition pattern when both sets
                are equal (风风雨雨 <-> 年年岁岁: AABB <-> CCDD).
  copies        same_position_copies(lower, upper) = #{i: lower[i] == upper[i], content}: a lower
                line should answer each character, not repeat it.

Decoding keeps the form through zoo.search's per-position constraints (`decoding_constraints`,
`pattern_constraints`): force_punct forces each punctuation mark of the upper line at its position
and bans every punctuation id of the vocabulary at the other positions; no_copy bans, at each
position, the upper line's content character there; keep_pattern ties each repeated character's
position to its first occurrence in the upper line and makes every other non-punctuation position
differ from the earlier ones (zoo.search's tied and distinct positions). With the length constraint
as well (FormOptions' default), every lower line keeps the punctuation and copies nothing, and with
force_punct and keep_pattern it repeats characters exactly where the upper line does; without the
length constraint, a line may still end before a mark of the upper line.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Sequence

import numpy as np

UNK_TOKEN = "<unk>"

Tokens = Sequence[str]


def is_punct(token: str) -> bool:
  """A punctuation token: every character in a Unicode punctuation category ("，", "？", "……")."""
  return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


def is_content(token: str) -> bool:
  """A known character that is not punctuation (the ones that may repeat or be copied)."""
  return token != UNK_TOKEN and not is_punct(token)


def punct_positions(line: Tokens) -> dict[int, str]:
  """Position -> mark, for every punctuation token of the line."""
  return {i: token for i, token in enumerate(line) if is_punct(token)}


def punct_matches(lower: Tokens, upper: Tokens) -> bool:
  """The same punctuation marks at the same positions, and none elsewhere."""
  return punct_positions(lower) == punct_positions(upper)


def repeat_pairs(line: Tokens) -> set[tuple[int, int]]:
  """Every (i, j), i < j, where the line has the same content character twice."""
  return {(i, j) for i in range(len(line)) for j in range(i + 1, len(line))
          if line[i] == line[j] and is_content(line[i])}


def has_unwanted_repeat(lower: Tokens, upper: Tokens) -> bool:
  """The lower line repeats a character at positions (i, j) where the upper line does not."""
  return bool(repeat_pairs(lower) - repeat_pairs(upper))


def repeat_pattern_matches(lower: Tokens, upper: Tokens) -> bool:
  """The lower line repeats characters exactly where the upper line does."""
  return repeat_pairs(lower) == repeat_pairs(upper)


def same_position_copies(lower: Tokens, upper: Tokens) -> int:
  """How many content characters of `upper` the lower line repeats at the same position."""
  return sum(low == up and is_content(up) for low, up in zip(lower, upper))


def punctuation_ids(vocab_tokens: Sequence[str]) -> np.ndarray:
  """int32 (P,): the ids of the punctuation tokens of a vocabulary given in id order."""
  return np.asarray([i for i, token in enumerate(vocab_tokens) if is_punct(token)], np.int32)


def decoding_constraints(upper: Tokens, upper_ids: Sequence[int], punct_ids: np.ndarray, *,
                         force_punct: bool, no_copy: bool) -> tuple[np.ndarray, np.ndarray]:
  """zoo.search constraints that keep the form of the lower line of one upper line of L tokens.

  Args:
    upper: the upper line's tokens as the model reads them (L of them).
    upper_ids: their ids (L of them; an eos after them is ignored).
    punct_ids: int (P,), the vocabulary's punctuation ids (`punctuation_ids`).
    force_punct: force the upper line's punctuation ids at their positions and ban every
      punctuation id at the other positions.
    no_copy: ban the upper line's content character at its own position.

  Returns:
    forced int32 (L,) (-1 = free) and banned int32 (L, K) (-1 = none), K = P + 1 with force_punct,
    else 1.
  """
  length = len(upper)
  upper_ids = np.asarray(upper_ids[:length], np.int32)
  if len(upper_ids) != length:
    raise ValueError(f"upper_ids: expected at least {length} ids for the {length} tokens of "
                     f"upper, got {len(upper_ids)}")
  marks = np.array([is_punct(token) for token in upper], bool)  # (L,)
  forced = np.where(marks & force_punct, upper_ids, -1).astype(np.int32)
  content = np.array([is_content(token) for token in upper], bool)
  copies = np.where(content & no_copy, upper_ids, -1)[:, None]  # (L, 1)
  if not force_punct:
    return forced, copies.astype(np.int32)
  other_marks = np.where(marks[:, None], -1, np.asarray(punct_ids, np.int32)[None, :])  # (L, P)
  return forced, np.concatenate([copies, other_marks], axis=1).astype(np.int32)


def pattern_constraints(upper: Tokens) -> tuple[np.ndarray, np.ndarray]:
  """zoo.search's tied and distinct positions that give the lower line the upper line's
  repetition pattern (风风雨雨 -> 年年岁岁; no repeat where the upper line has none).

  A content position whose character occurred earlier in the upper line is tied to its first
  occurrence; every position that is not punctuation (unknown characters included: they equal
  nothing) is distinct, so the lower line repeats a character nowhere else. With punctuation
  forced as well (force_punct), repeat_pairs(lower) == repeat_pairs(upper) for every output.

  Args:
    upper: the upper line's tokens as the model reads them (L of them).

  Returns:
    tied int32 (L,) (-1 = free) and distinct bool (L,).
  """
  first: dict[str, int] = {}
  tied = np.full(len(upper), -1, np.int32)
  for i, token in enumerate(upper):
    if is_content(token):
      tied[i] = first.setdefault(token, i)
  tied[tied == np.arange(len(upper))] = -1  # a first occurrence is free
  distinct = np.array([not is_punct(token) for token in upper], bool)
  return tied, distinct


@dataclasses.dataclass(frozen=True)
class FormOptions:
  """Which parts of the form decoding enforces (the couplet command's and report's flags).

  Attributes:
    exact_length: every lower line exactly as long as its upper line (zoo.search exact_lens).
    force_punct: the upper line's punctuation at its positions, none elsewhere.
    no_copy: no content character of the upper line at the same position.
    keep_pattern: characters repeated exactly where the upper line repeats them
      (`pattern_constraints`).
  """
  exact_length: bool = True
  force_punct: bool = False
  no_copy: bool = False
  keep_pattern: bool = False

  @property
  def name(self) -> str:
    """'free' when nothing is enforced, else the enforced parts joined by '+' in this order:
    'length', 'punct', 'nocopy', 'pattern' (e.g. 'length+punct+nocopy+pattern')."""
    parts = [part for part, on in (("length", self.exact_length), ("punct", self.force_punct),
                                   ("nocopy", self.no_copy), ("pattern", self.keep_pattern))
             if on]
    return "+".join(parts) or "free"
