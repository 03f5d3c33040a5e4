"""Finding, checking and reading the raw archives the dataset builders start from.

A raw source is one of
  * a canonical archive (aclImdb_v1.tar.gz, fra-eng.zip, couplet.tar.gz, afqmc_public.zip,
    lcqmc.tar.gz) or any .tar[.gz|.bz2|.xz], .tgz or .zip holding the same layout,
  * the folder such an archive extracts to (or any folder holding that layout),
  * a single text file (fra-eng only: fra.txt itself),
  * a folder that holds the canonical archive, directly or in the dataset's sub-folder
    (`--source ../shared/data` finds imdb/aclImdb_v1.tar.gz, fra-eng/fra-eng.zip, couplet/...),
    or the extracted tree in that sub-folder (afqmc/train.json).

An entry of CANONICAL is one archive; its `builder` names the dataset builder that reads it (the
key itself by default): `lcqmc` is a second archive of the `question_pairs` builder, so a folder
searched for question_pairs finds afqmc/ or lcqmc/ (both at once is an error naming them).

When no path is given and the user asks for the full data, the file is looked for in the manual
folder `<data_dir>/downloads/manual/` and otherwise downloaded from the canonical URL with the tfds
download manager. Archives carrying a canonical file name are checked against the digests pinned
below (the copies in ../shared/data and, where known, the upstream files); a mismatch, like a
truncated or corrupt archive, is a `SourceError` naming the file.

Text is decoded strictly as UTF-8: invalid bytes are an error naming the file and the line, not a
skip, because a file in another encoding would otherwise lose a large, unnoticed share of its lines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import socket
import tarfile
import urllib.parse
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Iterator, NamedTuple, Sequence

log = logging.getLogger(__name__)

ENV_DATA_DIR = "ZOO_DATA_DIR"
# The samples ship inside the package (pyproject: package-data pipelines = ["samples/**/*"]).
SAMPLES_DIR = Path(__file__).resolve().parent / "samples"


class SourceError(ValueError):
  """A raw source is missing, corrupt, fails its checksum, or does not have the expected layout."""


@dataclasses.dataclass(frozen=True)
class Canonical:
  """Where a dataset's canonical archive comes from and how to recognise it.

  Attributes:
    filename: the archive's canonical file name.
    url: the canonical download address.
    subdir: the sub-folder of a data folder (like ../shared/data) that holds the archive.
    top: the top folder inside the archive.
    marker: a path inside the extracted layout that identifies a folder as the extracted tree.
    other_markers: further such paths, for datasets read in more than one layout.
    sha256: digests accepted for a file called `filename` (our shared copy, the upstream file).
    sha1: further accepted SHA-1 digests (where only those are published, e.g. by d2l).
    sample: the file name of the small sample shipped in pipelines/samples/.
    sizes: the byte sizes of the accepted files (checked before their digest by
      `pipelines.download`; empty: not recorded).
    md5: further accepted MD5 digests (where only those are published, e.g. by PaddleNLP).
    builder: the dataset builder (pipelines.builders) that reads the archive; "" = the key.
  """
  filename: str
  url: str
  subdir: str
  top: str
  marker: str
  sha256: tuple[str, ...] = ()
  sha1: tuple[str, ...] = ()
  sample: str = ""
  other_markers: tuple[str, ...] = ()
  sizes: tuple[int, ...] = ()
  md5: tuple[str, ...] = ()
  builder: str = ""

  @property
  def pinned(self) -> bool:
    """Whether any digest is recorded for the file."""
    return bool(self.sha256 or self.sha1 or self.md5)

  def accepts(self, digests: Digests) -> bool:
    """Whether a file's digests match one recorded digest (of any of the three kinds)."""
    return (digests.sha256 in self.sha256 or digests.sha1 in self.sha1
            or digests.md5 in self.md5)

  def expected(self) -> str:
    """The recorded digests, for a message: 'sha256 <hex> or md5 <hex>'."""
    return " or ".join(f"{kind} {value}" for kind, values in
                       (("sha256", self.sha256), ("sha1", self.sha1), ("md5", self.md5))
                       for value in values)


class Digests(NamedTuple):
  """A file's hex digests, read in one pass (`file_digests`)."""
  sha256: str
  sha1: str
  md5: str


CANONICAL: dict[str, Canonical] = {
    "imdb": Canonical(
        filename="aclImdb_v1.tar.gz",
        url="http://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
        subdir="imdb",
        top="aclImdb",
        marker="train/pos",
        sha256=(
            # ../shared/data copy (rebuilt without the .feat files and imdbEr.txt).
            "02c575bcbb8e6636002a341723a16c2162a86cb7762db7c39b782cdfbd31108a",
            # Stanford's original archive (84,125,825 bytes).
            "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
        ),
        sha1=("01ada507287d82875905620988597833ad4e0903",),
        sample="imdb_sample.tar.gz",
        sizes=(56_779_053, 84_125_825),
    ),
    "fra_eng": Canonical(
        filename="fra-eng.zip",
        url="http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip",
        subdir="fra-eng",
        top="fra-eng",
        marker="fra.txt",
        sha256=("262d82086b4a2938a0415ee13dc3413338ce1d37cd98723f5f9a26cf535e27b9",),
        # The digest d2l publishes for its own download of this file.
        sha1=("94646ad1522d915e7b0f9296181140edcf86a4f5",),
        sample="fra_eng_sample.zip",
        sizes=(3_336_319,),
    ),
    "couplet": Canonical(
        filename="couplet.tar.gz",
        url="https://github.com/wb14123/couplet-dataset/releases/download/1.0/couplet.tar.gz",
        subdir="couplet",
        top="couplet",
        marker="train/in.txt",
        # Only our shared copy is pinned: the upstream release publishes no digest, so a genuine
        # upstream couplet.tar.gz needs `verify=False` (`--no-verify`).
        sha256=("99ec84dbd11368a09aab9c1e046f2838ab1c0c7d0feb56a9623163c5d29c9f12",),
        sample="couplet_sample.tar.gz",
        sizes=(24_230_639,),
    ),
    "question_pairs": Canonical(
        filename="afqmc_public.zip",
        url="https://storage.googleapis.com/cluebenchmark/tasks/afqmc_public.zip",
        subdir="afqmc",
        top="afqmc",
        marker="train.json",
        # CLUE publishes no digest of afqmc_public.zip, and the shared copy is its extracted
        # train.json and test.json (their digests: pipelines/builders/question_pairs.py).
        sample="question_pairs_sample.zip",
        # LCQMC and BQ: train.txt, dev.txt, test.txt of `text_a TAB text_b TAB label` lines;
        # LCQMC as PaddleHub ships it: train.tsv, dev.tsv, test.tsv with a header line.
        other_markers=("train.txt", "train.tsv"),
    ),
    "lcqmc": Canonical(
        # LCQMC (Liu et al., COLING 2018) as PaddleHub and PaddleNLP download it: lcqmc/train.tsv,
        # dev.tsv and test.tsv, each a header line `text_a TAB text_b TAB label`, then one pair
        # a line (238,766 / 8,802 / 12,500 pairs). Read by the question_pairs builder.
        filename="lcqmc.tar.gz",
        url="https://bj.bcebos.com/paddlehub-dataset/lcqmc.tar.gz",
        subdir="lcqmc",
        top="lcqmc",
        marker="train.tsv",
        # Only the archive's MD5 is published (PaddleNLP's datasets/lcqmc.py); no sha256 or
        # byte size is recorded anywhere public, so none is pinned here.
        md5=("62a7ba36f786a82ae59bbde0b0a9af0c",),
        builder="question_pairs",
    ),
}

_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def default_data_dir() -> Path:
  """$ZOO_DATA_DIR if set, else ~/.cache/attention_zoo: where prepared datasets live."""
  value = os.environ.get(ENV_DATA_DIR)
  return Path(value).expanduser() if value else Path.home() / ".cache" / "attention_zoo"


def manual_dir(data_dir: str | os.PathLike) -> Path:
  """The folder where a user may drop a canonical archive by hand (tfds' manual_dir)."""
  return Path(data_dir) / "downloads" / "manual"


def sample_path(name: str) -> Path:
  """The path of the small real sample shipped inside the package for dataset `name`."""
  path = SAMPLES_DIR / CANONICAL[name].sample
  if not path.is_file():
    raise SourceError(f"the packaged sample {path} is missing; reinstall the package or run "
                      f"scripts/make_samples.py")
  return path


def is_archive(path: Path) -> bool:
  lower = path.name.lower()
  return lower.endswith(".zip") or lower.endswith(_TAR_SUFFIXES)


def builder_of(name: str) -> str:
  """The dataset builder that reads the archive CANONICAL[name]."""
  return CANONICAL[name].builder or name


def file_digests(path: Path) -> Digests:
  """Returns the (sha256, sha1, md5) hex digests of a file, read once."""
  hashes = hashlib.sha256(), hashlib.sha1(), hashlib.md5()
  with open(path, "rb") as f:
    while chunk := f.read(1 << 20):
      for h in hashes:
        h.update(chunk)
  return Digests(*(h.hexdigest() for h in hashes))


def verify_checksum(path: Path, name: str) -> str:
  """Checks a file with the canonical name of dataset `name` against the pinned digests.

  A dataset with no pinned digest (question_pairs: CLUE publishes none) passes, with a warning
  that logs the file's sha256.

  Returns:
    The file's sha256.

  Raises:
    SourceError: the digest is not one of the pinned ones (a truncated or altered download).
  """
  canon = CANONICAL[name]
  digests = file_digests(path)
  if not canon.pinned:
    log.warning("%s: no digest is pinned for %s; its sha256 is %s", path, canon.filename,
                digests.sha256)
    return digests.sha256
  if not canon.accepts(digests):
    raise SourceError(
        f"{path}: checksum mismatch for {canon.filename} (sha256 {digests.sha256}, "
        f"{path.stat().st_size} bytes); expected {canon.expected()}. The file is probably "
        f"truncated or corrupt: download it again from {canon.url}. To use a different release "
        "on purpose, pass verify=False (--no-verify).")
  return digests.sha256


def _missing_message(name: str, data_dir: Path) -> str:
  canon = CANONICAL[name]
  return (f"no raw data for {name}: `python -m pipelines download {name}` fetches it into data/ "
          f"(then train with --data-dir data); or obtain {canon.filename} from {canon.url} and "
          f"pass its path as source (train --data-dir PATH, prepare --source PATH) or put it at "
          f"{manual_dir(data_dir) / canon.filename}")


def _locate_archive(canon: Canonical, folder: Path) -> Path | None:
  """The extracted tree or the archive `canon` describes inside `folder`, or None."""
  for tree in (folder, folder / canon.top):
    if any((tree / marker).exists() for marker in (canon.marker, *canon.other_markers)):
      return tree
  for archive in (folder / canon.filename, folder / canon.subdir / canon.filename):
    if archive.is_file():
      return archive
  return None


def locate_in_folder(name: str, folder: Path) -> Path | None:
  """The extracted tree or the canonical archive of dataset `name` inside `folder`, or None.

  `name` is a builder's name: every archive of CANONICAL that builder reads is looked for (for
  question_pairs, AFQMC's and LCQMC's).

  Raises:
    SourceError: `folder` holds the data of more than one of those archives (naming them).
  """
  found = {}
  for key, canon in CANONICAL.items():
    if builder_of(key) == name and (path := _locate_archive(canon, folder)) is not None:
      found.setdefault(path, key)
  if len(found) > 1:
    raise SourceError(f"{folder} holds the data of {len(found)} {name} datasets ("
                      + ", ".join(f"{key}: {path}" for path, key in found.items())
                      + "); name one of them as the source (--data-dir PATH)")
  return next(iter(found), None)


def existing_source(name: str, source: str | os.PathLike, *, data_dir: str | os.PathLike
                    ) -> Path:
  """The user-given `source` of dataset `name` as a Path; SourceError naming it if it is missing.

  Checked whenever a source is named, even when an earlier build would be reused without reading
  it: a mistyped path must not silently stand for whatever was prepared before.
  """
  path = Path(source).expanduser()
  if not path.exists():
    raise SourceError(f"{name} source {path} does not exist. " +
                      _missing_message(name, Path(data_dir)))
  return path


def resolve(name: str, source: str | os.PathLike | None, *, data_dir: str | os.PathLike,
            download: bool = False, verify: bool = True,
            fetch: Callable[[str], os.PathLike] | None = None) -> Path:
  """Finds the raw data of dataset `name` for a full-size build.

  Args:
    name: a builder's name ('imdb', 'fra_eng', 'couplet', 'question_pairs'); a file with the
      canonical name of any archive it reads (afqmc_public.zip, lcqmc.tar.gz) is verified.
    source: a user-given path (archive, extracted folder, fra.txt, or a folder holding the
      canonical archive), or None.
    data_dir: the data folder; its `downloads/manual/` is searched when `source` is None.
    download: when `source` is None and nothing is in the manual folder, download the canonical
      archive with `fetch`.
    verify: check the digest of files with a canonical name.
    fetch: url -> local path (the tfds download manager's `download`).

  Returns:
    A path to an archive, a folder, or a text file.

  Raises:
    SourceError: with the file to obtain and where to put it, or what was wrong with the path.
  """
  canon = CANONICAL[name]
  data_dir = Path(data_dir)
  if source is not None:
    path = existing_source(name, source, data_dir=data_dir)
    if path.is_dir():
      found = locate_in_folder(name, path)
      if found is None:
        raise SourceError(
            f"{path} holds neither the extracted {name} layout (no {canon.marker}) nor "
            f"{canon.filename} (looked in {path} and {path / canon.subdir}); `python -m "
            f"pipelines download {name} --to {path}` puts it there")
      path = found
  else:
    path = manual_dir(data_dir) / canon.filename
    if not path.exists():
      if not download:
        raise SourceError(_missing_message(name, data_dir) +
                          ", or ask for the canonical download (download=True, --download)")
      path = _download(name, data_dir, verify=verify, fetch=fetch)
      return path
  if verify and path.is_file():
    for key, other in CANONICAL.items():  # the archives this builder reads, by file name
      if builder_of(key) == name and path.name == other.filename:
        verify_checksum(path, key)
  return path


def _reachable(url: str, timeout: float = 5.0) -> bool:
  parts = urllib.parse.urlsplit(url)
  port = parts.port or (443 if parts.scheme == "https" else 80)
  try:
    with socket.create_connection((parts.hostname, port), timeout=timeout):
      return True
  except OSError:
    return False


def _download(name: str, data_dir: Path, *, verify: bool,
              fetch: Callable[[str], os.PathLike] | None) -> Path:
  canon = CANONICAL[name]
  # The download manager retries unreachable hosts for minutes; a quick probe fails fast offline.
  if fetch is None or not _reachable(canon.url):
    raise SourceError(f"cannot reach {canon.url} (offline?). " + _missing_message(name, data_dir))
  try:
    path = Path(fetch(canon.url))
  except Exception as exc:  # network and HTTP errors of any kind
    raise SourceError(f"downloading {canon.url} failed ({exc}). "
                      + _missing_message(name, data_dir)) from exc
  digests = file_digests(path)
  if canon.pinned:
    if verify and not canon.accepts(digests):
      raise SourceError(f"{path} (downloaded from {canon.url}): checksum mismatch (sha256 "
                        f"{digests.sha256}); delete it and retry, or pass verify=False")
  else:
    log.warning("%s has no pinned checksum; downloaded file sha256 %s", canon.url,
                digests.sha256)
  return path


# ----------------------------------------------------------------------------- reading raw files

def read_files(path: Path, select: Callable[[str], bool]) -> dict[str, bytes]:
  """Reads the selected files of an archive or folder in one pass.

  Args:
    path: a .tar[.gz|...]/.tgz/.zip archive, a folder, or a single file.
    select: called with each file's POSIX path relative to the archive/folder root (e.g.
      'aclImdb/train/pos/0_9.txt'); True to read it.

  Returns:
    {relative path: contents}. A single file is returned under its own name, unfiltered.

  Raises:
    SourceError: the archive is truncated or corrupt, or a file cannot be read.
  """
  if path.is_dir():
    return _read_folder(path, select)
  name = path.name.lower()
  if name.endswith(".zip"):
    return _read_archive(path, _zip_members, select)
  if name.endswith(_TAR_SUFFIXES):
    return _read_archive(path, _tar_members, select)
  return {path.name: path.read_bytes()}


def _read_folder(root: Path, select: Callable[[str], bool]) -> dict[str, bytes]:
  out = {}
  for folder, dirs, files in os.walk(root, followlinks=True):
    dirs.sort()
    for fname in sorted(files):
      full = Path(folder) / fname
      rel = full.relative_to(root).as_posix()
      if select(rel):
        try:
          out[rel] = full.read_bytes()
        except OSError as exc:
          raise SourceError(f"{full}: cannot be read ({exc})") from exc
  return out


# An archive's files in order, each as (its POSIX path inside the archive, a function reading it).
Members = Iterator[tuple[str, Callable[[], bytes]]]


def _tar_members(path: Path) -> Members:
  with tarfile.open(path, "r:*") as tar:
    for member in tar:
      if member.isfile():
        yield member.name.removeprefix("./"), lambda member=member: tar.extractfile(member).read()


def _zip_members(path: Path) -> Members:
  with zipfile.ZipFile(path) as archive:
    for info in sorted(archive.infolist(), key=lambda i: i.filename):
      if not info.is_dir():
        yield info.filename, lambda info=info: archive.read(info)


# What a truncated or corrupt archive raises while it is listed or read.
_DAMAGED = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, OSError)


def _read_archive(path: Path, members: Callable[[Path], Members],
                  select: Callable[[str], bool]) -> dict[str, bytes]:
  """The files of the archive at `path` that `select` picks, listed by `members` (tar or zip)."""
  out = {}
  try:
    for rel, read in members(path):
      if select(rel):
        out[rel] = read()
  except _DAMAGED as exc:
    raise SourceError(f"{path}: truncated or corrupt archive ({type(exc).__name__}: {exc}); "
                      f"obtain the file again") from exc
  return out


def read_bytes(path: str | os.PathLike, what: str = "") -> bytes:
  """The bytes of the file at `path`; SourceError '<what> <path>: cannot be read (why)'."""
  try:
    with open(path, "rb") as f:
      return f.read()
  except OSError as exc:
    raise SourceError(f"{what + ' ' if what else ''}{os.fspath(path)}: cannot be read "
                      f"({exc.strerror or exc})") from None


def decode_utf8(data: bytes, where: str) -> str:
  """Decodes strict UTF-8 (dropping a leading byte-order mark).

  Raises:
    SourceError: naming `where`, the line and the byte offset of the first invalid byte.
  """
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as exc:
    line = data.count(b"\n", 0, exc.start) + 1
    raise SourceError(
        f"{where}: line {line}: invalid UTF-8 (byte 0x{data[exc.start]:02x} at offset "
        f"{exc.start}); the file must be UTF-8 encoded") from None
  return text.removeprefix("\ufeff")


def split_lines(text: str) -> list[str]:
  """Splits on '\\n' only (str.splitlines would also split at U+2028, U+0085, ...).

  A final newline does not make an extra empty line; a '\\r' before the newline is removed.
  """
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  return [line[:-1] if line.endswith("\r") else line for line in lines]


def _header_name(name: str) -> str:
  return "".join(c for c in name.lower() if c.isalnum())


def is_header(fields: Sequence[str], columns: Sequence[Sequence[str]]) -> bool:
  """Whether a tab-separated line's `fields` name the columns of a layout rather than hold data:
  at least two fields and at most len(columns), field i one of the names `columns[i]` allows
  (case, spaces, '_' and '-' ignored: `Text_A`, `text a` and `texta` are alike)."""
  return 2 <= len(fields) <= len(columns) and all(
      _header_name(field) in {_header_name(name) for name in names}
      for field, names in zip(fields, columns))
