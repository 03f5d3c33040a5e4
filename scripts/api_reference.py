"""Builds the API reference of the zoo from its docstrings (pdoc), and checks it.

Usage: python scripts/api_reference.py [OUT]     (default docs/api; open OUT/zoo.html)

One HTML page per module of zoo/ (zoo.html lists every name of `zoo.__all__`), docstrings read as
Google style. The build fails (exit 1, the problems listed on stderr) when pdoc warns about
anything, when a name of `zoo.__all__` has no entry on zoo.html, or when a module of zoo/ has no
page. The pages are generated, not committed: docs/ZOO.md links into OUT=docs/api.

pdoc reads annotations as strings (the zoo's modules use `from __future__ import annotations`) and
evaluates them in the module it takes a function to come from, which is the wrong one in three
places: a NamedTuple's constructor (made by Python in a module of its own), a dataclass
constructor whose fields a base class in another module declared (FastLSTM's), and an
initializer of jax's given as a field's default (its module is the public alias, where its
annotations' names are not defined). Before pdoc runs, `resolve_annotations` evaluates those
constructors' and functions' annotations where they were written.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pathlib
import pkgutil
import sys
import typing
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def zoo_modules() -> list[str]:
  """zoo and the dotted names of all its submodules."""
  import zoo  # pylint: disable=import-outside-toplevel
  return ["zoo"] + sorted(f"zoo.{info.name}" for info in pkgutil.iter_modules(zoo.__path__))


def _namespace(cls: type) -> dict[str, typing.Any]:
  """The globals of every module that declared a class of `cls`'s MRO, `cls`'s own last (so
  first in precedence)."""
  namespace: dict[str, typing.Any] = {}
  for base in reversed(cls.__mro__):
    module = sys.modules.get(base.__module__)
    if module is not None:
      namespace.update(vars(module))
  return namespace


def _resolve(function: typing.Any, namespace: dict[str, typing.Any]) -> None:
  """Replaces the string annotations of `function`, and of the functions it wraps (whose
  signature inspect reports), by what they name in `namespace`."""
  while function is not None:
    annotations = getattr(function, "__annotations__", None)
    if annotations and any(isinstance(a, (str, typing.ForwardRef)) for a in annotations.values()):
      try:
        function.__annotations__ = typing.get_type_hints(function, globalns=namespace)
      except (NameError, AttributeError, TypeError):
        pass  # left as written: pdoc warns about it, which fails the build with the name
    function = getattr(function, "__wrapped__", None)


def resolve_annotations(module_names: list[str]) -> None:
  """Evaluates the annotations pdoc would evaluate in the wrong module (see the module docstring):
  constructors of the zoo's classes, and functions outside the zoo that a class holds as a field's
  default."""
  for name in module_names:
    module = importlib.import_module(name)
    for cls in vars(module).values():
      if not inspect.isclass(cls) or cls.__module__ != name:
        continue
      namespace = _namespace(cls)
      for constructor in ("__init__", "__new__"):
        function = cls.__dict__.get(constructor)
        if isinstance(function, staticmethod):  # a NamedTuple's __new__
          function = function.__func__
        if inspect.isfunction(function):
          _resolve(function, namespace)
      for value in vars(cls).values():
        if inspect.isfunction(value) and not value.__module__.startswith("zoo"):
          _resolve(value, value.__globals__)


def build(out: str) -> list[str]:
  """Writes the reference into `out`; returns the problems found (empty: a clean build)."""
  import pdoc  # pylint: disable=import-outside-toplevel
  import pdoc.render  # pylint: disable=import-outside-toplevel
  import zoo  # pylint: disable=import-outside-toplevel

  modules = zoo_modules()
  problems = []
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    resolve_annotations(modules)
    pdoc.render.configure(docformat="google", show_source=False)
    # "zoo" brings the submodules its __all__ names (zoo.checks); the others are named here.
    pdoc.pdoc("zoo", *(m for m in modules[1:] if m.rpartition(".")[2] not in zoo.__all__),
              output_directory=pathlib.Path(out))
  problems += [f"pdoc warned: {w.message}" for w in caught]
  for name in modules:
    if not os.path.exists(os.path.join(out, *name.split(".")) + ".html"):
      problems.append(f"{name}: no page {name.replace('.', '/')}.html")
  with open(os.path.join(out, "zoo.html"), encoding="utf-8") as f:
    page = f.read()
  for name in zoo.__all__:  # a function or class has an entry; a module, a link to its page
    entry = f'href="zoo/{name}.html"' if f"zoo.{name}" in modules else f'id="{name}"'
    if entry not in page:
      problems.append(f"zoo.{name}: in zoo.__all__ but not on zoo.html")
  return problems


def main(argv: list[str]) -> int:
  if len(argv) > 1:
    print("usage: python scripts/api_reference.py [OUT]", file=sys.stderr)
    return 2
  sys.path.insert(0, ROOT)
  out = argv[0] if argv else os.path.join(ROOT, "docs", "api")
  problems = build(out)
  for problem in problems:
    print(f"api_reference: {problem}", file=sys.stderr)
  if problems:
    return 1
  print(f"api_reference: {len(zoo_modules())} modules, {out}/zoo.html")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
