"""Chinese couplets (wb14123 couplet-dataset, cleaned) as a tfds builder.

Source: couplet.tar.gz or a folder (the top folder may have any name) with train/in.txt (upper
lines) and train/out.txt (lower lines), one couplet a line, characters separated by spaces, and
optionally test/in.txt + test/out.txt (upstream archives have them; ../shared/data's copy does not).
Records: {'upper': str, 'lower': str}, the lines exactly as in the files minus the line ending
(the shared copy ends every line with a space; it is kept).
Splits:
  * with test/: 'test' is test/; 'validation' is carved from train/ by upper line;
  * without test/: both 'validation' and 'test' are carved from train/ by upper line.
  Carving: each upper line (normalised: NFKC, whitespace collapsed) gets a stable sha256 number
  u in [0, 1); u < v goes to validation, v <= u < v + t to test, the rest to train, so all lower
  lines of one upper line share a split. v = t = 1% for 'full' (about 7,000 pairs each) and 5% for
  the 10,000-pair 'sample' (about 500 each).
Checks: in.txt and out.txt must have the same number of lines (else an error naming both counts);
a pair whose two lines have different numbers of space-separated tokens is dropped and counted
('length_mismatch'), as is a pair with a blank line ('empty_text'). Invalid UTF-8 is an error
naming the file and line.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import tensorflow_datasets as tfds

from pipelines.builders import _common
from pipelines.sources import SourceError, decode_utf8, read_files, split_lines

_PAIR_FILE = re.compile(r"^(.*?)(train|test)/(in|out)\.txt$")


@dataclasses.dataclass(eq=False)
class CoupletConfig(tfds.core.BuilderConfig):
  """Adds the shares of train/ carved out as validation and (when there is no test/) test."""
  validation_fraction: float = 0.01
  test_fraction: float = 0.01


class Couplet(_common.ZooBuilder, skip_registration=True):
  """Upper/lower lines of Chinese couplets; splits train, validation, test grouped by upper line."""

  name = "couplet"
  BUILDER_CONFIGS = [
      CoupletConfig(name="sample", description="Shipped slice of 10,000 couplets.",
                    validation_fraction=0.05, test_fraction=0.05),
      CoupletConfig(name="full", description="All couplets.",
                    validation_fraction=0.01, test_fraction=0.01),
  ]
  DESCRIPTION = "Chinese couplets: an upper line and the lower line that answers it."
  HOMEPAGE = "https://github.com/wb14123/couplet-dataset"
  CITATION = "wb14123/couplet-dataset (GitHub), cleaned like v-zich/couplet-clean-dataset."

  def _features(self):
    return tfds.features.FeaturesDict({"upper": tfds.features.Text(),
                                       "lower": tfds.features.Text()})

  def read_source(self, path: Path):
    files = read_files(path, lambda rel: _PAIR_FILE.match(rel) is not None)
    root = _common.single_root((_PAIR_FILE.match(rel)[1] for rel in files), path,
                               "couplet files (train/in.txt, train/out.txt)")
    for needed in ("train/in.txt", "train/out.txt"):
      if root + needed not in files:
        raise SourceError(f"{path}: missing {root + needed}")
    has_test = root + "test/in.txt" in files or root + "test/out.txt" in files
    for needed in ("test/in.txt", "test/out.txt") if has_test else ():
      if root + needed not in files:
        raise SourceError(f"{path}: has a test/ folder but no {root + needed}")

    tally = _common.Tally()
    v = self.builder_config.validation_fraction
    t = self.builder_config.test_fraction
    splits = {"train": [], "validation": [], "test": []}
    for part in ("train", "test") if has_test else ("train",):
      for number, upper, lower in self._pairs(path, root + part, files, tally):
        if part == "test":
          split = "test"
        else:
          u = _common.unit_hash(upper)
          split = "validation" if u < v else ("test" if u < v + t and not has_test else "train")
        splits[split].append((f"{part}/{number}", {"upper": upper, "lower": lower}))
    if has_test:
      rule = f"test = test/; validation = train/ upper lines with sha256 unit hash < {v:g}"
    else:
      rule = (f"carved from train/ by sha256 unit hash of the upper line: validation < {v:g}, "
              f"test < {v + t:g}, train otherwise")
    return splits, tally, rule

  @staticmethod
  def _pairs(path: Path, prefix: str, files: dict[str, bytes], tally: _common.Tally):
    """Yields (line number, upper, lower) of one folder's in.txt/out.txt, checking each pair."""
    where_in, where_out = f"{path}:{prefix}/in.txt", f"{path}:{prefix}/out.txt"
    uppers = split_lines(decode_utf8(files[prefix + "/in.txt"], where_in))
    lowers = split_lines(decode_utf8(files[prefix + "/out.txt"], where_out))
    if len(uppers) != len(lowers):
      raise SourceError(f"{path}: {prefix}/in.txt has {len(uppers)} lines but {prefix}/out.txt "
                        f"has {len(lowers)}; the two files must pair line by line")
    for number, (upper, lower) in enumerate(zip(uppers, lowers), start=1):
      here = f"{where_in}:{number}"
      upper_tokens, lower_tokens = upper.split(), lower.split()
      if not upper_tokens or not lower_tokens:
        tally.add("empty_text", here)
      elif len(upper_tokens) != len(lower_tokens):
        tally.add("length_mismatch", here)
      else:
        yield number, upper, lower
