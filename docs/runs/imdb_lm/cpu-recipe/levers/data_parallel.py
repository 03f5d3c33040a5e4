"""Ad hoc (issue 37, 2026-11-29 11:50-11:55 UTC): the CPU recipe's fine-tuning step (LSTM 512,
embedding 128, 10,000 ids) on a batch of 64 x 256 random ids sharded over the CPU devices, the
mean of 3 steps after one to compile. Run from the repository root as it was run:

  XLA_FLAGS="--xla_force_host_platform_device_count=2 --xla_cpu_multi_thread_eigen=false \
      intra_op_parallelism_threads=1" python docs/runs/imdb_lm/cpu-recipe/levers/data_parallel.py
  XLA_FLAGS="--xla_force_host_platform_device_count=2 --xla_cpu_multi_thread_eigen=false" ...
  XLA_FLAGS="--xla_force_host_platform_device_count=2" ...

(1.594 s, 1.626 s and 1.634 s a step; docs/BENCHMARKS.md has the committed benchmark's figures).
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec

from experiments.sentiment import lstm_lm

BATCH, WIDTH, VOCAB = 64, 256, 10000

print(jax.devices())
model = lstm_lm.Classifier(VOCAB, lstm_lm.ModelConfig(embed_dim=128, hidden_size=512), 0.5)
optimizer = lstm_lm.optimizer_for(1.0)
mesh = Mesh(np.array(jax.devices()), ("data",))
replicated = NamedSharding(mesh, PartitionSpec())
by_row = NamedSharding(mesh, PartitionSpec("data"))
step = lstm_lm.classifier_train_step(model, optimizer)
params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 8), jnp.int32),
                    jnp.full((1,), 8))["params"]
params = jax.device_put(params, replicated)
opt_state = jax.device_put(optimizer.init(params), replicated)
tokens = jax.device_put(
    jnp.asarray(np.random.randint(4, VOCAB, (BATCH, WIDTH)), jnp.int32), by_row)
lengths = jax.device_put(jnp.full((BATCH,), WIDTH), by_row)
labels = jax.device_put(jnp.zeros((BATCH,), jnp.int32), by_row)
weights = jax.device_put(jnp.ones((BATCH,)), by_row)
key = jax.random.PRNGKey(1)
jax.block_until_ready(step(params, opt_state, tokens, lengths, labels, weights, key, 1e-4))
started = time.perf_counter()
for _ in range(3):
  params, opt_state, _ = step(params, opt_state, tokens, lengths, labels, weights, key, 1e-4)
jax.block_until_ready(params)
seconds = (time.perf_counter() - started) / 3
print(f"B {BATCH} L {WIDTH}: {seconds:.3f} s/step, {seconds / BATCH * 1000:.2f} ms/review")
