"""What the dataset builders share: configs, source handling, skip reports, stable splits.

Every builder has two configs that live side by side in one data_dir:
  'sample': the small real slice shipped in pipelines/samples/ (no source needed);
  'full':   the whole dataset, from `source` (a path), the manual folder, or the canonical download.
The raw source reaches the builder through its constructor (`source=`, `download=`, `verify=`);
it is only read when the dataset is not yet prepared.

The builders read the whole raw source first (checking layout, encoding and pairing, and counting
what they skip), so that a bad source fails before anything is written, then hand each split's
records to tfds, which writes array_record files (no TensorFlow needed).
"""

from __future__ import annotations

import abc
import hashlib
import logging
import unicodedata
from pathlib import Path
from typing import Any, Iterable, Iterator

import tensorflow_datasets as tfds

from pipelines import sources
from pipelines.sources import SourceError

log = logging.getLogger(__name__)

VERSION = tfds.core.Version("1.0.0")
# How many locations of skipped records are kept per reason in the report.
_EXAMPLES_KEPT = 5


class Tally:
  """Counts records that were skipped or dropped, per reason, with a few locations of each."""

  def __init__(self):
    self.counts: dict[str, int] = {}
    self.examples: dict[str, list[str]] = {}

  def add(self, reason: str, where: str) -> None:
    self.counts[reason] = self.counts.get(reason, 0) + 1
    kept = self.examples.setdefault(reason, [])
    if len(kept) < _EXAMPLES_KEPT:
      kept.append(where)

  def total(self) -> int:
    return sum(self.counts.values())


def group_key(text: str) -> str:
  """The key that groups near-identical texts: NFKC, case-folded, whitespace collapsed."""
  return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def unit_hash(text: str) -> float:
  """A stable pseudo-random number in [0, 1) from `text` (sha256; the same on every machine)."""
  digest = hashlib.sha256(group_key(text).encode("utf-8")).digest()
  return int.from_bytes(digest[:8], "big") / 2.0**64


def single_root(roots: Iterable[str], source: Path, what: str) -> str:
  """Checks that all matched files sit under one root folder inside the source.

  Args:
    roots: the root prefix of each matched file ('' or e.g. 'aclImdb/').
    source: the source, for messages.
    what: a description of the layout, for messages.

  Returns:
    The one root prefix.

  Raises:
    SourceError: nothing matched, or the matches sit under several roots (two copies).
  """
  found = sorted(set(roots))
  if not found:
    raise SourceError(f"{source}: no {what} found")
  if len(found) > 1:
    raise SourceError(f"{source}: holds {what} under several roots {found}; give the path of "
                      f"one of them")
  return found[0]


class ZooBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Base of the zoo's dataset builders (array_record output, sample and full configs).

  Subclasses define `name`, `BUILDER_CONFIGS`, `DESCRIPTION`, `HOMEPAGE`, `CITATION`,
  `_features()` and `read_source(path)`.
  """

  VERSION = VERSION
  RELEASE_NOTES = {"1.0.0": "First release."}
  DESCRIPTION = ""
  HOMEPAGE = ""
  CITATION = ""
  # Our checksums are pinned in pipelines/sources.py; without a code path tfds looks for no
  # checksums.tsv beside the module (and does not trip over an editable install's namespace path).
  code_path = None

  def __init__(self, *, source=None, download: bool = False, verify: bool = True, **kwargs):
    """Args: source/download/verify as in `pipelines.sources.resolve`; the rest go to tfds."""
    self._source = source
    self._download = download
    self._verify = verify
    kwargs.setdefault("file_format", "array_record")
    super().__init__(**kwargs)

  @abc.abstractmethod
  def _features(self) -> tfds.features.FeaturesDict:
    """The record structure."""

  @abc.abstractmethod
  def read_source(self, path: Path) -> tuple[dict[str, list[tuple[Any, dict]]], Tally, str]:
    """Reads and checks a raw source without writing anything (a dry run of the build).

    Args:
      path: an archive, folder or file (see `pipelines.sources.read_files`).

    Returns:
      ({split: [(key, record), ...]}, the Tally of skipped records, a description of the split
      rule).

    Raises:
      SourceError: the source is missing parts, corrupt, or not UTF-8 (with file and line).
    """

  def _info(self) -> tfds.core.DatasetInfo:
    # DatasetInfo is built directly: tfds' dataset_info_from_configs would look for README and
    # checksum files beside the module.
    return tfds.core.DatasetInfo(
        builder=self, description=self.DESCRIPTION, features=self._features(),
        homepage=self.HOMEPAGE, citation=self.CITATION, metadata=tfds.core.MetadataDict())

  def _raw_path(self, dl_manager) -> Path:
    if self.builder_config.name == "sample":
      return sources.sample_path(self.name)
    return sources.resolve(
        self.name, self._source, data_dir=Path(self.data_dir_root), download=self._download,
        verify=self._verify, fetch=dl_manager.download)

  def _split_generators(self, dl_manager):
    path = self._raw_path(dl_manager)
    splits, tally, split_rule = self.read_source(path)
    empty = [split for split, items in splits.items() if not items]
    if empty:  # tfds cannot write an empty split; say why instead of failing in its writer
      total = sum(len(items) for items in splits.values())
      raise SourceError(f"{path}: the {empty} split(s) would be empty ({total:,} records kept in "
                        f"all); the source is too small for the split rule ({split_rule})")
    for reason, count in tally.counts.items():
      log.warning("%s/%s: skipped %d records (%s), e.g. %s", self.name, self.builder_config.name,
                  count, reason, tally.examples[reason])
    self.info.metadata.update({
        "source": str(path),
        "source_bytes": path.stat().st_size if path.is_file() else None,
        "source_path": str(path.resolve()),  # datasets._check_same_source compares folders by it
        "skipped": dict(tally.counts),
        "skipped_examples": dict(tally.examples),
        "split_rule": split_rule,
    })
    return {split: self._generate_examples(items) for split, items in splits.items()}

  def _generate_examples(self, items: list[tuple[Any, dict]]) -> Iterator[tuple[Any, dict]]:
    yield from items
