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


@pytest.mark.parametrize("name", ["imdb", "fra_eng", "couplet", "question_pairs"])
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


def test_chinese_chars_one_token_per_character_ascii_runs_whole():
  tok = text.chinese_chars_tokenize
  # AFQMC's masked amounts, numbers with units, Latin words (lowercased).
  assert tok("我的花呗账单是***，还款怎么是***") == [
      "我", "的", "花", "呗", "账", "单", "是", "*", "*", "*", ",", "还", "款", "怎", "么", "是",
      "*", "*", "*"]
  assert tok("借呗VIP用户提额2000元了吗?") == [
      "借", "呗", "vip", "用", "户", "提", "额", "2000", "元", "了", "吗", "?"]
  # NFKC: full-width letters, digits, punctuation and the ideographic space become ASCII.
  assert tok("ＡＢＣ１２３　花呗！") == ["abc123", "花", "呗", "!"]
  # Whitespace separates runs and is dropped; ASCII punctuation is one token each, even in a row.
  assert tok(" iphone 7plus\t5.5寸 ") == ["iphone", "7plus", "5", ".", "5", "寸"]
  assert tok("a_b-c...") == ["a", "_", "b", "-", "c", ".", ".", "."]
  # Other non-ASCII characters are single tokens, letters included.
  assert tok("Café ²€") == ["caf", "é", "2", "€"]
  assert tok("花呗".encode()) == ["花", "呗"]
  assert text.TOKENIZERS["question_pairs"] is tok
  with pytest.raises(ValueError, match="not valid UTF-8"):
    tok(b"\xff")


def test_word_bigrams_pair_each_word_with_the_one_before():
  assert text.word_bigrams(["not", "good", "."]) == ["<s> not", "not good", "good ."]
  assert text.word_bigrams(["fine"]) == ["<s> fine"]
  assert text.word_bigrams([]) == []
