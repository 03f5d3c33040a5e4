"""SentencePiece subwords trained on the sample's training split: cased text in and out, no unk."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from pipelines import datasets, subword, tasks
from pipelines.tasks import read_records
from pipelines.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID

VOCAB_SIZE = 1999  # an odd ceiling the sample reaches


def _normalised(text: str) -> str:
  """What SentencePiece's nmt_nfkc gives back: NFKC (no-break spaces -> space), spaces collapsed."""
  return " ".join(unicodedata.normalize("NFKC", text).split())


@pytest.fixture(scope="module")
def splits(prepared_samples):
  data_dir, _ = prepared_samples
  return {split: read_records(datasets.load("fra_eng", split, data_dir=data_dir))
          for split in ("train", "validation")}


@pytest.fixture(scope="module")
def subwords(splits):
  return subword.SubwordVocab.train([r[f] for r in splits["train"] for f in ("en", "fr")],
                                    vocab_size=VOCAB_SIZE)


def test_special_ids_size_and_metadata(subwords):
  assert len(subwords) == VOCAB_SIZE
  assert subwords.tokens[:4] == list(SPECIALS)
  assert [subwords.token_to_id(t) for t in SPECIALS] == [PAD_ID, UNK_ID, BOS_ID, EOS_ID]
  assert subwords.tokens[4:6] == ["<0x00>", "<0x01>"]  # the byte pieces follow
  assert subwords.metadata == subword.expected_metadata(VOCAB_SIZE) == {
      "tokenizer": "sentencepiece", "model_type": "unigram", "vocab_size": VOCAB_SIZE,
      "character_coverage": 1.0, "byte_fallback": True, "normalization": "nmt_nfkc"}


def test_every_dev_text_comes_back_cased_with_its_typography_and_no_unk(subwords, splits):
  texts = [r[f].decode() for r in splits["validation"] for f in ("en", "fr")]
  assert len(texts) == 1006
  for text in texts:
    pieces = subwords.tokenize(text)
    assert UNK_ID not in subwords.encode(pieces)
    assert subwords.detokenize(pieces) == _normalised(text)
  quote = "« Quel âge as-tu ? » « Seize ans. »"  # French quotes and spaces before ? and »
  assert subwords.detokenize(subwords.tokenize(quote)) == quote
  assert subwords.detokenize(subwords.tokenize("Cours\u202f!")) == "Cours !"
  assert subwords.tokenize("") == subwords.tokenize(" \t ") == []


def test_unseen_characters_fall_back_to_bytes(subwords):
  text = "Tom ☃ 日本"
  pieces = subwords.tokenize(text)
  snowman = [f"<0x{b:02X}>" for b in "☃".encode()]
  start = pieces.index(snowman[0])
  assert pieces[start:start + 3] == snowman == ["<0xE2>", "<0x98>", "<0x83>"]
  ids = subwords.encode(pieces, add_bos=True, add_eos=True, as_numpy=True)
  assert ids.dtype == np.int32 and ids[0] == BOS_ID and ids[-1] == EOS_ID
  assert UNK_ID not in ids.tolist()
  assert subwords.decode(ids) == pieces  # bos and eos left out
  assert subwords.decode([*ids.tolist(), PAD_ID], strip_special=False)[-2:] == ["<eos>", "<pad>"]
  assert subwords.detokenize(subwords.decode(ids)) == text


def test_training_is_deterministic_and_files_round_trip(subwords, splits, tmp_path):
  texts = [r[f] for r in splits["train"] for f in ("en", "fr")]
  assert subword.SubwordVocab.train(texts, vocab_size=VOCAB_SIZE) == subwords
  path = tmp_path / "joint.model"
  subwords.save(path)
  back = subword.SubwordVocab.load(path)
  assert back == subwords and back.tokens == subwords.tokens and back.metadata == subwords.metadata
  assert tasks.read_vocab_file(path) == subwords

  never = lambda: pytest.fail("a model trained with these settings was trained again")  # noqa
  again, how = subword.load_or_train(str(path), never, vocab_size=VOCAB_SIZE)
  assert again == subwords and how == f"loaded from {path}"
  other, how = subword.load_or_train(str(path), lambda: texts[:4000], vocab_size=777)
  assert how == f"retrained (the file at {path} was trained with other vocab_size)"
  assert len(other) == 777 and subword.SubwordVocab.load(path) == other
  path.write_bytes(b"not a model")
  with pytest.raises(ValueError, match="joint.model is not a SentencePiece model"):
    subword.SubwordVocab.load(path)
  _, how = subword.load_or_train(str(path), lambda: texts[:4000], vocab_size=777)
  assert how.startswith("retrained (subword model ") and "is not a SentencePiece model" in how
  with pytest.raises(ValueError, match="missing.model does not exist"):
    subword.SubwordVocab.load(tmp_path / "missing.model")


def test_bad_arguments_name_what_was_wrong(subwords):
  with pytest.raises(ValueError, match="vocab_size must be an integer >= 261, got 200"):
    subword.SubwordVocab.train(["Go."], vocab_size=200)
  with pytest.raises(ValueError, match="no non-blank text to train on"):
    subword.SubwordVocab.train(["", "  "], vocab_size=300)
  with pytest.raises(ValueError, match="got a string 'Va !'"):
    subwords.encode("Va !")
  with pytest.raises(ValueError, match=r"ids must lie in \[0, 1999\)"):
    subwords.decode([5, 1999])
  with pytest.raises(ValueError, match="tokenizer: expected one of"):
    tasks.TranslationOptions(tokenizer="bpe")
  with pytest.raises(ValueError, match="vocab_size must be an integer >= 261"):
    tasks.TranslationOptions(vocab_size=100)


def test_translation_data_with_subwords_on_the_sample(prepared_samples):
  data_dir, _ = prepared_samples
  data = tasks.TranslationData.load(data_dir=data_dir, tokenizer="sentencepiece",
                                    vocab_size=VOCAB_SIZE, max_src_len=29, max_tgt_len=31)
  name = f"fra_eng_sentencepiece_{VOCAB_SIZE}.model"
  assert data.vocab_names() == (name,) and data.src_vocab is data.tgt_vocab
  assert data.report["vocab"][name].startswith("trained and saved to ")
  for split in ("train", "dev", "test"):
    assert data.report[split]["unk_rate"] == {"src": 0.0, "tgt": 0.0}
  # The references are the raw French texts; an output equal to the reference's pieces
  # detokenizes to it (normalised).
  dev = data.splits["dev"]
  refs, sources = data.references("dev"), data.sources("dev")
  assert len(refs) == len(sources) == data.num_examples("dev") == 503
  assert any("\u202f" in ref for ref in refs)  # kept as Tatoeba writes it
  whole = [i for i in range(len(refs)) if dev.sequences["tgt_out"].lengths[i] < 31]
  assert len(whole) > 490
  for i in whole:
    assert data.target_text(dev.sequences["tgt_out"][i]) == _normalised(refs[i])
    assert data.source_text(dev.sequences["src"][i]) == _normalised(sources[i])
  again = tasks.TranslationData.load(data_dir=data_dir, tokenizer="sentencepiece",
                                     vocab_size=VOCAB_SIZE, max_src_len=29, max_tgt_len=31)
  assert again.report["cache"].startswith("loaded from")
  assert again.src_vocab == data.src_vocab and again.sources("dev") == sources
  np.testing.assert_array_equal(again.splits["test"].sequences["src"].flat,
                                data.splits["test"].sequences["src"].flat)
