"""The API reference: scripts/api_reference.py builds it from the docstrings (pdoc) without a
warning, with a page per module of zoo/ and an entry for every name of zoo.__all__, and every
section of docs/ZOO.md links to a page of it. (The type checker, `python -m mypy` on zoo/, runs
in .ci/run: from an empty cache it takes longer than a test should.)"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zoo

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\]\(api/([\w/.]+\.html)\)")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
  out = tmp_path_factory.mktemp("api")
  done = subprocess.run([sys.executable, str(ROOT / "scripts" / "api_reference.py"), str(out)],
                        cwd=ROOT, capture_output=True, text=True)
  assert (done.returncode, done.stderr) == (0, ""), done.stderr
  return out


def test_the_reference_builds_without_warnings_with_every_module(reference):
  pages = {p.relative_to(reference).as_posix() for p in reference.rglob("*.html")}
  modules = {f"zoo/{p.stem}.html" for p in (ROOT / "zoo").glob("*.py") if p.stem != "__init__"}
  assert modules | {"zoo.html"} <= pages


def test_every_public_name_has_its_entry_with_its_docstring(reference):
  page = (reference / "zoo.html").read_text(encoding="utf-8")
  for name in zoo.__all__:
    if name != "checks":  # a module: a link to its page
      assert f'id="{name}"' in page, name
  assert 'href="zoo/checks.html"' in page
  assert "Masks are boolean, True = may attend" in page  # zoo's docstring


def test_zoo_all_is_what_zoo_reexports():
  tree = ast.parse((ROOT / "zoo" / "__init__.py").read_text(encoding="utf-8"))
  imported = {alias.asname or alias.name for node in tree.body
              if isinstance(node, ast.ImportFrom) for alias in node.names}
  assert sorted(zoo.__all__) == sorted(imported)
  assert len(set(zoo.__all__)) == len(zoo.__all__)


def test_every_section_of_the_guide_links_to_the_reference(reference):
  guide = (ROOT / "docs" / "ZOO.md").read_text(encoding="utf-8")
  sections = re.split(r"^## \d+\. ", guide, flags=re.MULTILINE)[1:]
  assert len(sections) >= 13
  for section in sections:
    assert _LINK.search(section), section.splitlines()[0]
  for target in _LINK.findall(guide):
    assert (reference / target).is_file(), target
