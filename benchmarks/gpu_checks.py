"""GPU-only equality checks of the fast paths (the CPU tests cannot run the cuDNN kernels).

    python -m benchmarks.gpu_checks        # on a machine with an NVIDIA GPU; exit 0 = all passed

  1. zoo.fast_paths.cudnn_lstm (cuDNN) against zoo.LSTM (scan), same parameters, float32 at full
     precision: outputs, final states and parameter gradients, bidirectional and not, ragged
     lengths including an empty sequence.
  2. FastLSTM(implementation='cudnn') applies on the GPU and keeps zoo.LSTM's parameters.
  3. fast_paths.dot_product_attention (cuDNN flash attention, bfloat16) against the XLA version,
     with and without key lengths, and zoo.MultiHeadAttention's fused path against its vmap path.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import zoo
from zoo import fast_paths


def _relative(got, want) -> float:
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def check_lstm(bidirectional: bool) -> list[tuple[str, float, float]]:
  batch, steps, width, hidden, layers = 5, 37, 24, 32, 2
  model = zoo.LSTM(hidden, num_layers=layers, bidirectional=bidirectional)
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch, steps, width)), jnp.float32)
  lengths = jnp.asarray([37, 1, 20, 0, 36], jnp.int32)
  params = model.init(jax.random.key(0), x)["params"]

  def loss(run, p):
    outputs, finals = run(p)
    return jnp.sum(outputs ** 2) + sum(jnp.sum(s.h * s.c) for s in finals), (outputs, finals)

  scan = lambda p: model.apply({"params": p}, x, valid_lens=lengths)
  cudnn = lambda p: fast_paths.cudnn_lstm(p, x, lengths, precision="highest")
  results = []
  # The scan's matmuls at default precision are TF32 on an A100/H100/H200 (relative error ~5e-4,
  # TF32's rounding); both sides in full float32, the tolerances below hold.
  with jax.default_matmul_precision("highest"):
    (_, (want_out, want_fin)), want_grad = jax.jit(
        jax.value_and_grad(lambda p: loss(scan, p), has_aux=True))(params)
    (_, (got_out, got_fin)), got_grad = jax.jit(
        jax.value_and_grad(lambda p: loss(cudnn, p), has_aux=True))(params)
  name = "bi" if bidirectional else "uni"
  results.append((f"lstm {name} outputs", _relative(got_out, want_out), 1e-4))
  results.append((f"lstm {name} final h", max(_relative(g.h, w.h)
                                               for g, w in zip(got_fin, want_fin)), 1e-4))
  results.append((f"lstm {name} final c", max(_relative(g.c, w.c)
                                               for g, w in zip(got_fin, want_fin)), 1e-4))
  results.append((f"lstm {name} gradients", max(
      _relative(g, w) for g, w in zip(jax.tree.leaves(got_grad), jax.tree.leaves(want_grad))),
                  1e-3))
  return results


def check_fast_lstm_cudnn() -> list[tuple[str, float, float]]:
  x = jnp.ones((3, 7, 4))
  fast = fast_paths.FastLSTM(6, bidirectional=True, implementation="cudnn")
  params = fast.init(jax.random.key(0), x)["params"]
  reference = zoo.BiLSTM(6).init(jax.random.key(0), x)["params"]
  same_tree = jax.tree.structure(params) == jax.tree.structure(reference)
  usable = fast_paths.cudnn_applies()
  got, _ = jax.jit(fast.apply)({"params": params}, x)
  want, _ = jax.jit(zoo.BiLSTM(6).apply)({"params": params}, x)
  return [("FastLSTM cudnn applies, zoo's parameters", 0.0 if usable and same_tree else 1.0, 0.5),
          ("FastLSTM cudnn equals zoo.BiLSTM", _relative(got, want), 1e-2)]


def check_attention() -> list[tuple[str, float, float]]:
  rng = np.random.default_rng(1)
  shape_q, shape_kv = (3, 256, 8, 64), (3, 384, 8, 64)
  q, k, v = (jnp.asarray(rng.normal(size=s), jnp.bfloat16) for s in (shape_q, shape_kv, shape_kv))
  lens = jnp.asarray([384, 17, 200], jnp.int32)
  assert fast_paths.attention_backend(q, k, v) == "cudnn"
  results = []
  for name, kwargs in (("no mask", {}), ("key lengths", {"key_lens": lens}),
                       ("causal", {"is_causal": True})):
    got = jax.jit(lambda q, k, v, kw=kwargs: fast_paths.dot_product_attention(q, k, v, **kw))(
        q, k, v)
    want = jax.jit(lambda q, k, v, kw=kwargs: fast_paths.dot_product_attention(
        q, k, v, implementation="xla", **kw))(q, k, v)
    results.append((f"cudnn attention {name}", _relative(got, want), 2e-2))
  x = jnp.asarray(rng.normal(size=(3, 128, 256)), jnp.bfloat16)
  vmap = zoo.MultiHeadAttention(4, dtype=jnp.bfloat16, implementation="vmap")
  fused = zoo.MultiHeadAttention(4, dtype=jnp.bfloat16, implementation="fused")
  params = vmap.init(jax.random.key(0), x)
  results.append(("MHA fused vs vmap", _relative(jax.jit(fused.apply)(params, x),
                                                 jax.jit(vmap.apply)(params, x)), 2e-2))
  return results


def main() -> int:
  if jax.default_backend() != "gpu":
    print("benchmarks.gpu_checks: needs a GPU (jax.default_backend() is "
          f"{jax.default_backend()!r}); the CPU side is tested by tests/benchmarks")
    return 2
  print(f"device: {jax.devices()[0].device_kind}, jax {jax.__version__}", flush=True)
  results = []
  for check in (lambda: check_lstm(False), lambda: check_lstm(True), check_fast_lstm_cudnn,
                check_attention):
    try:
      results.extend(check())
    except Exception as error:  # pylint: disable=broad-except
      results.append((f"{getattr(check, '__name__', 'check')} raised "
                      f"{type(error).__name__}: {str(error)[:300]}", float("inf"), 0.0))
  failed = 0
  for name, error, tolerance in results:
    ok = error <= tolerance
    failed += not ok
    print(f"{'PASS' if ok else 'FAIL'}  {name}: relative error {error:.2e} (tolerance "
          f"{tolerance:.0e})", flush=True)
  print(f"{len(results) - failed} passed, {failed} failed")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
