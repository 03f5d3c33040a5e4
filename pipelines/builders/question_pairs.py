"""Chinese question pairs for semantic matching (AFQMC of CLUE, or LCQMC / BQ) as a tfds builder.

Source: a folder, a .zip or a .tar[.gz] (files at the top or under one folder of any name) in one
of two layouts:
  * CLUE (AFQMC): train.json, optionally dev.json and test.json; JSON lines {"sentence1": ...,
    "sentence2": ..., "label": "0" or "1"}; test.json's lines carry "id" and no label (CLUE's
    unlabelled test set). ../shared/data/afqmc holds train.json and test.json (dev.json withheld).
  * LCQMC (also BQ): train.txt, dev.txt, test.txt; lines `text_a TAB text_b TAB label`.
  * LCQMC as PaddleHub's lcqmc.tar.gz holds it (sources.CANONICAL['lcqmc']): lcqmc/train.tsv,
    dev.tsv, test.tsv, the same lines after a header line that must read `text_a TAB text_b TAB
    label`.
  A source with more than one of train.json, train.txt and train.tsv is refused (two datasets in
  one place).
Records: {'sentence1': str, 'sentence2': str, 'label': 1 same meaning, 0 not, -1 unlabelled,
'id': the line number in its file (from 1; a .tsv's first pair is line 2), or CLUE's "id" in
test.json}. Sentences are kept
exactly as stored.
Splits:
  * CLUE: 'validation' = dev.json when there is one, else carved from train.json; 'test' is always
    carved from train.json (CLUE's test.json has no labels); 'unlabelled' = test.json's pairs
    (label -1), a split that is left out when there is no test.json (tfds cannot store an empty
    split; datasets.load then names it missing).
  * LCQMC: train, dev and test (.txt or .tsv) as given; a missing dev or test file is carved
    from train as below.
  Carving: each pair's key is its two sentences, normalised (NFKC, case-folded, whitespace
  collapsed: _common.group_key) and sorted, so the key ignores the order of the two sentences. It
  gets a stable sha256 number u in [0, 1) (_common.unit_hash); u < v goes to validation (unless
  a dev file exists: then to train), v <= u < v + t to test (unless a test file exists), the rest
  to train. A pair, its repeats and its swapped copy (b, a) therefore always share a split, and
  the carved test split is the same pairs whether or not there is a dev file. v = t = 0.1 for
  'full' (about 3,400 AFQMC pairs each) and 0.08 for the 4,000-pair 'sample' (about 320 each).
Checks (each an error naming the file and line; nothing is skipped): a line that is not a JSON
object, a missing or non-string sentence, an empty (blank) sentence, a label other than 0/1
(string or number), a tab-separated line without exactly three fields, a test.json line without
an integer "id", a .tsv whose first line is not the header, invalid UTF-8. A blank line is an
error too (a file's final newline ends its last line; it does not make an empty one).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from pipelines.builders import _common
from pipelines.sources import SourceError, decode_utf8, read_files, split_lines

# The shared copy's files (../shared/data/afqmc), checked by scripts/make_samples.py. CLUE's
# afqmc_public.zip itself has no published digest, so none is pinned for it.
SHARED_SHA256 = {
    "train.json": "41c0ed462fe3da60c575c4f81f4799ba8fbe51155f962adcfc19c26b2de3f012",
    "test.json": "9d2a78d43215a0d4d34230f4aaca1d2cdbad03e1f268bef9da0468e0dc9eb4e5",
}
_PAIR_FILE = re.compile(r"^(.*?)(train|dev|test)\.(json|txt|tsv)$")
TSV_HEADER = "text_a\ttext_b\tlabel"  # the first line of each of LCQMC's .tsv files
_LAYOUTS = {"json": "CLUE's layout", "txt": "LCQMC's", "tsv": "PaddleHub's LCQMC"}
_LABELS = {"0": 0, "1": 1, 0: 0, 1: 1}


@dataclasses.dataclass(eq=False)
class QuestionPairsConfig(tfds.core.BuilderConfig):
  """Adds the shares of train carved out as validation and test (see the module docstring)."""
  validation_fraction: float = 0.1
  test_fraction: float = 0.1


def pair_key(sentence1: str, sentence2: str) -> str:
  """The carving key of a pair: both sentences normalised and sorted (order-free), NUL-joined."""
  return "\0".join(sorted((_common.group_key(sentence1), _common.group_key(sentence2))))


class QuestionPairs(_common.ZooBuilder, skip_registration=True):
  """Sentence pairs labelled same meaning (1) or not (0); splits train, validation, test and,
  from CLUE's test.json, unlabelled."""

  name = "question_pairs"
  BUILDER_CONFIGS = [
      QuestionPairsConfig(name="sample", description=(
          "Shipped slice of AFQMC: 4,000 train.json and 300 test.json pairs."),
                          validation_fraction=0.08, test_fraction=0.08),
      QuestionPairsConfig(name="full", description="All pairs of the source.",
                          validation_fraction=0.1, test_fraction=0.1),
  ]
  DESCRIPTION = ("Chinese question pairs (AFQMC, Ant Financial Question Matching Corpus, from the "
                 "CLUE benchmark; or LCQMC / BQ): does the second question mean the same?")
  HOMEPAGE = "https://github.com/CLUEbenchmark/CLUE"
  CITATION = ("Xu et al. CLUE: A Chinese Language Understanding Evaluation Benchmark. COLING "
              "2020.")

  def _features(self):
    return tfds.features.FeaturesDict({
        "sentence1": tfds.features.Text(),
        "sentence2": tfds.features.Text(),
        "label": np.int32,
        "id": np.int32,
    })

  def read_source(self, path: Path):
    files = read_files(path, lambda rel: _PAIR_FILE.match(rel) is not None)
    root = _common.single_root((_PAIR_FILE.match(rel)[1] for rel in files), path,
                               "question pair files (train.json, train.txt or train.tsv)")
    has = {rel[len(root):] for rel in files if rel.startswith(root)}
    trains = [ext for ext in _LAYOUTS if f"train.{ext}" in has]
    if len(trains) > 1:
      raise SourceError(f"{path}: holds both " + " and ".join(
          f"{root}train.{ext} ({_LAYOUTS[ext]})" for ext in trains)
                        + "; give the folder of one dataset")
    if not trains:
      raise SourceError(f"{path}: no {root}train.json (CLUE's layout) or {root}train.txt / "
                        f"{root}train.tsv (LCQMC's) among {sorted(files)}")
    ext = trains[0]
    clue = ext == "json"
    strays = sorted(name for name in has if not name.endswith(ext))
    if strays:
      raise SourceError(f"{path}: a {ext} layout with files of the other layout {strays}; give the "
                        f"folder of one dataset")

    def read(name: str, labelled: bool) -> list[tuple[int, dict]]:
      rel = root + name
      where = f"{path}:{rel}"
      lines = split_lines(decode_utf8(files[rel], where))
      first = 1
      if ext == "tsv":
        if not lines or lines[0] != TSV_HEADER:
          raise SourceError(f"{where}:1: expected the header line {TSV_HEADER!r}, got "
                            f"{(lines or [''])[0][:60]!r}")
        first = 2
      parse = _json_pair if clue else _tsv_pair
      return [(number, parse(line, f"{where}:{number}", number, labelled))
              for number, line in enumerate(lines[first - 1:], start=first)]

    v = self.builder_config.validation_fraction
    t = self.builder_config.test_fraction
    dev_file, test_file = f"dev.{ext}", f"test.{ext}"
    has_dev, has_test = dev_file in has, not clue and test_file in has
    splits: dict[str, list[tuple[Any, dict]]] = {"train": [], "validation": [], "test": []}
    for number, record in read(f"train.{ext}", True):
      u = _common.unit_hash(pair_key(record["sentence1"], record["sentence2"]))
      if u < v and not has_dev:
        split = "validation"
      elif v <= u < v + t and not has_test:
        split = "test"
      else:
        split = "train"
      splits[split].append((f"train/{number}", record))
    for name, split, present in ((dev_file, "validation", has_dev),
                                 (test_file, "test", has_test)):
      if present:
        splits[split] = [(f"{name}/{number}", record) for number, record in read(name, True)]
    if clue and "test.json" in has:
      splits["unlabelled"] = [(f"test.json/{record['id']}", record)
                              for _, record in read("test.json", False)]
    return splits, _common.Tally(), _rule(ext, has_dev, has_test, v, t)


def _rule(ext: str, has_dev: bool, has_test: bool, v: float, t: float) -> str:
  clue = ext == "json"
  carved = (f"carved from train.{ext} by sha256 unit hash u of the sorted, normalised sentence "
            f"pair: ")
  parts = []
  parts.append(f"validation = dev.{ext}" if has_dev else f"validation u < {v:g}")
  parts.append(f"test = test.{ext}" if has_test else f"test {v:g} <= u < {v + t:g}")
  rule = carved + ", ".join(parts) + ", train otherwise"
  if clue:
    rule += "; unlabelled = test.json (label -1), absent without it"
  return rule


def _label(value: Any, where: str) -> int:
  if isinstance(value, bool) or value not in _LABELS:
    raise SourceError(f"{where}: the label must be 0 or 1, got {value!r}")
  return _LABELS[value]


def _sentence(value: Any, field: str, where: str) -> str:
  if not isinstance(value, str):
    raise SourceError(f"{where}: {field} must be a string, got {value!r}")
  if not value.strip():
    raise SourceError(f"{where}: {field} is empty")
  return value


def _json_pair(line: str, where: str, number: int, labelled: bool) -> dict:
  """A record from one line of CLUE's JSON lines (train/dev: labelled; test: with an id)."""
  try:
    obj = json.loads(line)
  except json.JSONDecodeError as e:
    raise SourceError(f"{where}: not a JSON object ({e.msg} at column {e.colno}): "
                      f"{line[:60]!r}") from None
  if not isinstance(obj, dict):
    raise SourceError(f"{where}: expected a JSON object, got {line[:60]!r}")
  for field in ("sentence1", "sentence2", "label" if labelled else "id"):
    if field not in obj:
      raise SourceError(f"{where}: no {field!r} field (it has {sorted(obj)})")
  record = {"sentence1": _sentence(obj["sentence1"], "sentence1", where),
            "sentence2": _sentence(obj["sentence2"], "sentence2", where)}
  if labelled:
    record.update(label=_label(obj["label"], where), id=number)
  else:
    if isinstance(obj["id"], bool) or not isinstance(obj["id"], int):
      raise SourceError(f"{where}: 'id' must be an integer, got {obj['id']!r}")
    record.update(label=-1, id=obj["id"])
  return record


def _tsv_pair(line: str, where: str, number: int, labelled: bool) -> dict:
  """A record from one `text_a TAB text_b TAB label` line (LCQMC, BQ; .txt or .tsv)."""
  del labelled  # every LCQMC file is labelled
  fields = line.split("\t")
  if len(fields) != 3:
    raise SourceError(f"{where}: expected 3 tab-separated fields (text_a, text_b, label), got "
                      f"{len(fields)}: {line[:60]!r}")
  return {"sentence1": _sentence(fields[0], "text_a", where),
          "sentence2": _sentence(fields[1], "text_b", where),
          "label": _label(fields[2].strip(), where), "id": number}

