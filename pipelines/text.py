"""Tokenizers and detokenizers for the tasks: pure functions from text to a list of tokens.

Every tokenizer accepts `str` or UTF-8 `bytes` (tfds hands text fields back as bytes) and returns a
`list[str]`. Undecodable bytes raise a `ValueError` that shows the start of the text.

Empty text: a text that is empty or holds only whitespace (or, for IMDB, only markup) tokenizes to
the empty list `[]`; no tokenizer raises for it. The task layer (`pipelines.tasks`) counts such
examples, reports them and leaves them out, so nothing is dropped silently and no zero-length
sequence reaches a model.

IMDB (`imdb_tokenize`): markup is removed and the text is split into lowercased words and single
punctuation marks.
  1. HTML tags are replaced by a space: `<br />`, `<em>`, `</i>`, `<SPOILER>` ... (a `<` followed by
     a letter or `/`, up to the next `>` with no `<` in between; a lone `<` as in `<3` or `< 90` is
     text, not a tag). Then character references such as `&#345;` and `&amp;` are unescaped.
  2. The text is lowercased.
  3. Tokens are the matches of `[^\\W_]+(?:['’][^\\W_]+)*|\\S`, in order:
     - a word is a run of letters and digits (any script), and may contain apostrophes between such
       runs, so contractions and names stay whole: "don't", "it's", "o'brien", "rock'n'roll";
     - every other non-space character is a token of its own: "!!" -> "!", "!"; "7/10" -> "7", "/",
       "10"; a quote or trailing apostrophe is split off ("'cult'" -> "'", "cult", "'"); "_" too.
  Keeping contractions whole matches the bag-of-words vocabulary shipped with the dataset
  (aclImdb/imdb.vocab lists "don't", "it's"), and costs nothing in vocabulary size.

fra-eng (`fra_eng_tokenize`): d2l's preprocessing, exactly (d2l 10.5, `MTFraEng._preprocess` and
`_tokenize`): U+202F (narrow no-break space) and U+00A0 (no-break space) become a space, the text is
lowercased, a space is inserted before each of `, . ! ?` whose previous character is not a space,
and the text is split on single spaces with empty pieces dropped (surrounding whitespace is
stripped first, which d2l gets from cutting the file at newlines and tabs). So "Go." -> ["go", "."],
"Va !" -> ["va", "!"], "Cours\u202f!" -> ["cours", "!"], "Wait..." -> ["wait", ".", ".", "."].
Other punctuation (apostrophes, hyphens, quotes) stays attached, as in d2l: "j'ai" is one token.

Couplets (`couplet_tokenize`): the lines are stored with their characters separated by spaces, so
the tokens are the whitespace-separated pieces; a piece longer than one character (a line that was
not spaced) is split into its characters, so a token is always one character.

Chinese question pairs (`chinese_chars_tokenize`): the text is NFKC-normalised (full-width letters,
digits and punctuation become ASCII, the ideographic space a space) and lowercased; then every run
of ASCII letters and digits is one token, and every other character that is not whitespace is a
token of its own (a Chinese character, a punctuation mark, each '*' of AFQMC's masked amounts);
whitespace only separates. So "花呗还款2000元，VIP用户***" -> ["花", "呗", "还", "款", "2000", "元",
",", "vip", "用", "户", "*", "*", "*"] (the full-width comma becomes ",").

Bigrams (`word_bigrams`): the feature a bag-of-n-grams model adds to each word, its pair with the
word before it, as one string "previous word": the first word pairs with the start marker "<s>",
so the list is exactly as long as the words and position t of it belongs to word t:
["not", "good", "."] -> ["<s> not", "not good", "good ."]. Words never contain spaces, so the
pair is unambiguous.

Detokenizers turn tokens back into the text that BLEU (sacrebleu) scores: `fra_eng_detokenize`
joins with spaces and removes the space before `, . ! ?`; `couplet_detokenize` joins the characters
with nothing between them. Score a hypothesis against a reference that went through the same
tokenize -> detokenize round trip, so that both are normalised alike.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Callable, Sequence

Text = str | bytes

_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_IMDB_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|\S")
_FRA_ENG_PUNCT = ",.!?"
_SPACE_BEFORE_PUNCT = re.compile(r" ([,.!?])")
_CHINESE_CHARS_TOKEN = re.compile(r"[a-z0-9]+|\S")


def as_text(text: Text) -> str:
  """Returns `text` as `str`, decoding UTF-8 bytes; a ValueError shows the start of bad bytes."""
  if isinstance(text, str):
    return text
  if isinstance(text, (bytes, bytearray)):
    try:
      return bytes(text).decode("utf-8")
    except UnicodeDecodeError as e:
      raise ValueError(f"text is not valid UTF-8 ({e.reason} at byte {e.start}): "
                       f"{bytes(text[:60])!r}") from None
  raise ValueError(f"text: expected str or bytes, got {type(text).__name__}")


def imdb_tokenize(text: Text) -> list[str]:
  """Lowercased words and punctuation of a review, markup removed (rules in the module docstring).

  Example: "I didn't like it.<br /><br />2/10!" -> ["i", "didn't", "like", "it", ".", "2", "/",
  "10", "!"].
  """
  text = html.unescape(_TAG.sub(" ", as_text(text)))
  return _IMDB_TOKEN.findall(text.lower())


def fra_eng_preprocess(text: Text) -> str:
  """d2l's fra-eng preprocessing: no-break spaces -> space, lowercase, space before , . ! ?."""
  text = as_text(text).replace("\u202f", " ").replace("\xa0", " ").lower()
  out = []
  for i, char in enumerate(text):
    if i > 0 and char in _FRA_ENG_PUNCT and text[i - 1] != " ":
      out.append(" ")
    out.append(char)
  return "".join(out)


def fra_eng_tokenize(text: Text) -> list[str]:
  """d2l's fra-eng tokens: the preprocessed text split on single spaces, empty pieces dropped.

  Surrounding whitespace (e.g. a line's trailing "\r\n") is stripped first; d2l never sees any,
  because it cuts the file at newlines and tabs before tokenizing.
  """
  return [token for token in fra_eng_preprocess(text).strip().split(" ") if token]


def fra_eng_detokenize(tokens: Sequence[str]) -> str:
  """Joins fra-eng tokens for BLEU: ["va", "!"] -> "va!", ["go", "."] -> "go."."""
  return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(tokens))


def couplet_tokenize(text: Text) -> list[str]:
  """The characters of a couplet line: "晚 风 摇 树" -> ["晚", "风", "摇", "树"]."""
  pieces = as_text(text).split()
  if max(map(len, pieces), default=1) == 1:  # the stored layout: one character a piece
    return pieces
  return [char for piece in pieces for char in piece]


def couplet_detokenize(tokens: Sequence[str]) -> str:
  """Joins couplet characters with nothing between them: ["晚", "风"] -> "晚风"."""
  return "".join(tokens)


def chinese_chars_tokenize(text: Text) -> list[str]:
  """Characters, with ASCII words and numbers whole (rules in the module docstring).

  Example: "借呗VIP额度 ２０００元？" -> ["借", "呗", "vip", "额", "度", "2000", "元", "?"].
  """
  return _CHINESE_CHARS_TOKEN.findall(unicodedata.normalize("NFKC", as_text(text)).lower())


BIGRAM_START = "<s>"


def word_bigrams(words: Sequence[str]) -> list[str]:
  """Each word with the one before it: ["not", "good"] -> ["<s> not", "not good"] (same length)."""
  return [f"{prev} {word}" for prev, word in zip([BIGRAM_START, *words[:-1]], words)]


def imdb_detokenize(tokens: Sequence[str]) -> str:
  """Joins IMDB tokens with single spaces (for display; IMDB is never scored with BLEU)."""
  return " ".join(tokens)


TOKENIZERS: dict[str, Callable[[Text], list[str]]] = {
    "imdb": imdb_tokenize,
    "fra_eng": fra_eng_tokenize,
    "couplet": couplet_tokenize,
    "question_pairs": chinese_chars_tokenize,
}
DETOKENIZERS: dict[str, Callable[[Sequence[str]], str]] = {
    "imdb": imdb_detokenize,
    "fra_eng": fra_eng_detokenize,
    "couplet": couplet_detokenize,
}
