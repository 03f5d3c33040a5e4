import hashlib
import json

import numpy as np
import pytest

from pipelines import vocab as vocab_lib
from pipelines.sources import SourceError
from pipelines.vocab import UNK_ID, Vocab, read_bert_vocab

CORPUS = [["the", "cat", "sat"], ["the", "dog", "sat", "!"], ["a", "cat", "the", "<eos>"]]


def test_specials_and_deterministic_order():
  v = Vocab.build(CORPUS)
  # Frequency descending (the 3, cat 2, sat 2), ties by token; literal specials are not counted.
  assert v.tokens == ["<pad>", "<unk>", "<bos>", "<eos>", "the", "cat", "sat", "!", "a", "dog"]
  assert (v.pad_id, v.unk_id, v.bos_id, v.eos_id) == (0, 1, 2, 3)
  assert len(v) == 10
  assert v.token_to_id("cat") == 5 and v.token_to_id("zebra") == 1
  assert v.count("the") == 3 and v.count("zebra") == 0
  assert Vocab.build(reversed(CORPUS)) == v


def test_min_freq_and_max_size():
  v = Vocab.build(CORPUS, min_freq=2)
  assert v.tokens[4:] == ["the", "cat", "sat"]
  v = Vocab.build(CORPUS, max_size=6)
  assert v.tokens[4:] == ["the", "cat"] and len(v) == 6
  assert v.metadata == {"min_freq": 1, "max_size": 6}
  with pytest.raises(ValueError, match="min_freq"):
    Vocab.build(CORPUS, min_freq=0)
  with pytest.raises(ValueError, match="max_size"):
    Vocab.build(CORPUS, max_size=3)


def test_encode_decode_round_trip():
  v = Vocab.build(CORPUS)
  ids = v.encode(["the", "dog", "sat"], add_bos=True, add_eos=True)
  assert ids == [2, 4, 9, 6, 3]
  arr = v.encode(["the", "dog"], as_numpy=True)
  assert arr.dtype == np.int32 and arr.tolist() == [4, 9]
  assert v.decode(ids) == ["the", "dog", "sat"]
  assert v.decode(ids, strip_special=False) == ["<bos>", "the", "dog", "sat", "<eos>"]
  # Stops at the first eos and drops padding.
  assert v.decode(np.array([4, 5, 3, 6, 0, 0], np.int32)) == ["the", "cat"]
  assert v.decode([4, 0, 5]) == ["the", "cat"]
  for tokens in CORPUS[:2]:
    assert v.decode(v.encode(tokens)) == tokens


def test_all_unknown_text_is_a_run_of_unk():
  v = Vocab.build(CORPUS)
  assert v.encode(["zebra", "okapi", "gnu"]) == [1, 1, 1]
  assert v.decode([1, 1, 1]) == ["<unk>"] * 3
  assert v.encode([]) == []


def test_bad_arguments():
  v = Vocab.build(CORPUS)
  with pytest.raises(ValueError, match="tokenize it first"):
    v.encode("the cat")
  with pytest.raises(ValueError, match=r"ids must lie in \[0, 10\)"):
    v.decode([4, 10])
  with pytest.raises(ValueError, match=r"ids must lie in \[0, 10\)"):
    v.decode([-1])
  with pytest.raises(ValueError, match="1-D"):
    v.decode([[4]])
  with pytest.raises(ValueError, match="repeated"):
    Vocab(["x", "<unk>"])


def test_save_load_round_trip_unicode(tmp_path):
  v = Vocab.build([["晚", "风", "晚"], ["café", "'"]], metadata={"task": "couplet", "n": 2})
  path = tmp_path / "vocab.json"
  v.save(path)
  w = Vocab.load(path)
  assert w == v and w.tokens == v.tokens and w.metadata == v.metadata
  assert w.encode(["风", "café"]) == v.encode(["风", "café"])
  assert json.loads(path.read_text(encoding="utf-8"))["version"] == vocab_lib.VERSION
  assert "晚" in path.read_text(encoding="utf-8")
  assert list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("content, message", [
    (b"{\"format\": \"attention-zoo-vocab\", \"vers", "corrupt"),
    (b"\xff\xfe\x00", "corrupt"),
    (b"[1, 2, 3]", "is not an attention-zoo-vocab file"),
    (b"{\"format\": \"something-else\"}", "is not an attention-zoo-vocab file"),
    (b"{\"format\": \"attention-zoo-vocab\", \"version\": 99}", "format version 99"),
])
def test_load_corrupt_or_foreign_file_names_the_path(tmp_path, content, message):
  path = tmp_path / "bad.json"
  path.write_bytes(content)
  with pytest.raises(ValueError, match=message) as info:
    Vocab.load(path)
  assert str(path) in str(info.value)


def test_load_rejects_inconsistent_contents(tmp_path):
  good = Vocab.build(CORPUS).to_json()
  for broken in (dict(good, tokens=good["tokens"][1:], counts=good["counts"][1:]),
                 dict(good, counts=good["counts"][:-1]),
                 dict(good, tokens=good["tokens"] + ["the"], counts=good["counts"] + [1])):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(ValueError, match="is corrupt"):
      Vocab.load(path)
  with pytest.raises(ValueError, match="does not exist"):
    Vocab.load(tmp_path / "missing.json")


def test_read_bert_vocab_maps_bert_specials_to_ours_and_keeps_every_line(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[unused1]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n的\n是\r\n##s\n", encoding="utf-8")
  vocab = read_bert_vocab(path)
  assert vocab.tokens == ["<pad>", "<unk>", "<bos>", "<eos>", "[unused1]", "[MASK]", "的", "是",
                          "##s"]
  assert vocab.encode(["是", "的", "吗"]) == [7, 6, UNK_ID]
  assert vocab.metadata == {"bert_vocab_file": "vocab.txt", "lines": 9,
                            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


@pytest.mark.parametrize("text, message", [
    ("[PAD]\n[UNK]\n[CLS]\n的\n", r"vocab.txt: no \[SEP\] line"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n的\n\n是\n", r"vocab.txt:6: an empty line"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n的\n的\n", r"vocab.txt:6: '的' repeats line 5"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n<pad>\n", r"holds the project's special token '<pad>'"),
])
def test_read_bert_vocab_names_what_is_wrong(tmp_path, text, message):
  path = tmp_path / "vocab.txt"
  path.write_text(text, encoding="utf-8")
  with pytest.raises(SourceError, match=message):
    read_bert_vocab(path)
  with pytest.raises(SourceError, match=r"vocab_file .*missing.txt: cannot be read \(No such"):
    read_bert_vocab(tmp_path / "missing.txt")
