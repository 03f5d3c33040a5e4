"""Where one training step's time goes: XLA's ops against the PyTorch twin's, on this machine.

    python -m benchmarks.profile_steps                  # the four models, writes the 'profile'
                                                        # block of docs/BENCHMARKS.md
    python -m benchmarks.profile_steps --models bahdanau_cpu --steps 2 --out ''   # print only

The models and batches are the speed suites' (the same step callables, the same weights in both
frameworks): the translation runs' `transformer_cpu` and `bahdanau_cpu` and the couplet run's
`transformer_cpu` (benchmarks/translation_runs.py), and the sentiment BiLSTM with attention
pooling (`classifier`, benchmarks/training.py). Each step is forward, backward and Adam.

JAX: `jax.profiler.trace(..., create_perfetto_trace=True)` over `--steps` steps after two warm-up
steps; the trace's events are XLA's thunks, named as the instructions of the step's optimized HLO
(`training.jax_run(...).compiled_text()`), which says what each one is (a fusion around a dot is a
matmul). An event's self time is its duration less that of the events nested in it on the same
thread; `while` loops (the LSTMs' and decoders' scans) are containers, so their self time is the
loop's own overhead. PyTorch: `torch.profiler` over the same number of steps with its default
threads, each operator's self CPU time (`key_averages`). Times are per step, summed over the
threads that ran them, so with 2 cores they may add up to more than the step's wall time.

Both sides are grouped into the same categories (`CATEGORIES`), so the table reads as "XLA spends
x ms a step in matmuls where PyTorch spends y".
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time
from typing import Any, Callable, Iterable

import jax

from benchmarks import common
from benchmarks import report
from benchmarks import training
from benchmarks import translation_runs

MODELS = ("transformer_cpu", "bahdanau_cpu", "couplet_transformer_cpu", "classifier")
CATEGORIES = ("matmul", "attention kernel", "LSTM kernel", "elementwise", "reduction / softmax",
              "gather / scatter / slice", "copy / fill / transpose", "optimizer",
              "loop control", "other")
_CONTAINERS = frozenset({"while", "conditional", "call"})
_SLICING = frozenset({"gather", "scatter", "dynamic-slice", "dynamic-update-slice", "slice",
                      "concatenate", "pad", "select-and-scatter"})


# ------------------------------------------------------------------------------------------------
# XLA: the optimized HLO says what each thunk is.


@dataclasses.dataclass(frozen=True)
class Instruction:
  """One instruction of an HLO module: its opcode and, for a fusion or custom call, the opcodes
  of what it calls (or its custom-call target)."""
  opcode: str
  inner: frozenset[str] = frozenset()


_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_ASSIGNMENT = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"([a-z][a-z0-9\-]*)\(")
_CALLS = re.compile(r"calls=%?([\w.\-]+)")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')


def _opcode(rhs: str) -> str:
  """The opcode of an instruction's right-hand side ('f32[2,3]{1,0} dot(...), ...' -> 'dot')."""
  if rhs.startswith("("):  # a tuple type: skip the balanced parentheses
    depth = 0
    for index, char in enumerate(rhs):
      depth += {"(": 1, ")": -1}.get(char, 0)
      if depth == 0:
        rhs = rhs[index + 1:]
        break
  else:
    rhs = rhs.split(" ", 1)[1] if " " in rhs else rhs
  match = _OPCODE.search(rhs)
  return match.group(1) if match else "unknown"


def parse_hlo(text: str) -> dict[str, Instruction]:
  """Instruction name -> Instruction, for every instruction of every computation in `text`."""
  opcodes_of: dict[str, set[str]] = collections.defaultdict(set)
  raw: dict[str, tuple[str, str]] = {}
  computation = None
  for line in text.splitlines():
    if computation is None or line.rstrip().endswith("{"):
      match = _COMPUTATION.match(line)
      if match and "=" not in line.split("{")[0].split("(")[0]:
        computation = match.group(1)
        continue
    if line.strip() == "}":
      computation = None
      continue
    match = _ASSIGNMENT.match(line)
    if not match or computation is None:
      continue
    name, rhs = match.groups()
    opcode = _opcode(rhs)
    opcodes_of[computation].add(opcode)
    target = _TARGET.search(rhs)
    calls = _CALLS.search(rhs)
    raw[name] = (opcode, target.group(1) if target else (calls.group(1) if calls else ""))
  result = {}
  for name, (opcode, callee) in raw.items():
    if opcode == "custom-call":
      result[name] = Instruction(opcode, frozenset({callee}))
    else:
      result[name] = Instruction(opcode, frozenset(opcodes_of.get(callee, ())))
  return result


def xla_category(instruction: Instruction) -> str:
  """The category (CATEGORIES) of one HLO instruction."""
  ops = instruction.inner | {instruction.opcode}
  if instruction.opcode in _CONTAINERS:
    return "loop control"
  if ops & {"dot", "convolution"} or any(
      word in target.lower() for target in instruction.inner
      for word in ("matmul", "gemm", "onednn", "xnn", "ynn")):
    return "matmul"
  if ops & {"sort", "topk"} or any("topk" in t.lower() for t in instruction.inner):
    return "other"
  if ops & {"reduce", "reduce-window"}:
    return "reduction / softmax"
  if ops & _SLICING:
    return "gather / scatter / slice"
  if instruction.opcode in ("copy", "transpose") or ops <= {"copy", "transpose", "parameter",
                                                            "bitcast", "reshape", "broadcast"}:
    return "copy / fill / transpose"
  return "elementwise"


def self_times(events: Iterable[dict[str, Any]]) -> dict[str, float]:
  """Chrome-trace complete events ('ph': 'X', 'ts' and 'dur' in microseconds) -> name -> total
  self time: each event's duration less the durations of the events nested in it on its thread."""
  by_thread: dict[Any, list[dict[str, Any]]] = collections.defaultdict(list)
  for event in events:
    if event.get("ph") == "X" and "dur" in event:
      by_thread[(event.get("pid"), event.get("tid"))].append(event)
  totals: dict[str, float] = collections.defaultdict(float)
  for thread_events in by_thread.values():
    thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack: list[list[Any]] = []  # [end, name, self time]
    def pop(until: float) -> None:
      while stack and stack[-1][0] <= until:
        _, name, own = stack.pop()
        totals[name] += own
    for event in thread_events:
      pop(event["ts"])
      if stack:
        stack[-1][2] -= event["dur"]
      stack.append([event["ts"] + event["dur"], event["name"], float(event["dur"])])
    pop(float("inf"))
  return dict(totals)


def _trace_events(logdir: str) -> list[dict[str, Any]]:
  paths = glob.glob(os.path.join(logdir, "**", "*perfetto_trace.json.gz"), recursive=True)
  if not paths:
    raise FileNotFoundError(f"jax.profiler wrote no perfetto trace under {logdir}")
  with gzip.open(sorted(paths)[-1], "rt", encoding="utf-8") as f:
    trace = json.load(f)
  return trace["traceEvents"] if isinstance(trace, dict) else trace


def profile_jax(run: Callable[[], Any], steps: int) -> dict[str, Any]:
  """Op table of `steps` calls of a training.jax_run callable (already warmed up)."""
  instructions = parse_hlo(run.compiled_text())
  with tempfile.TemporaryDirectory() as logdir:
    start = time.perf_counter()
    with jax.profiler.trace(logdir, create_perfetto_trace=True):
      for _ in range(steps):
        run()
    wall = (time.perf_counter() - start) / steps
    totals = self_times(_trace_events(logdir))
  ops = [dict(name=name, category=xla_category(instructions[name]),
              kind=_describe(instructions[name]), ms=1e-3 * micros / steps)
         for name, micros in totals.items() if name in instructions]
  return dict(wall_ms=1e3 * wall, ops=sorted(ops, key=lambda op: -op["ms"]))


def _describe(instruction: Instruction) -> str:
  """A short description of an instruction: 'fusion (dot, add)', 'while', ..."""
  inner = sorted(instruction.inner - {"parameter", "constant", "tuple", "get-tuple-element",
                                      "bitcast", "reshape", "broadcast"})
  if not inner:
    return instruction.opcode
  shown = ", ".join(inner[:4]) + (", ..." if len(inner) > 4 else "")
  return f"{instruction.opcode} ({shown})"


# ------------------------------------------------------------------------------------------------
# PyTorch: torch.profiler's operator table.


_TORCH_RULES = (
    ("elementwise", ("masked_fill", "where")),
    ("attention kernel", ("scaled_dot_product", "flash_attention")),
    ("LSTM kernel", ("lstm", "rnn", "gru")),
    ("optimizer", ("adam", "_foreach", "optimizer")),
    ("matmul", ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "einsum", "dot")),
    ("reduction / softmax", ("sum", "mean", "softmax", "nll_loss", "cross_entropy", "norm",
                             "max", "min", "layer_norm")),
    ("gather / scatter / slice", ("embedding", "index", "gather", "scatter", "slice", "cat",
                                  "select", "pack", "pad", "narrow", "stack", "split", "chunk")),
    ("copy / fill / transpose", ("copy", "clone", "contiguous", "transpose", "permute", "to", "view",
                          "reshape", "t", "expand", "unsqueeze", "squeeze", "empty", "zeros",
                          "ones", "fill", "as_strided", "detach", "resize")),
)


def torch_category(name: str) -> str:
  """The category (CATEGORIES) of a PyTorch profiler key ('aten::addmm', 'Optimizer.step#...')."""
  base = name.split("::")[-1].lower()
  if name.startswith("autograd::"):  # the engine's wrappers around each backward function
    return "other"
  if name.startswith("Optimizer") or "adam" in base or base.startswith("_foreach"):
    return "optimizer"
  words = set(re.split(r"[_\W]+", base.strip("_")))
  for category, keys in _TORCH_RULES:
    if any(key in words or base.strip("_") == key for key in keys) or any(
        key in base for key in keys if len(key) > 4):
      return category
  if name.startswith("aten::"):
    return "elementwise"
  return "other"


def profile_torch(run: Callable[[], Any], steps: int) -> dict[str, Any]:
  """Operator table of `steps` calls of a training.torch_run callable (already warmed up)."""
  import torch  # pylint: disable=import-outside-toplevel
  start = time.perf_counter()
  with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(steps):
      run()
  wall = (time.perf_counter() - start) / steps
  ops = [dict(name=e.key, category=torch_category(e.key), kind=f"{e.count // steps} calls",
              ms=1e-3 * e.self_cpu_time_total / steps)
         for e in prof.key_averages() if e.self_cpu_time_total > 0]
  return dict(wall_ms=1e3 * wall, threads=torch.get_num_threads(),
              ops=sorted(ops, key=lambda op: -op["ms"]))


# ------------------------------------------------------------------------------------------------


def model_arguments(name: str, settings: common.Settings) -> dict[str, Any]:
  if name == "classifier":
    return training.classifier_arguments(settings)
  if name in translation_runs.RUNS:
    return translation_runs.arguments(name, settings)
  raise ValueError(f"unknown model {name!r}; known are {', '.join(MODELS)}")


def profile_model(name: str, steps: int, settings: common.Settings) -> dict[str, Any]:
  """Both frameworks' op tables for one model's training step."""
  args = model_arguments(name, settings)
  extra = dict(args["extra"])
  runs, _ = training.prepare(args["modules"], args["jax_loss"], args["batch"], args["inputs"],
                             args["to_torch"], args["make_torch"], args["torch_loss"], extra)
  jax_name = next(iter(args["modules"]))
  result = dict(model=name, steps=steps, size=extra.get("size"), jax_variant=jax_name,
                torch_agreement=extra.get("torch_agreement"))
  common.log(f"profile {name}: warm-up")
  for _ in range(2):
    runs[jax_name]()
  result["jax"] = profile_jax(runs[jax_name], steps)
  if "torch" in runs:
    for _ in range(2):
      runs["torch"]()
    result["torch"] = profile_torch(runs["torch"], steps)
  return result


def categories(ops: list[dict[str, Any]]) -> dict[str, float]:
  """Category -> milliseconds per step."""
  totals = {category: 0.0 for category in CATEGORIES}
  for op in ops:
    totals[op["category"]] += op["ms"]
  return totals


def markdown(results: dict[str, Any], command: str, top: int = 8) -> str:
  parts = ["### Where a training step's time goes (XLA's ops against PyTorch's)", "",
           report.machine_lines(results["machine"]), "",
           f"Command: `{command}`. Per model: {results['steps']} profiled steps after 2 warm-up "
           "steps, milliseconds per step summed over the threads that ran each op (so shares "
           "are of the op time, which can exceed the wall time on 2 cores); XLA's ops named by "
           "the step's optimized HLO, PyTorch's by its profiler (self CPU time, default threads). "
           "How ops are grouped: benchmarks/profile_steps.py."]
  for model in results["models"]:
    jax_side, torch_side = model["jax"], model.get("torch")
    jax_cats = categories(jax_side["ops"])
    torch_cats = categories(torch_side["ops"]) if torch_side else None
    jax_total = sum(jax_cats.values())
    torch_total = sum(torch_cats.values()) if torch_cats else None
    header = ["category", "XLA ms / step", "XLA share"]
    if torch_cats:
      header += ["PyTorch ms / step", "PyTorch share"]
    rows = []
    for category in CATEGORIES:
      if jax_cats[category] < 0.05 and (not torch_cats or torch_cats[category] < 0.05):
        continue
      row = [category, report.number(jax_cats[category]),
             f"{100 * jax_cats[category] / jax_total:.0f}%"]
      if torch_cats:
        row += [report.number(torch_cats[category]),
                f"{100 * torch_cats[category] / torch_total:.0f}%"]
      rows.append(row)
    total = ["**all ops**", report.number(jax_total), "100%"]
    wall = ["step wall time", report.number(jax_side["wall_ms"]), ""]
    if torch_cats:
      total += [report.number(torch_total), "100%"]
      wall += [report.number(torch_side["wall_ms"]), ""]
    rows += [total, wall]
    size = ", ".join(f"{k} {v}" for k, v in (model.get("size") or {}).items())
    parts += ["", f"**{model['model']}** ({size})", "", report.table(header, rows), "",
              f"Largest ops (XLA | PyTorch), ms per step:", ""]
    ops_rows = []
    torch_ops = torch_side["ops"] if torch_side else []
    for index in range(top):
      row = []
      for ops in (jax_side["ops"], torch_ops) if torch_side else (jax_side["ops"],):
        if index < len(ops):
          op = ops[index]
          row += [f"`{op['name']}` {op['kind']}", op["category"], report.number(op["ms"])]
        else:
          row += ["", "", ""]
      ops_rows.append(row)
    op_header = ["XLA op", "category", "ms"] + (["PyTorch op", "category", "ms"]
                                               if torch_side else [])
    parts.append(report.table(op_header, ops_rows))
  return "\n".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_steps",
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--models", default=",".join(MODELS),
                      help=f"comma-separated subset of {', '.join(MODELS)}")
  parser.add_argument("--steps", type=int, default=4, help="profiled steps per model")
  parser.add_argument("--top", type=int, default=8, help="largest ops listed per framework")
  parser.add_argument("--quick", action="store_true", help="toy sizes (checks the harness)")
  parser.add_argument("--out", default="docs/BENCHMARKS.md",
                      help="markdown file whose 'profile' block to write ('' to print only)")
  parser.add_argument("--json", default=None, help="also write the results as JSON here")
  return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
  args = parse_args(argv)
  names = [n for n in args.models.split(",") if n]
  for name in names:
    if name not in MODELS:
      raise SystemExit(f"--models: unknown model {name!r}; known are {', '.join(MODELS)}")
  if args.steps < 1:
    raise SystemExit(f"--steps must be >= 1, got {args.steps}")
  settings = common.QUICK if args.quick else common.Settings()
  results = dict(machine=common.machine(), steps=args.steps,
                 models=[profile_model(name, args.steps, settings) for name in names])
  command = "python -m benchmarks.profile_steps" + (
      f" --models {args.models}" if names != list(MODELS) else "") + (
      f" --steps {args.steps}" if args.steps != 4 else "")
  text = markdown(results, command, args.top)
  print(text)
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=1)
  if args.out and not args.quick:
    report.update_markdown(args.out, "profile", text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
