"""The layering of the project, read from the imports of every source file (those at module level
and those inside functions alike: an import deferred into a function is still a dependency):

  zoo/ imports neither pipelines/ nor experiments/; pipelines/ imports neither zoo/, experiments/
  nor flax; an experiment package never imports another experiment package; the engine (every
  module of experiments/ outside an experiment package: the engine's modules, the shared seq2seq
  package and the tools over runs such as the explorer) names no experiment package: it finds
  them through the registry; only the command line imports a tool; and no module imports itself
  back through a chain of imports (no import circle).
"""

from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("zoo", "pipelines", "experiments", "benchmarks")
SHARED = {"seq2seq"}  # packages of experiments/ that every experiment may import
TOOLS = {"explorer"}  # registry.TOOL_PACKAGES: tools over every experiment's runs, not experiments


def _modules() -> dict[str, str]:
  """Dotted module name -> file, for every .py file of the project's packages."""
  out = {}
  for package in PACKAGES:
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
      for name in files:
        if name.endswith(".py"):
          path = os.path.join(folder, name)
          module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
          out[module.removesuffix(".__init__")] = path
  return out


def _imports(module: str, path: str) -> set[str]:
  """The modules `module` imports, at module level or inside a function or class (relative
  imports resolved)."""
  package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
  found = set()
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parts = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
      found.add(base)
      found.update(f"{base}.{alias.name}" for alias in node.names)
  return found


MODULES = _modules()
IMPORTS = {m: _imports(m, p) for m, p in MODULES.items()}


def _top(name: str) -> str:
  return name.split(".")[0]


def test_the_layers_import_only_downwards():
  wrong = []
  for module, imported in IMPORTS.items():
    tops = {_top(name) for name in imported}
    if _top(module) == "zoo":
      wrong += [f"{module} imports {t}" for t in tops & {"pipelines", "experiments"}]
    if _top(module) == "pipelines":
      wrong += [f"{module} imports {t}" for t in tops & {"zoo", "experiments", "flax"}]
  assert not wrong, wrong


def _experiment(name: str) -> str | None:
  """The experiment package `name` lies in ('sentiment' for experiments.sentiment.cli), or None
  for a module of the engine, the shared package or a tool."""
  parts = name.split(".")
  if len(parts) > 1 and parts[0] == "experiments" and parts[1] not in SHARED | TOOLS:
    return parts[1] if ("experiments." + parts[1]) in MODULES and os.path.basename(
        MODULES["experiments." + parts[1]]) == "__init__.py" else None
  return None


def test_no_experiment_imports_another_experiment():
  experiment = _experiment
  crossing = [f"{module} imports {name}" for module, imported in IMPORTS.items()
              for name in imported
              if experiment(module) and experiment(name) and experiment(name) != experiment(module)]
  assert not crossing, crossing


def _engine_naming_experiments(imports: dict[str, set[str]]) -> list[str]:
  """'module imports name' for each module of experiments/ outside an experiment package that
  imports a module of one."""
  return [f"{module} imports {name}" for module, imported in sorted(imports.items())
          for name in sorted(imported)
          if _top(module) == "experiments" and _experiment(module) is None and _experiment(name)]


def test_the_engine_names_no_experiment():
  assert not _engine_naming_experiments(IMPORTS)
  # The check sees what it looks for: an explorer that imported an experiment's command code.
  assert _engine_naming_experiments({"experiments.explorer.service": {
      "experiments.couplet", "experiments.couplet.cli", "experiments.runs"}}) == [
          "experiments.explorer.service imports experiments.couplet",
          "experiments.explorer.service imports experiments.couplet.cli"]
  assert {_experiment(m) for m in MODULES} >= {"sentiment", "translation", "couplet", "matching",
                                               "template"}


def test_the_tools_are_the_registrys():
  from experiments import registry  # pylint: disable=import-outside-toplevel
  assert TOOLS == set(registry.TOOL_PACKAGES)
  assert not [f"{module} imports {name}" for module, imported in IMPORTS.items()
              for name in imported if name.startswith("experiments.explorer")
              and not module.startswith("experiments.explorer") and module != "experiments.cli"
              and not module.startswith(("tests", "benchmarks"))]


def test_no_import_circle():
  # A package's __init__ importing its own submodules is how it re-exports them, not a circle.
  graph = {m: {n for n in imported if n in MODULES and n != m and not n.startswith(m + ".")}
           for m, imported in IMPORTS.items()}
  circles, state, stack = [], {}, []

  def visit(module):
    state[module] = "open"
    stack.append(module)
    for other in sorted(graph[module]):
      if state.get(other) == "open":
        circles.append(" -> ".join(stack[stack.index(other):] + [other]))
      elif other not in state:
        visit(other)
    state[module] = "done"
    stack.pop()

  for module in sorted(graph):
    if module not in state:
      visit(module)
  assert not circles, circles
  assert len(graph) > 60  # the walk found the project


def test_relative_imports_are_resolved_so_a_crossing_would_be_seen(tmp_path):
  """A relative import of a sibling experiment resolves to its absolute name (which the crossing
  check rejects)."""
  assert _imports("experiments.couplet.task", _write(tmp_path, "from ..translation import task\n")
                  ) >= {"experiments.translation.task", "experiments.translation"}


def test_imports_inside_functions_are_seen(tmp_path):
  """An import deferred into a function (or a method) is a dependency too."""
  text = ("import json\n\n\ndef serve():\n  from experiments.explorer import service\n\n\n"
          "class A:\n  def f(self):\n    from .. import cli\n")
  assert _imports("experiments.couplet.task", _write(tmp_path, text)) == {
      "json", "experiments.explorer", "experiments.explorer.service", "experiments",
      "experiments.cli"}


def _write(folder, text):
  path = folder / "task.py"
  path.write_text(text, encoding="utf-8")
  return str(path)
