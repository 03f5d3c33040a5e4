"""Inputs are read as a stream in bounded memory (experiments/console.py), and pair files' headers
and extra columns are recognised.

A line longer than --max-line-bytes is refused with exit status 2 and one line naming the file,
the line and the limit, after reading no more than the limit and one read of the stream (so
/dev/zero is refused at once); a pipe is answered batch by batch as its lines come (the first
answers are written before the input ends); what a command echoes of an input is an excerpt.
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import shutil
import threading
import time
import tracemalloc

import pytest

from experiments import console as console_lib
from experiments.cli import main
from experiments.console import ListConsole
from experiments.console import UsageError
from experiments.matching import cli as matching_cli
from experiments.translation import cli as translation_cli
from pipelines.sources import SourceError
from pipelines.tasks.matching import pair_rows

LEGACY = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "legacy_runs")


class _Counting(io.RawIOBase):
  """A binary stream of `pattern` repeated for ever (or `total` bytes), counting what was read."""

  def __init__(self, pattern: bytes, total: int | None = None):
    self.pattern, self.left, self.read_bytes = pattern, total, 0

  def readable(self) -> bool:
    return True

  def read1(self, size: int = -1) -> bytes:
    count = size if self.left is None else min(size, self.left)
    start = self.read_bytes % len(self.pattern)  # go on where the last read stopped
    chunk = (self.pattern * (count // len(self.pattern) + 2))[start:start + count]
    self.read_bytes += len(chunk)
    if self.left is not None:
      self.left -= len(chunk)
    return chunk


def test_a_long_line_is_refused_naming_file_line_and_limit_before_it_is_read_whole():
  stream = io.BufferedReader(io.BytesIO(b"good\r\nbad\n" + b"x" * 5_000_000 + b"\nlast\n"))
  reader = console_lib.LineReader(stream, "reviews.txt", max_line_bytes=1000)
  lines = iter(reader)
  assert [next(lines), next(lines)] == ["good", "bad"]
  with pytest.raises(UsageError) as info:
    next(lines)
  assert str(info.value) == ("reviews.txt, line 3: longer than 1,000 bytes (--max-line-bytes); "
                             "every line must hold one input of UTF-8 text")
  assert stream.tell() <= 1000 + 2 * console_lib._CHUNK  # pylint: disable=protected-access
  # A line of exactly the limit (its bytes before the newline) is read; a last line needs no
  # newline; a BOM at the start is dropped.
  reader = console_lib.LineReader(io.BytesIO(b"\xef\xbb\xbf" + b"y" * 10 + b"\nz"), "f", 13)
  assert list(reader) == ["y" * 10, "z"]


def test_an_endless_line_is_refused_at_once_and_an_endless_stream_read_in_flat_memory():
  zero = _Counting(b"\0")
  with pytest.raises(UsageError, match=r"^zero, line 1: longer than 1,048,576 bytes"):
    next(iter(console_lib.LineReader(zero, "zero")))
  chunk = console_lib._CHUNK  # pylint: disable=protected-access
  assert zero.read_bytes <= console_lib.MAX_LINE_BYTES + chunk
  endless = _Counting(b"a good movie\n")
  lines = iter(console_lib.LineReader(endless, "pipe"))
  tracemalloc.start()
  for line in itertools.islice(lines, 50_000):
    assert line == "a good movie"
  peak = tracemalloc.get_traced_memory()[1]
  tracemalloc.stop()
  assert endless.read_bytes < 50_001 * 13 + chunk
  assert peak < 1_000_000, peak  # 650 kB were read: none of it is kept


def test_dev_zero_and_a_long_line_exit_2_with_one_line(reference_run, tmp_path, capsys):
  started = time.monotonic()
  assert main(["predict", "toy", "--input-file", "/dev/zero", "--workdir",
               reference_run.workdir]) == 2
  assert time.monotonic() - started < 5
  assert capsys.readouterr().err.splitlines() == [
      "error: /dev/zero, line 1: longer than 1,048,576 bytes (--max-line-bytes); every line "
      "must hold one input of UTF-8 text"]
  path = tmp_path / "inputs.txt"
  path.write_text("1 2\n3 4 5 6 7 8 9 10\n4\n", encoding="utf-8")
  assert main(["predict", "toy", "--input-file", str(path), "--workdir", reference_run.workdir,
               "--max-line-bytes", "8"]) == 2
  captured = capsys.readouterr()
  assert captured.err.splitlines() == [
      f"error: {path}, line 2: longer than 8 bytes (--max-line-bytes); every line must hold one "
      "input of UTF-8 text"]
  assert captured.out.splitlines()[0].startswith("1 2\t")  # what came before was answered
  with pytest.raises(SystemExit) as info:
    main(["predict", "toy", "1", "--workdir", reference_run.workdir, "--max-line-bytes", "0"])
  assert info.value.code == 2
  assert "--max-line-bytes: must be at least 1, got 0" in capsys.readouterr().err


def _pipe_reader() -> tuple[console_lib.LineReader, int]:
  read_end, write_end = os.pipe()
  return console_lib.LineReader(os.fdopen(read_end, "rb"), "standard input"), write_end


def test_batches_answer_what_a_pipe_has_without_waiting_for_a_full_batch():
  reader, write_end = _pipe_reader()
  os.write(write_end, b"one\ntwo\nthr")  # a third line begun, not ended
  args = argparse.Namespace(inputs=console_lib.InputLines(reader))
  batches = console_lib.input_batches(args, size=64)
  got = []
  thread = threading.Thread(target=lambda: got.append(next(batches)), daemon=True)
  thread.start()
  thread.join(10)
  assert got and got[0].inputs == ["one", "two"] and got[0].first_number == 1
  assert not got[0].last and got[0].numbered
  os.write(write_end, b"ee\n" + b"x\n" * 70)
  os.close(write_end)
  rest = list(batches)
  assert [b.inputs for b in rest] == [["three"] + ["x"] * 63, ["x"] * 7]
  assert [(b.first_number, b.last) for b in rest] == [(3, False), (67, True)]
  # Inputs given as a list are one batch; one input alone is not numbered.
  one = list(console_lib.input_batches(argparse.Namespace(inputs=["a"])))
  assert [(b.inputs, b.numbered, b.last) for b in one] == [(["a"], False, True)]


def test_predict_answers_a_pipe_before_it_ends_and_echoes_an_excerpt(tmp_path, monkeypatch):
  workdir = tmp_path / "run"
  shutil.copytree(os.path.join(LEGACY, "sentiment-transformer"), workdir)
  read_end, write_end = os.pipe()
  monkeypatch.setattr("sys.stdin", os.fdopen(read_end, "r", encoding="utf-8"))
  console = ListConsole()
  long = "a really good film " * 600  # 11,400 characters
  answered_before_the_end = []

  def write():
    os.write(write_end, b"what a great film\na waste of time\n")
    started = time.monotonic()
    while not console.lines and time.monotonic() - started < 120:
      time.sleep(0.05)
    answered_before_the_end.append(len(console.lines))
    os.write(write_end, (long + "\n").encode() + b"fine\n" * 70)
    os.close(write_end)

  writer = threading.Thread(target=write, daemon=True)
  writer.start()
  assert main(["predict", "sentiment", "--workdir", str(workdir)], console) == 0
  writer.join(10)
  labels = [line for line in console.lines if not line.startswith("  ")]
  assert answered_before_the_end[0] > 0 and len(labels) == 73
  assert labels[0].split("\t")[2] == "what a great film"
  assert labels[2].split("\t")[2] == f"{long[:60]}... (11,400 characters)"
  assert sum(note.startswith("# ") for note in console.notes) == 1  # the header once
  assert [n.split(" (")[0] for n in console.notes if n.startswith("note: input")] == [
      "note: input 3"]


def test_pair_files_headers_are_skipped_and_extra_columns_named(tmp_path):
  path = tmp_path / "pairs.tsv"
  path.write_text("English\tFrench\nGo .\tVa !\nHi .\tSalut !\n", encoding="utf-8")
  headers = []
  assert translation_cli.read_pairs(str(path), on_header=headers.append) == (
      ["Go .", "Hi ."], ["Va !", "Salut !"])
  assert headers == ["English\tFrench"]
  assert console_lib.header_note(str(path), headers[0]) == (
      f"note: line 1 of {path} ('English\\tFrench') names the columns: read as a header and "
      "skipped")
  path.write_text("Go .\tVa !\nHi .\tSalut !\textra\n", encoding="utf-8")
  with pytest.raises(UsageError, match=rf"^{path}, line 2: expected English<TAB>French \(two "
                     r"fields\), got 3 fields"):
    translation_cli.read_pairs(str(path))
  # Matching: evaluate's rows and predict's pairs.
  rows = list(pair_rows(["text_a\ttext_b\tlabel", "花呗\t借呗\t1"], "m.tsv", headers.append))
  assert rows == [("花呗", "借呗", 1)] and headers[-1] == "text_a\ttext_b\tlabel"
  with pytest.raises(SourceError, match=r"^m.tsv:2: expected .* got 4 column"):
    list(pair_rows(["花呗\t借呗\t1", "a\tb\t1\tmore"], "m.tsv"))
  assert matching_cli.parse_pairs(["Sentence1\tSentence2", "花呗\t借呗\t1"], "p.tsv", 1,
                                  headers.append) == [("花呗", "借呗")]
  assert headers[-1] == "Sentence1\tSentence2"
  with pytest.raises(UsageError, match=r"^line 7 of p.tsv has 4 columns; a pair has at most "
                     r"three"):
    matching_cli.parse_pairs(["花呗\t借呗", "a\tb\t0\tx"], "p.tsv", 6)
  # A header later than line 1 is data (and a label 'label' is refused as one).
  assert matching_cli.parse_pairs(["text_a\ttext_b"], "p.tsv", 2) == [("text_a", "text_b")]


def test_evaluate_pairs_skips_the_header_with_a_note(tmp_path, capsys):
  workdir = tmp_path / "run"
  shutil.copytree(os.path.join(LEGACY, "translation-bahdanau"), workdir)
  path = tmp_path / "pairs.tsv"
  path.write_text("en\tfr\nGo .\tVa !\nI won !\tJ'ai gagné !\n", encoding="utf-8")
  assert main(["evaluate", "--workdir", str(workdir), "--pairs", str(path),
               "--beam-size", "1"]) == 0
  captured = capsys.readouterr()
  assert f"note: line 1 of {path} ('en\\tfr') names the columns: read as a header and skipped" in (
      captured.err.splitlines())
  assert '"lines": 2' in captured.out
