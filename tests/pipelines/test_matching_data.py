"""MatchingData (question pairs): exact ids and batch fields, the vocabulary, the cache, user
files."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines import tasks
from pipelines.batching import Ragged
from pipelines.sources import SourceError
from pipelines.tasks.matching import join_pairs, read_pairs_tsv
from pipelines.vocab import BOS_ID, EOS_ID, UNK_ID


def _record(s1, s2, label):
  return {"sentence1": s1, "sentence2": s2, "label": label}


# Counts over train: 花 3, 呗 3, 借 2 -> ids 呗 4, 花 5 (ties by code point), 借 6.
TRAIN = [_record("花呗", "花呗花", 1), _record("借呗", "借", 0), _record(" ", "花", 1)]
DEV = [_record("花借X", "呗", 1), _record("花", "借", 0)]
TEST = [_record("花花花花呗", "借Z", 1)]


def _data(tmp_path=None, **options):
  options = {"max_len": 3, "boundaries": (1, 3), "min_freq": 1, **options}
  return tasks.MatchingData.from_records({"train": TRAIN, "dev": DEV, "test": TEST},
                                         vocab_dir=tmp_path, **options)


def test_batch_fields_exact():
  data = _data()
  assert data.vocab.tokens[4:] == ["呗", "花", "借"]
  assert (BOS_ID, EOS_ID) == (2, 3)
  assert data.boundaries == {"a": (1, 3), "b": (1, 3), "pair": (5, 9), "segments": (5, 9)}
  # Dev example 1 (lengths 1, 1: bucket 0) is carried up into bucket 1 beside example 0.
  (batch,) = list(data.eval_batches("dev", batch_size=2))
  expected = {
      "a": [[5, 0, 0], [5, 6, UNK_ID]], "a_len": [1, 3],
      "b": [[6, 0, 0], [4, 0, 0]], "b_len": [1, 1],
      "pair": [[2, 5, 3, 6, 3, 0, 0, 0, 0], [2, 5, 6, UNK_ID, 3, 4, 3, 0, 0]],
      "pair_len": [5, 7],
      "segments": [[0, 0, 0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 0, 0]],
      "label": [0, 1], "index": [1, 0], "weight": [1.0, 1.0],
  }
  assert set(batch) == set(expected)
  for key, values in expected.items():
    np.testing.assert_array_equal(batch[key], values, err_msg=key)
    assert batch[key].dtype == (np.float32 if key == "weight" else np.int32), key
  assert data.texts("dev") == [("花借X", "呗"), ("花", "借")]
  assert data.labels("dev").tolist() == [1, 0]


def test_report_truncation_empty_and_vocab_from_train_only():
  data = _data()
  train, test = data.report["train"], data.report["test"]
  assert (train["records"], train["skipped_empty"], train["kept"]) == (3, 1, 2)
  assert data.texts("train") == [("花呗", "花呗花"), ("借呗", "借")]
  # "花花花花呗" keeps its first 3 characters; "Z" (seen in test only) and "X" (dev) are unknown.
  assert test["truncated"] == {"a": 1, "b": 0}
  assert data.splits["test"].sequences["a"][0].tolist() == [5, 5, 5]
  assert data.splits["test"].sequences["b"][0].tolist() == [6, UNK_ID]
  assert "X" not in data.vocab and "Z" not in data.vocab
  assert test["unk_rate"] == {"a": 0.0, "b": 0.5} and test["all_unknown"] == {"a": 0, "b": 0}
  assert data.report["dev"]["unk_rate"]["a"] == pytest.approx(1 / 4)
  assert "dev: 2 of 2 records" in data.summary()


def test_join_pairs_layout():
  a = Ragged.from_sequences([[7, 8], [], [9]])
  b = Ragged.from_sequences([[5], [6, 6], []])
  pair, segments = join_pairs(a, b)
  assert [pair[i].tolist() for i in range(3)] == [[2, 7, 8, 3, 5, 3], [2, 3, 6, 6, 3],
                                                  [2, 9, 3, 3]]
  assert [segments[i].tolist() for i in range(3)] == [[0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 1],
                                                      [0, 0, 0, 1]]
  with pytest.raises(ValueError, match="2 first sentences but 3"):
    join_pairs(a.take(np.arange(2)), b)


def test_pair_order_both_adds_swapped_training_pairs_only():
  given, both = _data(), _data(pair_order="both")
  assert both.vocab == given.vocab  # counted over the pairs as given
  assert both.num_examples("train") == 4 and both.report["train"]["swapped_added"] == 2
  assert both.texts("train") == [("花呗", "花呗花"), ("借呗", "借"), ("花呗花", "花呗"),
                                 ("借", "借呗")]
  assert both.labels("train").tolist() == [1, 0, 1, 0]
  seqs = both.splits["train"].sequences
  assert seqs["a"][2].tolist() == seqs["b"][0].tolist() == [5, 4, 5]
  assert seqs["pair"][3].tolist() == [2, 6, 3, 6, 4, 3]
  assert both.num_examples("dev") == 2 and both.num_examples("test") == 1
  assert "train holds 2 swapped pairs" in both.summary()


def test_encode_pair_is_a_batch_of_one():
  data = _data()
  one = data.encode_pair("花呗", "借呗花借")
  assert set(one) == {"a", "a_len", "b", "b_len", "pair", "pair_len", "segments", "index",
                      "weight"}
  np.testing.assert_array_equal(one["a"], [[5, 4, 0]])
  np.testing.assert_array_equal(one["b"], [[6, 4, 5]])  # cut at max_len 3
  np.testing.assert_array_equal(one["pair"], [[2, 5, 4, 3, 6, 4, 5, 3, 0]])
  np.testing.assert_array_equal(one["segments"], [[0, 0, 0, 0, 1, 1, 1, 1, 0]])
  assert one["pair_len"].tolist() == [8] and one["weight"].tolist() == [1.0]
  with pytest.raises(ValueError, match=r"^sentence2 has no tokens: ' '"):
    data.encode_pair("花呗", " ")
  batches = list(data.pair_batches([("花", "借"), ("呗", "花")], batch_size=4, labels=[1, 0]))
  assert batches[0]["label"].tolist() == [1, 0, 1, 1] and batches[0]["weight"].sum() == 2
  with pytest.raises(ValueError, match=r"pair 1: sentence1 has no tokens"):
    data.encode_pairs([("花", "借"), ("", "花")])


def test_options_are_checked():
  with pytest.raises(ValueError, match=r"tokenizer: expected one of \['chars', 'subword'\]"):
    _data(tokenizer="words")
  with pytest.raises(ValueError, match=r"pair_order: expected one of"):
    _data(pair_order="swapped")
  with pytest.raises(ValueError, match=r"boundaries \(1, 2\) must end at the maximum length 3"):
    _data(boundaries=(1, 2))
  with pytest.raises(ValueError, match=r"unknown options \['max_src_len'\]"):
    _data(max_src_len=4)
  with pytest.raises(ValueError, match=r"dev record 0: the label must be 0 or 1, got -1"):
    tasks.MatchingData.from_records({"train": TRAIN, "dev": [_record("花", "呗", -1)]})


def test_vocab_file_reloads_and_options_defaults(tmp_path):
  first = _data(tmp_path)
  second = _data(tmp_path)
  assert second.report["vocab"]["question_pairs_chars_vocab.json"].startswith("loaded from")
  assert second.vocab == first.vocab
  options = tasks.MatchingOptions()
  assert (options.max_len, options.boundaries, options.tokenizer, options.min_freq,
          options.subword_vocab_size, options.pair_order) == (
              48, (12, 24, 36, 48), "chars", 2, 4000, "as_given")


def test_sample_load_cache_round_trip_and_batch_contract(prepared_samples):
  data_dir, reports = prepared_samples
  first = tasks.MatchingData.load(data_dir=data_dir)
  assert first.report["cache"].startswith("saved to")
  counts = reports["question_pairs"].splits
  assert [first.num_examples(s) for s in ("train", "dev", "test")] == [
      counts["train"], counts["validation"], counts["test"]]
  assert len(first.unlabelled_texts) == 600
  second = tasks.MatchingData.load(data_dir=data_dir)
  assert second.report["cache"].startswith("loaded from")
  assert second.unlabelled_texts == first.unlabelled_texts
  for split in ("train", "dev", "test"):
    a, b = first.splits[split], second.splits[split]
    assert set(b.sequences) == {"a", "b", "pair", "segments"}
    for field in a.sequences:
      np.testing.assert_array_equal(a.sequences[field].flat, b.sequences[field].flat)
      np.testing.assert_array_equal(a.sequences[field].lengths, b.sequences[field].lengths)
    np.testing.assert_array_equal(first.labels(split), second.labels(split))
    assert first.texts(split) == second.texts(split)
    assert second.report[split] == first.report[split]
  # Every training batch keeps the contract: pair = [CLS] a [SEP] b [SEP], segments 0 then 1.
  batches = second.train_batches(batch_size=32, seed=0)
  for _ in range(5):
    batch = next(batches)
    width = batch["a"].shape[1]
    assert width in (12, 24, 36, 48) and batch["b"].shape[1] == width
    assert batch["pair"].shape[1] == batch["segments"].shape[1] == 2 * width + 3
    for row in range(32):
      a = batch["a"][row, :batch["a_len"][row]].tolist()
      b = batch["b"][row, :batch["b_len"][row]].tolist()
      pair = [2, *a, 3, *b, 3]
      assert batch["pair"][row].tolist() == pair + [0] * (2 * width + 3 - len(pair))
      assert batch["segments"][row].tolist() == ([0] * (len(a) + 2) + [1] * (len(b) + 1)
                                                 + [0] * (2 * width - len(a) - len(b)))
      text_a, _ = second.texts("train")[batch["index"][row]]
      assert second.vocab.decode(a) == second.tokenize(text_a)[:48] or UNK_ID in a


def test_sample_subword_tokenizer(prepared_samples):
  data_dir, _ = prepared_samples
  data = tasks.MatchingData.load(data_dir=data_dir, tokenizer="subword",
                                 subword_vocab_size=2000)
  assert data.vocab_names() == ("question_pairs_sentencepiece_2000.model",)
  assert data.vocab.tokens[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"]
  one = data.encode_pair("花呗怎么还款", "借呗额度")
  assert one["pair"][0, 0] == 2 and one["pair"][0, one["pair_len"][0] - 1] == 3
  assert data.report["test"]["unk_rate"] == {"a": 0.0, "b": 0.0}  # byte fallback


def test_read_pairs_tsv(tmp_path):
  path = tmp_path / "pairs.tsv"
  path.write_bytes("花呗\t借呗\t1\n怎么还款\t还款\n额度\t提额\t0\r\n".encode())
  assert read_pairs_tsv(path) == [("花呗", "借呗", 1), ("怎么还款", "还款", None),
                                  ("额度", "提额", 0)]
  for content, message in [
      ("花呗\t借呗\n只有一列\n", r"pairs.tsv:2: expected sentence1 TAB sentence2 \[TAB label\], "
                              r"got 1 column"),
      ("花呗\t借呗\t1\t2\n", r"pairs.tsv:1: expected .* got 4 column"),
      ("花呗\t借呗\n\n", r"pairs.tsv:2: expected .* got 1 column"),
      ("花呗\t \t1\n", r"pairs.tsv:1: sentence2 is empty"),
      ("花呗\t借呗\t2\n", r"pairs.tsv:1: the label must be 0 or 1, got '2'"),
  ]:
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SourceError, match=message):
      read_pairs_tsv(path)
  path.write_bytes(b"ok\tok\n\xff\tx\n")
  with pytest.raises(SourceError, match=r"pairs.tsv: line 2: invalid UTF-8"):
    read_pairs_tsv(path)
  with pytest.raises(SourceError, match=r"missing.tsv: cannot be read"):
    read_pairs_tsv(tmp_path / "missing.tsv")


def test_a_bert_vocab_file_is_the_vocabulary_and_an_edited_one_is_reread(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n花\n呗\n借\n", encoding="utf-8")
  data = _data(tmp_path / "files", vocab_file=str(path))
  assert data.vocab.tokens == ["<pad>", "<unk>", "<bos>", "<eos>", "花", "呗", "借"]
  first = data.vocab_names()
  assert (tmp_path / "files" / first[0]).is_file()
  # Every character that is not a line of the file is unknown; the pair keeps [CLS]/[SEP] ids.
  ids = data.encode_pairs([("花额呗", "借呗")]).sequences["pair"]
  assert ids.flat.tolist() == [BOS_ID, 4, UNK_ID, 5, EOS_ID, 6, 5, EOS_ID]
  path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n借\n", encoding="utf-8")
  assert _data(tmp_path / "files", vocab_file=str(path)).vocab_names() != first
  with pytest.raises(ValueError, match=r"vocab_file: a BERT vocabulary is read for tokenizer "
                                       r"'chars', not 'subword'"):
    _data(vocab_file=str(path), tokenizer="subword")
  with pytest.raises(SourceError, match=r"vocab_file: .*nowhere.txt is not a file"):
    _data(vocab_file=str(tmp_path / "nowhere.txt"))
