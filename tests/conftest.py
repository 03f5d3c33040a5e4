"""Test-wide settings: CPU, float32 matmuls at full precision, several fake devices for sharding.

XLA's backend optimisation level 0 roughly halves compile time, which is almost all of the time a
CPU test suite of small jitted models spends (measured on tests/zoo/test_seq2seq.py and
test_recurrent.py: 44 s -> 26 s of CPU). It changes how fast the compiled code runs, not what it
computes, so every exact-value test still holds.
"""

import os

# Must be set before jax is imported. Four fake CPU devices let the data-parallel code be tested.
_FLAGS = ("--xla_force_host_platform_device_count=4", "--xla_backend_optimization_level=0")
os.environ["XLA_FLAGS"] = " ".join(
    [os.environ.get("XLA_FLAGS", "")] +
    [f for f in _FLAGS if f.split("=")[0] not in os.environ.get("XLA_FLAGS", "")]).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
