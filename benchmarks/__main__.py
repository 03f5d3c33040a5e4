"""Runs the benchmarks that fit this machine and writes JSON and docs/BENCHMARKS.md.

    python -m benchmarks                       # full sizes: JSON + markdown block for this machine
    python -m benchmarks --quick               # small sizes, prints the tables (writes nothing)
    python -m benchmarks --suites attention,memory --json /tmp/gpu.json   # a side file only
    python -m benchmarks --from-json benchmarks/results/gpu.json   # re-render, no measuring
    python -m benchmarks --from-json benchmarks/results/cpu.json /tmp/new.json \
        --json benchmarks/results/cpu.json --out docs/BENCHMARKS.md   # merge a side file in

Suites: attention (forward, forward+backward vs flax MHA), training (JAX vs PyTorch steps),
decoding (cached vs recomputed beam search), memory (attention at long sequences),
translation_runs (the translation CPU runs' models, JAX vs PyTorch steps). Each figure is a
ratio against a reference measured in the same run (see benchmarks/common.py). A full run writes
benchmarks/results/{cpu,gpu}.json (merged suite by suite, so a GPU run may be split over several
calls) and the 'cpu' or 'gpu' block of docs/BENCHMARKS.md, leaving the rest of the file alone.
A run whose `--json` names another file writes that file only (the block rendered from it alone
would drop every suite it lacks); the log prints the `--from-json` command that merges it in.

The attention explorer's latency needs trained runs, so it is a command of its own, not a suite:
`python -m benchmarks.explorer --workdir RUN [--workdir RUN ...]` (its 'explorer' block).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any, Callable

from benchmarks import attention
from benchmarks import common
from benchmarks import decoding
from benchmarks import memory
from benchmarks import report
from benchmarks import training


def _translation_runs(name: str) -> Callable:
  """translation_runs.<name>, imported on use: it needs experiments/ and its dependencies (dacite,
  tyro, tfds), which the other suites do not (a GPU machine's python3 runs them without wheels)."""
  def call(*args):
    from benchmarks import translation_runs  # pylint: disable=import-outside-toplevel
    return getattr(translation_runs, name)(*args)
  return call


SUITES: dict[str, tuple[Callable[[common.Settings], Any], Callable[[Any], str]]] = {
    "attention": (attention.run, attention.markdown),
    "training": (training.run, training.markdown),
    "decoding": (decoding.run, decoding.markdown),
    "memory": (memory.run, memory.markdown),
    "translation_runs": (_translation_runs("run"), _translation_runs("markdown")),
}

UNTIMED_SUITES = frozenset({"memory"})  # XLA's planned bytes: exact, the same every time
HEADINGS = {"cpu": "## Speed on the CPU", "gpu": "## Speed on the GPU"}

PREAMBLE = """Command: `{command}`. Medians of {repeats} repeats after {warmup} warm-up calls; the
implementations of a comparison are timed round-robin, so load on the shared machine affects them
alike. The figures to read are the ratios; absolute times move with the load."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true",
                      help="small sizes that check the harness in a minute or two")
  parser.add_argument("--suites", default=",".join(SUITES),
                      help=f"comma-separated subset of {', '.join(SUITES)}")
  parser.add_argument("--out", default=None,
                      help="markdown file to update (default: docs/BENCHMARKS.md for a full run "
                           "into the machine's store, none with --quick or a side --json file)")
  parser.add_argument("--json", default=None,
                      help="JSON file to merge results into (default: the machine's store, "
                           "benchmarks/results/<cpu|gpu>.json, for a full run, none with --quick); "
                           "with --from-json, where the merged files are written")
  parser.add_argument("--dtypes", default=None,
                      help="comma-separated dtypes of the attention suite (default: float32 on "
                           "a CPU, bfloat16 on a GPU)")
  parser.add_argument("--lengths", default=None,
                      help="comma-separated sequence lengths of the attention suite (default: "
                           "its grid's; a shorter grid for a short device call)")
  parser.add_argument("--head-dims", default=None,
                      help="comma-separated head widths of the attention suite (default: 64,128)")
  parser.add_argument("--from-json", nargs="+", default=None,
                      help="render the markdown from these JSON files (merged in order) instead "
                           "of measuring")
  parser.add_argument("--rounds", type=int, default=None,
                      help="measure each timed suite this many times in a row and show every "
                           "round's ratio, to show their spread (default: 2 for a full CPU run, "
                           "1 with --quick or on a GPU, whose time is rationed)")
  parser.add_argument("--note", default="",
                      help="a sentence added to the markdown block (e.g. about the load)")
  return parser.parse_args(argv)


def render(results: dict[str, Any], note: str = "") -> tuple[str, str]:
  """(block key 'cpu'/'gpu', markdown) for stored or fresh results."""
  machine = results.get("machine") or {}
  key = "cpu" if machine.get("backend", "cpu") == "cpu" else "gpu"
  settings = results.get("settings") or {}
  preamble = PREAMBLE.format(command=settings.get("command", "python -m benchmarks"),
                             repeats=settings.get("repeats"), warmup=settings.get("warmup"))
  if settings.get("rounds", 1) > 1:
    preamble += (f"\n\nEach timed comparison was measured {settings['rounds']} times in a row "
                 "(the whole comparison, warm-up included); a ratio shown as 'a / b' gives each "
                 "round's, one figure where they agree to two decimals; times are the first "
                 "round's. The memory suite's planned bytes are exact and measured once.")
  if settings.get("quick"):
    preamble += "\n\nQuick sizes (a harness check, not figures to quote)."
  if note or settings.get("note"):
    preamble += "\n\n" + (note or settings.get("note"))
  renderers = {name: render_suite for name, (_, render_suite) in SUITES.items()}
  return key, report.render(results, renderers, HEADINGS[key], preamble)


def _grid_place(row: dict[str, Any]) -> tuple[str, str, int, int, int, str]:
  """An attention row's place in the grid: device, dtype, head width, length, then forward before
  forward+backward (an unknown pass last, by name)."""
  passes = ("forward", "forward+backward")
  mode = str(row.get("mode"))
  return (str(row.get("device", "")), str(row.get("dtype")), row.get("head_dim", 0),
          row.get("length", 0), passes.index(mode) if mode in passes else len(passes), mode)


def _merge_attention(results: dict[str, Any], stored: dict[str, Any]) -> None:
  """Merges stored results into `results`: later suites replace earlier ones, except that the
  rows of attention suites measured in separate calls (one per dtype, or per group of lengths)
  are combined, in the order of the grid (device, dtype, head width, length, pass), a later file's
  row replacing an earlier one of the same place in the grid; each attention row is stamped with
  the device of its file's machine ('device'), and the table gets a device column where rows of
  several devices meet. Each suite keeps the machine and note it was measured with (a file's own
  'suite_machines' / 'suite_notes', else its machine and note), so the rendered block says which
  suites were measured on another day."""
  results["machine"] = stored.get("machine", results.get("machine"))
  results["settings"] = stored.get("settings", results.get("settings"))
  for name in stored.get("suites", {}):
    results.setdefault("suite_machines", {})[name] = (
        stored.get("suite_machines", {}).get(name) or stored.get("machine"))
    results.setdefault("suite_notes", {})[name] = stored.get("suite_notes", {}).get(
        name, (stored.get("settings") or {}).get("note", ""))
  for name, suite in stored.get("suites", {}).items():
    earlier = results["suites"].get(name)
    if name == "attention" and isinstance(suite, dict) and "rows" in suite:
      # each row names the device it was timed on, so that rows of two GPUs never mix unnamed
      device = (results["suite_machines"][name] or {}).get("device")
      if device:
        suite = dict(suite, rows=[dict(r, device=r.get("device", device)) for r in suite["rows"]])
    if name == "attention" and isinstance(earlier, dict) and "rows" in earlier and "rows" in suite:
      by_place = {_grid_place(r): r for r in earlier["rows"] + suite["rows"]}  # later wins
      rows = [by_place[place] for place in sorted(by_place)]
      suite = dict(suite, rows=rows)
    results["suites"][name] = suite


def main(argv: list[str] | None = None) -> int:
  args = parse_args(argv)
  if args.from_json:
    results: dict[str, Any] = {"suites": {}}
    for path in args.from_json:
      with open(path, encoding="utf-8") as f:
        stored = json.load(f)
      _merge_attention(results, stored)
    if args.json:
      results = report.merge_json(args.json, results)
    key, text = render(results, args.note)
    print(text)
    if args.out:
      report.update_markdown(args.out, key, text)
    return 0
  names = [s.strip() for s in args.suites.split(",") if s.strip()]
  unknown = [s for s in names if s not in SUITES]
  if unknown:
    raise SystemExit(f"--suites: unknown {unknown}; known are {', '.join(SUITES)}")
  settings = common.QUICK if args.quick else common.Settings()
  if common.on_gpu() and not args.quick:  # steadier timings; the device time is rationed
    settings = dataclasses.replace(settings, repeats=5, min_repeat_s=0.02)
  if args.dtypes:
    settings = dataclasses.replace(settings, dtypes=tuple(args.dtypes.split(",")))
  for name in ("lengths", "head_dims"):
    value = getattr(args, name)
    if value:
      try:
        numbers = tuple(int(v) for v in value.split(","))
      except ValueError:
        raise SystemExit(f"--{name.replace('_', '-')}: expected comma-separated integers, "
                         f"got {value!r}") from None
      if any(n < 1 for n in numbers):
        raise SystemExit(f"--{name.replace('_', '-')}: every value must be >= 1, got {value!r}")
      settings = dataclasses.replace(settings, **{name: numbers})
  machine = common.machine()
  key = "cpu" if machine["backend"] == "cpu" else "gpu"
  store = f"benchmarks/results/{key}.json"
  json_path = args.json or (None if args.quick else store)
  side_file = json_path is not None and os.path.abspath(json_path) != os.path.abspath(store)
  out = args.out or (None if args.quick or side_file else "docs/BENCHMARKS.md")
  rounds = args.rounds or (1 if args.quick or key == "gpu" else 2)
  if rounds < 1:
    raise SystemExit(f"--rounds must be >= 1, got {rounds}")
  command = "python -m benchmarks" + (" --quick" if args.quick else "") + (
      f" --rounds {rounds}" if args.rounds else "")
  results = {"machine": machine,
             "settings": dict(warmup=settings.warmup, repeats=settings.repeats,
                              quick=settings.quick, command=command, note=args.note,
                              rounds=rounds),
             "suites": {}}
  common.log(f"machine: {json.dumps(machine)}")
  for name in names:
    run_suite, _ = SUITES[name]
    measured = [common.guarded(name, lambda run_suite=run_suite: run_suite(settings))
                for _ in range(1 if name in UNTIMED_SUITES else rounds)]
    errors = [m for m in measured if isinstance(m, dict) and "error" in m]
    results["suites"][name] = errors[0] if errors else report.merge_rounds(measured)
    merged = report.merge_json(json_path, results) if json_path else results
    _, text = render(merged, args.note)
    if out:
      report.update_markdown(out, key, text)
  merged = results
  if json_path:
    with open(json_path, encoding="utf-8") as f:
      merged = json.load(f)
  _, text = render(merged, args.note)
  print(text)
  if side_file and not args.out:
    common.log(f"results in {json_path} only; to merge them into {store} and docs/BENCHMARKS.md: "
               f"python -m benchmarks --from-json {store} {json_path} --json {store} "
               f"--out docs/BENCHMARKS.md")
  failed = [n for n in names if isinstance(results["suites"][n], dict)
            and "error" in results["suites"][n]]
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
