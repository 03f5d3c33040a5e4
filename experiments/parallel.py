"""Data parallelism with jax.sharding: batches split over a device mesh, everything else replicated.

One `jax.jit` program per step runs on all devices: the batch is sharded along its leading axis
over the mesh axis 'data', the parameters and optimizer state are replicated, and XLA inserts the
gradient all-reduce. With a single device the same code runs unchanged.

Several processes (experiments/distributed.py): the mesh spans every process's devices
(`jax.devices()`), each process hands over only its own slice of a batch (rows
[p*b, (p+1)*b) of the global batch, as the pipelines' Batcher yields them) and
`jax.make_array_from_process_local_data` assembles the global array; every process then calls the
same jitted step, and the replicated results (state, metric sums) are equal on all of them.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Iterator, Sequence

import jax
import numpy as np
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

DATA_AXIS = "data"


class DataParallel:
  """A 1-D mesh over devices and the shardings and jitted steps that use it.

  Attributes:
    mesh: Mesh with one axis, 'data', over `devices`.
    replicated: NamedSharding placing a full copy on every device (parameters, optimizer state).
    batch_sharding: NamedSharding splitting the leading (batch) axis over the devices.
  """

  def __init__(self, devices: Sequence[jax.Device] | None = None):
    devices = list(jax.devices() if devices is None else devices)
    self.mesh = Mesh(np.asarray(devices), (DATA_AXIS,))
    self.replicated = NamedSharding(self.mesh, P())
    self.batch_sharding = NamedSharding(self.mesh, P(DATA_AXIS))
    self.local_devices = [d for d in devices if d.process_index == jax.process_index()]
    self._max = jax.jit(lambda values: values.max(), out_shardings=self.replicated)

  @property
  def num_devices(self) -> int:
    return self.mesh.size

  @property
  def num_processes(self) -> int:
    return len({d.process_index for d in self.mesh.devices.flat})

  def check_batch_size(self, batch_size: int, name: str = "batch_size") -> None:
    """Raises ValueError unless `batch_size` splits evenly over the devices."""
    if batch_size % self.num_devices:
      raise ValueError(f"{name} = {batch_size} must be a multiple of the number of devices "
                       f"({self.num_devices}) for data parallelism")

  def shard_batch(self, batch) -> Any:
    """Puts this process's host batch on its devices, as its slice of one global batch.

    Args:
      batch: dict of numpy arrays with leading axis b, this process's rows of the step's batch
        (in a single process, the whole batch).

    Returns:
      The global batch: arrays with leading axis b * num_processes, split along it over the mesh.
      The transfer is asynchronous: it overlaps with whatever the devices are computing.
    """
    local = len(self.local_devices)
    where = (f"{local} devices" if self.num_processes == 1 else
             f"the {local} devices of process {jax.process_index()}")
    for name, value in batch.items():
      if np.ndim(value) == 0 or np.shape(value)[0] % local:
        raise ValueError(f"batch[{name!r}] with shape {np.shape(value)} cannot be split over "
                         f"{where}: its leading axis must be a multiple of it")
    return jax.make_array_from_process_local_data(self.batch_sharding, dict(batch))

  def max_over_processes(self, value: int) -> jax.Array:
    """The largest of the `value`s every process passes, as a replicated int32 scalar (a collective:
    every process must call it, equally often). Asynchronous until read."""
    local = np.full((len(self.local_devices),), value, np.int32)
    return self._max(jax.make_array_from_process_local_data(self.batch_sharding, local))

  def replicate(self, tree) -> Any:
    return jax.device_put(tree, self.replicated)

  def local_copy(self, tree) -> Any:
    """`tree` (replicated) as arrays of this process alone, for host-side work that runs in one
    process only or differently per process (decoding, drawing); unchanged in a single process."""
    if self.num_processes == 1:
      return tree
    return jax.device_put(jax.device_get(tree), self.local_devices[0])

  def jit_init(self, init_fn: Callable) -> Callable:
    """jit of `init_fn(rng, batch) -> state` with a replicated result."""
    return jax.jit(init_fn, in_shardings=(self.replicated, self.batch_sharding),
                   out_shardings=self.replicated)

  def jit_train_step(self, step_fn: Callable, num_carried: int = 1) -> Callable:
    """jit of `step_fn(*carried, batch) -> carried`, donating the carried state.

    Args:
      step_fn: e.g. `train_step(state, batch) -> (state, metrics)` (num_carried=1) or the loop's
        `loop_step(state, acc, batch) -> (state, acc)` (num_carried=2).
      num_carried: how many leading arguments are state that is replaced by the outputs (donated,
        so their buffers are reused in place).
    """
    return jax.jit(step_fn,
                   in_shardings=(self.replicated,) * num_carried + (self.batch_sharding,),
                   out_shardings=self.replicated,
                   donate_argnums=tuple(range(num_carried)))

  def jit_eval_step(self, eval_fn: Callable) -> Callable:
    """jit of `eval_fn(params, batch) -> metrics` (nothing donated: the parameters live on)."""
    return jax.jit(eval_fn, in_shardings=(self.replicated, self.batch_sharding),
                   out_shardings=self.replicated)

  def prefetch(self, batches: Iterator, size: int = 2, with_state: bool = True) -> Iterator:
    """Keeps `size` batches on the way to the devices ahead of the one being consumed.

    Args:
      batches: host batches; when `with_state`, an iterator with `get_state()` (resumable).
      size: how many batches to transfer ahead (>= 1).
      with_state: also yield the iterator position right after each batch was drawn.

    Yields:
      Sharded device batches, or (device batch, position) pairs when `with_state`. The position
      belongs to the yielded batch, not to the prefetched ones, so a checkpoint written after
      training on that batch resumes exactly at the next one.
    """
    queue = collections.deque()
    iterator = iter(batches)

    def enqueue():
      try:
        host = next(iterator)
      except StopIteration:
        return False
      position = batches.get_state() if with_state else None
      queue.append((self.shard_batch(host), position))
      return True

    for _ in range(max(size, 1)):
      if not enqueue():
        break
    while queue:
      device_batch, position = queue.popleft()
      enqueue()
      yield (device_batch, position) if with_state else device_batch


class StopAgreement:
  """The processes' common decision to stop: the largest signal number any of them received.

  Every process calls it once per step with its own signal (None: none). In a single process the
  answer is that signal, at once. With several, the processes' signals are reduced on the devices
  and the answer is the one of the previous call, read while the current step runs, so no step
  waits for it; every process gets the same answer at the same step and they stop together.
  """

  def __init__(self, dp: DataParallel):
    self.dp = dp
    self._pending: jax.Array | None = None

  def __call__(self, signum: int | None) -> int | None:
    if self.dp.num_processes == 1:
      return signum
    previous, self._pending = self._pending, self.dp.max_over_processes(signum or 0)
    agreed = 0 if previous is None else int(previous)
    return agreed or None
