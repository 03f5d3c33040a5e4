"""The dataset builders over the shipped samples: counts, records, splits, the command line.

The samples are prepared once per session (conftest.prepared_samples). The expected contents are
computed here independently, straight from the sample archives and the documented split rules.
"""

from __future__ import annotations

import collections
import hashlib
import io
import itertools
import re
import sys
import tarfile
import unicodedata
import zipfile

import pytest

from pipelines import datasets, sources
from pipelines.__main__ import main


def _unit(text: str) -> float:
  """The documented split hash: sha256 of NFKC + casefold + collapsed whitespace, 64 bits."""
  key = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
  return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0**64


def _tar_files(name):
  with tarfile.open(sources.sample_path(name)) as tar:
    return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def _records(data_dir, name, split):
  ds = datasets.load(name, split, data_dir=data_dir)
  return [ds[i] for i in range(len(ds))]


def _text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else value


def test_sample_counts_and_reports(prepared_samples):
  _, reports = prepared_samples
  assert reports["imdb"].splits == {"train": 2000, "test": 1000, "unsupervised": 300}
  assert sum(reports["fra_eng"].splits.values()) == 10_000
  assert sum(reports["couplet"].splits.values()) == 10_000
  for name, report in reports.items():
    assert report.config == "sample" and report.built and report.skipped == {}, name
    assert report.path.endswith(f"{name}/sample/{'1.1.0' if name == 'imdb' else '1.0.0'}")
    assert "  skipped 0" in report.lines()
  # About 90/5/5 (fra-eng, by English sentence) and 90/5/5 (couplet sample, by upper line).
  for name in ("fra_eng", "couplet"):
    splits = reports[name].splits
    assert 8_700 < splits["train"] < 9_300, (name, splits)
    assert 350 < splits["validation"] < 650 and 350 < splits["test"] < 650, (name, splits)
  # Nothing needed TensorFlow.
  assert "tensorflow" not in sys.modules


def test_imdb_records_match_the_archive(prepared_samples):
  data_dir, _ = prepared_samples
  folders = {"train/neg": ("train", 0), "train/pos": ("train", 1), "test/neg": ("test", 0),
             "test/pos": ("test", 1), "train/unsup": ("unsupervised", -1)}
  files = _tar_files("imdb")
  expected = collections.defaultdict(collections.Counter)
  for path, data in files.items():
    match = re.fullmatch(r"aclImdb/(\w+)/(\w+)/(\d+)_(\d+)\.txt", path)
    if match:
      split, label = folders[f"{match[1]}/{match[2]}"]
      # Line i of the URL list beside the folder is review i's movie page.
      url = files[f"aclImdb/{match[1]}/urls_{match[2]}.txt"].decode().split("\n")[int(match[3])]
      movie = url.removeprefix("http://www.imdb.com/title/").removesuffix("/usercomments")
      expected[split][(data.decode(), label, int(match[4]), int(match[3]), movie)] += 1
  for split in datasets.SPLITS["imdb"]:
    records = _records(data_dir, "imdb", split)
    for record in records:
      assert set(record) == {"text", "label", "rating", "id", "movie"}
      assert isinstance(record["text"], bytes) and isinstance(record["movie"], bytes)
      assert isinstance(record["label"], int) and isinstance(record["rating"], int)
      allowed = {0: range(1, 5), 1: range(7, 11), -1: range(0, 1)}[record["label"]]
      assert record["rating"] in allowed, record
      assert re.fullmatch(rb"tt\d{7}", record["movie"]), record["movie"]
    got = collections.Counter((_text(r["text"]), r["label"], r["rating"], r["id"],
                               _text(r["movie"])) for r in records)
    assert got == expected[split], split
  # Train and test are of different movies (the dataset's own rule), some with several reviews.
  movies = {split: collections.Counter(_text(r["movie"]) for r in _records(data_dir, "imdb", split))
            for split in ("train", "test")}
  assert not set(movies["train"]) & set(movies["test"])
  assert max(movies["train"].values()) > 1
  # Balanced sample, raw markup kept.
  labels = collections.Counter(r["label"] for r in _records(data_dir, "imdb", "train"))
  assert labels == {0: 1000, 1: 1000}
  assert any("<br />" in _text(r["text"]) for r in _records(data_dir, "imdb", "test"))


def test_fra_eng_splits_follow_the_english_sentence(prepared_samples):
  data_dir, _ = prepared_samples
  with zipfile.ZipFile(sources.sample_path("fra_eng")) as archive:
    lines = archive.read("fra-eng/fra.txt").decode().splitlines()
  expected = collections.defaultdict(collections.Counter)
  for line in lines:
    en, fr = line.split("\t")[:2]
    u = _unit(en)
    expected["train" if u < 0.9 else "validation" if u < 0.95 else "test"][(en, fr)] += 1
  english = {}
  for split in datasets.SPLITS["fra_eng"]:
    records = _records(data_dir, "fra_eng", split)
    assert all(set(r) == {"en", "fr"} and isinstance(r["fr"], bytes) for r in records)
    pairs = collections.Counter((_text(r["en"]), _text(r["fr"])) for r in records)
    assert pairs == expected[split], split
    english[split] = {en for en, _ in pairs}
  for a, b in itertools.combinations(english, 2):
    assert not english[a] & english[b], (a, b)
    norm = lambda texts: {" ".join(t.casefold().split()) for t in texts}  # noqa: E731
    assert not norm(english[a]) & norm(english[b]), (a, b)
  # The sample keeps several translations of one sentence together.
  counts = collections.Counter(en for en, _ in expected["train"])
  assert max(counts.values()) > 1


def test_couplet_splits_follow_the_upper_line(prepared_samples):
  data_dir, _ = prepared_samples
  files = _tar_files("couplet")
  uppers = files["couplet/train/in.txt"].decode().split("\n")[:-1]
  lowers = files["couplet/train/out.txt"].decode().split("\n")[:-1]
  expected = collections.defaultdict(collections.Counter)
  for upper, lower in zip(uppers, lowers):
    u = _unit(upper)  # the sample config carves 5% validation and 5% test
    expected["validation" if u < 0.05 else "test" if u < 0.10 else "train"][(upper, lower)] += 1
  seen = {}
  for split in datasets.SPLITS["couplet"]:
    records = _records(data_dir, "couplet", split)
    pairs = collections.Counter((_text(r["upper"]), _text(r["lower"])) for r in records)
    assert pairs == expected[split], split
    # Lines exactly as in the files: characters separated by spaces, same count on both sides.
    assert all(len(u.split()) == len(l.split()) for u, l in pairs)
    seen[split] = {u for u, _ in pairs}
  for a, b in itertools.combinations(seen, 2):
    assert not seen[a] & seen[b], (a, b)


def test_load_checks_name_and_split(prepared_samples):
  data_dir, _ = prepared_samples
  with pytest.raises(ValueError, match=r"unknown dataset 'imdbb'.*'fra_eng'"):
    datasets.load("imdbb", "train", data_dir=data_dir)
  with pytest.raises(ValueError, match=r"unknown split 'validation' of imdb.*'unsupervised'"):
    datasets.load("imdb", "validation", data_dir=data_dir)


def test_prepare_is_idempotent_and_info_reads_metadata(prepared_samples):
  data_dir, reports = prepared_samples
  again = datasets.prepare("couplet", data_dir=data_dir)
  assert not again.built and again.splits == reports["couplet"].splits
  shown = datasets.info("fra_eng", data_dir=data_dir)
  assert shown.splits == reports["fra_eng"].splits
  assert shown.source.endswith("fra_eng_sample.zip") and "English" in shown.split_rule
  assert datasets.info("fra_eng", full=True, data_dir=data_dir) is None


def test_command_line(prepared_samples, capsys, tmp_path):
  data_dir, reports = prepared_samples
  assert main(["info", "all", "--data-dir", str(data_dir)]) == 0
  out = capsys.readouterr().out
  assert "imdb (sample): train 2,000, test 1,000, unsupervised 300 (total 3,300)" in out
  counts = reports["couplet"].splits
  assert f"couplet (sample): train {counts['train']:,}, validation {counts['validation']:,}" in out
  assert out.count("skipped 0") == len(datasets.NAMES)
  assert main(["prepare", "imdb", "--data-dir", str(data_dir)]) == 0
  assert "reused in" in capsys.readouterr().out
  assert main(["info", "couplet", "--full", "--data-dir", str(data_dir)]) == 0
  assert "not prepared" in capsys.readouterr().out
  # A missing source: a message naming the file to obtain and where to put it, exit status 2.
  assert main(["prepare", "imdb", "--source", str(tmp_path / "nope.tar.gz"),
               "--data-dir", str(tmp_path)]) == 2
  err = capsys.readouterr().err
  assert "nope.tar.gz does not exist" in err and "aclImdb_v1.tar.gz" in err
  assert str(tmp_path / "downloads" / "manual") in err


def test_sample_archives_are_small_and_canonical():
  total = sum(sources.sample_path(n).stat().st_size for n in datasets.NAMES)
  assert total < 4_000_000
  files = _tar_files("imdb")
  assert "aclImdb/README" in files
  reviews = [p for p in files if p.endswith(".txt") and "/urls_" not in p]
  per_folder = collections.Counter(p.rsplit("/", 1)[0] for p in reviews)
  assert per_folder == {"aclImdb/train/pos": 1000, "aclImdb/train/neg": 1000,
                        "aclImdb/test/pos": 500, "aclImdb/test/neg": 500,
                        "aclImdb/train/unsup": 300}
  # The URL lists are whole, so that line i still names the movie of review i.
  url_lines = {p: files[p].decode().count("\n") for p in files if "/urls_" in p}
  assert url_lines == {"aclImdb/train/urls_pos.txt": 12_500, "aclImdb/train/urls_neg.txt": 12_500,
                       "aclImdb/test/urls_pos.txt": 12_500, "aclImdb/test/urls_neg.txt": 12_500,
                       "aclImdb/train/urls_unsup.txt": 50_000}
  with tarfile.open(fileobj=io.BytesIO(sources.sample_path("couplet").read_bytes())) as tar:
    assert sorted(tar.getnames()) == ["couplet/train/in.txt", "couplet/train/out.txt"]
