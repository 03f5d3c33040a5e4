"""The raw datasets as random-access tfds data sources: `load`, `prepare`, `info`.

    ds = load("fra_eng", "train")                       # the shipped sample, prepared on first use
    ds = load("imdb", "test", source="../shared/data/imdb/aclImdb_v1.tar.gz")   # full data
    len(ds), ds[0]  ->  {'text': b'...', 'label': 1, 'rating': 9, 'id': 4821, 'movie': b'tt0453418'}

Names, splits and records (text fields come back as UTF-8 `bytes` from tfds):
  imdb     train / test / unsupervised   {'text', 'label' (0 neg, 1 pos, -1 unsup), 'rating',
                                         'id', 'movie' (IMDB title id)}
  fra_eng  train / validation / test     {'en', 'fr'}            (split by English sentence)
  couplet  train / validation / test     {'upper', 'lower'}      (split by upper line)
  question_pairs  train / validation / test / unlabelled   {'sentence1', 'sentence2', 'label' (1
           same meaning, 0 not, -1 unlabelled), 'id'}   (AFQMC or LCQMC; carved by sentence pair;
           'unlabelled' is CLUE's test.json, absent from a build whose source has none)
See pipelines/builders/*.py for each source layout, split rule and what is skipped.

Where things go: prepared datasets live under `data_dir`, by default $ZOO_DATA_DIR or
~/.cache/attention_zoo, as <data_dir>/<name>/<config>/<version>/*.array_record (imdb 1.1.0, the
others 1.0.0); config 'sample' is the shipped slice (used when no source is given), 'full' the
whole dataset, so both can sit in one data_dir. A full build reads `source` (an archive, an extracted folder, fra.txt, or a folder holding
the canonical archive), else <data_dir>/downloads/manual/<canonical file>, else (only with
download=True) the canonical URL. Preparing is idempotent: an existing build is reused without
reading the source again (a source that is named must still exist); `overwrite=True` rebuilds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import tensorflow_datasets as tfds

from pipelines import sources
from pipelines.builders import BUILDERS

NAMES = tuple(BUILDERS)
SPLITS = {
    "imdb": ("train", "test", "unsupervised"),
    "fra_eng": ("train", "validation", "test"),
    "couplet": ("train", "validation", "test"),
    "question_pairs": ("train", "validation", "test", "unlabelled"),
}


@dataclasses.dataclass
class PrepareReport:
  """What a prepared dataset holds and how it was made.

  Attributes:
    name: the dataset name.
    config: 'sample' or 'full'.
    path: the folder of the array_record files.
    source: the raw source it was built from.
    splits: {split: number of records}.
    skipped: {reason: number of raw records skipped or dropped}, empty when nothing was.
    skipped_examples: {reason: a few locations 'file:line' of skipped records}.
    split_rule: how the splits were made.
    built: True when this call built it, False when an existing build was reused.
    seconds: wall time of this call.
  """
  name: str
  config: str
  path: str
  source: str
  splits: dict[str, int]
  skipped: dict[str, int]
  skipped_examples: dict[str, list[str]]
  split_rule: str
  built: bool = False
  seconds: float = 0.0

  def lines(self, timing: bool = True) -> list[str]:
    """A human-readable summary, one line each (the last one the time taken, if `timing`)."""
    total = sum(self.splits.values())
    counts = ", ".join(f"{split} {count:,}" for split, count in self.splits.items())
    out = [f"{self.name} ({self.config}): {counts} (total {total:,})",
           f"  stored in {self.path}",
           f"  source {self.source}",
           f"  splits {self.split_rule}"]
    if self.skipped:
      for reason, count in sorted(self.skipped.items()):
        out.append(f"  skipped {count:,} ({reason}), e.g. {self.skipped_examples.get(reason)}")
    else:
      out.append("  skipped 0")
    if timing:
      out.append(f"  {'built' if self.built else 'reused'} in {self.seconds:.1f} s")
    return out


def _check_name(name: str) -> None:
  if name not in BUILDERS:
    raise ValueError(f"name: unknown dataset {name!r}; known datasets are {list(NAMES)}")


def builder(name: str, *, source: str | os.PathLike | None = None,
            data_dir: str | os.PathLike | None = None, download: bool = False,
            verify: bool = True, full: bool | None = None) -> tfds.core.GeneratorBasedBuilder:
  """The tfds builder of dataset `name` (nothing is read or written yet).

  Args:
    name: one of NAMES ('imdb', 'fra_eng', 'couplet', 'question_pairs').
    source: path of the raw data for the full dataset; None for the shipped sample.
    data_dir: where prepared datasets live (default $ZOO_DATA_DIR or ~/.cache/attention_zoo).
    download: build the full dataset without a source: use the manual folder or the canonical URL.
    verify: check the sha256 of canonical archives.
    full: force the config ('full' when True, 'sample' when False); by default 'full' exactly when
      a source is given or download is asked for.

  Raises:
    pipelines.sources.SourceError: `source` is given but does not exist.
  """
  _check_name(name)
  if full is None:
    full = source is not None or download
  data_dir = Path(data_dir).expanduser() if data_dir is not None else sources.default_data_dir()
  if source is not None:  # before any reuse of an earlier build, which would not read it
    sources.existing_source(name, source, data_dir=data_dir)
  return BUILDERS[name](data_dir=os.fspath(data_dir), config="full" if full else "sample",
                        source=source, download=download, verify=verify)


def _report(b: tfds.core.GeneratorBasedBuilder, built: bool, seconds: float) -> PrepareReport:
  meta = b.info.metadata or {}
  return PrepareReport(
      name=b.name, config=b.builder_config.name, path=str(b.data_dir),
      source=str(meta.get("source")),
      splits={split: b.info.splits[split].num_examples for split in SPLITS[b.name]
              if split in b.info.splits},  # an optional split its source did not have is absent
      skipped=dict(meta.get("skipped") or {}),
      skipped_examples={k: list(v) for k, v in (meta.get("skipped_examples") or {}).items()},
      split_rule=str(meta.get("split_rule")), built=built, seconds=seconds)


def _is_prepared(b: tfds.core.GeneratorBasedBuilder) -> bool:
  return (Path(b.data_dir) / "dataset_info.json").exists()


def _check_same_source(b: tfds.core.GeneratorBasedBuilder, source) -> None:
  """Refuses to reuse a full build that was made from a different file or folder than `source`.

  Files are compared by name and size, folders by their absolute path (recorded since
  'source_path' was; an older build of a folder is reused unchecked).
  """
  if source is None:
    return
  path = Path(source).expanduser()
  if path.is_dir():
    path = sources.locate_in_folder(b.name, path) or path
  meta = b.info.metadata or {}
  recorded = Path(str(meta.get("source")))
  recorded_path = meta.get("source_path")
  if path.is_dir() and recorded_path and Path(str(recorded_path)) != path.resolve():
    raise ValueError(
        f"{b.data_dir} was built from {recorded_path}, not from the folder {path.resolve()}; pass "
        f"overwrite=True (--overwrite) to rebuild it, or use another data_dir")
  if path.is_file() and recorded.name and (
      path.name != recorded.name or path.stat().st_size != meta.get("source_bytes")):
    raise ValueError(
        f"{b.data_dir} was built from {recorded} ({meta.get('source_bytes')} bytes), not from "
        f"{path} ({path.stat().st_size} bytes); pass overwrite=True (--overwrite) to rebuild it, "
        f"or use another data_dir")


def prepare(name: str, *, source: str | os.PathLike | None = None,
            data_dir: str | os.PathLike | None = None, download: bool = False,
            verify: bool = True, overwrite: bool = False) -> PrepareReport:
  """Builds dataset `name` as array_record files, or reuses an existing build.

  Args:
    name: one of NAMES ('imdb', 'fra_eng', 'couplet', 'question_pairs').
    source: raw data path for the full dataset; None for the shipped sample (see module doc).
    data_dir: where prepared datasets live (default $ZOO_DATA_DIR or ~/.cache/attention_zoo).
    download: full dataset without a source (manual folder, else the canonical URL).
    verify: check the sha256 of canonical archives.
    overwrite: rebuild even if a build exists.

  Returns:
    A PrepareReport (split counts, skipped counts, where it is stored, time taken).

  Raises:
    pipelines.sources.SourceError: missing, corrupt or malformed raw data (nothing is written).
  """
  start = time.perf_counter()
  b = builder(name, source=source, data_dir=data_dir, download=download, verify=verify)
  built = _prepare_builder(b, source, overwrite)
  return _report(b, built, time.perf_counter() - start)


def _prepare_builder(b: tfds.core.GeneratorBasedBuilder, source, overwrite: bool) -> bool:
  """Runs tfds' download_and_prepare; returns True when it built, False when it reused."""
  built = overwrite or not _is_prepared(b)
  if not built:
    _check_same_source(b, source)
  mode = (tfds.download.GenerateMode.REUSE_CACHE_IF_EXISTS if overwrite
          else tfds.download.GenerateMode.REUSE_DATASET_IF_EXISTS)
  with quiet_tfds():
    b.download_and_prepare(download_config=tfds.download.DownloadConfig(
        download_mode=mode, try_download_gcs=False))
  return built


@contextlib.contextmanager
def quiet_tfds() -> Iterator[None]:
  """Keeps tfds' chatter off standard output, which commands keep for their results.

  tfds prints "Downloading and preparing dataset ..." and "... Subsequent calls will reuse this
  data." to standard output: inside the block they go to standard error. Its nested progress bars
  move the cursor up with escape codes that a log file keeps as `[A` litter: they are drawn only
  when standard error is a terminal.
  """
  tfds.display_progress_bar(sys.stderr.isatty())
  with contextlib.redirect_stdout(sys.stderr):
    yield


def load(name: str, split: str, *, source: str | os.PathLike | None = None,
         data_dir: str | os.PathLike | None = None, download: bool = False) -> Any:
  """A random-access data source over one split (prepared first if needed).

  Args:
    name: one of NAMES ('imdb', 'fra_eng', 'couplet', 'question_pairs').
    split: one of SPLITS[name].
    source, data_dir, download: as in `prepare`.

  Returns:
    A tfds ArrayRecord data source: `len(ds)`, `ds[i] -> dict`, `ds.__getitems__([i, j, ...])`.
  """
  _check_name(name)
  if split not in SPLITS[name]:
    raise ValueError(f"split: unknown split {split!r} of {name}; known splits are "
                     f"{list(SPLITS[name])}")
  b = builder(name, source=source, data_dir=data_dir, download=download)
  _prepare_builder(b, source, overwrite=False)
  if split not in b.info.splits:
    raise ValueError(f"split: {name} in {b.data_dir} has no {split!r} split: its source "
                     f"{(b.info.metadata or {}).get('source')} had none (it has "
                     f"{sorted(b.info.splits)})")
  return b.as_data_source(split)


def info(name: str, *, full: bool = False,
         data_dir: str | os.PathLike | None = None) -> PrepareReport | None:
  """The report of an existing build of `name` ('full' or 'sample'), or None if not prepared."""
  b = builder(name, data_dir=data_dir, full=full)
  return _report(b, built=False, seconds=0.0) if _is_prepared(b) else None
