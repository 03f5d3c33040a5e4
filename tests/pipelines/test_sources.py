"""Raw sources on tiny temporary files: layouts, skips that are counted, and clear errors."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import shutil
import tarfile
import zipfile

import pytest

from pipelines import datasets, sources
from pipelines.__main__ import main
from pipelines.builders.couplet import Couplet, CoupletConfig
from pipelines.sources import SourceError

def _urls(*movies: str) -> bytes:
  """A URL list: line i names the movie of review i."""
  return "".join(f"http://www.imdb.com/title/{m}/usercomments\n" for m in movies).encode()


IMDB = {
    "aclImdb/README": b"about",
    "aclImdb/train/urls_pos.txt": _urls(*[f"tt00000{i:02d}" for i in range(13)]),
    "aclImdb/train/urls_neg.txt": _urls(*[f"tt00001{i:02d}" for i in range(8)]),
    "aclImdb/test/urls_pos.txt": _urls("tt0000200", "tt0000201"),
    "aclImdb/test/urls_neg.txt": _urls("tt0000300", "tt0000301", "tt0000302", "tt0000303",
                                       "tt0000304", "tt0000305"),
    "aclImdb/train/urls_unsup.txt": _urls("tt9", "tt9", "tt9", "tt9", "tt0000400"),
    "aclImdb/train/pos/12_9.txt": b"Great<br />film.",
    "aclImdb/train/pos/3_10.txt": "Caf\u00e9 scene, superb.".encode(),
    "aclImdb/train/neg/7_2.txt": b"Dull.",
    "aclImdb/test/pos/1_7.txt": b"Fine.",
    "aclImdb/test/neg/2_1.txt": b"Awful.",
    "aclImdb/test/neg/5_3.txt": b"  \n ",  # empty review: skipped and counted
    "aclImdb/train/unsup/4_0.txt": b"Some film.",
    "aclImdb/train/unsup/._4_0.txt": b"\x00\x05",  # not <id>_<rating>.txt: skipped and counted
}


def _write(root, files):
  for rel, data in files.items():
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
  return root


def _tar(path, files):
  with tarfile.open(path, "w:gz") as tar:
    for rel, data in files.items():
      info = tarfile.TarInfo(rel)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return path


def _zip(path, files):
  with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
    for rel, data in files.items():
      archive.writestr(rel, data)
  return path


def _read(name, path, tmp_path):
  """The builder's dry run on `path`: ({split: [(key, record)]}, tally)."""
  splits, tally, _ = datasets.builder(name, source=path, data_dir=tmp_path).read_source(path)
  return splits, tally


def _couplet_files(prefix, uppers, lowers):
  return {f"{prefix}/in.txt": "".join(u + "\n" for u in uppers).encode(),
          f"{prefix}/out.txt": "".join(l + "\n" for l in lowers).encode()}


# ------------------------------------------------------------------------------------- IMDB

def test_imdb_archive_folder_and_zip_read_alike(tmp_path):
  results = []
  for path in (_tar(tmp_path / "tiny.tar.gz", IMDB), _write(tmp_path / "tree", IMDB),
               _zip(tmp_path / "tiny.zip", IMDB)):
    results.append(_read("imdb", path, tmp_path))
  splits, tally = results[0]
  for other_splits, other_tally in results[1:]:
    assert other_splits == splits and other_tally.counts == tally.counts
  assert splits["train"] == [
      ("train/neg/7_2", {"text": "Dull.", "label": 0, "rating": 2, "id": 7,
                         "movie": "tt0000107"}),
      ("train/pos/3_10", {"text": "Caf\u00e9 scene, superb.", "label": 1, "rating": 10, "id": 3,
                          "movie": "tt0000003"}),
      ("train/pos/12_9", {"text": "Great<br />film.", "label": 1, "rating": 9, "id": 12,
                          "movie": "tt0000012"}),
  ]
  assert splits["test"] == [
      ("test/neg/2_1", {"text": "Awful.", "label": 0, "rating": 1, "id": 2, "movie": "tt0000302"}),
      ("test/pos/1_7", {"text": "Fine.", "label": 1, "rating": 7, "id": 1, "movie": "tt0000201"})]
  assert splits["unsupervised"] == [
      ("train/unsup/4_0", {"text": "Some film.", "label": -1, "rating": 0, "id": 4,
                           "movie": "tt0000400"})]
  assert tally.counts == {"empty_text": 1, "unrecognised_file": 1}
  assert tally.examples["empty_text"][0].endswith("tiny.tar.gz:aclImdb/test/neg/5_3.txt")


@pytest.mark.parametrize("change, message", [
    ({"aclImdb/test/neg/2_1.txt": None, "aclImdb/test/neg/5_3.txt": None},
     r"no reviews .* \['aclImdb/test/neg/'\]"),
    ({"aclImdb/train/pos/8_5.txt": b"Meh."}, r"train/pos/8_5.txt: rating 5 does not belong"),
    ({"aclImdb/test/pos/1_7.txt": b"Fine.\nReally \xe9tonnant."},
     r"test/pos/1_7.txt: line 2: invalid UTF-8 \(byte 0xe9"),
    ({"copy/train/pos/1_8.txt": b"Again."}, r"several roots \['aclImdb/', 'copy/'\]"),
    ({"aclImdb/test/urls_neg.txt": None},
     r"bad.tar.gz: no URL lists \['aclImdb/test/urls_neg.txt'\]; line i of .*names the movie"),
    ({"aclImdb/train/urls_pos.txt": _urls("tt1", "tt2")},
     r"aclImdb/train/urls_pos.txt has 2 lines, but .*aclImdb/train/pos/3_10.txt needs line 4"),
    ({"aclImdb/test/urls_pos.txt": b"http://www.imdb.com/title/tt1/usercomments\nhttp://x\n"},
     r"aclImdb/test/urls_pos.txt: line 2: expected an IMDB title URL \(http://www.imdb.com/title/"
     r"tt<digits>/usercomments\) for .*test/pos/1_7.txt, got 'http://x'"),
])
def test_imdb_bad_trees_raise_clear_errors(tmp_path, change, message):
  files = {**IMDB, **change}
  files = {rel: data for rel, data in files.items() if data is not None}
  with pytest.raises(SourceError, match=message):
    _read("imdb", _tar(tmp_path / "bad.tar.gz", files), tmp_path)


# ---------------------------------------------------------------------------------- fra-eng

FRA = ("Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\n"
       "Hi.\tSalut !\n"
       "\n"
       "no tab here\n"
       "Run!\t \n"
       "Run!\tCours\u202f!\r\n")


def test_fra_eng_columns_and_counted_skips(tmp_path):
  pairs_file = tmp_path / "fra.txt"
  pairs_file.write_text(FRA, encoding="utf-8")
  results = [_read("fra_eng", path, tmp_path) for path in (
      pairs_file,
      _zip(tmp_path / "fra-eng-copy.zip", {"fra-eng/fra.txt": FRA.encode(),
                                           "fra-eng/_about.txt": b"about"}),
      _write(tmp_path / "extracted", {"fra-eng/fra.txt": FRA.encode()}) / "fra-eng")]
  for splits, tally in results:
    records = sorted((key, rec["en"], rec["fr"]) for recs in splits.values() for key, rec in recs)
    assert records == [(1, "Go.", "Va !"), (2, "Hi.", "Salut !"), (6, "Run!", "Cours\u202f!")]
    assert tally.counts == {"blank_line": 1, "malformed_line": 1, "empty_text": 1}
  assert results[0][1].examples["malformed_line"] == [f"{pairs_file}:4"]


def test_fra_eng_bad_inputs(tmp_path):
  bad = tmp_path / "fra.txt"
  bad.write_bytes(b"Go.\tVa !\nHi.\tSalut \xff!\n")
  with pytest.raises(SourceError, match=r"fra.txt: line 2: invalid UTF-8 \(byte 0xff"):
    _read("fra_eng", bad, tmp_path)
  no_pairs = _zip(tmp_path / "x.zip", {"fra-eng/_about.txt": b"about"})
  with pytest.raises(SourceError, match=r"x.zip: no fra.txt found"):
    _read("fra_eng", no_pairs, tmp_path)
  two = _zip(tmp_path / "y.zip", {"a/fra.txt": b"A\tB\n", "b/fra.txt": b"C\tD\n"})
  with pytest.raises(SourceError, match=r"several fra.txt files \['a/fra.txt', 'b/fra.txt'\]"):
    _read("fra_eng", two, tmp_path)


# ---------------------------------------------------------------------------------- couplets

def test_couplet_checks_pairs_and_counts_drops(tmp_path):
  files = _couplet_files("couplet/train", ["春 风 暖 ", "明 月 ", "", "山 高 "],
                         ["秋 雨 凉 ", "清 风 来 ", "白 云 ", "水 长 "])
  splits, tally = _read("couplet", _tar(tmp_path / "c.tar.gz", files), tmp_path)
  kept = sorted((k, r["upper"], r["lower"]) for recs in splits.values() for k, r in recs)
  assert kept == [("train/1", "春 风 暖 ", "秋 雨 凉 "), ("train/4", "山 高 ", "水 长 ")]
  assert tally.counts == {"length_mismatch": 1, "empty_text": 1}
  assert tally.examples["length_mismatch"] == [f"{tmp_path / 'c.tar.gz'}:couplet/train/in.txt:2"]


def test_couplet_bad_inputs(tmp_path):
  unequal = _couplet_files("couplet/train", ["春 风 ", "明 月 ", "山 高 "], ["秋 雨 ", "清 风 "])
  with pytest.raises(SourceError, match=r"in.txt has 3 lines but couplet/train/out.txt has 2"):
    _read("couplet", _write(tmp_path / "a", unequal), tmp_path)
  only_in = {"couplet/train/in.txt": b"a b\n"}
  with pytest.raises(SourceError, match=r"missing couplet/train/out.txt"):
    _read("couplet", _write(tmp_path / "b", only_in), tmp_path)
  half_test = {**_couplet_files("couplet/train", ["春 "], ["秋 "]), "couplet/test/in.txt": b"x\n"}
  with pytest.raises(SourceError, match=r"test/ folder but no couplet/test/out.txt"):
    _read("couplet", _write(tmp_path / "c", half_test), tmp_path)
  not_utf8 = {"couplet/train/in.txt": "春 风 \n明 月 \n".encode(),
              "couplet/train/out.txt": "秋 雨 \n".encode() + "清 风 \n".encode("gb18030")}
  with pytest.raises(SourceError, match=r"train/out.txt: line 2: invalid UTF-8"):
    _read("couplet", _write(tmp_path / "d", not_utf8), tmp_path)


def _grouped_couplets(n_upper, per_upper, prefix="train"):
  uppers = [f"上 {i:03d} " for i in range(n_upper) for _ in range(per_upper)]
  lowers = [f"下 {i:03d} " for i in range(n_upper * per_upper)]
  return _couplet_files(prefix, uppers, lowers)


def _custom_couplet(tmp_path):
  config = CoupletConfig(name="custom", validation_fraction=0.2, test_fraction=0.3)
  return Couplet(data_dir=str(tmp_path), config=config)


def test_couplet_carves_validation_and_test_by_upper_line(tmp_path):
  source = _write(tmp_path / "no_test", _grouped_couplets(61, 3))
  splits, _, rule = _custom_couplet(tmp_path).read_source(source)
  uppers = {s: {r["upper"] for _, r in recs} for s, recs in splits.items()}
  sizes = {s: len(recs) for s, recs in splits.items()}
  assert sum(sizes.values()) == 183 and all(size % 3 == 0 for size in sizes.values())
  assert all(len(uppers[s]) * 3 == sizes[s] for s in splits)  # whole groups only
  assert not (uppers["train"] & uppers["validation"] or uppers["train"] & uppers["test"]
              or uppers["validation"] & uppers["test"])
  assert 4 <= len(uppers["validation"]) <= 24 and 8 <= len(uppers["test"]) <= 30, sizes
  assert "carved from train/" in rule
  # The same source always gives the same splits.
  assert _custom_couplet(tmp_path).read_source(source)[0] == splits


def test_couplet_uses_a_test_folder_when_present(tmp_path):
  files = {**_grouped_couplets(40, 2, "couplet/train"),
           **_couplet_files("couplet/test", ["甲 乙 ", "丙 丁 ", "戊 "], ["子 丑 ", "寅 卯 ", "辰 "])}
  splits, _, rule = _custom_couplet(tmp_path).read_source(_tar(tmp_path / "up.tar.gz", files))
  assert [(k, r["upper"]) for k, r in splits["test"]] == [
      ("test/1", "甲 乙 "), ("test/2", "丙 丁 "), ("test/3", "戊 ")]
  assert len(splits["train"]) + len(splits["validation"]) == 80
  assert 0 < len(splits["validation"]) < 40
  assert rule.startswith("test = test/")


# ------------------------------------------------------------------------- corrupt archives

def test_corrupt_and_truncated_archives(tmp_path):
  garbage = tmp_path / "garbage.tar.gz"
  garbage.write_bytes(b"not an archive at all" * 10)
  with pytest.raises(SourceError, match=r"garbage.tar.gz: truncated or corrupt archive"):
    _read("imdb", garbage, tmp_path)
  for name in ("imdb", "fra_eng", "couplet"):
    data = sources.sample_path(name).read_bytes()
    cut = tmp_path / f"cut_{sources.sample_path(name).name}"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(SourceError, match=rf"cut_{name}_sample.*truncated or corrupt archive"):
      _read(name, cut, tmp_path)
  # Bit rot inside a zip member's compressed data: caught by the CRC check.
  rot = _zip(tmp_path / "rot.zip", {"fra-eng/fra.txt": "".join(
      f"Sentence {i}.\tPhrase {i}.\n" for i in range(300)).encode()})
  with zipfile.ZipFile(rot) as archive:
    info = archive.infolist()[0]
  raw = bytearray(rot.read_bytes())
  raw[info.header_offset + 30 + len(info.filename) + info.compress_size // 2] ^= 0x55
  rot.write_bytes(bytes(raw))
  with pytest.raises(SourceError, match=r"rot.zip: truncated or corrupt archive"):
    _read("fra_eng", rot, tmp_path)


def test_canonical_names_are_checked_against_pinned_digests(tmp_path, monkeypatch):
  canonical = tmp_path / "fra-eng.zip"
  canonical.write_bytes(sources.sample_path("fra_eng").read_bytes()[:5000])  # a truncated copy
  with pytest.raises(SourceError, match=r"fra-eng.zip: checksum mismatch for fra-eng.zip"):
    sources.resolve("fra_eng", canonical, data_dir=tmp_path)
  # A folder holding the archive in the dataset's sub-folder is searched too.
  holder = tmp_path / "data"
  (holder / "fra-eng").mkdir(parents=True)
  shutil.copy(canonical, holder / "fra-eng" / "fra-eng.zip")
  with pytest.raises(SourceError, match=r"checksum mismatch"):
    sources.resolve("fra_eng", holder, data_dir=tmp_path)
  assert sources.resolve("fra_eng", holder, data_dir=tmp_path, verify=False) == (
      holder / "fra-eng" / "fra-eng.zip")
  digest = hashlib.sha256(canonical.read_bytes()).hexdigest()
  pinned = dataclasses.replace(sources.CANONICAL["fra_eng"], sha256=(digest,), sha1=())
  monkeypatch.setitem(sources.CANONICAL, "fra_eng", pinned)
  assert sources.resolve("fra_eng", canonical, data_dir=tmp_path) == canonical
  (tmp_path / "empty").mkdir()
  with pytest.raises(SourceError, match=r"empty holds neither the extracted fra_eng layout"):
    sources.resolve("fra_eng", tmp_path / "empty", data_dir=tmp_path)


# --------------------------------------------------------------------- finding the full data

def test_missing_data_and_offline_download_name_the_file(tmp_path, monkeypatch):
  manual = tmp_path / "downloads" / "manual"
  with pytest.raises(SourceError, match=rf"obtain couplet.tar.gz from https://github.com/wb14123"
                                        rf".*put it at {manual}/couplet.tar.gz"):
    sources.resolve("couplet", None, data_dir=tmp_path)
  monkeypatch.setattr(sources, "_reachable", lambda url, timeout=5.0: False)
  with pytest.raises(SourceError, match=rf"cannot reach http://ai.stanford.edu/.*aclImdb_v1.tar.gz"
                                        rf".*{manual}/aclImdb_v1.tar.gz"):
    datasets.prepare("imdb", download=True, data_dir=tmp_path)
  assert datasets.info("imdb", full=True, data_dir=tmp_path) is None  # nothing was written


def test_download_goes_through_fetch_and_is_verified(tmp_path, monkeypatch):
  monkeypatch.setattr(sources, "_reachable", lambda url, timeout=5.0: True)
  fake = _zip(tmp_path / "fetched.zip", {"fra-eng/fra.txt": b"Go.\tVa !\n"})
  urls = []
  fetch = lambda url: (urls.append(url), fake)[1]  # noqa: E731
  with pytest.raises(SourceError, match=r"fetched.zip \(downloaded from http://d2l-data"):
    sources.resolve("fra_eng", None, data_dir=tmp_path, download=True, fetch=fetch)
  assert sources.resolve("fra_eng", None, data_dir=tmp_path, download=True, verify=False,
                         fetch=fetch) == fake
  assert urls == [sources.CANONICAL["fra_eng"].url] * 2


# ------------------------------------------------------------------------ end-to-end builds

def _pairs_text(n: int) -> bytes:
  """n English-French pairs with distinct English sentences (enough for three splits at n ~ 80)."""
  return "".join(f"Sentence {i}.\tPhrase {i}.\n" for i in range(n)).encode()


def test_full_build_reports_drops_in_output_and_metadata(tmp_path, capsys):
  # 700 couplets (enough for 1% validation and test) plus one blank and one mismatched pair.
  uppers = [f"上 {i:04d} " for i in range(700)] + ["", "春 风 暖 "]
  lowers = [f"下 {i:04d} " for i in range(700)] + ["白 云 ", "秋 雨 "]
  source = _tar(tmp_path / "tiny_couplet.tar.gz", _couplet_files("couplet/train", uppers, lowers))
  data_dir = tmp_path / "data"
  assert main(["prepare", "couplet", "--source", str(source), "--data-dir", str(data_dir)]) == 0
  out = capsys.readouterr().out
  assert "couplet (full): " in out and "(total 700)" in out
  assert "skipped 1 (empty_text)" in out and "skipped 1 (length_mismatch)" in out
  shown = datasets.info("couplet", full=True, data_dir=data_dir)
  assert shown.skipped == {"empty_text": 1, "length_mismatch": 1}
  assert shown.skipped_examples["length_mismatch"] == [f"{source}:couplet/train/in.txt:702"]
  # The sample config of the same data_dir is separate and still unprepared.
  assert datasets.info("couplet", data_dir=data_dir) is None
  loaded = datasets.load("couplet", "train", source=source, data_dir=data_dir)
  assert len(loaded) == shown.splits["train"] > 600


def test_failed_builds_write_nothing_and_rebuilds_need_overwrite(tmp_path):
  data_dir = tmp_path / "data"
  bad = _write(tmp_path / "bad", _couplet_files("train", ["春 ", "明 "], ["秋 "]))
  with pytest.raises(SourceError, match=r"has 2 lines but train/out.txt has 1"):
    datasets.prepare("couplet", source=bad, data_dir=data_dir)
  assert datasets.info("couplet", full=True, data_dir=data_dir) is None
  too_small = _write(tmp_path / "small", {"fra.txt": _pairs_text(2)}) / "fra.txt"
  with pytest.raises(SourceError, match=r"small/fra.txt: the \[.*'test'\] split\(s\) would be "
                                        r"empty \(2 records"):
    datasets.prepare("fra_eng", source=too_small, data_dir=data_dir)
  assert datasets.info("fra_eng", full=True, data_dir=data_dir) is None
  first = _write(tmp_path / "first", {"fra.txt": _pairs_text(80)}) / "fra.txt"
  second = _write(tmp_path / "second", {"fra.txt": _pairs_text(81)}) / "fra.txt"
  assert sum(datasets.prepare("fra_eng", source=first, data_dir=data_dir).splits.values()) == 80
  with pytest.raises(ValueError, match=r"was built from .*first/fra.txt .* not from .*second"):
    datasets.prepare("fra_eng", source=second, data_dir=data_dir)
  report = datasets.prepare("fra_eng", source=second, data_dir=data_dir, overwrite=True)
  assert report.built and sum(report.splits.values()) == 81


def test_manual_folder_is_used_for_full_data(tmp_path):
  manual = sources.manual_dir(tmp_path)
  manual.mkdir(parents=True)
  _zip(manual / "fra-eng.zip", {"fra-eng/fra.txt": _pairs_text(80)})
  with pytest.raises(SourceError, match=r"checksum mismatch"):
    datasets.prepare("fra_eng", download=True, data_dir=tmp_path)
  report = datasets.prepare("fra_eng", download=True, verify=False, data_dir=tmp_path)
  assert report.config == "full" and sum(report.splits.values()) == 80
  assert report.source == str(manual / "fra-eng.zip")
