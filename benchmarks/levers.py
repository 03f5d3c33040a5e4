"""Levers on a CPU training step, each against the default side by side: XLA flags and bfloat16.

    python -m benchmarks.levers                                  # both translation runs' models
    python -m benchmarks.levers --models bahdanau_cpu --rounds 3

Each (model, lever) is timed in a fresh process (XLA reads its flags once, at start-up): the
median of `--steps` training steps (forward, backward, Adam; the translation_runs suite's model,
batch and loss) after two warm-up steps. The levers of one model are run in turn, and the whole
turn is repeated `--rounds` times, so that a change of load hits all of them; the table gives each
round's median and the ratio of the default's time to the lever's (above 1: the lever is faster).

Levers:
  default        what the runs do: float32, XLA's default CPU flags.
  bfloat16       the model computes in bfloat16 (matmul inputs and activations) over float32
                 parameters and optimizer state: on a CPU with avx512_bf16 or AMX, XLA's matmul
                 library takes bfloat16 inputs with float32 accumulation.
  onednn         --xla_cpu_use_onednn=true: oneDNN for XLA's matmuls.
  scheduler      --xla_cpu_enable_concurrency_optimized_scheduler=true.
  no_ynn         --xla_cpu_experimental_ynn_fusion_type= (empty): XLA's own matmul emitter instead
                 of the YNNPACK fusions it uses by default (a check that the default is the
                 faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

LEVERS: dict[str, str] = {
    "default": "",
    "bfloat16": "",
    "onednn": "--xla_cpu_use_onednn=true",
    "scheduler": "--xla_cpu_enable_concurrency_optimized_scheduler=true",
    "no_ynn": "--xla_cpu_experimental_ynn_fusion_type=",
}
MODELS = ("transformer_cpu", "bahdanau_cpu")


def child(model: str, lever: str, steps: int) -> dict[str, Any]:
  """Times one model's training step under one lever (in this process, flags already set)."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from benchmarks import common  # pylint: disable=import-outside-toplevel
  from benchmarks import training  # pylint: disable=import-outside-toplevel
  from benchmarks import translation_runs  # pylint: disable=import-outside-toplevel
  settings = common.Settings()
  args = translation_runs.arguments(model, settings)
  module = args["modules"]["jax"]
  if lever == "bfloat16":
    shape = translation_runs.run_batch(model, settings)
    config = translation_runs.model_config(model, settings)
    module = translation_runs.RunModel(config.build(shape.vocab, shape.vocab, jnp.bfloat16,
                                                    jnp.float32))
  batch = args["batch"]
  params = jax.jit(module.init)(jax.random.key(0), *(batch[k] for k in args["inputs"]))["params"]
  run = training.jax_run(args["jax_loss"](module), params, batch)
  for _ in range(2):
    run()
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  return dict(model=model, lever=lever, ms=1e3 * statistics.median(times),
              flags=os.environ.get("XLA_FLAGS", ""))


def measure(models: list[str], levers: list[str], rounds: int, steps: int) -> dict[str, Any]:
  from benchmarks import common  # pylint: disable=import-outside-toplevel
  results: dict[str, dict[str, list[float]]] = {m: {lever: [] for lever in levers} for m in models}
  machine = common.machine()
  for model in models:
    for round_index in range(rounds):
      for lever in levers:
        env = dict(os.environ, XLA_FLAGS=" ".join(
            f for f in (os.environ.get("XLA_FLAGS", ""), LEVERS[lever]) if f))
        out = subprocess.run([sys.executable, "-m", "benchmarks.levers", "--child", model, lever,
                              "--steps", str(steps)], env=env, check=True, capture_output=True,
                             text=True).stdout
        record = json.loads(out.strip().splitlines()[-1])
        results[model][lever].append(record["ms"])
        print(f"{model} round {round_index + 1} {lever}: {record['ms']:.0f} ms", file=sys.stderr,
              flush=True)
  return dict(machine=machine, rounds=rounds, steps=steps, results=results)


def markdown(measured: dict[str, Any]) -> str:
  from benchmarks import report  # pylint: disable=import-outside-toplevel
  rows = []
  for model, by_lever in measured["results"].items():
    default = statistics.median(by_lever["default"]) if by_lever.get("default") else None
    for lever, times in by_lever.items():
      ratio = default / statistics.median(times) if default and times else None
      rows.append([model, lever, LEVERS[lever] or ("bfloat16 compute" if lever == "bfloat16"
                                                   else "(none)"),
                   " / ".join(report.number(t) for t in times), report.speedup(ratio)])
  return "\n".join([report.machine_lines(measured["machine"]), "",
                    report.table(["model", "lever", "flags", "ms / step, each round",
                                  "default / lever"], rows)])


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.levers",
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--models", default=",".join(MODELS))
  parser.add_argument("--levers", default=",".join(LEVERS))
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--steps", type=int, default=7)
  parser.add_argument("--json", default=None, help="also write the results here")
  parser.add_argument("--child", nargs=2, metavar=("MODEL", "LEVER"), help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(json.dumps(child(*args.child, args.steps)))
    return 0
  models = [m for m in args.models.split(",") if m]
  levers = [lever for lever in args.levers.split(",") if lever]
  for name, known, given in (("--models", MODELS, models), ("--levers", tuple(LEVERS), levers)):
    unknown = [g for g in given if g not in known]
    if unknown:
      raise SystemExit(f"{name}: unknown {unknown}; known are {', '.join(known)}")
  if "default" not in levers:
    levers.insert(0, "default")
  if args.rounds < 1 or args.steps < 1:
    raise SystemExit("--rounds and --steps must be >= 1")
  measured = measure(models, levers, args.rounds, args.steps)
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(measured, f, indent=1)
  print(markdown(measured))
  return 0


if __name__ == "__main__":
  sys.exit(main())
