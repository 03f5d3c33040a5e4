"""The FLOP counter (against XLA's own count of the same matmuls), the timing harness and the
markdown/JSON writers of the benchmarks."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import jax
import jax.numpy as jnp
import pytest

from benchmarks import common
from benchmarks import flops
from benchmarks import report

B, H, Q, K, DH, DV, D = 3, 4, 5, 7, 6, 10, 22


def _xla_flops(fn, *shapes) -> float:
  args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
  return float(jax.jit(fn).lower(*args).compile().cost_analysis()["flops"])


def test_attention_core_counts_what_xla_counts():
  def core(q, k, v):
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k)
    return jnp.einsum("bhqk,bhkv->bhqv", scores, v)
  want = _xla_flops(core, (B, H, Q, DH), (B, H, K, DH), (B, H, K, DV))
  assert flops.attention_core(B, H, Q, K, DH, DV) == want
  assert flops.attention_core(B, H, Q, K, DH) == B * H * (2 * Q * K * DH) * 2
  assert flops.attention_core(B, H, Q, K, DH, DV, causal=True) == want / 2


def test_mha_projections_count_what_xla_counts():
  def projections(xq, xkv, wq, wk, wv, wo):
    q = jnp.einsum("bqd,dhe->bqhe", xq, wq)
    k = jnp.einsum("bkd,dhe->bkhe", xkv, wk)
    v = jnp.einsum("bkd,dhe->bkhe", xkv, wv)
    return q, k, v, jnp.einsum("bqhe,hed->bqd", q, wo)
  want = _xla_flops(projections, (B, Q, D), (B, K, D), (D, H, DH), (D, H, DH), (D, H, DH),
                    (H, DH, D))
  assert flops.mha_projections(B, Q, K, D, H, DH) == want


def test_mha_forward_and_backward_formulas():
  projections = flops.mha_projections(B, Q, K, D, H, DH)
  core = flops.attention_core(B, H, Q, K, DH)
  assert flops.mha(B, Q, K, D, H, DH) == projections + core
  assert flops.mha(B, Q, K, D, H, DH, backward=True) == 3 * projections + 3.5 * core
  assert flops.mha(B, Q, K, D, H, DH, causal=True) == projections + core / 2


def test_tflops_handles_failures():
  assert flops.tflops(3e12, 1.5) == pytest.approx(2.0)
  assert flops.tflops(3e12, "RuntimeError: no") is None
  assert flops.tflops(3e12, None) is None
  assert flops.tflops(3e12, 0.0) is None


def test_time_side_by_side_reports_medians_and_failures():
  calls = {"a": 0, "b": 0}

  def a():
    calls["a"] += 1

  def b():
    calls["b"] += 1

  def broken():
    raise ValueError("cudnn: unsupported head width\nmore detail")

  settings = common.Settings(warmup=2, repeats=5, min_repeat_s=0.0, max_calls=1)
  times = common.time_side_by_side({"a": a, "broken": broken, "b": b}, settings)
  assert list(times) == ["a", "broken", "b"]
  assert isinstance(times["a"], float) and times["a"] >= 0.0
  assert times["broken"] == "ValueError: cudnn: unsupported head width"
  assert calls == {"a": 7, "b": 7}  # 2 warm-up + 5 timed calls each


def test_time_side_by_side_repeats_a_slow_callable_less():
  calls = {"fast": 0, "slow": 0}

  def fast():
    calls["fast"] += 1

  def slow():
    calls["slow"] += 1
    time.sleep(0.02)

  settings = common.Settings(warmup=2, repeats=6, min_repeat_s=0.0, max_calls=1, budget_s=0.05)
  times = common.time_side_by_side({"fast": fast, "slow": slow}, settings)
  # One warm-up call (it already took more than a quarter of the budget), then 3 repeats.
  assert calls == {"fast": 8, "slow": 1 + 3}
  assert times["slow"] >= 0.02


def test_ratio():
  assert common.ratio(2.0, 0.5) == 4.0
  assert common.ratio(2.0, "failed") is None
  assert common.ratio(None, 1.0) is None


def test_device_peaks():
  assert common.device_peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16") == 989.4
  assert common.device_peak_tflops("NVIDIA H100 PCIe", "bfloat16") == 756.0
  assert common.device_peak_tflops("NVIDIA H200", "float32") == 494.7
  assert common.device_peak_tflops("cpu", "float32") is None


DOC = """# Benchmarks (speed)

Intro line.

## Data preparation

Prepared in 12 s.

## Data loading

| loader | batches/s |
|---|---:|
| numpy | 10 |
"""


def test_replace_block_appends_then_replaces_and_keeps_the_rest():
  once = report.replace_block(DOC, "cpu", "## Speed on the CPU\n\nfirst")
  assert once.startswith(DOC.rstrip("\n"))
  assert once.endswith("<!-- benchmarks:cpu begin -->\n## Speed on the CPU\n\nfirst\n"
                       "<!-- benchmarks:cpu end -->\n")
  with_gpu = report.replace_block(once, "gpu", "gpu figures")
  twice = report.replace_block(with_gpu, "cpu", "## Speed on the CPU\n\nsecond")
  assert "first" not in twice and "second" in twice and "gpu figures" in twice
  assert twice.count("benchmarks:cpu begin") == 1
  assert twice.replace("second", "first") == with_gpu  # nothing else moved
  assert report.replace_block(twice, "cpu", "## Speed on the CPU\n\nsecond") == twice


def test_replace_block_in_the_middle_keeps_what_follows():
  middle = DOC.replace("## Data loading", "<!-- benchmarks:cpu begin -->\nold\n"
                       "<!-- benchmarks:cpu end -->\n\n## Data loading")
  new = report.replace_block(middle, "cpu", "new")
  assert new == middle.replace("\nold\n", "\nnew\n")


def test_replace_block_rejects_a_block_without_its_end():
  with pytest.raises(ValueError, match="cpu: the block's begin marker has no end marker"):
    report.replace_block("<!-- benchmarks:cpu begin -->\nold\n", "cpu", "new")


def test_update_markdown_creates_and_updates_a_file(tmp_path):
  path = tmp_path / "BENCHMARKS.md"
  report.update_markdown(str(path), "cpu", "table one")
  assert path.read_text().startswith(report.TITLE)
  path.write_text(path.read_text() + "\n## Data loading\n\nkept\n")
  report.update_markdown(str(path), "cpu", "table two")
  text = path.read_text()
  assert "table two" in text and "table one" not in text and text.endswith("kept\n")


def test_merge_json_accumulates_suites(tmp_path):
  path = str(tmp_path / "sub" / "gpu.json")
  report.merge_json(path, {"machine": {"date": "1"}, "suites": {"attention": {"rows": [1]}}})
  merged = report.merge_json(path, {"machine": {"date": "2"},
                                    "suites": {"training": {"x": 2}, "attention": {"rows": [3]}}})
  with open(path, encoding="utf-8") as f:
    assert json.load(f) == merged
  assert merged["machine"] == {"date": "2"}
  assert merged["suites"] == {"attention": {"rows": [3]}, "training": {"x": 2}}
  assert merged["suite_machines"] == {"attention": {"date": "2"}, "training": {"date": "2"}}
  # A third run of one suite keeps the day each of the others was measured on.
  merged = report.merge_json(path, {"machine": {"date": "3"}, "settings": {"note": "busy"},
                                    "suites": {"memory": {"y": 1}}})
  assert merged["suite_machines"] == {"attention": {"date": "2"}, "training": {"date": "2"},
                                      "memory": {"date": "3"}}
  assert merged["suite_notes"] == {"attention": "", "training": "", "memory": "busy"}


def test_table_and_number_formats():
  assert report.table(["a", "b"], [["x", 1.5]]) == "| a | b |\n|:---|---:|\n| x | 1.5 |"
  assert report.number(12345.6) == "12,346"
  assert report.number(0.012345) == "0.0123"
  assert report.number(None) == "n/a"
  assert report.speedup(1.234) == "1.23x"


def test_render_shows_machine_and_failed_suites():
  results = {"machine": {"date": "today", "cpu": "AMD EPYC", "cores": 2, "backend": "cpu",
                         "load_average_1min": 1.5, "python": "3.11", "jax": "0.10",
                         "flax": "0.12", "optax": "0.2", "torch": None},
             "suites": {"one": {"value": 7}, "two": {"error": "two: boom"}}}
  text = report.render(results, {"one": lambda s: f"### one\n\nvalue {s['value']}",
                                 "two": lambda s: "unused", "three": lambda s: "absent"},
                       "## Speed on the CPU", "preamble")
  assert "AMD EPYC (2 cores)" in text and "torch not installed" in text
  assert "value 7" in text and "Failed: `two: boom`" in text and "absent" not in text
  assert "another machine" not in text
  # A suite measured elsewhere says so under its own section, with its machine.
  older = dict(results["machine"], date="yesterday", cpu="Intel Xeon")
  text = report.render(dict(results, suite_machines={"one": older, "two": results["machine"]},
                            suite_notes={"one": "it was busy", "two": ""}),
                       {"one": lambda s: f"### one\n\nvalue {s['value']}",
                        "two": lambda s: "unused"}, "## Speed on the CPU")
  one = text.index("### one")
  assert text.index("Measured on another machine or day") > one
  assert "- date: yesterday" in text and "Intel Xeon (2 cores)" in text
  assert text.count("Measured on another machine") == 1 and "it was busy" in text


def _row(dtype, head_dim, length, mode):
  return {"dtype": dtype, "head_dim": head_dim, "length": length, "mode": mode}


def test_attention_rows_of_separate_calls_merge_in_grid_order(tmp_path):
  from benchmarks import __main__ as cli
  first = [_row("bfloat16", 64, 1024, "forward"), _row("bfloat16", 64, 1024, "forward+backward"),
           _row("bfloat16", 128, 1024, "forward")]
  second = [_row("bfloat16", 64, 512, "forward+backward"), _row("bfloat16", 64, 512, "forward"),
            _row("bfloat16", 128, 8192, "forward"), _row("float32", 64, 512, "forward")]
  results = {"suites": {}}
  cli._merge_attention(results, {"suites": {"attention": {"rows": first}}})
  cli._merge_attention(results, {"suites": {"attention": {"rows": second}, "decoding": {"x": 1}}})
  order = [(r["dtype"], r["head_dim"], r["length"], r["mode"])
           for r in results["suites"]["attention"]["rows"]]
  assert order == [("bfloat16", 64, 512, "forward"), ("bfloat16", 64, 512, "forward+backward"),
                   ("bfloat16", 64, 1024, "forward"), ("bfloat16", 64, 1024, "forward+backward"),
                   ("bfloat16", 128, 1024, "forward"), ("bfloat16", 128, 8192, "forward"),
                   ("float32", 64, 512, "forward")]
  assert results["suites"]["decoding"] == {"x": 1}
  # A row measured again replaces the earlier one instead of standing beside it.
  again = dict(_row("bfloat16", 64, 1024, "forward"), seconds=0.5)
  cli._merge_attention(results, {"suites": {"attention": {"rows": [again]}}})
  rows = results["suites"]["attention"]["rows"]
  assert len(rows) == 7 and rows[2] == again


def test_rendering_from_json_keeps_the_day_each_suite_was_measured(tmp_path):
  """`--from-json` of a file that merged runs of several days says so under the older suites."""
  from benchmarks import __main__ as cli
  machine = lambda date: {"date": date, "cpu": "AMD EPYC", "cores": 2, "backend": "cpu"}  # noqa
  path = str(tmp_path / "cpu.json")
  report.merge_json(path, {"machine": machine("monday"), "settings": {"note": "quiet"},
                           "suites": {"memory": {"y": 1}}})
  report.merge_json(path, {"machine": machine("tuesday"), "settings": {"note": "paused"},
                           "suites": {"decoding": {"x": 1}}})
  results = {"suites": {}}
  with open(path, encoding="utf-8") as f:
    cli._merge_attention(results, json.load(f))
  assert results["machine"]["date"] == "tuesday"
  assert results["suite_machines"]["memory"]["date"] == "monday"
  assert results["suite_notes"] == {"memory": "quiet", "decoding": "paused"}
  text = report.render(results, {"memory": lambda s: "### memory", "decoding": lambda s: "### d"},
                       "## Speed on the CPU")
  assert text.count("Measured on another machine or day") == 1
  assert text.index("- date: monday") > text.index("### memory")
  assert "quiet" in text


def test_a_side_json_file_leaves_the_store_and_the_markdown_alone_until_merged(
    tmp_path, monkeypatch, capsys):
  """`--json OTHER` writes OTHER only (rendering the block from it alone dropped every other
  suite); `--from-json STORE OTHER --json STORE --out MD` merges it in, each suite keeping its
  day."""
  from benchmarks import __main__ as cli
  monkeypatch.chdir(tmp_path)
  for name in ("old_suite", "new_suite"):
    monkeypatch.setitem(cli.SUITES, name, (lambda settings: {"seconds": 0.5},
                                           lambda suite, name=name: f"### {name} {suite}"))
  store = "benchmarks/results/cpu.json"
  report.merge_json(store, {"machine": {"date": "monday", "backend": "cpu"},
                            "settings": {"note": "quiet"}, "suites": {"old_suite": {"y": 3}}})
  before = open(store, encoding="utf-8").read()
  assert cli.main(["--suites", "new_suite", "--json", "side.json", "--rounds", "1"]) == 0
  assert open(store, encoding="utf-8").read() == before
  assert not os.path.exists("docs/BENCHMARKS.md")
  assert json.load(open("side.json", encoding="utf-8"))["suites"] == {
      "new_suite": {"seconds": 0.5}}
  assert (f"python -m benchmarks --from-json {store} side.json --json {store} --out "
          "docs/BENCHMARKS.md") in capsys.readouterr().out

  os.makedirs("docs")
  assert cli.main(["--from-json", store, "side.json", "--json", store,
                   "--out", "docs/BENCHMARKS.md"]) == 0
  merged = json.load(open(store, encoding="utf-8"))
  assert merged["suites"] == {"old_suite": {"y": 3}, "new_suite": {"seconds": 0.5}}
  assert merged["suite_machines"]["old_suite"]["date"] == "monday"
  assert merged["suite_notes"]["old_suite"] == "quiet"
  assert merged["suite_machines"]["new_suite"]["date"] != "monday"  # today's machine
  text = open("docs/BENCHMARKS.md", encoding="utf-8").read()
  assert "### old_suite {'y': 3}" in text and "### new_suite {'seconds': 0.5}" in text


def test_attention_grid_options_narrow_the_grid_and_reject_bad_values(tmp_path, capsys):
  from benchmarks import __main__ as cli
  out = tmp_path / "b.json"
  assert cli.main(["--quick", "--suites", "attention", "--lengths", "24,40", "--head-dims", "16",
                   "--json", str(out)]) == 0
  rows = json.loads(out.read_text())["suites"]["attention"]["rows"]
  assert sorted({(r["length"], r["head_dim"]) for r in rows}) == [(24, 16), (40, 16)]
  with pytest.raises(SystemExit, match="--lengths: expected comma-separated integers"):
    cli.main(["--quick", "--suites", "attention", "--lengths", "24,x"])
  with pytest.raises(SystemExit, match="--head-dims: every value must be >= 1"):
    cli.main(["--quick", "--suites", "attention", "--head-dims", "0"])


def test_attention_grid_rejects_a_head_width_that_does_not_divide_the_width():
  from benchmarks import attention
  settings = dataclasses.replace(common.QUICK, head_dims=(24,))  # the quick width is 64
  with pytest.raises(ValueError, match=r"head widths \[24\] do not divide the model width 64"):
    attention.run(settings)


def test_merge_rounds_lists_every_rounds_ratio_and_keeps_the_first_rounds_times():
  first = {"rows": [{"mode": "forward", "flax": {"seconds": 0.25, "speedup": 1.0},
                     "zoo": {"seconds": 0.125, "speedup": 2.0}}], "reference": "flax"}
  second = {"rows": [{"mode": "forward", "flax": {"seconds": 0.5, "speedup": 1.0},
                      "zoo": {"seconds": 0.3, "speedup": 5 / 3}}], "reference": "flax"}
  merged = report.merge_rounds([first, second])
  assert merged == {"rows": [{"mode": "forward", "flax": {"seconds": 0.25, "speedup": [1.0, 1.0]},
                              "zoo": {"seconds": 0.125, "speedup": [2.0, 5 / 3]}}],
                    "reference": "flax"}
  assert report.speedup(merged["rows"][0]["zoo"]["speedup"]) == "2.00x / 1.67x"
  assert report.speedup(merged["rows"][0]["flax"]["speedup"]) == "1.00x"
  assert report.speedup([None, 1.5]) == "n/a / 1.50x"
  assert report.speedup(report.merge_rounds([first])["rows"][0]["zoo"]["speedup"]) == "2.00x"


def test_merge_rounds_keeps_the_first_round_where_the_structure_differs():
  first = {"rows": [{"speedup": 1.5}, {"speedup": 0.5}], "torch": {"speedup": 1.0}}
  second = {"rows": [{"speedup": 1.25}], "torch": "failed: out of memory"}
  assert report.merge_rounds([first, second]) == first


def test_attention_columns_keep_the_variants_order_after_a_json_round_trip():
  from benchmarks import attention
  result = {"seconds": 0.01, "speedup": 1.0, "tflops": 0.1, "peak_fraction": None,
            "max_relative_error": 0.0, "error": None}
  names = ["flax", "zoo_vmap", "zoo_fused", "jax_xla", "zoo_auto"]
  row = dict(mode="forward", dtype="float32", head_dim=16, length=24, batch=2, width=32,
             flops=1.0, reference="flax", results={n: dict(result) for n in names})
  row = json.loads(json.dumps(row, sort_keys=True))  # as benchmarks/results/*.json store it
  text = attention.markdown({"rows": [row], "width": 32, "tokens": 48})
  header = next(line for line in text.splitlines() if line.startswith("| pass"))
  assert header.split("|")[6:-1] == [f" `{n}` " for n in names]


def test_cudnn_cell_reads_na_for_float32_and_failed_for_other_errors():
  """cuDNN's refusal of float32 (its message names no 'cudnn') is 'n/a'; a bfloat16 error is not."""
  from benchmarks import attention
  ok = {"seconds": 0.01, "speedup": 1.0, "tflops": 0.1, "peak_fraction": None,
        "max_relative_error": 0.0, "error": None}
  refused = dict(ok, seconds=None, speedup=None, tflops=None, max_relative_error=None,
                 error="RuntimeError: NotImplementedError: Q must be fp16/bf16/fp8_e4m3fn, got "
                       "float32")
  rows = [dict(mode="forward", dtype=dtype, head_dim=16, length=24, batch=2, width=32, flops=1.0,
               reference="flax", results={"flax": dict(ok), "jax_cudnn": dict(refused)})
          for dtype in ("float32", "bfloat16")]
  text = attention.markdown({"rows": rows, "width": 32, "tokens": 48})
  cells = {line.split("|")[2].strip(): line.split("|")[-2].strip()
           for line in text.splitlines() if line.startswith("| forward")}
  assert cells == {"float32": "n/a", "bfloat16": "failed"}


def test_the_suites_but_translation_runs_import_without_experiments_dependencies():
  """A GPU machine's python3 has jax, flax, optax, torch but not dacite or tyro: the CLI must load
  there, importing experiments/ only for the translation_runs suite."""
  import subprocess
  import sys
  code = ("import sys; sys.modules['dacite'] = sys.modules['tyro'] = None\n"
          "import benchmarks.__main__ as m\n"
          "assert 'experiments' not in sys.modules, 'experiments imported'\n"
          "print(sorted(m.SUITES))")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
  assert done.returncode == 0, done.stderr
  assert "translation_runs" in done.stdout


def test_exact_matmuls_asks_for_full_precision_on_a_gpu_only_and_restores_the_default():
  from benchmarks import common
  before = jax.config.jax_default_matmul_precision
  with common.exact_matmuls(gpu=True):
    assert jax.config.jax_default_matmul_precision == "highest"
  assert jax.config.jax_default_matmul_precision == before
  with common.exact_matmuls(gpu=False):  # already exact there: unchanged, so nothing recompiles
    assert jax.config.jax_default_matmul_precision == before
  with common.exact_matmuls():  # this machine's backend decides (the tests run on a CPU)
    assert jax.config.jax_default_matmul_precision == (
        "highest" if common.on_gpu() else before)


def test_the_training_reference_is_the_fastest_float32_pytorch_setting():
  from benchmarks import training
  assert training._fastest_torch({"torch": 0.03, "torch_tf32": 0.02, "torch_bf16_autocast": 0.01,
                                  "jax_scan": 0.005}) == "torch_tf32"
  assert training._fastest_torch({"torch": 0.03, "torch_1thread": "failed"}) == "torch"


def _timed_row(dtype, head_dim, length, mode):
  result = {"seconds": 0.01, "speedup": 1.0, "tflops": 0.1, "peak_fraction": None,
            "max_relative_error": 0.0, "error": None}
  return dict(_row(dtype, head_dim, length, mode), batch=2, width=32, flops=1.0,
              reference="flax", results={"flax": dict(result), "zoo_vmap": dict(result)})


def test_attention_rows_of_two_gpus_keep_their_device_and_get_a_device_column():
  from benchmarks import __main__ as cli
  from benchmarks import attention
  h200 = {"machine": {"device": "NVIDIA H200"},
          "suites": {"attention": {"rows": [_timed_row("bfloat16", 64, 1024, "forward")],
                                   "width": 32, "tokens": 48}}}
  h100 = {"machine": {"device": "NVIDIA H100 80GB HBM3"},
          "suites": {"attention": {"rows": [_timed_row("bfloat16", 64, 1024, "forward"),
                                            _timed_row("float32", 64, 1024, "forward")],
                                   "width": 32, "tokens": 48}}}
  results = {"suites": {}}
  cli._merge_attention(results, h200)
  cli._merge_attention(results, h100)
  rows = results["suites"]["attention"]["rows"]
  # the same grid place on two devices: both rows stay, each with its device
  assert [(r["device"], r["dtype"]) for r in rows] == [
      ("NVIDIA H100 80GB HBM3", "bfloat16"), ("NVIDIA H100 80GB HBM3", "float32"),
      ("NVIDIA H200", "bfloat16")]
  text = attention.markdown(results["suites"]["attention"])
  assert "| device | pass |" in text and "| NVIDIA H200 | forward |" in text
  # rows of one device alone: no device column
  assert "| device |" not in attention.markdown(h200["suites"]["attention"])
