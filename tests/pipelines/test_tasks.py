import dataclasses
import json

import numpy as np
import pytest

from pipelines import tasks, text
from pipelines.vocab import BOS_ID, EOS_ID, UNK_ID, Vocab

WORDS = "good bad film plot actor great awful fine dull moving".split()


def _reviews(n, seed, label_of=lambda i: i % 2):
  rng = np.random.default_rng(seed)
  out = []
  for i in range(n):
    words = rng.choice(WORDS, size=int(rng.integers(1, 14)))
    out.append({"text": ("<br />".join(words) + "!").encode(), "label": label_of(i),
                "rating": 1})
  return out


def _assert_next_batches(iterator, expected_batches):
  for expected in expected_batches:
    got = next(iterator)
    assert got.keys() == expected.keys()
    for key in expected:
      np.testing.assert_array_equal(got[key], expected[key])


def _imdb(tmp_path=None, **options):
  train = _reviews(41, 0)
  train[4] = {"text": "<br /><br /> ", "label": 0, "rating": 2}  # empty after markup removal
  test = _reviews(13, 1)
  test[2] = {"text": "Zyzzyva quokka!", "label": 1, "rating": 9}  # "!" is known, the words not
  test[5] = {"text": "Zyzzyva quokka", "label": 1, "rating": 9}  # all unknown
  return tasks.SentimentData.from_records(train, test, max_len=9, boundaries=(3, 6, 9),
                                          min_freq=1, dev_fraction=0.25, vocab_dir=tmp_path,
                                          **options)


def test_sentiment_splits_report_and_batches(tmp_path):
  data = _imdb(tmp_path)
  # 40 kept train reviews: 10 (5 per label) become dev, 30 stay train.
  assert [data.num_examples(s) for s in ("train", "dev", "test")] == [30, 10, 13]
  assert data.report["train"]["skipped_empty"] == 1 and data.report["train"]["records"] == 31
  assert data.report["test"]["all_unknown"] == {"tokens": 1}
  assert data.splits["dev"].scalars["label"].tolist().count(1) == 5
  # Every review with more than 9 tokens is cut (words, "<br />" gone, "!" at the end).
  lengths = data.splits["test"].sequences["tokens"].lengths
  assert lengths.max() == 9 and data.report["test"]["truncated"]["tokens"] > 0
  batch = next(iter(data.eval_batches("test", batch_size=5)))
  assert set(batch) == {"tokens", "lengths", "label", "index", "weight"}
  assert batch["tokens"].dtype == np.int32 and batch["tokens"].shape[0] == 5
  assert "imdb: imdb_vocab.json built and saved" in data.summary()


def test_sentiment_encoding_is_exact():
  data = _imdb()
  test = data.splits["test"]
  assert test.sequences["tokens"][5].tolist() == [UNK_ID, UNK_ID]
  assert data.vocab.decode(test.sequences["tokens"][2]) == ["<unk>", "<unk>", "!"]
  first = _reviews(13, 1)[0]["text"].decode().replace("<br />", " ").lower().split()
  tokens = first[:-1] + [first[-1][:-1], "!"]
  assert data.vocab.decode(test.sequences["tokens"][0]) == tokens[:9]


def test_dev_split_is_deterministic_and_vocab_reloads_identically(tmp_path):
  first = _imdb(tmp_path)
  second = _imdb(tmp_path)
  assert second.report["vocab"]["imdb_vocab.json"].startswith("loaded from")
  assert second.vocab == first.vocab
  for split in ("train", "dev", "test"):
    a, b = first.splits[split], second.splits[split]
    np.testing.assert_array_equal(a.sequences["tokens"].flat, b.sequences["tokens"].flat)
    np.testing.assert_array_equal(a.scalars["label"], b.scalars["label"])
  # Other options make the stored vocabulary stale: it is rebuilt, and says why.
  third = tasks.SentimentData.from_records(_reviews(41, 0), _reviews(13, 1), max_len=9,
                                           boundaries=(3, 6, 9), min_freq=2, dev_fraction=0.25,
                                           vocab_dir=tmp_path)
  assert "rebuilt" in third.report["vocab"]["imdb_vocab.json"]
  assert "min_freq" in third.report["vocab"]["imdb_vocab.json"]
  assert Vocab.load(tmp_path / "imdb_vocab.json") == third.vocab


def test_sentiment_bigrams_are_aligned_with_the_words_and_cached(tmp_path):
  data = _imdb(tmp_path, bigrams=True, bigram_min_freq=1)
  assert data.report["vocab"]["imdb_bigram_vocab.json"].startswith("built and saved")
  assert Vocab.load(tmp_path / "imdb_bigram_vocab.json") == data.bigram_vocab
  for split in ("train", "dev", "test"):
    seqs = data.splits[split].sequences
    np.testing.assert_array_equal(seqs["bigrams"].lengths, seqs["tokens"].lengths)
  test = data.splits["test"]
  # Each position holds its word's pair with the word before it, from the kept (first 9) words.
  words = data.vocab.decode(test.sequences["tokens"][0])
  expected = [pair if pair in data.bigram_vocab else "<unk>" for pair in text.word_bigrams(words)]
  assert data.bigram_vocab.decode(test.sequences["bigrams"][0], strip_special=False) == expected
  assert expected.count("<unk>") < len(expected) - 1  # most pairs of this review were seen
  # "<s> zyzzyva" and "zyzzyva quokka" were never seen in train; "quokka !" neither.
  assert test.sequences["bigrams"][2].tolist() == [UNK_ID] * 3
  assert data.report["test"]["all_unknown"] == {"tokens": 1, "bigrams": 2}
  batch = next(iter(data.eval_batches("test", batch_size=5)))
  assert set(batch) == {"tokens", "lengths", "bigrams", "label", "index", "weight"}
  assert batch["bigrams"].shape == batch["tokens"].shape
  assert np.all((batch["bigrams"] == 0) == (batch["tokens"] == 0))
  # The cache keeps the bigrams and their vocabulary.
  path = data.save_cache(tmp_path)
  back, why = tasks.SentimentData._from_cache(str(tmp_path), dataclasses.asdict(data.options))
  assert why == "" and back.report["cache"] == f"loaded from {path}"
  assert back.bigram_vocab == data.bigram_vocab
  _assert_next_batches(back.eval_batches("test", 5), list(data.eval_batches("test", 5)))
  # Without the option nothing about bigrams appears.
  plain = _imdb()
  assert plain.bigram_vocab is None and "bigrams" not in plain.splits["train"].sequences


def test_corrupt_vocab_file_names_the_path(tmp_path):
  (tmp_path / "imdb_vocab.json").write_text("{not json", encoding="utf-8")
  with pytest.raises(ValueError, match="imdb_vocab.json is corrupt"):
    _imdb(tmp_path)


def test_cache_round_trip_and_staleness(tmp_path):
  data = _translation(vocab_dir=tmp_path)
  path = data.save_cache(tmp_path)
  back, why = tasks.TranslationData._from_cache(str(tmp_path), dataclasses.asdict(data.options))
  assert why == "" and back.report["cache"] == f"loaded from {path}"
  assert back.src_vocab == data.src_vocab and back.tgt_vocab == data.tgt_vocab
  assert back.references("dev") == data.references("dev")
  assert {k: v for k, v in back.report.items() if k not in ("vocab", "cache")} == {
      k: v for k, v in data.report.items() if k != "vocab"}
  for split in ("train", "dev"):
    for field in ("src", "tgt_in", "tgt_out"):
      np.testing.assert_array_equal(back.splits[split].sequences[field].flat,
                                    data.splits[split].sequences[field].flat)
  _assert_next_batches(back.eval_batches("dev", 3), list(data.eval_batches("dev", 3)))
  # Other options: another file. A changed vocabulary or a damaged file: not used, and why.
  other = dict(dataclasses.asdict(data.options), min_freq=2)
  assert tasks.TranslationData._from_cache(str(tmp_path), other) == (None, "none yet")
  Vocab.build([["x"]], metadata={"other": 1}).save(tmp_path / "fra_eng_en_vocab.json")
  assert "changed since" in tasks.TranslationData._from_cache(str(tmp_path),
                                                              dataclasses.asdict(data.options))[1]
  with open(path, "r+b") as f:
    f.truncate(100)
  assert "unreadable" in tasks.TranslationData._from_cache(str(tmp_path),
                                                           dataclasses.asdict(data.options))[1]


def test_a_cache_with_other_vocabularies_is_not_used(tmp_path):
  class SharedVocab(tasks.TranslationData):  # same file name of the cache, one vocabulary
    shared_vocab = True

  data = _translation(vocab_dir=tmp_path)
  data.save_cache(tmp_path)
  back, why = SharedVocab._from_cache(str(tmp_path), dataclasses.asdict(data.options))
  assert back is None and why.endswith("names the vocabularies ['fra_eng_en_vocab.json', "
                                        "'fra_eng_fr_vocab.json'], not "
                                        "['fra_eng_shared_vocab.json']")


def test_options_are_checked(tmp_path):
  with pytest.raises(ValueError, match=r"unknown options \['max_length'\]"):
    _imdb(max_length=3)
  with pytest.raises(ValueError, match=r"unknown options \['max_length'\]"):
    tasks.SentimentData.load(data_dir=tmp_path, max_length=3)
  assert not list(tmp_path.iterdir())  # refused before anything was prepared
  with pytest.raises(ValueError, match="must end at the maximum length 9"):
    tasks.SentimentData.from_records([], [], max_len=9, boundaries=(3, 8))
  with pytest.raises(ValueError, match="max_tgt_len must be an integer >= 2"):
    tasks.TranslationOptions(max_tgt_len=1)
  assert tasks.CoupletOptions().boundaries == {"src": (8, 12, 18, 33), "tgt": (8, 12, 18, 33)}
  assert tasks.TranslationOptions(max_src_len=20).boundaries == {"src": (5, 10, 15, 20),
                                                                 "tgt": (8, 12, 16, 24)}
  assert tasks.SentimentOptions(max_len=100).boundaries == (25, 50, 75, 100)


def test_a_task_must_name_its_own_options_class(tmp_path):
  class Forgetful(tasks.Seq2SeqData):
    task, fields = "forgetful", ("left", "right")

  message = r"^Forgetful declares no options_class \(the options dataclass every TaskData"
  with pytest.raises(TypeError, match=message):
    Forgetful.from_records({"train": [{"left": "a b", "right": "c"}]})
  with pytest.raises(TypeError, match=message):
    Forgetful._from_cache(str(tmp_path), {})
  with pytest.raises(TypeError, match="^TaskData declares no options_class"):
    tasks.TaskData({})
  with pytest.raises(TypeError, match="^Seq2SeqData declares no options_class"):
    tasks.Seq2SeqData.load()
  # Each task has its own; none falls back to another task's options.
  assert [cls.options_class for cls in (tasks.SentimentData, tasks.TranslationData,
                                        tasks.CoupletData)] == [
      tasks.SentimentOptions, tasks.TranslationOptions, tasks.CoupletOptions]
  with pytest.raises(ValueError, match=r"unknown options \['max_len'\]"):
    tasks.TranslationData.from_records({"train": []}, max_len=9)


def test_sentiment_train_iterator_resumes():
  data = _imdb()
  it = data.train_batches(batch_size=4, seed=7)
  for _ in range(9):  # past the first epoch of 7 batches
    next(it)
  state = json.loads(json.dumps(it.get_state()))
  want = [next(it) for _ in range(3)]
  again = data.train_batches(batch_size=4, seed=0)
  again.set_state(state)
  _assert_next_batches(again, want)


def test_sentiment_bad_records():
  with pytest.raises(ValueError, match="labels must be 0 or 1"):
    tasks.SentimentData.from_records(_reviews(7, 0, label_of=lambda i: -1), _reviews(3, 1),
                                     min_freq=1)
  with pytest.raises(ValueError, match="has no field 'text'"):
    tasks.SentimentData.from_records([{"review": "x", "label": 0}], _reviews(3, 1))
  with pytest.raises(ValueError, match="unknown split 'validation'"):
    _imdb().eval_batches("validation", 4)


FRA = [("Go.", "Va !"), ("Run!", "Cours\u202f!"), ("Who?", "Qui ?"), ("I see.", "Je vois."),
       ("Wait for me, Tom.", "Attends-moi, Tom."), ("", "Vide."),
       ("It is a very long English sentence indeed.", "C'est une très longue phrase."),
       ("I see Tom.", "Je vois Tom."), ("Go home.", "Rentre."), ("Tom runs.", "Tom court.")]


def _translation(**options):
  records = [{"en": en, "fr": fr} for en, fr in FRA]
  return tasks.TranslationData.from_records({"train": records[:8], "dev": records[8:]},
                                            max_src_len=6, max_tgt_len=5,
                                            boundaries={"src": (3, 6), "tgt": (3, 5)},
                                            min_freq=1, **options)


def test_translation_ids_are_exact():
  data = _translation()
  assert data.report["train"]["skipped_empty"] == 1
  assert data.report["train"]["truncated"] == {"src": 2, "tgt": 1}
  train = data.splits["train"]
  src, tgt_in, tgt_out = (train.sequences[k] for k in ("src", "tgt_in", "tgt_out"))
  # "Go." -> go . <eos>; "Va !" -> <bos> va ! and va ! <eos>.
  assert data.src_vocab.decode(src[0], strip_special=False) == ["go", ".", "<eos>"]
  assert data.tgt_vocab.decode(tgt_in[0], strip_special=False) == ["<bos>", "va", "!"]
  assert data.tgt_vocab.decode(tgt_out[0], strip_special=False) == ["va", "!", "<eos>"]
  assert tgt_in[1][0] == BOS_ID and tgt_out[1][-1] == EOS_ID
  # Truncation keeps the first max - 1 tokens, then adds eos / bos.
  long = 5  # the long sentence, after the empty pair was skipped
  assert data.src_vocab.decode(src[long], strip_special=False) == [
      "it", "is", "a", "very", "long", "<eos>"]
  assert data.tgt_vocab.decode(tgt_out[long]) == ["c'est", "une", "très", "longue"]
  assert data.references("dev") == ["rentre.", "tom court."]
  with pytest.raises(ValueError, match="no reference texts"):
    data.references("train")


def test_translation_batches_and_text():
  data = _translation()
  batches = list(data.eval_batches("dev", batch_size=3))
  assert len(batches) == 1
  (batch,) = batches
  assert set(batch) == {"src", "src_len", "tgt_in", "tgt_out", "tgt_len", "index", "weight"}
  assert batch["weight"].tolist() == [1, 1, 0]
  assert batch["src"].shape == (3, 6) and batch["tgt_in"].shape == (3, 5)
  i = int(np.flatnonzero(batch["index"] == 1)[0])
  assert data.target_text(batch["tgt_out"][i]) == "tom <unk>."
  assert data.source_text(batch["src"][i]) == "tom <unk>."
  assert batch["tgt_len"][i] == 4 and batch["src_len"][i] == 4  # three tokens + eos / bos
  rev = _translation(reverse=True)
  assert rev.src_vocab.decode(rev.splits["train"].sequences["src"][0]) == ["va", "!"]


def test_couplets_shared_vocab_and_unequal_pairs():
  upper = ["晚 风 摇 树", "丹 枫 江 冷", "闲 来", "一 二 三", "春 风", "  "]
  lower = ["晨 露 润 花", "白 露 山 寒", "静 坐", "四 五", "秋 雨", "春"]
  records = [{"upper": u, "lower": l} for u, l in zip(upper, lower)]
  data = tasks.CoupletData.from_records({"train": records, "test": records[:2]}, max_src_len=4,
                                        max_tgt_len=5, min_freq=1)
  assert data.src_vocab is data.tgt_vocab
  report = data.report["train"]
  assert (report["skipped_empty"], report["skipped_unequal"], report["kept"]) == (1, 1, 4)
  assert report["truncated"] == {"src": 2, "tgt": 0}
  batch = next(iter(data.eval_batches("test", batch_size=2)))
  order = np.argsort(batch["index"])
  assert data.target_text(batch["tgt_out"][order[0]]) == "晨露润花"
  assert data.references("test") == ["晨露润花", "白露山寒"]
  assert batch["tgt_len"][order].tolist() == [5, 5] and batch["src_len"][order].tolist() == [4, 4]
  rev = tasks.CoupletData.from_records({"train": records}, min_freq=1, reverse=True)
  assert rev.src_vocab == data.src_vocab
  assert rev.target_text(rev.splits["train"].sequences["tgt_out"][0]) == "晚风摇树"


# ---- the shipped samples, prepared once per module in a temporary data_dir

@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
  return tmp_path_factory.mktemp("zoo_data")


@pytest.fixture(scope="module")
def imdb_sample(sample_dir):
  return tasks.SentimentData.load(data_dir=sample_dir)


@pytest.fixture(scope="module")
def fra_eng_sample(sample_dir):
  return tasks.TranslationData.load(data_dir=sample_dir)


@pytest.fixture(scope="module")
def couplet_sample(sample_dir):
  return tasks.CoupletData.load(data_dir=sample_dir)


def test_sample_imdb_epoch_has_four_shapes_and_reloads_its_vocab(imdb_sample, sample_dir):
  data = imdb_sample
  assert data.report["dev"]["kept"] == round(0.1 * (data.report["dev"]["kept"]
                                                     + data.report["train"]["kept"]))
  it = data.train_batches(batch_size=45, seed=0)
  shapes, seen = set(), []
  for _ in range(it.batches_per_epoch):
    batch = next(it)
    shapes.add(batch["tokens"].shape)
    seen += batch["index"].tolist()
  assert shapes == {(45, 64), (45, 128), (45, 192), (45, 256)}
  assert len(seen) == len(set(seen)) == data.num_examples("train") // 45 * 45
  assert data.report["cache"].startswith("saved to")
  again = tasks.SentimentData.load(data_dir=sample_dir)
  assert again.report["cache"].startswith("loaded from")
  assert again.report["vocab"]["imdb_vocab.json"].startswith("loaded from")
  assert again.report["test"] == data.report["test"]
  assert again.vocab == data.vocab
  np.testing.assert_array_equal(again.splits["test"].sequences["tokens"].flat,
                                data.splits["test"].sequences["tokens"].flat)


def test_sample_fra_eng_resumes_across_an_epoch_boundary(fra_eng_sample):
  data = fra_eng_sample
  it = data.train_batches(batch_size=250, seed=3)
  for _ in range(it.batches_per_epoch - 2):
    next(it)
  state = json.loads(json.dumps(it.get_state()))
  want = [next(it) for _ in range(4)]
  assert it.epoch == 1
  resumed = data.train_batches(batch_size=250, seed=3)
  resumed.set_state(state)
  _assert_next_batches(resumed, want)
  # The d2l preprocessing on real text: no no-break spaces survive, punctuation stands alone.
  for tokens in map(text.fra_eng_tokenize, data.references("dev")):
    assert not any("\u202f" in t or "\xa0" in t for t in tokens)
    assert all(t in ",.!?" or t[-1] not in ",.!?" for t in tokens)


def test_sample_couplet_eval_over_three_processes_covers_everything_once(couplet_sample):
  data = couplet_sample
  n = data.num_examples("test")
  real = []
  for p in range(3):
    for batch in data.eval_batches("test", batch_size=33, process_index=p, process_count=3):
      assert batch["src"].shape[0] == 11
      assert np.array_equal(batch["src_len"], batch["tgt_len"])  # equal-length couplet lines
      real += batch["index"][batch["weight"] == 1].tolist()
  assert sorted(real) == list(range(n))
  refs = data.references("test")
  assert all(len(ref) + 1 == length for ref, length in zip(
      refs, data.splits["test"].sequences["tgt_out"].lengths))
