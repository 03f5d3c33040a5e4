"""The question_pairs builder: both layouts, the carving rule, every malformed line, the sample.

Expected splits are recomputed here from the documented rule (sha256 of the sorted, normalised
sentence pair), not with the builder's own functions.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import tarfile
import unicodedata
import zipfile

import pytest

from pipelines import datasets, sources
from pipelines.builders.question_pairs import QuestionPairs
from pipelines.sources import SourceError

CHARS = "花呗借还款额度怎么开通为什么不能用逾期利息分期账单提前"


def _norm(text: str) -> str:
  return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _unit(s1: str, s2: str) -> float:
  """The documented key: both sentences normalised, sorted, NUL-joined; sha256's first 64 bits."""
  key = _norm("\0".join(sorted((_norm(s1), _norm(s2)))))
  return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0**64


def _split_of(s1: str, s2: str, v: float = 0.1, t: float = 0.1, dev=False, test=False) -> str:
  u = _unit(s1, s2)
  if u < v and not dev:
    return "validation"
  if v <= u < v + t and not test:
    return "test"
  return "train"


def _pairs(n: int, seed: int = 0) -> list[tuple[str, str, int]]:
  """n distinct made-up pairs of Chinese questions with labels."""
  out = []
  for i in range(n):
    s1 = CHARS[i % 26] + CHARS[(i * 7 + seed) % 26] + f"{i}" + CHARS[(i * 3) % 26]
    s2 = CHARS[(i * 5 + 1) % 26] + CHARS[(i + seed) % 26] + f"{i + seed}"
    out.append((s1, s2, (i * 7) % 3 == 0))
  return [(a, b, int(label)) for a, b, label in out]


def _json_lines(pairs, with_id=False) -> str:
  lines = []
  for i, (s1, s2, label) in enumerate(pairs):
    obj = ({"id": i, "sentence1": s1, "sentence2": s2} if with_id
           else {"sentence1": s1, "sentence2": s2, "label": str(label)})
    lines.append(json.dumps(obj, ensure_ascii=False) + "\n")
  return "".join(lines)


def _tsv_lines(pairs) -> str:
  return "".join(f"{s1}\t{s2}\t{label}\n" for s1, s2, label in pairs)


def _folder(path, files: dict[str, str | bytes]):
  for name, content in files.items():
    (path / name).parent.mkdir(parents=True, exist_ok=True)
    (path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
  return path


def _tar_gz(path, files: dict[str, str]):
  """Writes `files` {path inside: text} as a .tar.gz at `path`; returns `path`."""
  with tarfile.open(path, mode="w:gz") as tar:
    for name, text in files.items():
      data = text.encode()
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return path


def _read(path, config="full"):
  builder = QuestionPairs(data_dir=str(path.parent / "unused_data_dir"), config=config)
  splits, tally, rule = builder.read_source(path)
  assert tally.total() == 0
  return {split: [record for _, record in items] for split, items in splits.items()}, rule


def _triples(records):
  return [(r["sentence1"], r["sentence2"], r["label"]) for r in records]


# ---- layouts


def test_clue_layout_without_dev_carves_validation_and_test(tmp_path):
  pairs = _pairs(120)
  folder = _folder(tmp_path / "afqmc", {"train.json": _json_lines(pairs),
                                        "test.json": _json_lines(pairs[:7], with_id=True)})
  splits, rule = _read(folder)
  assert set(splits) == {"train", "validation", "test", "unlabelled"}
  expected = collections.defaultdict(list)
  for number, (s1, s2, label) in enumerate(pairs, start=1):
    expected[_split_of(s1, s2)].append((s1, s2, label, number))
  for split in ("train", "validation", "test"):
    got = [(r["sentence1"], r["sentence2"], r["label"], r["id"]) for r in splits[split]]
    assert got == expected[split], split
    assert got, split  # 120 pairs leave none of them empty
  assert [(r["id"], r["label"]) for r in splits["unlabelled"]] == [(i, -1) for i in range(7)]
  assert "validation u < 0.1" in rule and "test 0.1 <= u < 0.2" in rule


def test_clue_dev_json_is_validation_and_test_is_the_same_carve(tmp_path):
  pairs, dev = _pairs(120), _pairs(9, seed=5)
  without, _ = _read(_folder(tmp_path / "a", {"train.json": _json_lines(pairs)}))
  assert "unlabelled" not in without  # no test.json: no unlabelled split
  with_dev, rule = _read(_folder(tmp_path / "b", {"train.json": _json_lines(pairs),
                                                   "dev.json": _json_lines(dev)}))
  assert _triples(with_dev["validation"]) == dev
  assert [r["id"] for r in with_dev["validation"]] == list(range(1, 10))
  # The carved test split does not depend on dev.json; the would-be validation pairs train.
  assert with_dev["test"] == without["test"]
  assert sorted(_triples(with_dev["train"])) == sorted(_triples(without["train"])
                                                        + _triples(without["validation"]))
  assert "validation = dev.json" in rule


def test_lcqmc_layout_as_given_in_a_tar_gz(tmp_path):
  parts = {"train": _pairs(30), "dev": _pairs(5, seed=1), "test": _pairs(6, seed=2)}
  archive = _tar_gz(tmp_path / "lcqmc.tar.gz",
                    {f"lcqmc/{name}.txt": _tsv_lines(pairs) for name, pairs in parts.items()})
  splits, rule = _read(archive)
  assert set(splits) == {"train", "validation", "test"}
  for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
    assert _triples(splits[split]) == parts[name]
    assert [r["id"] for r in splits[split]] == list(range(1, len(parts[name]) + 1))
  assert "validation = dev.txt" in rule and "test = test.txt" in rule


def test_lcqmc_without_dev_and_test_carves_them(tmp_path):
  pairs = _pairs(90)
  splits, _ = _read(_folder(tmp_path / "bq", {"train.txt": _tsv_lines(pairs)}))
  for split in ("train", "validation", "test"):
    assert _triples(splits[split]) == [p for p in pairs if _split_of(p[0], p[1]) == split]


def test_a_pair_its_repeats_and_its_swapped_copy_share_a_split(tmp_path):
  pairs = _pairs(150)
  # Each pair again swapped, and again with other case, width and spacing (same normalised key).
  variants = [(b, a, label) for a, b, label in pairs]
  variants += [(f" {a.upper()} ", unicodedata.normalize("NFKC", b).replace("1", "１"), label)
               for a, b, label in pairs]
  splits, _ = _read(_folder(tmp_path / "afqmc", {"train.json": _json_lines(pairs + variants)}))
  where = collections.defaultdict(set)
  for split, records in splits.items():
    for r in records:
      where[_norm("\0".join(sorted((_norm(r["sentence1"]), _norm(r["sentence2"])))))].add(split)
  assert len(where) == 150 and all(len(s) == 1 for s in where.values())
  assert sum(map(len, splits.values())) == 450
  assert all(len(records) >= 3 for records in splits.values())


def test_sample_follows_the_rule(prepared_samples):
  data_dir, reports = prepared_samples
  report = reports["question_pairs"]
  assert sum(report.splits[s] for s in ("train", "validation", "test")) == 4000
  assert report.splits["unlabelled"] == 300 and report.skipped == {}
  assert 250 < report.splits["validation"] < 400 and 250 < report.splits["test"] < 400
  with zipfile.ZipFile(sources.sample_path("question_pairs")) as archive:
    assert sorted(archive.namelist()) == ["afqmc/test.json", "afqmc/train.json"]
    train = [json.loads(line) for line in archive.read("afqmc/train.json").decode().splitlines()]
    test = [json.loads(line) for line in archive.read("afqmc/test.json").decode().splitlines()]
  assert sum(r["label"] == "1" for r in train) == 1232  # AFQMC's 30.8% positives
  for split in ("train", "validation", "test"):
    ds = datasets.load("question_pairs", split, data_dir=data_dir)
    got = sorted((r["id"], r["sentence1"].decode(), r["sentence2"].decode(), r["label"])
                 for r in (ds[i] for i in range(len(ds))))
    expected = [(n, r["sentence1"], r["sentence2"], int(r["label"]))
                for n, r in enumerate(train, start=1)
                if _split_of(r["sentence1"], r["sentence2"], 0.08, 0.08) == split]
    assert got == expected, split
  ds = datasets.load("question_pairs", "unlabelled", data_dir=data_dir)
  got = sorted((r["id"], r["sentence1"].decode(), r["label"]) for r in (ds[i] for i in range(300)))
  assert got == sorted((r["id"], r["sentence1"], -1) for r in test)


# ---- malformed sources: each an error naming the file and line


GOOD = '{"sentence1": "花呗", "sentence2": "借呗", "label": "1"}\n'


@pytest.mark.parametrize("name,bad_line,message", [
    ("train.json", "{not json\n", r"train.json:3: not a JSON object"),
    ("train.json", "[1, 2]\n", r"train.json:3: expected a JSON object"),
    ("train.json", '{"sentence1": "花呗", "label": "1"}\n', r"train.json:3: no 'sentence2'"),
    ("train.json", '{"sentence1": "花呗", "sentence2": "借呗"}\n', r"train.json:3: no 'label'"),
    ("train.json", '{"sentence1": "花呗", "sentence2": "借呗", "label": "2"}\n',
     r"train.json:3: the label must be 0 or 1, got '2'"),
    ("train.json", '{"sentence1": "花呗", "sentence2": "借呗", "label": true}\n',
     r"train.json:3: the label must be 0 or 1, got True"),
    ("train.json", '{"sentence1": " ", "sentence2": "借呗", "label": "0"}\n',
     r"train.json:3: sentence1 is empty"),
    ("train.json", '{"sentence1": "花呗", "sentence2": 7, "label": "0"}\n',
     r"train.json:3: sentence2 must be a string"),
    ("train.json", "\n", r"train.json:3: not a JSON object"),
    ("dev.json", '{"sentence1": "花呗", "sentence2": "借呗", "label": "x"}\n',
     r"dev.json:3: the label must be 0 or 1"),
    ("test.json", '{"sentence1": "花呗", "sentence2": "借呗"}\n', r"test.json:3: no 'id'"),
    ("test.json", '{"id": "7", "sentence1": "花呗", "sentence2": "借呗"}\n',
     r"test.json:3: 'id' must be an integer"),
    ("train.txt", "花呗\t借呗\n", r"train.txt:3: expected 3 tab-separated fields .* got 2"),
    ("train.txt", "花呗\t借呗\t1\t1\n", r"train.txt:3: expected 3 tab-separated fields"),
    ("dev.txt", "花呗\t\t1\n", r"dev.txt:3: text_b is empty"),
    ("test.txt", "花呗\t借呗\tyes\n", r"test.txt:3: the label must be 0 or 1, got 'yes'"),
])
def test_malformed_lines_name_file_and_line(tmp_path, name, bad_line, message):
  ext = name.rsplit(".", 1)[1]
  good = GOOD if ext == "json" else "花呗\t借呗\t1\n"
  if name == "test.json":
    good = '{"id": 0, "sentence1": "花呗", "sentence2": "借呗"}\n'
  files = {f"train.{ext}": GOOD * 3 if ext == "json" else "花呗\t借呗\t1\n" * 3}
  files[name] = good * 2 + bad_line + good
  folder = _folder(tmp_path / "src", files)
  with pytest.raises(SourceError, match=f"{tmp_path}/src:{message}"):
    _read(folder)


def test_invalid_utf8_and_mixed_layouts_are_errors(tmp_path):
  folder = _folder(tmp_path / "utf", {"train.json": GOOD.encode() + b'{"sentence1": "\xff"}\n'})
  with pytest.raises(SourceError, match=r"utf:train.json: line 2: invalid UTF-8"):
    _read(folder)
  both = _folder(tmp_path / "both", {"train.json": GOOD, "train.txt": "a\tb\t1\n"})
  with pytest.raises(SourceError, match=r"holds both train.json .* and train.txt"):
    _read(both)
  stray = _folder(tmp_path / "stray", {"train.json": GOOD, "dev.txt": "a\tb\t1\n"})
  with pytest.raises(SourceError, match=r"a json layout with files of the other layout"):
    _read(stray)
  with pytest.raises(SourceError, match=r"no train.json .* or train.txt"):
    _read(_folder(tmp_path / "devonly", {"dev.json": GOOD}))


# ---- preparing: the data folder, the same-source check


def test_prepare_finds_the_subfolder_and_refuses_another_source(tmp_path):
  data_dir = tmp_path / "zoo"
  shared = _folder(tmp_path / "shared", {"afqmc/train.json": _json_lines(_pairs(80)),
                                         "afqmc/test.json": _json_lines(_pairs(4), True)})
  report = datasets.prepare("question_pairs", source=shared, data_dir=data_dir)
  assert report.config == "full" and report.source == str(shared / "afqmc")
  assert sum(report.splits.values()) == 84 and report.splits["unlabelled"] == 4
  lcqmc = _folder(tmp_path / "lcqmc", {"train.txt": _tsv_lines(_pairs(60)),
                                       "dev.txt": _tsv_lines(_pairs(5, 1)),
                                       "test.txt": _tsv_lines(_pairs(5, 2))})
  # The same folder named either way is reused; another folder is refused.
  assert not datasets.prepare("question_pairs", source=shared / "afqmc", data_dir=data_dir).built
  with pytest.raises(ValueError, match=r"was built from .*shared/afqmc, not from the folder "
                                       r".*lcqmc; .*--overwrite"):
    datasets.prepare("question_pairs", source=lcqmc, data_dir=data_dir)
  report = datasets.prepare("question_pairs", source=lcqmc, data_dir=data_dir, overwrite=True)
  assert report.splits == {"train": 60, "validation": 5, "test": 5}
  assert "unlabelled" not in report.lines()[0]
  with pytest.raises(ValueError, match=r"has no 'unlabelled' split: its source .*lcqmc had none"):
    datasets.load("question_pairs", "unlabelled", source=lcqmc, data_dir=data_dir)
  with pytest.raises(SourceError, match=r"holds neither the extracted question_pairs layout"):
    datasets.prepare("question_pairs", source=tmp_path / "zoo", data_dir=tmp_path / "other")


def test_clue_archive_with_the_canonical_name_has_no_digest_to_fail(tmp_path):
  # CLUE's afqmc_public.zip holds its three files at the top; no digest is pinned for it.
  archive = tmp_path / "manual" / "afqmc_public.zip"
  archive.parent.mkdir()
  with zipfile.ZipFile(archive, "w") as zf:
    zf.writestr("train.json", _json_lines(_pairs(60)))
    zf.writestr("dev.json", _json_lines(_pairs(6, seed=3)))
    zf.writestr("test.json", _json_lines(_pairs(5), with_id=True))
  report = datasets.prepare("question_pairs", source=archive, data_dir=tmp_path / "zoo")
  assert report.splits["validation"] == 6 and report.splits["unlabelled"] == 5
  assert report.splits["train"] + report.splits["test"] == 60


def _lcqmc_tsv(pairs) -> str:
  """One of LCQMC's .tsv files as PaddleHub's lcqmc.tar.gz holds them: the header line first."""
  return "text_a\ttext_b\tlabel\n" + _tsv_lines(pairs)


def test_paddlehub_lcqmc_layout_with_its_header_lines(tmp_path):
  parts = {"train": _pairs(41), "dev": _pairs(7, seed=1), "test": _pairs(9, seed=2)}
  archive = _tar_gz(tmp_path / "lcqmc.tar.gz",
                    {f"lcqmc/{name}.tsv": _lcqmc_tsv(pairs) for name, pairs in parts.items()})
  splits, rule = _read(archive)
  assert set(splits) == {"train", "validation", "test"}
  for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
    assert _triples(splits[split]) == parts[name]
    # ids are line numbers: the header is line 1.
    assert [r["id"] for r in splits[split]] == list(range(2, len(parts[name]) + 2))
  assert "validation = dev.tsv" in rule and "test = test.tsv" in rule
  without_test = _read(_folder(tmp_path / "lcqmc", {"train.tsv": _lcqmc_tsv(parts["train"]),
                                                    "dev.tsv": _lcqmc_tsv(parts["dev"])}))[0]
  carved = [p for p in parts["train"] if _split_of(p[0], p[1], dev=True) == "test"]
  assert len(carved) == 3 and _triples(without_test["test"]) == carved


@pytest.mark.parametrize("first, message", [
    ("花呗\t借呗\t1", r"dev.tsv:1: expected the header line 'text_a\\ttext_b\\tlabel', got "
                    r"'花呗\\t借呗\\t1'"),
    ("text_a\ttext_b", r"dev.tsv:1: expected the header line"),
])
def test_a_tsv_without_its_header_line_is_an_error(tmp_path, first, message):
  folder = _folder(tmp_path / "src", {"train.tsv": _lcqmc_tsv(_pairs(3)),
                                      "dev.tsv": first + "\n" + _tsv_lines(_pairs(2))})
  with pytest.raises(SourceError, match=f"{tmp_path}/src:{message}"):
    _read(folder)
  both = _folder(tmp_path / "both", {"train.txt": "a\tb\t1\n", "train.tsv": _lcqmc_tsv([])})
  with pytest.raises(SourceError, match=r"holds both train.txt \(LCQMC's\) and train.tsv"):
    _read(both)
