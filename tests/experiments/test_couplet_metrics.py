"""The couplet's form rules and metrics, on hand-made lines and on real couplets of the shipped
sample (pipelines/samples/couplet_sample.tar.gz), with every value computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments.couplet import form
from experiments.couplet import metrics
from experiments.couplet.form import FormOptions


def test_char_bleu_known_values():
  # One wrong character of 7: n-gram precisions 6/7, 5/6, 4/5, 3/4, no brevity penalty.
  assert metrics.char_bleu(["一二三四五六七"], ["一二三四五六八"]) == pytest.approx(
      100 * (6 / 7 * 5 / 6 * 4 / 5 * 3 / 4) ** 0.25, abs=1e-9)
  # Every n-gram matches but the corpus is 11 characters against 14: BP = exp(1 - 14 / 11).
  assert metrics.char_bleu(["春风得意马蹄疾", "一日看尽"],
                           ["春风得意马蹄疾", "一日看尽长安花"]) == pytest.approx(
                               100 * math.exp(1 - 14 / 11), abs=1e-9)
  assert metrics.char_bleu(["一 二 三 四"], ["一二三四"]) == pytest.approx(100.0)  # spaces ignored
  with pytest.raises(ValueError, match="same length"):
    metrics.char_bleu(["一"], ["一", "二"])


def test_bleu1_and_bleu2_known_values():
  assert metrics.char_bleu(["一二三四五六七"], ["一二三四五六八"], max_order=1) == pytest.approx(
      100 * 6 / 7, abs=1e-9)
  assert metrics.char_bleu(["一二三四五六七"], ["一二三四五六八"], max_order=2) == pytest.approx(
      100 * (6 / 7 * 5 / 6) ** 0.5, abs=1e-9)
  # 春风 / 秋月 / 夏日长 against 春雨 / 秋月 / 夏日长久: unigrams 1 + 2 + 3 = 6 of 7 match,
  # bigrams 0 + 1 + 2 = 3 of 4; the hypotheses have 7 characters, the references 8.
  hyps, refs = ["春风", "秋月", "夏日长"], ["春雨", "秋月", "夏日长久"]
  brevity = math.exp(1 - 8 / 7)
  assert metrics.char_bleu(hyps, refs, max_order=1) == pytest.approx(100 * brevity * 6 / 7,
                                                                     abs=1e-9)
  assert metrics.char_bleu(hyps, refs, max_order=2) == pytest.approx(
      100 * brevity * (6 / 7 * 3 / 4) ** 0.5, abs=1e-9)


def test_oracle_lines_pick_the_hypothesis_closest_to_the_reference():
  first, second = [list("秋雨连绵"), list("春风化雨")], [list("一二"), list("一三")]
  tied = [list("甲乙"), list("丙丁")]
  picked = metrics.oracle_lines([first, second, tied], ["春风得意", "一三", "戊己"])
  # 春风化雨 shares 春, 风 and 春风 with 春风得意 (秋雨连绵 nothing); 一三 is the reference itself;
  # neither 甲乙 nor 丙丁 shares a character with 戊己, so the decoder's first stays.
  assert picked == [first[1], second[1], tied[0]]
  assert picked[0] is first[1]  # the hypothesis itself, not a copy
  # BLEU-2 decides, not BLEU-1: against 一二三四五, 五四三二一 has every character but no bigram
  # (BLEU-2 35.4 with sacrebleu's smoothing), 一二三七八 three characters and two bigrams (54.8).
  scrambled, prefix = list("五四三二一"), list("一二三七八")
  assert metrics.oracle_lines([[scrambled, prefix]], ["一二三四五"]) == [prefix]
  assert metrics.oracle_lines([[prefix, scrambled]], ["一二三四五"], max_order=1) == [scrambled]
  with pytest.raises(ValueError, match=r"nbest\[1\] has no hypotheses"):
    metrics.oracle_lines([first, []], ["春风得意", "一三"])
  with pytest.raises(ValueError, match="same length"):
    metrics.oracle_lines([first], ["春风得意", "一三"])


def test_length_and_copy_rates_known_values():
  uppers = [list("春风，得意"), list("夏日长"), ["<unk>", "水"], list("山高")]
  hyps = [list("春雨，失意"), list("秋月"), ["<unk>", "山"], list("水深")]
  # Copies: 春 and 意 in the first pair (the aligned comma is not one); <unk> never counts.
  assert [form.same_position_copies(h, u) for h, u in zip(hyps, uppers)] == [2, 0, 0, 0]
  assert metrics.exact_length_rate(hyps, uppers) == 3 / 4
  assert metrics.copy_rate(hyps, uppers) == 1 / 4
  # Aligned content positions: 4 (comma left out) + 2 (min length) + 1 (<unk> left out) + 2.
  assert metrics.copied_char_rate(hyps, uppers) == 2 / 9
  assert metrics.line_text(["<unk>", "山"]) == metrics.UNK_CHAR + "山"
  scores = metrics.score_lines(hyps, uppers, ["春雨，失意", "秋月", "□山", "水深"])
  # The references equal the hypotheses, so they share every form rate.
  rates = {"punct_match_rate": 1.0, "unwanted_repeat_rate": 0.0, "repeat_pattern_rate": 1.0,
           "copy_rate": 0.25, "copied_chars": 2 / 9}
  assert scores.as_dict("_free") == pytest.approx({
      "bleu_free": 100.0, "bleu1_free": 100.0, "bleu2_free": 100.0, "exact_length_free": 0.75,
      **{f"{name}_free": value for name, value in rates.items()}, "count_free": 4.0,
      **{f"ref_{name}": value for name, value in rates.items()}}, abs=1e-9)


def test_form_rules_on_single_lines():
  assert form.is_punct("，") and form.is_punct("？") and form.is_punct("……")
  assert not form.is_punct("春") and not form.is_punct("<unk>") and not form.is_punct("<eos>")
  assert form.is_content("春") and not form.is_content("，") and not form.is_content("<unk>")
  assert form.punct_positions(list("正正反反，反反正正，反正一样")) == {4: "，", 9: "，"}
  assert form.repeat_pairs(list("风风雨雨")) == {(0, 1), (2, 3)}
  assert form.repeat_pattern_matches(list("年年岁岁"), list("风风雨雨"))
  assert not form.repeat_pattern_matches(list("年岁岁年"), list("风风雨雨"))
  # Unknown characters and marks never form a pair; a pair of the upper line's is wanted.
  assert form.repeat_pairs(["<unk>", "，", "<unk>", "，"]) == set()
  assert not form.has_unwanted_repeat(list("年年岁月"), list("风风雨雨"))
  assert form.has_unwanted_repeat(list("年月年月"), list("风风雨雨"))
  # A missing position holds no mark; a different mark is a mismatch.
  assert not form.punct_matches(list("春风"), list("春，风"))
  assert not form.punct_matches(list("何花？城"), list("斯地，我"))
  assert FormOptions(exact_length=False).name == "free"
  assert FormOptions().name == "length"
  assert FormOptions(False, True, True).name == "punct+nocopy"
  assert FormOptions(force_punct=True, no_copy=True).name == "length+punct+nocopy"
  assert FormOptions(keep_pattern=True, no_copy=True).name == "length+nocopy+pattern"


def test_pattern_constraints_tie_repeats_to_their_first_occurrence():
  tied, distinct = form.pattern_constraints(list("游珊瑚岛，岛岛金枝玉叶"))
  np.testing.assert_array_equal(tied, [-1, -1, -1, -1, -1, 3, 3, -1, -1, -1, -1])
  np.testing.assert_array_equal(distinct, [1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1])
  assert tied.dtype == np.int32 and distinct.dtype == bool
  tied, distinct = form.pattern_constraints(list("正正反反，反反正正，反正一样"))
  np.testing.assert_array_equal(tied, [-1, 0, -1, 2, -1, 2, 2, 0, 0, -1, 2, 0, -1, -1])
  # Unknown characters equal nothing: never tied, but distinct from the rest like any character.
  tied, distinct = form.pattern_constraints(["<unk>", "<unk>", "春", "，", "春"])
  np.testing.assert_array_equal(tied, [-1, -1, -1, -1, 2])
  np.testing.assert_array_equal(distinct, [1, 1, 1, 0, 1])


# Five couplets of the shipped sample (upper, reference) with 9, 11, 13, 14 and 15 characters, and
# a hand-made lower line for each with known faults.
SAMPLE = [
    ("精进修行，为人师表", "严持戒律，息世讥嫌", "勤勤苦练，为国为民"),
    ("游珊瑚岛，岛岛金枝玉叶", "住翡翠庭，庭庭火树银花", "登泰山顶。顶顶青松翠柏"),
    ("斯地赞嘉清，我非才子也磨墨", "何花开隽永？城有书香不谢春", "春风吹大地，我爱山水山花美"),
    ("正正反反，反反正正，反正一样", "是是非非，非非是是，是非不分", "来来往往，往往来来，往来匆忙"),
    ("佳品聚茶庄，佳传山韵，杏香天井", "盛情留贵客，盛誉岩红，云雾芦溪", "好茶香满院，好水"),
]


def test_form_rates_on_real_couplets():
  uppers, refs, hyps = ([list(line) for line in lines] for lines in zip(*SAMPLE))
  # Exact length: all but the last line (8 of 15 characters).
  assert metrics.exact_length_rate(hyps, uppers) == 4 / 5
  # Punctuation: a full stop for a comma (2), a missing second comma (5).
  assert [form.punct_matches(h, u) for h, u in zip(hyps, uppers)] == [
      True, False, True, True, False]
  assert metrics.punct_match_rate(hyps, uppers) == 3 / 5
  # Repetition: 勤勤 and 为..为 (1), 山..山 (3) where the upper line repeats nothing. Line 2 repeats
  # 顶 exactly where the upper line repeats 岛, line 4 mirrors 正/反 with 来/往, line 5 好 as 佳.
  assert form.repeat_pairs(hyps[0]) == {(0, 1), (5, 7)}
  assert form.repeat_pairs(hyps[1]) == form.repeat_pairs(uppers[1]) == {(3, 5), (3, 6), (5, 6)}
  assert [form.has_unwanted_repeat(h, u) for h, u in zip(hyps, uppers)] == [
      True, False, True, False, False]
  assert metrics.unwanted_repeat_rate(hyps, uppers) == 2 / 5
  assert metrics.repeat_pattern_rate(hyps, uppers) == 3 / 5
  # Copies: 为 at position 5 (1), 我 at position 6 (3).
  assert [form.same_position_copies(h, u) for h, u in zip(hyps, uppers)] == [1, 0, 1, 0, 0]
  assert metrics.copy_rate(hyps, uppers) == 2 / 5
  # Aligned content positions: 8 + 10 + 12 + 12 + 7 (the first 8 of line 5 hold one comma).
  assert metrics.copied_char_rate(hyps, uppers) == 2 / 49

  # The references: a question mark for a comma (3); 是非 against the upper line's 反正 at
  # positions 10 and 11 (4) repeats 是 at (0, 10) ... where the upper line has 正 and 反.
  assert metrics.punct_match_rate(refs, uppers) == 4 / 5
  assert [form.has_unwanted_repeat(r, u) for r, u in zip(refs, uppers)] == [
      False, False, False, True, False]
  assert metrics.repeat_pattern_rate(refs, uppers) == 4 / 5
  assert metrics.copy_rate(refs, uppers) == 0.0

  scores = metrics.score_lines(hyps, uppers, [line for _, line, _ in SAMPLE])
  texts = ["".join(h) for h in hyps]
  references = [line for _, line, _ in SAMPLE]
  assert scores.bleu == metrics.char_bleu(texts, references)
  assert scores.bleu1 == metrics.char_bleu(texts, references, max_order=1)
  assert scores.bleu2 == metrics.char_bleu(texts, references, max_order=2)
  assert (scores.exact_length, scores.punct_match_rate, scores.unwanted_repeat_rate,
          scores.repeat_pattern_rate, scores.copy_rate, scores.copied_chars, scores.count) == (
              4 / 5, 3 / 5, 2 / 5, 3 / 5, 2 / 5, 2 / 49, 5)
  assert scores.reference == {"ref_punct_match_rate": 4 / 5, "ref_unwanted_repeat_rate": 1 / 5,
                              "ref_repeat_pattern_rate": 4 / 5, "ref_copy_rate": 0.0,
                              "ref_copied_chars": 0.0}
  assert metrics.CoupletScores.names("_free")[:3] == ("bleu_free", "bleu1_free", "bleu2_free")
  with pytest.raises(ValueError, match="hypotheses and references must have the same length"):
    metrics.score_lines(hyps, uppers, references[:3])


def test_decoding_constraints_of_a_real_upper_line():
  # A vocabulary without 表: the upper line 精进修行，为人师表 is read with "<unk>" last.
  vocab = ["<pad>", "<unk>", "<bos>", "<eos>", "，", "精", "进", "修", "行", "为", "人", "师", "？",
           "。"]
  punct_ids = form.punctuation_ids(vocab)
  np.testing.assert_array_equal(punct_ids, [4, 12, 13])
  upper = ["精", "进", "修", "行", "，", "为", "人", "师", "<unk>"]
  ids = [5, 6, 7, 8, 4, 9, 10, 11, 1, 3]  # eos last, ignored
  copies = [5, 6, 7, 8, -1, 9, 10, 11, -1]  # neither the comma nor <unk> is a copy
  forced, banned = form.decoding_constraints(upper, ids, punct_ids, force_punct=True,
                                             no_copy=True)
  assert forced.dtype == banned.dtype == np.int32
  np.testing.assert_array_equal(forced, [-1, -1, -1, -1, 4, -1, -1, -1, -1])
  marks = np.tile([4, 12, 13], (9, 1))
  marks[4] = -1  # the comma's own position bans no mark
  np.testing.assert_array_equal(banned, np.concatenate([np.array(copies)[:, None], marks], 1))

  forced, banned = form.decoding_constraints(upper, ids, punct_ids, force_punct=False,
                                             no_copy=True)
  np.testing.assert_array_equal(forced, np.full(9, -1))
  np.testing.assert_array_equal(banned, np.array(copies)[:, None])
  forced, banned = form.decoding_constraints(upper, ids, punct_ids, force_punct=True,
                                             no_copy=False)
  np.testing.assert_array_equal(forced, [-1, -1, -1, -1, 4, -1, -1, -1, -1])
  np.testing.assert_array_equal(banned, np.concatenate([np.full((9, 1), -1), marks], 1))
  with pytest.raises(ValueError, match="upper_ids: expected at least 9 ids"):
    form.decoding_constraints(upper, ids[:5], punct_ids, force_punct=True, no_copy=True)
