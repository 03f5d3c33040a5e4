"""benchmarks/profile_steps.py: naming XLA's thunks by the optimized HLO, self times of nested
trace events, PyTorch operator categories, and one real profile of a small training step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import common
from benchmarks import profile_steps
from benchmarks import training


def _scan_grad_hlo() -> str:
  """The optimized HLO of a gradient through a scan of tanh(h W + x_t) (5 units, 7 steps)."""
  def loss(w, xs):
    step = lambda h, x: (jnp.tanh(h @ w + x), h)
    return jnp.sum(jax.lax.scan(step, jnp.zeros(5), xs)[0] ** 2)
  grad = jax.jit(jax.grad(loss))
  return grad.lower(jnp.ones((5, 5)), jnp.ones((7, 5))).compile().as_text()


def test_parse_hlo_names_every_instruction_and_what_its_fusion_holds():
  instructions = profile_steps.parse_hlo(_scan_grad_hlo())
  opcodes = {i.opcode for i in instructions.values()}
  assert "while" in opcodes and "fusion" in opcodes
  categories = {profile_steps.xla_category(i) for i in instructions.values()}
  assert {"matmul", "loop control"} <= categories
  whiles = [name for name, i in instructions.items() if i.opcode == "while"]
  assert whiles and all(profile_steps.xla_category(instructions[n]) == "loop control"
                        for n in whiles)
  # A fusion is described by the opcodes inside it.
  fused = [i for i in instructions.values() if i.opcode == "fusion" and "tanh" in i.inner]
  assert fused, "the tanh of the scan body is fused"


def test_parse_hlo_reads_tuple_types_and_custom_call_targets():
  text = """HloModule m

%fused_computation.1 (p: f32[4,3], q: f32[3,2]) -> f32[4,2] {
  %p = f32[4,3]{1,0} parameter(0)
  %q = f32[3,2]{1,0} parameter(1)
  ROOT %dot.1 = f32[4,2]{1,0} dot(%p, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main (a: f32[4,3], b: f32[3,2]) -> (f32[4,2], s32[2]) {
  %a = f32[4,3]{1,0} parameter(0)
  %b = f32[3,2]{1,0} parameter(1)
  %ynn_fusion.3 = f32[4,2]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_computation.1
  %topk.2 = (f32[4,2]{1,0}, s32[4,2]{1,0}) custom-call(%ynn_fusion.3), custom_call_target="TopK"
  %copy.5 = f32[4,2]{0,1} copy(%ynn_fusion.3)
  ROOT %tuple = (f32[4,2]{1,0}, s32[2]{0}) tuple(%copy.5, %copy.5)
}
"""
  instructions = profile_steps.parse_hlo(text)
  assert instructions["ynn_fusion.3"] == profile_steps.Instruction(
      "fusion", frozenset({"parameter", "dot"}))
  assert instructions["topk.2"] == profile_steps.Instruction("custom-call", frozenset({"TopK"}))
  assert instructions["tuple"].opcode == "tuple"
  assert profile_steps.xla_category(instructions["ynn_fusion.3"]) == "matmul"
  assert profile_steps.xla_category(instructions["topk.2"]) == "other"
  assert profile_steps.xla_category(instructions["copy.5"]) == "copy / fill / transpose"
  assert profile_steps._describe(instructions["ynn_fusion.3"]) == "fusion (dot)"


def test_self_times_subtract_nested_events_on_the_same_thread_only():
  events = [
      dict(ph="X", name="while.1", ts=0.0, dur=100.0, pid=1, tid=1),
      dict(ph="X", name="dot.2", ts=10.0, dur=30.0, pid=1, tid=1),
      dict(ph="X", name="fusion.3", ts=50.0, dur=20.0, pid=1, tid=1),
      dict(ph="X", name="dot.2", ts=55.0, dur=5.0, pid=1, tid=1),   # nested in fusion.3
      dict(ph="X", name="dot.2", ts=20.0, dur=40.0, pid=1, tid=2),  # another thread
      dict(ph="i", name="marker", ts=1.0, pid=1, tid=1),
      dict(ph="X", name="fusion.3", ts=120.0, dur=7.0, pid=1, tid=1),
  ]
  assert profile_steps.self_times(events) == {"while.1": 50.0, "dot.2": 75.0, "fusion.3": 22.0}


@pytest.mark.parametrize("name, category", [
    ("aten::addmm", "matmul"), ("aten::mm", "matmul"), ("aten::bmm", "matmul"),
    ("aten::mkldnn_rnn_layer_backward", "LSTM kernel"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention kernel"),
    ("Optimizer.step#Adam.step", "optimizer"), ("aten::_foreach_add_", "optimizer"),
    ("aten::copy_", "copy / fill / transpose"), ("aten::fill_", "copy / fill / transpose"),
    ("aten::_to_copy", "copy / fill / transpose"),
    ("aten::embedding_dense_backward", "gather / scatter / slice"),
    ("aten::cat", "gather / scatter / slice"), ("aten::tanh", "elementwise"),
    ("aten::add_", "elementwise"), ("aten::masked_fill", "elementwise"),
    ("aten::_log_softmax", "reduction / softmax"), ("aten::native_layer_norm",
                                                    "reduction / softmax"),
    ("autograd::engine::evaluate_function: AddmmBackward0", "other"),
])
def test_torch_category(name, category):
  assert profile_steps.torch_category(name) == category


def test_profile_jax_of_a_small_training_step_finds_its_matmuls():
  w = jnp.asarray(np.random.default_rng(0).normal(size=(64, 48)), jnp.float32)
  batch = {"x": np.random.default_rng(1).normal(size=(37, 64)).astype(np.float32)}
  loss = lambda params, b: jnp.mean(jnp.tanh(b["x"] @ params["w"]) ** 2)
  run = training.jax_run(loss, {"w": w}, batch)
  run()
  result = profile_steps.profile_jax(run, steps=3)
  assert result["wall_ms"] > 0
  cats = profile_steps.categories(result["ops"])
  assert set(cats) == set(profile_steps.CATEGORIES)
  assert cats["matmul"] > 0  # forward x W and the backward's x^T g
  assert all(op["ms"] >= 0 for op in result["ops"])
  assert result["ops"] == sorted(result["ops"], key=lambda op: -op["ms"])


def test_markdown_renders_both_sides_and_a_jax_only_model():
  machine = common.machine()
  ops = lambda *rows: [dict(name=n, category=c, kind=k, ms=ms) for n, c, k, ms in rows]
  results = dict(machine=machine, steps=3, models=[
      dict(model="m1", size={"batch": 3}, jax=dict(wall_ms=10.0, ops=ops(
          ("dot.1", "matmul", "dot", 6.0), ("fusion.2", "elementwise", "fusion (add)", 2.0))),
           torch=dict(wall_ms=12.0, threads=2, ops=ops(
               ("aten::mm", "matmul", "4 calls", 9.0)))),
      dict(model="m2", size=None, jax=dict(wall_ms=5.0, ops=ops(("dot.1", "matmul", "dot", 4.0))))])
  text = profile_steps.markdown(results, "python -m benchmarks.profile_steps", top=2)
  assert "| matmul | 6 | 75% | 9 | 100% |" in text
  assert "| elementwise | 2 | 25% | 0 | 0% |" in text
  assert "| **all ops** | 8 | 100% | 9 | 100% |" in text
  assert "| `dot.1` dot | matmul | 6 | `aten::mm` 4 calls | matmul | 9 |" in text
  assert "| `fusion.2` fusion (add) | elementwise | 2 |  |  |  |" in text
  assert "**m2** ()" in text and "| matmul | 4 | 100% |" in text


def test_unknown_model_and_bad_steps_are_refused():
  with pytest.raises(SystemExit, match="unknown model 'lstm'"):
    profile_steps.main(["--models", "lstm", "--out", ""])
  with pytest.raises(SystemExit, match="--steps must be >= 1"):
    profile_steps.main(["--steps", "0", "--out", ""])
