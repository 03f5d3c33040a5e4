"""IMDB Large Movie Review Dataset v1.0 (Maas et al., 2011) as a tfds builder.

Source layout (archive or extracted tree; the top folder may have any name):
  aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt and aclImdb/train/unsup/<id>_0.txt, and beside
  each review folder its URL list: aclImdb/{train,test}/urls_{pos,neg}.txt, aclImdb/train/
  urls_unsup.txt, whose line i is the IMDB page (http://www.imdb.com/title/tt.../usercomments) of
  the movie that review <i>_* is about.
Records: {'text': the review exactly as stored (with its <br /> markup, which the tokenizer
strips), 'label': 0 neg / 1 pos / -1 unsupervised, 'rating': from the file name (1-4 neg, 7-10 pos,
0 unsupervised), 'id': the review's number in its folder (the <id> of the file name), 'movie': the
IMDB title id of its movie ('tt0453418'), from the URL list}. Splits 'train' (25,000), 'test'
(25,000), 'unsupervised' (50,000); the train and test reviews are of different movies (3,456 and
3,581 of them), up to 30 reviews a movie.
Reviews are generated in sorted order (folder, then numeric id); tfds then stores them in its own
deterministic order (a hash of each key), so the same source always gives the same files.
Skipped and counted: empty reviews ('empty_text') and files in a review folder whose names are not
<id>_<rating>.txt ('unrecognised_file'). Errors: a missing folder or URL list, a review without
its line in the URL list or a line that is not an IMDB title URL, a rating outside its folder's
range, invalid UTF-8 (with file and line).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import tensorflow_datasets as tfds

from pipelines.builders import _common
from pipelines.sources import SourceError, decode_utf8, read_files, split_lines

# (folder inside the root, split, label, allowed ratings, the URL list beside it)
_FOLDERS = (
    ("train/neg", "train", 0, range(1, 5), "train/urls_neg.txt"),
    ("train/pos", "train", 1, range(7, 11), "train/urls_pos.txt"),
    ("test/neg", "test", 0, range(1, 5), "test/urls_neg.txt"),
    ("test/pos", "test", 1, range(7, 11), "test/urls_pos.txt"),
    ("train/unsup", "unsupervised", -1, range(0, 1), "train/urls_unsup.txt"),
)
_FOLDER_INFO = {folder: (split, label, ratings, urls)
                for folder, split, label, ratings, urls in _FOLDERS}
_URL_LISTS = tuple(urls for *_, urls in _FOLDERS)
# root prefix, review folder, file name
_IN_FOLDER = re.compile(r"^(.*?)(train/pos|train/neg|train/unsup|test/pos|test/neg)/([^/]+)$")
_FILE_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")
_URL_LIST = re.compile(r"^(.*?)((?:train|test)/urls_(?:pos|neg|unsup)\.txt)$")
_MOVIE_URL = re.compile(r"^https?://www\.imdb\.com/title/(tt\d+)/usercomments$")


class Imdb(_common.ZooBuilder, skip_registration=True):
  """IMDB reviews with labels, ratings, ids and movies; splits train, test, unsupervised."""

  name = "imdb"
  VERSION = tfds.core.Version("1.1.0")
  RELEASE_NOTES = {
      "1.0.0": "First release.",
      "1.1.0": "Records carry the review's id and its movie's IMDB title id (from urls_*.txt).",
  }
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
        "id": np.int32,
        "movie": tfds.features.Text(),
    })

  def read_source(self, path: Path):
    files = read_files(path, lambda rel: (_IN_FOLDER.match(rel) or _URL_LIST.match(rel))
                       is not None)
    root = _common.single_root(
        (_IN_FOLDER.match(rel)[1] for rel in files if _IN_FOLDER.match(rel)), path,
        "review files in the aclImdb layout ({train,test}/{pos,neg}/, train/unsup/)")
    tally = _common.Tally()
    found = {folder: [] for folder in _FOLDER_INFO}
    for rel, data in files.items():
      in_folder = _IN_FOLDER.match(rel)
      if in_folder is None:  # a URL list
        continue
      _, folder, fname = in_folder.groups()
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
    missing = [root + urls for urls in _URL_LISTS if root + urls not in files]
    if missing:
      raise SourceError(f"{path}: no URL lists {missing}; line i of {{train,test}}/urls_pos.txt "
                        f"(urls_neg.txt, urls_unsup.txt) names the movie of review i of pos/ "
                        f"(neg/, unsup/), and the builder keeps it with every review")

    splits = {"train": [], "test": [], "unsupervised": []}
    for folder, reviews in found.items():
      split, label, ratings, urls = _FOLDER_INFO[folder]
      url_file = f"{path}:{root}{urls}"
      url_lines = split_lines(decode_utf8(files[root + urls], url_file))
      for review_id, rating, rel, data in sorted(reviews):
        where = f"{path}:{rel}"
        if rating not in ratings:
          raise SourceError(f"{where}: rating {rating} does not belong in {folder}/ (expected "
                            f"{ratings.start}-{ratings.stop - 1})")
        text = decode_utf8(data, where)
        if not text.strip():
          tally.add("empty_text", where)
          continue
        movie = _movie(url_lines, review_id, url_file, where)
        key = f"{folder}/{review_id}_{rating}"
        splits[split].append((key, {"text": text, "label": label, "rating": rating,
                                    "id": review_id, "movie": movie}))
    return splits, tally, "the archive's own train/test/unsup folders"


def _movie(url_lines: list[str], review_id: int, url_file: str, review: str) -> str:
  """The IMDB title id on line `review_id` (from 0) of a URL list; SourceError naming the line."""
  if review_id >= len(url_lines):
    raise SourceError(f"{url_file} has {len(url_lines)} lines, but {review} needs line "
                      f"{review_id + 1} (line i + 1 gives the movie of review i)")
  match = _MOVIE_URL.match(url_lines[review_id].strip())
  if match is None:
    raise SourceError(f"{url_file}: line {review_id + 1}: expected an IMDB title URL "
                      f"(http://www.imdb.com/title/tt<digits>/usercomments) for {review}, got "
                      f"{url_lines[review_id]!r}")
  return match[1]
