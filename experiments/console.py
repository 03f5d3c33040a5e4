"""The one path everything a command prints goes through.

Results (what a user pipes into a file: translations, labels, JSON) go to standard output, one
`print` per line; notes (headers, where a file was saved, warnings, progress) go to standard
error, so `translate < in.txt > out.txt` leaves only translations in out.txt. Library code never
prints: it returns values, and the command-line modules (experiments/cli.py and each experiment's
cli.py) hand them to a Console. Tests pass a Console over lists to read what a command said.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import select
import stat
import sys
from typing import BinaryIO, Callable, Iterable, Iterator, Sequence, TextIO


class Console:
  """Where a command's lines go.

  Args:
    out: the stream of results (default sys.stdout, looked up at each line so pytest's capture
      works).
    err: the stream of notes (default sys.stderr, the same way).
  """

  def __init__(self, out: TextIO | None = None, err: TextIO | None = None):
    self._out, self._err = out, err

  def print(self, line: str = "") -> None:
    """Writes one line of results to standard output."""
    print(line, file=self._out or sys.stdout, flush=True)

  def note(self, line: str) -> None:
    """Writes one line for the person at the terminal (not a result) to standard error."""
    print(line, file=self._err or sys.stderr, flush=True)

  def error(self, message: str) -> None:
    """Writes 'error: message' to standard error."""
    self.note(f"error: {message}")


class ListConsole(Console):
  """A Console that keeps the lines in two lists (for tests and notebooks)."""

  def __init__(self):
    super().__init__()
    self.lines: list[str] = []
    self.notes: list[str] = []

  def print(self, line: str = "") -> None:
    self.lines.append(line)

  def note(self, line: str) -> None:
    self.notes.append(line)


class UsageError(ValueError):
  """Bad command-line input found by a command (an input text the model cannot read, a count
  below 1): the command line exits with status 2 and the message, like an argparse error."""


EXCERPT_CHARS = 60  # the most of one input a message quotes


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
  """`text` quoted for a message: whole if short, else its first `limit` characters and '...'
  with the length, so that no message repeats a whole long input."""
  if len(text) <= limit:
    return repr(text)
  return f"{text[:limit]!r}... ({len(text):,} characters)"


def cut_notice(number: int, text: str, used: int, total: int, unit: str, setting: str) -> str:
  """The note every experiment writes for an input longer than its model reads.

  The rule (one for every experiment's predict command): such an input is cut to its first
  `used` units (words, tokens, characters) and run; this note on standard error says which input,
  how much of it was used and which setting limits it, quoting no more than `excerpt` does.
  """
  return (f"note: input {number} ({excerpt(text)}) has {total:,} {unit}; this run reads the "
          f"first {used:,} ({setting}), the rest was not used")


_LONG_QUOTE = re.compile(r"'(?:[^'\\]|\\.){%d,}'" % (EXCERPT_CHARS + 1) + "|" +
                         r'"(?:[^"\\]|\\.){%d,}"' % (EXCERPT_CHARS + 1))


def shorten_quotes(message: str) -> str:
  """`message` with every quoted string longer than EXCERPT_CHARS cut to an excerpt, so that an
  error about an input never repeats a whole long input."""
  return _LONG_QUOTE.sub(lambda m: f"{m.group(0)[:EXCERPT_CHARS + 1]}{m.group(0)[0]}... "
                         f"({len(m.group(0)) - 2:,} characters)", message)


def echo(text: str, limit: int = EXCERPT_CHARS) -> str:
  """`text` as a command's output repeats an input (a label's line, a TSV column): whole if
  short, else excerpt's rule without the quotes (its first `limit` characters, '...' and the
  length), so that no output line repeats a whole long input."""
  if len(text) <= limit:
    return text
  return f"{text[:limit]}... ({len(text):,} characters)"


def header_note(name: str, line: str) -> str:
  """The note of a command that skipped the first line of a pair file as its header."""
  return (f"note: line 1 of {name} ({excerpt(line)}) names the columns: read as a header and "
          "skipped")


MAX_LINE_BYTES = 1 << 20  # 1 MiB: the longest line a command reads (--max-line-bytes raises it)
INPUT_BATCH = 64  # the most inputs of a file or pipe a command answers before writing results
_CHUNK = 1 << 16  # the most bytes read from a stream at a time


def line_limit(value: str) -> int:
  """--max-line-bytes's type: a whole number of bytes, at least 1."""
  try:
    number = int(value)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number of bytes, got {value!r}") from None
  if number < 1:
    raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
  return number


def add_line_limit_argument(parser: argparse.ArgumentParser) -> None:
  """--max-line-bytes, on every command that reads lines from a file or standard input."""
  parser.add_argument("--max-line-bytes", type=line_limit, default=MAX_LINE_BYTES, metavar="N",
                      help=f"refuse a line of the input longer than N bytes (default "
                      f"{MAX_LINE_BYTES:,}); a longer one stops the command with status 2 "
                      "before it is held in memory")


def _pollable(stream) -> int | None:
  """The file descriptor of `stream` when reading it may block (a pipe, terminal or socket),
  else None (a regular file, an in-memory stream)."""
  try:
    fd = stream.fileno()
    return None if stat.S_ISREG(os.fstat(fd).st_mode) else fd
  except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
    return None


class LineReader:
  """The lines of a binary stream, read and checked one at a time in memory bounded by
  `max_line_bytes` (plus one read of _CHUNK bytes), however long the stream is.

  Lines end at '\\n' (a '\\r' before it is dropped, a last line needs none); a byte-order mark
  at the start is dropped. Iterating yields each line as str; a line that breaks a rule stops
  the iteration with a UsageError naming `name` and the line:
    - longer than max_line_bytes: found once that many bytes of it are read (so /dev/zero, which
      has no newline, is refused after its first MiB);
    - a NUL byte (a binary file) or bytes that are not UTF-8: naming the column too.
  """

  def __init__(self, stream: BinaryIO, name: str, max_line_bytes: int = MAX_LINE_BYTES,
               closing: bool = False):
    self.name, self.limit = name, max_line_bytes
    self.line_number = 0  # the lines read so far
    self._stream, self._closing = stream, closing
    self._read = getattr(stream, "read1", stream.read)  # read1: what a pipe has, without waiting
    self._fd = _pollable(stream)
    self._buffer = bytearray()
    self._start = 0  # where the unread part of _buffer begins
    self._ended = False

  def __iter__(self) -> Iterator[str]:
    try:
      while (line := self._next_line()) is not None:
        yield line
    finally:
      self.close()

  def close(self) -> None:
    """Closes the stream if this reader opened it."""
    if self._closing:
      self._stream.close()

  def waiting(self) -> bool:
    """True when no whole line has been read ahead and the stream has nothing to read now (a pipe
    or terminal whose writer has not written more): a command then answers what it has rather
    than wait for a full batch. Never blocks."""
    if self._fd is None:
      return False
    while not self._ended and self._buffer.find(b"\n", self._start) == -1:
      if len(self._buffer) - self._start > self.limit:
        return False  # the next line is refused at once
      if not select.select([self._fd], [], [], 0)[0]:
        return True
      self._fill()  # readable: one read that does not block
    return False

  def _fill(self) -> None:
    if self._start:
      del self._buffer[:self._start]
      self._start = 0
    chunk = self._read(_CHUNK)
    if chunk:
      self._buffer += chunk
    else:
      self._ended = True

  def _next_line(self) -> str | None:
    while True:
      end = self._buffer.find(b"\n", self._start)
      if (end if end != -1 else len(self._buffer)) - self._start > self.limit:
        raise UsageError(f"{self.name}, line {self.line_number + 1}: longer than "
                         f"{self.limit:,} bytes (--max-line-bytes); every line must hold one "
                         "input of UTF-8 text")
      if end != -1 or (self._ended and self._start < len(self._buffer)):
        stop = end if end != -1 else len(self._buffer)
        data = bytes(self._buffer[self._start:stop])
        self._start = stop + 1 if end != -1 else stop
        return self._decoded(data)
      if self._ended:
        return None
      self._fill()

  def _decoded(self, data: bytes) -> str:
    """One line's bytes as text (numbered), its BOM and '\\r' dropped; checked for NUL bytes
    and UTF-8."""
    self.line_number += 1
    skipped = 0
    if self.line_number == 1 and data.startswith(b"\xef\xbb\xbf"):
      data, skipped = data[3:], 3
    data = data.removesuffix(b"\r")
    where = f"{self.name}, line {self.line_number}, column"
    nul = data.find(b"\0")
    if nul != -1:
      raise UsageError(f"{where} {nul + skipped + 1}: a NUL byte: this looks like a binary "
                       "file, not UTF-8 text with one input per line")
    try:
      return data.decode("utf-8")
    except UnicodeDecodeError as e:
      raise UsageError(f"{where} {e.start + skipped + 1}: not valid UTF-8 (byte "
                       f"0x{data[e.start]:02x}); save the file as UTF-8 text") from None


def open_lines(path: str, stdin: TextIO | None = None,
               max_line_bytes: int = MAX_LINE_BYTES) -> LineReader:
  """A LineReader over the file `path` ('-': standard input), opened now (it closes the file
  when its lines are read).

  Raises:
    UsageError: the file cannot be opened (naming it and why).
  """
  if path == "-":
    stream = stdin or sys.stdin
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text stream without bytes underneath (tests, notebooks): in memory
      buffer = io.BytesIO(stream.read().encode("utf-8"))
    return LineReader(buffer, "standard input", max_line_bytes)
  try:
    f = open(path, "rb")  # pylint: disable=consider-using-with  (the reader closes it)
  except OSError as e:
    raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
  return LineReader(f, path, max_line_bytes, closing=True)


def read_lines(path: str, stdin: TextIO | None = None,
               max_line_bytes: int = MAX_LINE_BYTES) -> list[str]:
  """Every line of the file `path` ('-': standard input), read by `open_lines` (for commands
  that need them all at once; each line is still bounded by max_line_bytes).

  Raises:
    UsageError: the file cannot be read (naming it and why), a line too long, not UTF-8 text.
  """
  reader = open_lines(path, stdin, max_line_bytes)
  try:
    return list(reader)
  finally:
    reader.close()


class InputLines:
  """A predict command's inputs from a file or standard input, one per line, read as they are
  iterated (a pipe that never ends keeps being answered).

  Raises (while iterating):
    UsageError: what LineReader refuses; an empty line (it cannot be run, and leaving it out
      would shift every later output against its input); no line at all.
  """

  def __init__(self, reader: LineReader):
    self.reader = reader

  def __iter__(self) -> Iterator[str]:
    count = 0
    for line in self.reader:
      if not line.strip():
        raise UsageError(f"line {self.reader.line_number} of {self.reader.name} is empty; "
                         "every line must hold one input")
      count += 1
      yield line
    if not count:
      raise UsageError(f"{self.reader.name} holds no inputs")

  def waiting(self) -> bool:
    """LineReader.waiting."""
    return self.reader.waiting()


_END = object()


def batches(items: Iterable[str], size: int,
            waiting: Callable[[], bool] = lambda: False) -> Iterator[tuple[list[str], bool]]:
  """(batch, last) pairs of `items` in order: a batch is `size` items, or fewer when `waiting()`
  says no more has arrived yet (then the batch is answered at once, and `last` is False as no one
  knows yet); `last` is True on the batch known to be the final one (an item is read ahead to
  know it, never while waiting)."""
  it = iter(items)
  batch: list[str] = []
  ahead = _END
  while True:
    item, ahead = (next(it, _END) if ahead is _END else ahead), _END
    if item is _END:
      if batch:
        yield batch, True
      return
    batch.append(item)
    if waiting():
      yield batch, False
      batch = []
    elif len(batch) >= size:
      ahead = next(it, _END)
      yield batch, ahead is _END
      if ahead is _END:
        return
      batch = []


def input_batches(args: argparse.Namespace,
                  size: int = INPUT_BATCH) -> Iterator[argparse.Namespace]:
  """`args` once per batch of its inputs (a copy whose `inputs` is the batch), for a predict
  command to answer and write batch after batch, in memory that does not grow with the input.

  The copy has `first_number`: the number of its first input (1-based, so notes number inputs as
  one batch would), `last`: whether it is known to be the last batch, and `numbered`: whether
  the command has more than one input (files saved per input, such as heatmaps, are then
  numbered). Inputs given as a list (the INPUT arguments, the explorer) are one batch.
  """
  inputs = args.inputs
  if isinstance(inputs, (list, tuple)):
    size = max(len(inputs), 1)
  number = 1
  for batch, last in batches(inputs, size, getattr(inputs, "waiting", lambda: False)):
    yield argparse.Namespace(**{**vars(args), "inputs": batch, "first_number": number,
                                "last": last,
                                "numbered": not (number == 1 and last and len(batch) == 1)})
    number += len(batch)


@contextlib.contextmanager
def input_errors() -> Iterator[None]:
  """Turns a ValueError raised inside the block by the user's input (an empty text, a line too
  long for the model) into a UsageError, so the command exits with status 2 and the message (its
  quoted inputs cut to an excerpt: `shorten_quotes`)."""
  try:
    yield
  except UsageError as e:
    raise UsageError(shorten_quotes(str(e))) from None
  except ValueError as e:
    raise UsageError(shorten_quotes(str(e))) from None


def run_command(parser: argparse.ArgumentParser,
                body: Callable[[argparse.Namespace, Console], int],
                argv: Sequence[str] | None = None) -> int:
  """Parses `argv` and runs `body(args, Console())`; a UsageError it raises becomes the parser's
  error (status 2 and the message), as a bad flag does. Returns body's exit status."""
  args = parser.parse_args(argv)
  try:
    return body(args, Console())
  except UsageError as e:
    parser.error(str(e))  # exits
    raise  # unreachable: parser.error exits; keeps the return type honest for readers
