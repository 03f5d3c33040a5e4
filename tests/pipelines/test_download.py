"""`python -m pipelines download` against a local HTTP server on 127.0.0.1 (no internet).

The server serves the shipped samples under the canonical file names; the tests record the
samples' own sizes and digests as the canonical ones, so every check the command makes is real.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import re
import threading
from pathlib import Path

import pytest

from pipelines import datasets
from pipelines import download
from pipelines import sources
from pipelines.__main__ import main


class _Server(http.server.ThreadingHTTPServer):
  """Serves `files` {url path: bytes} with Range requests; `cut_after` {path: n} sends the full
  Content-Length but closes the connection after n bytes, once."""

  def __init__(self):
    super().__init__(("127.0.0.1", 0), _Handler)  # port 0: a free port, safe beside other workers
    self.files: dict[str, bytes] = {}
    self.cut_after: dict[str, int] = {}
    self.ranges: list[str | None] = []

  @property
  def url(self) -> str:
    return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):

  def do_GET(self):  # pylint: disable=invalid-name
    server: _Server = self.server
    body = server.files.get(self.path)
    server.ranges.append(self.headers.get("Range"))
    if body is None:
      self.send_error(404, "Not Found")
      return
    start = 0
    if self.headers.get("Range"):
      start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
      if start >= len(body):
        self.send_error(416, "Range Not Satisfiable")
        return
      self.send_response(206)
      self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
    else:
      self.send_response(200)
    self.send_header("Content-Length", str(len(body) - start))
    self.end_headers()
    cut = server.cut_after.pop(self.path, None)
    self.wfile.write(body[start:] if cut is None else body[start:start + cut])
    if cut is not None:
      self.close_connection = True

  def log_message(self, *args):  # no request lines on the test's stderr
    pass


@pytest.fixture
def server():
  httpd = _Server()
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  yield httpd
  httpd.shutdown()
  httpd.server_close()


def _serve_sample(name: str, server: _Server, monkeypatch, body: bytes | None = None) -> bytes:
  """Serves dataset `name`'s shipped sample (or `body`) at /<canonical file name> and records the
  sample's size and sha256 as the canonical ones; returns the sample's bytes."""
  canon = sources.CANONICAL[name]
  sample = sources.sample_path(name).read_bytes()
  server.files[f"/{canon.filename}"] = sample if body is None else body
  monkeypatch.setitem(sources.CANONICAL, name, dataclasses.replace(
      canon, url=f"{server.url}/{canon.filename}", sizes=(len(sample),),
      sha256=(hashlib.sha256(sample).hexdigest(),), sha1=()))
  return sample


def _run(argv, capsys) -> tuple[int, list[str], list[str]]:
  status = main(argv)
  captured = capsys.readouterr()
  return status, captured.out.splitlines(), captured.err.splitlines()


def test_download_fetches_checks_and_prepares_and_train_reads_the_folder(server, monkeypatch,
                                                                         capsys, tmp_path):
  sample = _serve_sample("fra_eng", server, monkeypatch)
  to, prepared = tmp_path / "data", tmp_path / "prepared"
  status, out, err = _run(["download", "fra_eng", "--to", str(to), "--data-dir", str(prepared)],
                          capsys)
  assert status == 0, err
  archive = to / "fra-eng" / "fra-eng.zip"
  assert archive.read_bytes() == sample and not archive.with_name("fra-eng.zip.part").exists()
  assert out[0] == f"fra_eng: {archive} (downloaded, {len(sample):,} bytes)"
  assert out[1].startswith("fra_eng (full): train ") and out[-1].strip().startswith("built in")
  assert err[-1] == "train on it with: python -m experiments train EXPERIMENT --data-dir " + str(to)
  assert not any("Downloading and preparing" in line for line in out)  # tfds: on stderr
  # `train --data-dir DATA` hands the folder to the builder as its source: it finds the archive
  # and reuses the build the download made.
  assert sources.locate_in_folder("fra_eng", to) == archive
  assert not datasets.prepare("fra_eng", source=to, data_dir=prepared).built
  # Run again: the file is there and passes its checks; nothing is fetched.
  requests_before = len(server.ranges)
  status, out, _ = _run(["download", "fra_eng", "--to", str(to), "--data-dir", str(prepared),
                         "--no-prepare"], capsys)
  assert status == 0 and out == [f"fra_eng: {archive} (already there, {len(sample):,} bytes)"]
  assert len(server.ranges) == requests_before


@pytest.mark.parametrize("fault, message", [
    ("truncated", r"got {cut:,} bytes, expected {size:,} \(a truncated file or another release\); "
                  r"it was deleted: run the command again"),
    ("checksum", r"checksum mismatch \(sha256 [0-9a-f]{{64}}, {size:,} bytes; expected sha256 "
                 r"[0-9a-f]{{64}}\); it was deleted: run the command again, or pass --no-verify"),
    ("missing", r"{url} answered HTTP 404 Not Found"),
])
def test_a_bad_download_is_one_clear_line_and_leaves_no_file(fault, message, server, monkeypatch,
                                                            capsys, tmp_path):
  sample = sources.sample_path("couplet").read_bytes()
  body = {"truncated": sample[:len(sample) // 2],
          "checksum": sample[:-1] + bytes([sample[-1] ^ 1]),
          "missing": None}[fault]
  _serve_sample("couplet", server, monkeypatch, body=body)
  if body is None:
    del server.files["/couplet.tar.gz"]
  status, out, err = _run(["download", "couplet", "--to", str(tmp_path)], capsys)
  assert (status, out, len(err)) == (1, [], 1)
  url = f"{server.url}/couplet.tar.gz"
  expected = message.format(cut=len(sample) // 2, size=len(sample), url=url.replace(".", r"\."))
  assert err[0].startswith(f"error: couplet: {url}") and re.search(expected, err[0]), err[0]
  assert not any(p.is_file() for p in tmp_path.rglob("*"))
  assert fault != "missing" or not any(tmp_path.iterdir())  # no folder before there is data


def test_a_cut_download_resumes_where_it_stopped(server, monkeypatch, capsys, tmp_path):
  sample = _serve_sample("imdb", server, monkeypatch)
  server.cut_after["/aclImdb_v1.tar.gz"] = len(sample) // 3
  status, _, err = _run(["download", "imdb", "--to", str(tmp_path), "--no-prepare"], capsys)
  assert status == 1 and len(err) == 1
  assert err[0].startswith(f"error: imdb: the download from {server.url}/aclImdb_v1.tar.gz was "
                           "cut at ") and err[0].endswith("run the command again to resume it")
  part = tmp_path / "imdb" / "aclImdb_v1.tar.gz.part"
  kept = part.stat().st_size
  assert 0 < kept <= len(sample) // 3
  status, out, _ = _run(["download", "imdb", "--to", str(tmp_path), "--no-prepare"], capsys)
  assert status == 0 and out == [f"imdb: {tmp_path / 'imdb' / 'aclImdb_v1.tar.gz'} (resumed, "
                                 f"{len(sample):,} bytes)"]
  assert server.ranges[-1] == f"bytes={kept}-"  # only the rest was asked for
  assert (tmp_path / "imdb" / "aclImdb_v1.tar.gz").read_bytes() == sample and not part.exists()


def test_all_fetches_every_canonical_dataset_from_a_mirror(server, monkeypatch, capsys, tmp_path):
  canonical = {name: sources.CANONICAL[name] for name in ("fra_eng", "couplet")}
  monkeypatch.setattr(sources, "CANONICAL", canonical)
  for name in canonical:
    _serve_sample(name, server, monkeypatch)
    # The recorded URL points elsewhere: $ZOO_DATA_MIRROR replaces it.
    sources.CANONICAL[name] = dataclasses.replace(sources.CANONICAL[name],
                                                  url="http://unreachable.invalid/x")
  monkeypatch.setenv(download.ENV_MIRROR, server.url + "/")
  status, out, err = _run(["download", "all", "--to", str(tmp_path), "--no-prepare"], capsys)
  assert status == 0, err
  assert [line.split(":")[0] for line in out] == ["fra_eng", "couplet"]
  assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.*")) == [
      "couplet/couplet.tar.gz", "fra-eng/fra-eng.zip"]


def test_an_unknown_name_is_a_usage_error(capsys):
  with pytest.raises(SystemExit) as info:
    main(["download", "mnist"])
  assert info.value.code == 2 and "invalid choice: 'mnist'" in capsys.readouterr().err


def test_an_unreachable_host_is_one_line(monkeypatch, capsys, tmp_path):
  monkeypatch.setenv(download.ENV_MIRROR, "http://127.0.0.1:9")  # the discard port: refused
  status, out, err = _run(["download", "fra_eng", "--to", str(tmp_path)], capsys)
  assert (status, out) == (1, [])
  assert err == ["error: fra_eng: cannot reach http://127.0.0.1:9/fra-eng.zip (ConnectionError; "
                 "offline?)"]
  assert not any(tmp_path.iterdir())


def test_targets_follow_the_canonical_sub_folders():
  for name, canon in sources.CANONICAL.items():
    assert download.target_path(name, "d") == Path("d") / canon.subdir / canon.filename
