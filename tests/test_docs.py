"""The code in the docs runs: every ```python block of docs/ZOO.md, and the README's example of
using a module (its section "Using a module"; the README's other Python block needs a trained run).

Each block is executed on its own, in a fresh namespace, compiled under a file name that names the
document and the block, and with its lines numbered as in the document, so a failing assert points
at the Markdown line. A block that raises fails its test.
"""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = "docs/ZOO.md"
README = "README.md"
README_SECTION = "## Using a module"
MIN_GUIDE_BLOCKS = 8

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _python_blocks(path: str, section: str | None = None) -> list[tuple[int, str]]:
  """(line of the block's first code line, code) for each ```python block of the file at `path`
  (relative to the repository root); only those under the heading `section` when it is given."""
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    text = f.read()
  if section is not None:
    start = text.index(section)
    following = re.search(r"^#{1,2} ", text[start + len(section):], re.MULTILINE)
    end = len(text) if following is None else start + len(section) + following.start()
  else:
    start, end = 0, len(text)
  blocks = []
  for match in _FENCE.finditer(text, start, end):
    first_line = text.count("\n", 0, match.start(1)) + 1
    blocks.append((first_line, match.group(1)))
  return blocks


def _cases() -> list:
  cases = []
  for path, section in ((GUIDE, None), (README, README_SECTION)):
    for index, (line, code) in enumerate(_python_blocks(path, section)):
      first = code.strip().splitlines()[0] if code.strip() else "(empty)"
      cases.append(pytest.param(path, line, code, id=f"{path}#{index} {first[:60]}"))
  return cases


@pytest.mark.parametrize("path, line, code", _cases())
def test_python_block_runs(path, line, code):
  # Blank lines before the code make tracebacks show the document's own line numbers.
  program = compile("\n" * (line - 1) + code, os.path.join(ROOT, path), "exec")
  exec(program, {"__name__": "__doc_block__"})  # a fresh namespace per block


def test_the_guide_has_its_examples_and_the_readme_its_one():
  assert len(_python_blocks(GUIDE)) >= MIN_GUIDE_BLOCKS
  assert len(_python_blocks(README, README_SECTION)) == 1
