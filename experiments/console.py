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
import re
import sys
from typing import Callable, Iterator, Sequence, TextIO


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


def decode_lines(data: bytes, name: str) -> list[str]:
  """The lines of a file's bytes decoded as UTF-8 (a leading byte-order mark dropped).

  Raises:
    UsageError: naming `name`, the line and the column, for bytes that are not UTF-8 or for a NUL
      byte (a binary file).
  """
  def where(offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{name}, line {line}, column {column}"

  nul = data.find(b"\0")
  if nul != -1:
    raise UsageError(f"{where(nul)}: a NUL byte: this looks like a binary file, not UTF-8 text "
                     "with one input per line")
  try:
    text = data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    offset = e.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
    raise UsageError(f"{where(offset)}: not valid UTF-8 (byte 0x{data[offset]:02x}); save the "
                     "file as UTF-8 text") from None
  return text.splitlines()


def read_lines(path: str, stdin: TextIO | None = None) -> list[str]:
  """The UTF-8 lines of the file `path` ('-': standard input), checked by `decode_lines`.

  Raises:
    UsageError: the file cannot be read (naming it and why), or is not UTF-8 text.
  """
  if path == "-":
    stream = stdin or sys.stdin
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text stream without bytes underneath (tests, notebooks)
      return stream.read().splitlines()
    return decode_lines(buffer.read(), "standard input")
  try:
    with open(path, "rb") as f:
      data = f.read()
  except OSError as e:
    raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
  return decode_lines(data, path)


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
