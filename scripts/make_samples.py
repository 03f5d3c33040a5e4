"""Makes the small real samples shipped in pipelines/samples/ from the full archives.

    python scripts/make_samples.py [--data ../shared/data] [--out pipelines/samples]

Each sample keeps its dataset's canonical layout, so the same builder code reads it:
  imdb_sample.tar.gz     aclImdb/README, aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt,
                         aclImdb/train/unsup/: 1,000 + 1,000 train, 500 + 500 test and 300
                         unsupervised reviews, and the five URL lists aclImdb/{train,test}/
                         urls_{pos,neg}.txt, aclImdb/train/urls_unsup.txt whole (line i names the
                         movie of review i, so the kept reviews keep their movies)
  fra_eng_sample.zip     fra-eng/fra.txt (10,000 pairs) and fra-eng/_about.txt (the attribution)
  couplet_sample.tar.gz  couplet/train/in.txt and out.txt (10,000 couplets)
  question_pairs_sample.zip  afqmc/train.json (4,000 labelled pairs, AFQMC's share of positives
                         kept: the first of each label by rank) and afqmc/test.json (300
                         unlabelled pairs with their CLUE ids), lines byte for byte as in the
                         shared copy, whose two files are checked against their pinned digests
Selection is deterministic and unrelated to the split rule of the builders: items are ranked by the
sha256 of "sample/" + a stable text (the review's path inside the archive, the English sentence, the
upper line, the AFQMC line), the first ones are kept, and kept lines stay in their original file
order. Ranking by
the sentence keeps most translations of one English sentence (and lower lines of one upper line)
together. The archives are written byte-identically on every run (fixed times, owners and order).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipelines import sources  # noqa: E402

IMDB_COUNTS = {"train/pos": 1000, "train/neg": 1000, "test/pos": 500, "test/neg": 500,
               "train/unsup": 300}
FRA_ENG_PAIRS = 10_000
COUPLETS = 10_000
QUESTION_PAIRS, UNLABELLED_PAIRS = 4_000, 300
_FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def rank(text: str) -> bytes:
  return hashlib.sha256(("sample/" + text).encode("utf-8")).digest()


def write_tar_gz(path: Path, files: dict[str, bytes]) -> None:
  """Writes `files` (archive path -> bytes) in sorted order with fixed metadata."""
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
    for name in sorted(files):
      info = tarfile.TarInfo(name)
      info.size, info.mtime, info.mode = len(files[name]), 0, 0o644
      tar.addfile(info, io.BytesIO(files[name]))
  with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                              compresslevel=9) as gz:
    gz.write(buffer.getvalue())


def write_zip(path: Path, files: dict[str, bytes]) -> None:
  with zipfile.ZipFile(path, "w") as archive:
    for name in sorted(files):
      info = zipfile.ZipInfo(name, date_time=_FIXED_ZIP_TIME)
      info.compress_type = zipfile.ZIP_DEFLATED
      info.external_attr = 0o644 << 16
      archive.writestr(info, files[name], compresslevel=9)


def keep_lines(keys: list[str], count: int) -> list[int]:
  """Indices of the `count` lines whose keys rank first, in their original order."""
  order = sorted(range(len(keys)), key=lambda i: (rank(keys[i]), i))
  return sorted(order[:count])


def make_imdb(archive: Path, out: Path) -> str:
  pattern = re.compile(r"^aclImdb/(train/(pos|neg|unsup)|test/(pos|neg))/\d+_\d+\.txt$")
  url_lists = [f"aclImdb/{split}/urls_{kind}.txt"
               for split, kind in (("train", "pos"), ("train", "neg"), ("train", "unsup"),
                                   ("test", "pos"), ("test", "neg"))]
  whole = ["aclImdb/README", *url_lists]
  files = sources.read_files(archive, lambda rel: rel in whole or pattern.match(rel) is not None)
  chosen = {rel: files[rel] for rel in whole}
  for folder, count in IMDB_COUNTS.items():
    names = sorted((rel for rel in files if rel.startswith(f"aclImdb/{folder}/")), key=rank)
    chosen.update((rel, files[rel]) for rel in names[:count])
  write_tar_gz(out / sources.CANONICAL["imdb"].sample, chosen)
  return f"imdb: {len(chosen) - len(whole)} reviews " + ", ".join(f"{f} {n}" for f, n in IMDB_COUNTS.items())


def make_fra_eng(archive: Path, out: Path) -> str:
  files = sources.read_files(archive, lambda rel: rel.startswith("fra-eng/"))
  lines = files["fra-eng/fra.txt"].decode("utf-8").split("\n")
  lines = [line for line in lines if line]
  kept = keep_lines([line.split("\t")[0] for line in lines], FRA_ENG_PAIRS)
  text = "".join(lines[i] + "\n" for i in kept)
  write_zip(out / sources.CANONICAL["fra_eng"].sample,
            {"fra-eng/fra.txt": text.encode("utf-8"),
             "fra-eng/_about.txt": files["fra-eng/_about.txt"]})
  return f"fra_eng: {len(kept)} pairs"


def make_couplet(archive: Path, out: Path) -> str:
  files = sources.read_files(archive, lambda rel: rel.startswith("couplet/train/"))
  uppers = files["couplet/train/in.txt"].decode("utf-8").split("\n")[:-1]
  lowers = files["couplet/train/out.txt"].decode("utf-8").split("\n")[:-1]
  kept = keep_lines(uppers, COUPLETS)
  write_tar_gz(out / sources.CANONICAL["couplet"].sample, {
      "couplet/train/in.txt": "".join(uppers[i] + "\n" for i in kept).encode("utf-8"),
      "couplet/train/out.txt": "".join(lowers[i] + "\n" for i in kept).encode("utf-8"),
  })
  return f"couplet: {len(kept)} couplets"


def make_question_pairs(folder: Path, out: Path) -> str:
  """AFQMC's train.json and test.json (a folder, not an archive: the shared copy is extracted)."""
  from pipelines.builders import question_pairs  # pylint: disable=g-import-not-at-top
  chosen = {}
  for name, digest in question_pairs.SHARED_SHA256.items():
    path = folder / name
    sha256 = sources.file_digests(path)[0]
    if sha256 != digest:
      raise sources.SourceError(f"{path}: sha256 {sha256}, expected {digest} (the shared copy)")
    chosen[name] = [line for line in path.read_bytes().decode("utf-8").split("\n") if line]
  train = chosen["train.json"]
  labels = [json.loads(line)["label"] for line in train]
  positive = [i for i, label in enumerate(labels) if label == "1"]
  negative = [i for i, label in enumerate(labels) if label != "1"]
  keep_positive = round(QUESTION_PAIRS * len(positive) / len(train))
  kept = sorted([positive[i] for i in keep_lines([train[i] for i in positive], keep_positive)]
                + [negative[i] for i in keep_lines([train[i] for i in negative],
                                                   QUESTION_PAIRS - keep_positive)])
  test = chosen["test.json"]
  kept_test = keep_lines(test, UNLABELLED_PAIRS)
  write_zip(out / sources.CANONICAL["question_pairs"].sample, {
      "afqmc/train.json": "".join(train[i] + "\n" for i in kept).encode("utf-8"),
      "afqmc/test.json": "".join(test[i] + "\n" for i in kept_test).encode("utf-8"),
  })
  return (f"question_pairs: {len(kept)} train pairs ({keep_positive} positive), "
          f"{len(kept_test)} unlabelled")


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                      help="folder with imdb/, fra-eng/, couplet/ holding the canonical archives "
                      "and afqmc/ holding train.json and test.json")
  parser.add_argument("--out", type=Path, default=sources.SAMPLES_DIR)
  args = parser.parse_args(argv)
  args.out.mkdir(parents=True, exist_ok=True)
  for name, make in (("imdb", make_imdb), ("fra_eng", make_fra_eng), ("couplet", make_couplet)):
    canon = sources.CANONICAL[name]
    archive = args.data / canon.subdir / canon.filename
    sources.verify_checksum(archive, name)
    print(make(archive, args.out))
  print(make_question_pairs(args.data / sources.CANONICAL["question_pairs"].subdir, args.out))
  for path in sorted(args.out.iterdir()):
    print(f"  {path.name}: {path.stat().st_size:,} bytes, sha256 "
          f"{sources.file_digests(path)[0]}")


if __name__ == "__main__":
  main()
