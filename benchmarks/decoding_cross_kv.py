"""Cached decoding with the cross-attention keys/values projected once against at every step.

    python -m benchmarks.decoding_cross_kv            # the decoding suite's sizes (CPU)
    python -m benchmarks.decoding_cross_kv --quick    # toy sizes (checks the harness)

Since 2026-11-27 zoo.Transformer.init_decode_state puts each decoder layer's cross-attention keys
and values of the encoder outputs in the decoding state (`cross_key_values`), so that a step does
not project them again. This times the decoding suite's searches (benchmarks/decoding.py: the same
model, weights, sentences and lengths) both ways side by side: `project_once`, the state as
init_decode_state makes it, and `every_step`, the same state without `cross_key_values` (the step
then projects the encoder outputs itself, as before). Both must decode the same tokens. The ratio
is every_step's time over project_once's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import zoo
from benchmarks import common
from benchmarks import decoding
from benchmarks import models
from benchmarks import report
from zoo.transformer import Transformer


def searcher(model: Transformer, max_len: int, beam: int, search_name: str, project_once: bool):
  """A jitted (params, src, src_lens) -> zoo.Decoded / zoo.Beams of the cached search."""
  @jax.jit
  def run(params, src, src_lens):
    variables = {"params": params}
    state = model.apply(variables, src, src_lens, max_len=max_len,
                        method=Transformer.init_decode_state)
    if not project_once:
      state = {k: v for k, v in state.items() if k != "cross_key_values"}
    step = lambda s, t: model.apply(variables, s, t, method=Transformer.decode_step)
    if search_name == "greedy":
      return zoo.greedy_search(step, state, bos_id=decoding.BOS, eos_id=decoding.EOS,
                               max_len=max_len)
    return zoo.beam_search(step, state, beam_size=beam, bos_id=decoding.BOS,
                           eos_id=decoding.EOS, max_len=max_len)
  return run


def measure(settings: common.Settings) -> dict[str, Any]:
  size = decoding.size_for(settings, common.on_gpu())
  m = size.model
  model = decoding.build_model(m, max(*size.lengths, m.src_len))
  batch = models.translation_inputs(dataclasses.replace(m, batch=size.sentences))
  src, src_lens = jnp.asarray(batch["src"]), jnp.asarray(batch["src_lens"])
  params = jax.jit(model.init)(jax.random.key(0), src, jnp.asarray(batch["tgt_in"]),
                               src_lens)["params"]
  rows = []
  for max_len in size.lengths:
    for search_name in decoding.SEARCHES:
      runs = {name: searcher(model, max_len, size.beam, search_name, name == "project_once")
              for name in ("project_once", "every_step")}
      outputs = {name: run(params, src, src_lens) for name, run in runs.items()}
      times = common.time_side_by_side(
          {name: common.blocking(run, params, src, src_lens) for name, run in runs.items()},
          settings)
      rows.append(dict(search=search_name, max_len=max_len,
                       same_tokens=bool(np.array_equal(outputs["project_once"].tokens,
                                                       outputs["every_step"].tokens)),
                       project_once_ms=1e3 * times["project_once"],
                       every_step_ms=1e3 * times["every_step"],
                       speedup=common.ratio(times["every_step"], times["project_once"])))
      common.log(json.dumps(rows[-1]))
  return dict(machine=common.machine(), size=dataclasses.asdict(size), rows=rows)


def markdown(result: dict[str, Any]) -> str:
  size = result["size"]
  rows = [[r["search"] if r["search"] == "greedy" else f"beam {size['beam']}", r["max_len"],
           report.number(r["project_once_ms"]), report.number(r["every_step_ms"]),
           report.speedup(r["speedup"]), "yes" if r["same_tokens"] else "NO"]
          for r in result["rows"]]
  return "\n".join([report.machine_lines(result["machine"]), "",
                    report.table(["search", "max_len", "projected once, ms / batch",
                                  "projected every step, ms / batch", "ratio", "same tokens"],
                                 rows)])


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.decoding_cross_kv",
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true", help="toy sizes")
  parser.add_argument("--json", default=None, help="also write the results here")
  args = parser.parse_args(argv)
  result = measure(common.QUICK if args.quick else common.Settings())
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)
  print(markdown(result))
  return 0 if all(r["same_tokens"] for r in result["rows"]) else 1


if __name__ == "__main__":
  sys.exit(main())
