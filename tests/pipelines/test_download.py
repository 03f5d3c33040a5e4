"""`python -m pipelines download` against a local HTTP server on 127.0.0.1 (no internet).

The server serves the shipped samples under the canonical file names; the tests record the
samples' own sizes and digests as the canonical ones, so every check the command makes is real.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import re
import tarfile
import threading
from pathlib import Path

import pytest

from pipelines import datasets
from pipelines import download
from pipelines import sources
from pipelines.__main__ import main
from pipelines.tasks.matching import MatchingData


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


def _lcqmc_pairs(counts: dict[str, int]) -> dict[str, list[tuple[str, str, int]]]:
  """Made-up (text_a, text_b, label) pairs, `counts[split]` of each split."""
  chars = "喜欢打篮球的男生什么样女手机丢了想换个买新求推荐大家觉得她好看吗"
  return {split: [("".join(chars[(i * p + k) % len(chars)] for p in (1, 3, 5, 7)) + str(i),
                   "".join(chars[(i * p + k + 1) % len(chars)] for p in (2, 3, 11)),
                   (i + k) % 2) for i in range(count)]
          for k, (split, count) in enumerate(counts.items())}


def _lcqmc_archive(pairs: dict[str, list[tuple[str, str, int]]]) -> bytes:
  """An archive in the layout of PaddleHub's lcqmc.tar.gz: lcqmc/train.tsv, dev.tsv, test.tsv,
  each a `text_a TAB text_b TAB label` header line, then one pair a line."""
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
    for split, rows in pairs.items():
      lines = ["text_a\ttext_b\tlabel"] + [f"{a}\t{b}\t{label}" for a, b, label in rows]
      data = ("\n".join(lines) + "\n").encode()
      info = tarfile.TarInfo(f"lcqmc/{split}.tsv")
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return buffer.getvalue()


def test_lcqmc_is_checked_by_its_md5_and_train_matching_reads_the_folder(server, monkeypatch,
                                                                        capsys, tmp_path):
  pairs = _lcqmc_pairs({"train": 23, "dev": 5, "test": 7})
  body = _lcqmc_archive(pairs)
  canon = sources.CANONICAL["lcqmc"]
  server.files["/lcqmc.tar.gz"] = body
  # Only an MD5 is published for lcqmc.tar.gz (no sha256, no size): this one is the sample's.
  monkeypatch.setitem(sources.CANONICAL, "lcqmc", dataclasses.replace(
      canon, url=f"{server.url}/lcqmc.tar.gz", md5=(hashlib.md5(body).hexdigest(),)))
  to, prepared = tmp_path / "data", tmp_path / "prepared"
  status, out, err = _run(["download", "lcqmc", "--to", str(to), "--data-dir", str(prepared)],
                          capsys)
  assert status == 0, err
  archive = to / "lcqmc" / "lcqmc.tar.gz"
  assert archive.read_bytes() == body
  assert out[0] == f"lcqmc: {archive} (downloaded, {len(body):,} bytes)"
  assert out[1] == "question_pairs (full): train 23, validation 5, test 7 (total 35)"
  assert "validation = dev.tsv" in out[4] and "test = test.tsv" in out[4]
  # `train matching --data-dir DATA`: MatchingData.load finds the archive and reuses the build.
  assert sources.locate_in_folder("question_pairs", to) == archive
  data = MatchingData.load(source=to, data_dir=prepared)
  assert [len(data.labels(split)) for split in ("train", "dev", "test")] == [23, 5, 7]
  for split in ("train", "dev", "test"):
    texts_labels = zip(data.texts(split), data.labels(split).tolist())
    assert sorted((a, b, label) for (a, b), label in texts_labels) == sorted(pairs[split])
  # A folder holding AFQMC's data too is ambiguous: an error naming both.
  (to / "afqmc").mkdir()
  (to / "afqmc" / "train.json").write_text("")
  with pytest.raises(sources.SourceError, match=r"holds the data of 2 question_pairs datasets "
                     r"\(question_pairs: .*afqmc, lcqmc: .*lcqmc.tar.gz\); name one of them"):
    sources.locate_in_folder("question_pairs", to)


def test_lcqmc_with_another_md5_is_refused_and_deleted(server, monkeypatch, capsys, tmp_path):
  body = _lcqmc_archive(_lcqmc_pairs({"train": 4}))
  server.files["/lcqmc.tar.gz"] = body
  monkeypatch.setitem(sources.CANONICAL, "lcqmc", dataclasses.replace(
      sources.CANONICAL["lcqmc"], url=f"{server.url}/lcqmc.tar.gz"))
  status, out, err = _run(["download", "lcqmc", "--to", str(tmp_path)], capsys)
  assert (status, out) == (1, [])
  assert err == [f"error: lcqmc: {server.url}/lcqmc.tar.gz: checksum mismatch (sha256 "
                 f"{hashlib.sha256(body).hexdigest()}, md5 {hashlib.md5(body).hexdigest()}, "
                 f"{len(body):,} bytes; expected md5 62a7ba36f786a82ae59bbde0b0a9af0c); it was "
                 "deleted: run the command again, or pass --no-verify to keep another release on "
                 "purpose"]
  assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_all_prepares_one_build_per_builder_and_says_which_it_left(server, monkeypatch, capsys,
                                                                   tmp_path):
  canonical = {name: sources.CANONICAL[name] for name in ("question_pairs", "lcqmc")}
  monkeypatch.setattr(sources, "CANONICAL", canonical)
  _serve_sample("question_pairs", server, monkeypatch)
  body = _lcqmc_archive(_lcqmc_pairs({"train": 6}))
  server.files["/lcqmc.tar.gz"] = body
  sources.CANONICAL["lcqmc"] = dataclasses.replace(
      canonical["lcqmc"], url=f"{server.url}/lcqmc.tar.gz", md5=(hashlib.md5(body).hexdigest(),))
  status, out, err = _run(["download", "all", "--to", str(tmp_path / "data"), "--data-dir",
                           str(tmp_path / "prepared")], capsys)
  assert status == 0, err
  assert out[0].startswith("question_pairs: ") and out[1].startswith("question_pairs (full): ")
  assert out[-1] == (f"lcqmc: {tmp_path / 'data' / 'lcqmc' / 'lcqmc.tar.gz'} (downloaded, "
                     f"{len(body):,} bytes)")
  assert ("note: lcqmc is not prepared: this data dir holds one question_pairs build, just made "
          "from afqmc_public.zip; `python -m pipelines download lcqmc --data-dir OTHER` prepares "
          "it in another") in err
