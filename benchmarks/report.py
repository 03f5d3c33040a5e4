"""Writing results: JSON (merged suite by suite) and markdown sections of docs/BENCHMARKS.md.

The benchmark command owns one block of docs/BENCHMARKS.md per kind of machine ('cpu', 'gpu'),
delimited by HTML comments; everything outside its block (the data sections of other parts of the
project, the other machine's block) is left exactly as it was.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterable, Sequence

TITLE = "# Benchmarks (speed)\n"


def _markers(key: str) -> tuple[str, str]:
  return f"<!-- benchmarks:{key} begin -->", f"<!-- benchmarks:{key} end -->"


def replace_block(text: str, key: str, content: str) -> str:
  """`text` with the block `key` holding `content`: replaced in place if present, else appended.

  Args:
    text: the whole markdown document ('' for a new one).
    key: the block's name (e.g. 'cpu').
    content: markdown, without the markers.

  Returns:
    the new document; the text outside the block is unchanged.
  """
  begin, end = _markers(key)
  block = f"{begin}\n{content.strip()}\n{end}\n"
  start = text.find(begin)
  if start >= 0:
    stop = text.find(end, start)
    if stop < 0:
      raise ValueError(f"{key}: the block's begin marker has no end marker {end!r}")
    stop += len(end)
    if text[stop:stop + 1] == "\n":
      stop += 1
    return text[:start] + block + text[stop:]
  if not text:
    return TITLE + "\n" + block
  return text.rstrip("\n") + "\n\n" + block


def update_markdown(path: str, key: str, content: str) -> None:
  """Writes `content` into the block `key` of the markdown file at `path` (created if missing)."""
  text = ""
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      text = f.read()
  with open(path, "w", encoding="utf-8") as f:
    f.write(replace_block(text, key, content))


def merge_json(path: str, results: dict[str, Any]) -> dict[str, Any]:
  """Merges `results` ({'machine': ..., 'suites': {name: ...}}) into the JSON file at `path`.

  Suites measured now replace the stored ones of the same name; others stay (so a GPU run split
  into several calls accumulates). The machine description and settings are the latest ones;
  'suite_machines' and 'suite_notes' keep, for every suite, the machine it was measured on and the
  run's note (a stored suite without them: the stored file's; a suite of `results` that carries
  its own, as `--from-json` merges give it, keeps those), so that `render` can say which suites
  come from another machine or day. Returns the merged results.
  """
  merged = {"machine": results.get("machine"), "settings": results.get("settings"), "suites": {},
            "suite_machines": {}, "suite_notes": {}}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      stored = json.load(f)
    merged["suites"].update(stored.get("suites", {}))
    note = (stored.get("settings") or {}).get("note", "")
    for name in merged["suites"]:
      merged["suite_machines"][name] = stored.get("suite_machines", {}).get(name,
                                                                            stored.get("machine"))
      merged["suite_notes"][name] = stored.get("suite_notes", {}).get(name, note)
  merged["suites"].update(results.get("suites", {}))
  for name in results.get("suites", {}):  # results merged from files keep each suite's own
    merged["suite_machines"][name] = (results.get("suite_machines", {}).get(name)
                                      or results.get("machine"))
    merged["suite_notes"][name] = results.get("suite_notes", {}).get(
        name, (results.get("settings") or {}).get("note", ""))
  folder = os.path.dirname(path)
  if folder:
    os.makedirs(folder, exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(merged, f, indent=1, sort_keys=True, default=float)
    f.write("\n")
  return merged


def table(header: Sequence[str], rows: Iterable[Sequence[Any]],
          align: Sequence[str] | None = None) -> str:
  """A markdown table; `align` holds 'l' or 'r' per column (default: first left, others right)."""
  align = align or ["l"] + ["r"] * (len(header) - 1)
  lines = ["| " + " | ".join(header) + " |",
           "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|"]
  for row in rows:
    lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
  return "\n".join(lines)


def number(value: float | None, digits: int = 3) -> str:
  """A figure with `digits` significant digits (thousands separated), or 'n/a'."""
  if value is None:
    return "n/a"
  if abs(value) >= 10 ** digits:
    return f"{value:,.0f}"
  return f"{value:.{digits}g}"


def speedup(value: float | Sequence[float | None] | None) -> str:
  """A ratio as '1.23x', or 'n/a'; the ratios of rounds measured in a row (`merge_rounds`) as
  '1.23x / 1.19x' (one figure where they agree to the digits shown)."""
  if isinstance(value, (list, tuple)):
    shown = [speedup(v) for v in value]
    return shown[0] if len(set(shown)) == 1 else " / ".join(shown)
  return "n/a" if value is None else f"{value:.2f}x"


RATIO_KEYS = frozenset({"speedup"})


def merge_rounds(rounds: Sequence[Any]) -> Any:
  """One suite's results measured several times in a row -> the first round's results, with
  every ratio (a numeric value under a key of RATIO_KEYS) replaced by the list of its values in
  all rounds, in order (rendered by `speedup` as 'a / b').

  Every round must have the first one's structure where the ratios are; a part whose structure
  differs (a variant that failed in one round) keeps the first round's values.
  """
  first = rounds[0]
  if isinstance(first, dict):
    merged = {}
    for key, value in first.items():
      others = [r.get(key) if isinstance(r, dict) else None for r in rounds]
      if key in RATIO_KEYS and all(isinstance(v, (int, float)) or v is None for v in others):
        merged[key] = list(others)
      else:
        merged[key] = merge_rounds(others) if all(
            isinstance(o, type(value)) for o in others) else value
    return merged
  if isinstance(first, list) and all(isinstance(r, list) and len(r) == len(first)
                                     for r in rounds):
    return [merge_rounds([r[i] for r in rounds]) for i in range(len(first))]
  return first


def megabytes(value: float | None) -> str:
  return "n/a" if value is None else f"{value / 2**20:,.1f}"


def machine_lines(machine: dict[str, Any]) -> str:
  """Markdown lines describing the machine and library versions."""
  accelerator = machine.get("device") if machine.get("backend") != "cpu" else "none (CPU only)"
  return "\n".join([
      f"- date: {machine.get('date')}",
      f"- CPU: {machine.get('cpu')} ({machine.get('cores')} cores), 1-minute load average at the "
      f"start: {machine.get('load_average_1min')}",
      f"- accelerator: {accelerator}",
      f"- python {machine.get('python')}, jax {machine.get('jax')}, flax {machine.get('flax')}, "
      f"optax {machine.get('optax')}, torch {machine.get('torch') or 'not installed'}",
  ])


def render(results: dict[str, Any], renderers: dict[str, Callable[[Any], str]],
           heading: str, preamble: str = "") -> str:
  """The markdown block of one machine: heading, machine lines, then each suite's section."""
  parts = [heading, "", machine_lines(results.get("machine") or {})]
  if preamble:
    parts += ["", preamble.strip()]
  for name, render_suite in renderers.items():
    suite = results.get("suites", {}).get(name)
    if suite is None:
      continue
    parts.append("")
    if isinstance(suite, dict) and "error" in suite:
      parts.append(f"### {name}\n\nFailed: `{suite['error']}`")
    else:
      parts.append(render_suite(suite))
    own = (results.get("suite_machines") or {}).get(name)
    if own and own != results.get("machine"):
      parts += ["", f"Measured on another machine or day than the lines at the top of this "
                    f"section:\n{machine_lines(own)}"]
      note = (results.get("suite_notes") or {}).get(name)
      if note:
        parts += ["", note]
  return "\n".join(parts) + "\n"
