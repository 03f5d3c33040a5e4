"""Tatoeba English-French pairs (d2l's fra-eng) as a tfds builder.

Source: fra-eng.zip (fra-eng/fra.txt inside), the extracted folder, or the text file itself. One
pair per line, ENGLISH<TAB>FRENCH; releases with more tab-separated columns (attribution) work
too: the first two columns are taken.
Records: {'en': str, 'fr': str}, exactly as in the file (non-breaking spaces included; the
tokenizer normalises them).
Splits train / validation / test, about 90 / 5 / 5, decided by the English sentence: each English
sentence goes to the split given by a sha256 hash of its normalised form (NFKC, case-folded,
whitespace collapsed), so all its translations land in the same split and no English sentence is
in two splits. The rule is the same for the sample and the full data.
Skipped and counted: blank lines ('blank_line'), lines without a tab ('malformed_line'), pairs
with an empty side ('empty_text'). Invalid UTF-8 is an error naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow_datasets as tfds

from pipelines.builders import _common
from pipelines.sources import SourceError, decode_utf8, is_archive, read_files, split_lines

TRAIN_FRACTION = 0.90
VALIDATION_FRACTION = 0.05
PAIRS_FILE = "fra.txt"


def split_of(english: str) -> str:
  """The split ('train', 'validation' or 'test') of every pair with this English sentence."""
  u = _common.unit_hash(english)
  if u < TRAIN_FRACTION:
    return "train"
  return "validation" if u < TRAIN_FRACTION + VALIDATION_FRACTION else "test"


class FraEng(_common.ZooBuilder, skip_registration=True):
  """English-French sentence pairs; splits train, validation, test grouped by English."""

  name = "fra_eng"
  BUILDER_CONFIGS = [
      tfds.core.BuilderConfig(name="sample", description="Shipped slice of 10,000 pairs."),
      tfds.core.BuilderConfig(name="full", description="All pairs of fra.txt."),
  ]
  DESCRIPTION = "English-French sentence pairs from Tatoeba (manythings.org), as used by d2l."
  HOMEPAGE = "https://www.manythings.org/anki/"
  CITATION = "Tatoeba Project (tatoeba.org), CC-BY 2.0 FR; pairs collected by manythings.org/anki."

  def _features(self):
    return tfds.features.FeaturesDict({"en": tfds.features.Text(), "fr": tfds.features.Text()})

  def read_source(self, path: Path):
    if path.is_file() and not is_archive(path):
      files = read_files(path, lambda rel: True)
    else:
      files = read_files(path, lambda rel: rel.rsplit("/", 1)[-1] == PAIRS_FILE)
      if not files:
        raise SourceError(f"{path}: no {PAIRS_FILE} found (expected fra-eng/{PAIRS_FILE})")
      if len(files) > 1:
        raise SourceError(f"{path}: several {PAIRS_FILE} files {sorted(files)}; give one of them")
    [(rel, data)] = files.items()
    where = f"{path}:{rel}" if rel != path.name else str(path)
    tally = _common.Tally()
    splits = {"train": [], "validation": [], "test": []}
    for number, line in enumerate(split_lines(decode_utf8(data, where)), start=1):
      here = f"{where}:{number}"
      if not line.strip():
        tally.add("blank_line", here)
        continue
      columns = line.split("\t")
      if len(columns) < 2:
        tally.add("malformed_line", here)
        continue
      english, french = columns[0], columns[1]
      if not english.strip() or not french.strip():
        tally.add("empty_text", here)
        continue
      splits[split_of(english)].append((number, {"en": english, "fr": french}))
    rule = (f"by sha256 unit hash of the normalised English sentence: train < {TRAIN_FRACTION:g}, "
            f"validation < {TRAIN_FRACTION + VALIDATION_FRACTION:g}, test otherwise")
    return splits, tally, rule
