"""IMDB Large Movie Review Dataset v1.0 (Maas et al., 2011) as a tfds builder.

Source layout (archive or extracted tree; the top folder may have any name):
  aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt and aclImdb/train/unsup/<id>_0.txt
Records: {'text': the review exactly as stored (with its <br /> markup, which the tokenizer
strips), 'label': 0 neg / 1 pos / -1 unsupervised, 'rating': from the file name (1-4 neg, 7-10 pos,
0 unsupervised)}. Splits 'train' (25,000), 'test' (25,000), 'unsupervised' (50,000).
Reviews are generated in sorted order (folder, then numeric id); tfds then stores them in its own
deterministic order (a hash of each key), so the same source always gives the same files.
Skipped and counted: empty reviews ('empty_text') and files in a review folder whose names are not
<id>_<rating>.txt ('unrecognised_file'). Errors: a missing folder, a rating outside its folder's
range, invalid UTF-8 (with file and line).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import tensorflow_datasets as tfds

from pipelines.builders import _common
from pipelines.sources import SourceError, decode_utf8, read_files

# (folder inside the root, split, label, allowed ratings)
_FOLDERS = (
    ("train/neg", "train", 0, range(1, 5)),
    ("train/pos", "train", 1, range(7, 11)),
    ("test/neg", "test", 0, range(1, 5)),
    ("test/pos", "test", 1, range(7, 11)),
    ("train/unsup", "unsupervised", -1, range(0, 1)),
)
_FOLDER_INFO = {folder: (split, label, ratings) for folder, split, label, ratings in _FOLDERS}
# root prefix, review folder, file name
_IN_FOLDER = re.compile(r"^(.*?)(train/pos|train/neg|train/unsup|test/pos|test/neg)/([^/]+)$")
_FILE_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")


class Imdb(_common.ZooBuilder, skip_registration=True):
  """IMDB reviews with labels and ratings; splits train, test, unsupervised."""

  name = "imdb"
  BUILDER_CONFIGS = [
      tfds.core.BuilderConfig(name="sample", description=(
          "Shipped slice: 2,000 train (1,000 pos + 1,000 neg), 1,000 test, 300 unsupervised.")),
      tfds.core.BuilderConfig(name="full", description="All 100,000 reviews."),
  ]
  DESCRIPTION = "Large Movie Review Dataset v1.0: movie reviews labelled positive or negative."
  HOMEPAGE = "https://ai.stanford.edu/~amaas/data/sentiment/"
  CITATION = ("Maas, Daly, Pham, Huang, Ng and Potts. Learning Word Vectors for Sentiment "
              "Analysis. ACL 2011.")

  def _features(self):
    return tfds.features.FeaturesDict({
        "text": tfds.features.Text(),
        "label": np.int32,
        "rating": np.int32,
    })

  def read_source(self, path: Path):
    files = read_files(path, lambda rel: _IN_FOLDER.match(rel) is not None)
    root = _common.single_root(
        (_IN_FOLDER.match(rel)[1] for rel in files), path,
        "review files in the aclImdb layout ({train,test}/{pos,neg}/, train/unsup/)")
    tally = _common.Tally()
    found = {folder: [] for folder in _FOLDER_INFO}
    for rel, data in files.items():
      _, folder, fname = _IN_FOLDER.match(rel).groups()
      name_match = _FILE_NAME.match(fname)
      if name_match is None:
        tally.add("unrecognised_file", f"{path}:{rel}")
        continue
      review_id, rating = int(name_match[1]), int(name_match[2])
      found[folder].append((review_id, rating, rel, data))
    missing = [root + folder + "/" for folder, reviews in found.items() if not reviews]
    if missing:
      raise SourceError(f"{path}: no reviews (<id>_<rating>.txt files) in {missing}; the source "
                        f"must have the aclImdb layout {{train,test}}/{{pos,neg}}/, train/unsup/")

    splits = {"train": [], "test": [], "unsupervised": []}
    for folder, reviews in found.items():
      split, label, ratings = _FOLDER_INFO[folder]
      for review_id, rating, rel, data in sorted(reviews):
        where = f"{path}:{rel}"
        if rating not in ratings:
          raise SourceError(f"{where}: rating {rating} does not belong in {folder}/ (expected "
                            f"{ratings.start}-{ratings.stop - 1})")
        text = decode_utf8(data, where)
        if not text.strip():
          tally.add("empty_text", where)
          continue
        key = f"{folder}/{review_id}_{rating}"
        splits[split].append((key, {"text": text, "label": label, "rating": rating}))
    return splits, tally, "the archive's own train/test/unsup folders"
