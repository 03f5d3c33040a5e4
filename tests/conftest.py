"""Test-wide settings: CPU, float32 matmuls at full precision, several fake devices for sharding."""

import os

# Four fake CPU devices let the data-parallel code be tested here; must be set before jax imports.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
