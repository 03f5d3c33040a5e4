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

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _own_data_dir(tmp_path_factory):
  """Each test process (each pytest-xdist worker) prepares the shipped samples in its own data
  dir: two workers building the same tfds dataset in one folder would race on its final rename,
  and the tests never touch a user's ~/.cache/attention_zoo. An explicit $ZOO_DATA_DIR is kept."""
  if os.environ.get("ZOO_DATA_DIR"):
    yield
    return
  os.environ["ZOO_DATA_DIR"] = str(tmp_path_factory.mktemp("zoo_data"))
  yield
  del os.environ["ZOO_DATA_DIR"]
