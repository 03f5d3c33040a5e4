import pytest

from pipelines import text


def test_imdb_strips_markup_and_splits_punctuation():
  review = "I didn't like it.<br /><br />2/10!! <i>Really</i>"
  assert text.imdb_tokenize(review) == [
      "i", "didn't", "like", "it", ".", "2", "/", "10", "!", "!", "really"]


def test_imdb_apostrophes_quotes_and_unicode():
  assert text.imdb_tokenize("'Cult' films: rock'n'roll, dogs' O'Brien’s") == [
      "'", "cult", "'", "films", ":", "rock'n'roll", ",", "dogs", "'", "o'brien’s"]
  # A lone "<" is text, not a tag; character references are unescaped; non-ASCII letters are word
  # characters; underscores are split off one by one.
  assert text.imdb_tokenize("<3 < 90 min &#345;ek Café__x") == [
      "<", "3", "<", "90", "min", "řek", "café", "_", "_", "x"]


def test_imdb_accepts_bytes_and_rejects_bad_utf8():
  assert text.imdb_tokenize("Fine.<br />".encode()) == ["fine", "."]
  with pytest.raises(ValueError, match="not valid UTF-8"):
    text.imdb_tokenize(b"ok \xff\xfe")
  with pytest.raises(ValueError, match="expected str or bytes"):
    text.imdb_tokenize(17)


@pytest.mark.parametrize("name", ["imdb", "fra_eng", "couplet"])
@pytest.mark.parametrize("empty", ["", "   \t\n", b""])
def test_empty_text_gives_no_tokens(name, empty):
  assert text.TOKENIZERS[name](empty) == []


def test_imdb_markup_only_gives_no_tokens():
  assert text.imdb_tokenize("<br /><br />") == []


def test_fra_eng_d2l_examples():
  assert text.fra_eng_tokenize("Go.") == ["go", "."]
  assert text.fra_eng_tokenize("Va\u202f!") == ["va", "!"]
  assert text.fra_eng_tokenize("Va !") == ["va", "!"]
  assert text.fra_eng_tokenize("Cours\u202f!") == ["cours", "!"]
  assert text.fra_eng_tokenize("Qui\xa0?") == ["qui", "?"]
  assert text.fra_eng_tokenize("Wait...") == ["wait", ".", ".", "."]
  assert text.fra_eng_tokenize("J'ai froid, Tom.") == ["j'ai", "froid", ",", "tom", "."]
  # Only , . ! ? are split off; other punctuation stays attached, as in d2l.
  assert text.fra_eng_tokenize("Well-done: «Bravo»") == ["well-done:", "«bravo»"]
  assert text.fra_eng_preprocess("Hi.  Run!") == "hi .  run !"


def test_fra_eng_detokenize_removes_space_before_punctuation():
  assert text.fra_eng_detokenize(["va", "!"]) == "va!"
  assert text.fra_eng_detokenize(["j'ai", "froid", ",", "tom", "."]) == "j'ai froid, tom."
  assert text.fra_eng_detokenize([]) == ""
  sentence = "Il a dit : « Non ! »"
  tokens = text.fra_eng_tokenize(sentence)
  assert text.fra_eng_tokenize(text.fra_eng_detokenize(tokens)) == tokens


def test_couplet_characters():
  assert text.couplet_tokenize("晚 风 摇 树 树 还 挺 ") == ["晚", "风", "摇", "树", "树", "还", "挺"]
  assert text.couplet_tokenize("丹枫 江") == ["丹", "枫", "江"]
  assert text.couplet_tokenize("晚 风".encode()) == ["晚", "风"]
  assert text.couplet_detokenize(["晚", "风", "摇"]) == "晚风摇"


def test_word_bigrams_pair_each_word_with_the_one_before():
  assert text.word_bigrams(["not", "good", "."]) == ["<s> not", "not good", "good ."]
  assert text.word_bigrams(["fine"]) == ["<s> fine"]
  assert text.word_bigrams([]) == []
