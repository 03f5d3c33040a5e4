"""The code in the docs runs: every ```python block of docs/ZOO.md, the README's examples of
using a module (its section "Using a module": with jax.jit, and inside an NNX model), its
`load_run` example on a run trained as the quickstart trains it, and every `python -m` command of
its bash blocks is accepted as written (arguments, config overrides; stopped where work would
start).

Each block is executed on its own, in a fresh namespace, compiled under a file name that names the
document and the block, and with its lines numbered as in the document, so a failing assert points
at the Markdown line. A block that raises fails its test.
"""

from __future__ import annotations

import os
import re
import shlex

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
  assert len(_python_blocks(README, README_SECTION)) == 2  # linen with jax.jit; inside NNX


# --------------------------------------------------------------------------------------------------
# The README's commands and its trained-run example, as written.

_BASH_FENCE = re.compile(r"^```bash[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


class _Parsed(BaseException):
  """Raised where a command, its arguments accepted, would start its work."""


def _readme_commands() -> list[tuple[int, str]]:
  """(line, command words after `python -m`) of every `python -m` command in the README's bash
  blocks, continuation lines joined, comments and shell redirections dropped."""
  with open(os.path.join(ROOT, README), encoding="utf-8") as f:
    text = f.read()
  commands = []
  for block in _BASH_FENCE.finditer(text):
    first = text.count("\n", 0, block.start(1)) + 1
    joined, start = "", None
    for number, line in enumerate(block.group(1).splitlines(), start=first):
      code = line.split("#", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
      if start is None and "python -m " in code:
        start, joined = number, code[code.index("python -m ") + len("python -m "):]
      elif start is not None:
        joined += " " + code.strip()
      if start is not None and not joined.endswith("\\"):
        commands.append((start, joined))
        start = None
      joined = joined[:-1] if joined.endswith("\\") else joined
  return commands


def _words(command: str) -> list[str]:
  words = shlex.split(command)
  for i, word in enumerate(words):
    if word in (">", "<", "|", "2>"):
      return words[:i]
  return words


def test_every_readme_command_is_accepted_as_written(monkeypatch, tmp_path):
  # pylint: disable=import-outside-toplevel
  import importlib
  from experiments import cli, distributed, runs
  from pipelines import __main__ as pipelines_cli
  from pipelines import download
  from experiments.sentiment import blend

  def parsed(*args, **kwargs):
    raise _Parsed()
  for owner, name in ((runs, "make_task"), (runs, "load_run"), (runs, "load_config"),
                      (runs, "evaluate_run"), (distributed, "initialize"), (download, "fetch"),
                      (blend, "blend_members")):
    monkeypatch.setattr(owner, name, parsed)
  mains = {"experiments": cli.main, "pipelines": pipelines_cli.main}
  commands = _readme_commands()
  assert len(commands) >= 20
  monkeypatch.chdir(tmp_path)  # the input files the commands name, as a user would have them
  for line, command in commands:
    module, *argv = _words(command)
    for flag, value in zip(argv, argv[1:]):
      if flag in ("--input-file", "--pairs"):
        (tmp_path / value).write_text("I won!\tJ'ai gagné !\n", encoding="utf-8")
      if flag == "--member":  # NAME=FILE: a file of the repository, here where the user is
        path = tmp_path / value.partition("=")[2]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    main = mains.get(module) or importlib.import_module(module).main  # a module command
    try:
      status = main(argv)
    except _Parsed:
      continue
    except SystemExit as e:
      status = e.code
    assert status == 0, f"README.md:{line}: `python -m {command}` exits {status}"


def test_the_readme_load_run_example_runs_on_the_quickstarts_run(tmp_path, monkeypatch, capsys):
  """The "From Python" block, as written, in a folder holding runs/quickstart trained as
  scripts/quickstart.sh trains it (a few steps only)."""
  # pylint: disable=import-outside-toplevel
  from experiments import cli
  with open(os.path.join(ROOT, "scripts", "quickstart.sh"), encoding="utf-8") as f:
    quickstart = f.read()
  assert "--model bilstm_attn_dot --workdir \"$WORKDIR\"" in quickstart
  assert "WORKDIR=${WORKDIR:-runs/quickstart}" in quickstart
  monkeypatch.chdir(tmp_path)
  assert cli.main(["train", "sentiment", "--model", "bilstm_attn_dot", "--workdir",
                   "runs/quickstart", "--train.num_steps=2", "--train.progress_bar=False"]) == 0
  capsys.readouterr()
  line, code = _python_blocks(README, "**From Python**")[0]
  exec(compile("\n" * (line - 1) + code, os.path.join(ROOT, README), "exec"),  # pylint: disable=exec-used
       {"__name__": "__doc_block__"})
  label, probability, weights = capsys.readouterr().out.split(" ", 2)
  assert label in ("positive", "negative") and 0.5 <= float(probability) <= 1
  assert len(weights.strip("[]\n").split()) == 6  # a weight per word of the sentence
