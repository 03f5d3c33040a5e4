"""Downloading the full datasets from their canonical addresses (`python -m pipelines download`).

    fetch("fra_eng", "data")   ->  data/fra-eng/fra-eng.zip, its size and sha256 checked

Each dataset of `sources.CANONICAL` is fetched from its `url` with `requests` (streamed into
`<file>.part`, so a cut download resumes where it stopped with an HTTP Range request), checked
against the recorded sizes and digests (sha256, or SHA-1 or MD5 where only those are published:
LCQMC's), and only then renamed to its canonical name inside the
dataset's sub-folder: the layout `--source DIR` / `train --data-dir DIR` already reads
(`sources.locate_in_folder`). A file that is already there and passes the checks is not fetched
again.

$ZOO_DATA_MIRROR (a base URL) fetches every file from `<mirror>/<canonical file name>` instead of
its canonical address: a local copy of the archives, or a test server.

Every failure is a `DownloadError` whose message is one line naming the dataset, the address and
what to do: an HTTP error status, an unreachable host, a transfer cut short (kept for resuming), a
file of the wrong size or digest (deleted, since resuming it could not repair it).
"""

from __future__ import annotations

import os
from pathlib import Path

import requests

from pipelines import sources

ENV_MIRROR = "ZOO_DATA_MIRROR"
_CHUNK = 1 << 16  # what a cut transfer can lose of its last read: resuming refetches it
# Seconds to wait for a connection and then for each read; a stalled server is a failure, not a
# hang.
_TIMEOUT = (15, 60)


class DownloadError(RuntimeError):
  """A dataset could not be fetched or did not pass its checks (a one-line message)."""


def url_of(name: str) -> str:
  """Where dataset `name` is fetched from: its canonical URL, or the file under $ZOO_DATA_MIRROR."""
  canon = sources.CANONICAL[name]
  mirror = os.environ.get(ENV_MIRROR)
  return f"{mirror.rstrip('/')}/{canon.filename}" if mirror else canon.url


def target_path(name: str, to: str | os.PathLike) -> Path:
  """<to>/<the dataset's sub-folder>/<its canonical file name>."""
  canon = sources.CANONICAL[name]
  return Path(to).expanduser() / canon.subdir / canon.filename


def check(name: str, path: Path, *, verify: bool = True, url: str = "") -> str:
  """Checks a fetched file's size and digest against the recorded ones.

  Returns:
    The file's sha256.

  Raises:
    DownloadError: a size that is not a recorded one (truncated, or another release), or a digest
      that is not a pinned one (with `verify`).
  """
  canon = sources.CANONICAL[name]
  size = path.stat().st_size
  where = f"{name}: {url or path}"
  if verify and canon.sizes and size not in canon.sizes:
    raise DownloadError(
        f"{where}: got {size:,} bytes, expected {' or '.join(f'{s:,}' for s in canon.sizes)} "
        "(a truncated file or another release); it was deleted: run the command again")
  digests = sources.file_digests(path)
  if verify and canon.pinned and not canon.accepts(digests):
    raise DownloadError(
        f"{where}: checksum mismatch (sha256 {digests.sha256}, "
        + (f"md5 {digests.md5}, " if canon.md5 else "")
        + f"{size:,} bytes; expected {canon.expected()}); it was deleted: run the command again, "
        "or pass --no-verify to keep another release on purpose")
  return digests.sha256


def _get(name: str, url: str, offset: int) -> requests.Response:
  headers = {"Range": f"bytes={offset}-"} if offset else {}
  try:
    return requests.get(url, headers=headers, stream=True, timeout=_TIMEOUT)
  except requests.RequestException as e:
    raise DownloadError(f"{name}: cannot reach {url} ({type(e).__name__}; offline?)") from None


def fetch(name: str, to: str | os.PathLike, *, verify: bool = True,
          progress=None) -> tuple[Path, str]:
  """Downloads dataset `name`'s canonical archive into `to` and checks it.

  Args:
    name: a key of sources.CANONICAL.
    to: the download folder; the file lands in its `<subdir>/<filename>`.
    verify: check the recorded sizes and digests (False: take another release on purpose).
    progress: called as progress(done_bytes, total_bytes or None) after each chunk, or None.

  Returns:
    (the file's path, what happened: 'downloaded', 'resumed' or 'already there').

  Raises:
    DownloadError: see the module docstring.
  """
  if name not in sources.CANONICAL:
    raise ValueError(f"unknown dataset {name!r}; known: {', '.join(sources.CANONICAL)}")
  path = target_path(name, to)
  url = url_of(name)
  if path.is_file():
    try:
      check(name, path, verify=verify, url=str(path))
      return path, "already there"
    except DownloadError:
      path.unlink()  # a bad earlier file: fetch it again
  part = path.with_name(path.name + ".part")
  offset = part.stat().st_size if part.is_file() else 0
  response = _get(name, url, offset)
  with response:
    if offset and response.status_code == 416:  # the part already holds the whole file
      response = None
    elif response.status_code not in (200, 206):
      raise DownloadError(f"{name}: {url} answered HTTP {response.status_code} "
                          f"{response.reason or ''}".rstrip())
    resumed = response is not None and response.status_code == 206
    path.parent.mkdir(parents=True, exist_ok=True)  # only once there is something to write
    if response is not None:
      if not resumed:
        offset = 0  # the server sent the whole file
      length = response.headers.get("Content-Length")
      total = offset + int(length) if length and length.isdigit() else None
      done = offset
      try:
        with open(part, "ab" if resumed else "wb") as f:
          for chunk in response.iter_content(_CHUNK):
            f.write(chunk)
            done += len(chunk)
            if progress is not None:
              progress(done, total)
      except requests.RequestException as e:
        raise DownloadError(f"{name}: the download from {url} was cut at {done:,} bytes "
                            f"({type(e).__name__}); run the command again to resume it") from None
      if total is not None and done < total:
        raise DownloadError(f"{name}: the download from {url} was cut at {done:,} of {total:,} "
                            "bytes; run the command again to resume it")
  try:
    check(name, part, verify=verify, url=url)
  except DownloadError:
    part.unlink()
    raise
  part.replace(path)
  return path, "resumed" if offset else "downloaded"
