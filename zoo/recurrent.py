"""LSTM encoders that honour per-example lengths, and the single LSTM step that decoders build on.

The LSTM equations, with gates stacked in PyTorch's order i, f, g, o along the last axis:

  gates = x W_ih + b + h W_hh                       (4H,)  split into i, f, g, o of width H
  c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
  h' = sigmoid(o) * tanh(c')

Parameters of one layer (`LSTMLayer`), with a direction axis n (1, or 2 when bidirectional; index 0
is the forward direction, 1 the backward one) so both directions run in ONE scan:

  input/kernel   (D, n, 4H)   W_ih; PyTorch's weight_ih_l{k}[_reverse] is its transpose (4H, D)
  input/bias     (n, 4H)      b; PyTorch's bias_ih + bias_hh
  hidden_kernel  (n, H, 4H)   W_hh; PyTorch's weight_hh_l{k}[_reverse] transposed

Speed: x W_ih + b for every time step (and both directions) is one big matmul before the scan; the
scan itself only does h W_hh and the gate arithmetic. Matmuls run in `dtype` with float32
accumulation; the gates, h and c are carried in float32 (so bfloat16 runs do not drift over long
sequences) and outputs are cast to `dtype`.

States: an `LSTMState(h, c)` per layer, each (B, n*H): for a bidirectional layer the forward state
comes first and the backward one second, the same layout as the outputs' last axis.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from zoo import batching
from zoo import checks
from zoo import masking

Dtype = Any
Initializer = Callable[..., jax.Array]


class LSTMState(NamedTuple):
  """The recurrent state of one LSTM layer: hidden output h and memory cell c, both (B, n*H)."""
  h: jax.Array
  c: jax.Array


class LSTMInit(NamedTuple):
  """Initializers of one LSTM layer's parameters.

  Attributes:
    kernel: of W_ih (D, n, 4H); LeCun normal (fan-in D) by default.
    recurrent_kernel: of W_hh (n, H, 4H); orthogonal rows by default.
    bias: of b (n, 4H); zeros by default (a forget-gate bias of 1 is a common alternative).
  """
  kernel: Initializer = nn.initializers.lecun_normal()
  recurrent_kernel: Initializer = nn.initializers.orthogonal()
  bias: Initializer = nn.initializers.zeros_init()


def lstm_update(gates: jax.Array, c: jax.Array) -> LSTMState:
  """The LSTM nonlinearity: pre-activations and the old cell to the new (h, c).

  Args:
    gates: (..., 4H) pre-activations x W_ih + b + h W_hh, in gate order i, f, g, o.
    c: (..., H) the previous memory cell.

  Returns:
    LSTMState(h (..., H), c (..., H)) in the dtype of `gates`.
  """
  if np.shape(gates)[-1] != 4 * np.shape(c)[-1]:
    raise ValueError(f"gates with shape {np.shape(gates)} must be 4 times as wide as the cell c "
                     f"with shape {np.shape(c)} (gate order i, f, g, o)")
  i, f, g, o = jnp.split(gates, 4, axis=-1)
  c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
  return LSTMState(jax.nn.sigmoid(o) * jnp.tanh(c), c)


def lstm_step(hidden_kernel: jax.Array, state: LSTMState, input_gates: jax.Array,
              dtype: Dtype = jnp.float32) -> LSTMState:
  """One LSTM time step of one direction, given the input part of the gates.

  Args:
    hidden_kernel: W_hh (H, 4H).
    state: LSTMState(h (N, H), c (N, H)).
    input_gates: (N, 4H), x W_ih + b (computed outside, possibly for all steps at once).
    dtype: the dtype of the h W_hh matmul (accumulated in float32).

  Returns:
    the new LSTMState, float32 (N, H).
  """
  checks.rank(hidden_kernel, 2, "hidden_kernel")
  width = hidden_kernel.shape[0]
  if (hidden_kernel.shape[1], np.shape(input_gates)[-1], np.shape(state.h)[-1]) != (
      4 * width, 4 * width, width):
    raise ValueError(f"lstm_step: hidden_kernel {hidden_kernel.shape} (H, 4H), state.h "
                     f"{np.shape(state.h)} (N, H) and input_gates {np.shape(input_gates)} (N, 4H) "
                     "disagree on H")
  recurrent = jnp.dot(state.h.astype(dtype), hidden_kernel.astype(dtype),
                      preferred_element_type=jnp.float32)
  gates = input_gates.astype(jnp.float32) + recurrent
  return lstm_update(gates, state.c.astype(jnp.float32))


def reverse_valid(x: jax.Array, lengths: jax.Array | None) -> jax.Array:
  """Reverses each sequence within its valid length; padded positions stay where they are.

  The map is its own inverse, so it also puts outputs of a reversed run back in place.

  Args:
    x: (B, L, ...).
    lengths: int (B,), or None for sequences that fill all L positions.

  Returns:
    (B, L, ...) with `out[b, t] = x[b, lengths[b] - 1 - t]` for t < lengths[b], else x[b, t].
  """
  if lengths is None:
    return jnp.flip(x, axis=1)
  steps = jnp.arange(x.shape[1])
  lens = jnp.asarray(lengths)[:, None]
  source = jnp.where(steps < lens, lens - 1 - steps, steps)  # (B, L)
  source = source.reshape(source.shape + (1,) * (x.ndim - 2))
  return jnp.take_along_axis(x, source, axis=1)


def _scan_directions(hidden_kernel: jax.Array, gates: jax.Array, init: LSTMState,
                     mask: jax.Array | None, dtype: Dtype) -> tuple[jax.Array, LSTMState]:
  """Runs n independent directions through time in one scan.

  Args:
    hidden_kernel: (n, H, 4H).
    gates: time-major input gates (L, n, B, 4H).
    init: LSTMState with h, c float32 (n, B, H).
    mask: bool (L, B), True at real tokens (None: all real). At padded steps the state is kept and
      the output is zero.
    dtype: matmul dtype.

  Returns:
    outputs (L, n, B, H) in `dtype`, and the final LSTMState (n, B, H) float32.
  """
  kernel = hidden_kernel.astype(dtype)

  def body(state, inputs):
    gates_t, mask_t = inputs  # (n, B, 4H), (B,) or None
    recurrent = jnp.einsum("nbh,nhg->nbg", state.h.astype(dtype), kernel,
                           preferred_element_type=jnp.float32)
    new = lstm_update(gates_t.astype(jnp.float32) + recurrent, state.c)
    if mask_t is None:
      return new, new.h.astype(dtype)
    keep = mask_t[None, :, None]  # (1, B, 1)
    state = LSTMState(jnp.where(keep, new.h, state.h), jnp.where(keep, new.c, state.c))
    return state, jnp.where(keep, new.h, 0.0).astype(dtype)

  final, outputs = jax.lax.scan(body, init, (gates, mask))
  return outputs, final


def _check_state(state, name: str, batch: int, width: int) -> LSTMState:
  """Validates one layer's (h, c) pair of shape (B, width) and returns it as an LSTMState."""
  if not isinstance(state, (tuple, list)) or len(state) != 2:
    raise ValueError(f"{name}: expected a pair (h, c), got {type(state).__name__}")
  h, c = state
  for part, value in (("h", h), ("c", c)):
    if tuple(jnp.shape(value)) != (batch, width):
      raise ValueError(f"{name}.{part}: expected shape {(batch, width)}, got "
                       f"{tuple(jnp.shape(value))}")
  return LSTMState(h, c)


def check_states(states, name: str, num_layers: int, batch: int, width: int) -> tuple[LSTMState, ...]:
  """Validates a per-layer state tuple: `num_layers` pairs (h, c), each (batch, width)."""
  if not isinstance(states, (tuple, list)) or len(states) != num_layers:
    got = len(states) if isinstance(states, (tuple, list)) else type(states).__name__
    raise ValueError(f"{name}: expected a tuple of {num_layers} (h, c) pairs, one per layer, "
                     f"got {got}")
  return tuple(_check_state(s, f"{name}[{i}]", batch, width) for i, s in enumerate(states))


def zero_states(num_layers: int, batch: int, width: int) -> tuple[LSTMState, ...]:
  """All-zero float32 states: `num_layers` LSTMState(h (B, width), c (B, width))."""
  zeros = jnp.zeros((batch, width), jnp.float32)
  return tuple(LSTMState(zeros, zeros) for _ in range(num_layers))


class LSTMLayer(nn.Module):
  """One LSTM layer, forward-only or bidirectional (parameter layout in the module docstring).

  Attributes:
    hidden_size: H, the state width of one direction.
    bidirectional: also run a backward direction (starting at each sequence's last real token).
    dtype: the dtype of the matmuls and the outputs; None (the default): the promoted type of the
      inputs and parameters (flax's rule). Gates and states are float32 whatever the dtype.
    param_dtype: the dtype parameters are stored in.
    initializers: the initializers of W_ih, W_hh and b (`LSTMInit`).
  """
  hidden_size: int
  bidirectional: bool = False
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32
  initializers: LSTMInit = LSTMInit()

  @property
  def num_directions(self) -> int:
    return 2 if self.bidirectional else 1

  def setup(self):
    n, gates = self.num_directions, 4 * self.hidden_size
    self.input = nn.DenseGeneral(
        (n, gates), dtype=self.dtype, param_dtype=self.param_dtype,
        kernel_init=self.initializers.kernel, bias_init=self.initializers.bias)
    self.hidden_kernel = self.param("hidden_kernel", self.initializers.recurrent_kernel,
                                    (n, self.hidden_size, gates), self.param_dtype)

  def input_gates(self, x: jax.Array) -> jax.Array:
    """x W_ih + b for any leading axes: x (..., D) -> (..., n, 4H) in `dtype`."""
    return self.input(x)

  def step(self, state: LSTMState, input_gates: jax.Array) -> LSTMState:
    """One time step of a forward-only layer.

    Args:
      state: LSTMState(h (N, H), c (N, H)).
      input_gates: (N, 4H), from `input_gates(x)[..., 0, :]` plus any other input projections.

    Returns:
      the new LSTMState, float32 (N, H).
    """
    if self.bidirectional:
      raise ValueError("step: a bidirectional layer cannot run one step at a time "
                       "(its backward direction needs the whole sequence)")
    dtype = nn.dtypes.canonicalize_dtype(input_gates, self.hidden_kernel, dtype=self.dtype)
    return lstm_step(self.hidden_kernel[0], state, input_gates, dtype)

  def __call__(self, x: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None,
               initial_state: LSTMState | None = None) -> tuple[jax.Array, LSTMState]:
    """Runs the layer over padded sequences.

    Args:
      x: (*batch, L, D), any leading batch shape, none included.
      valid_lens: int (*batch,), the number of real tokens of each sequence (None: all L real).
      mask: bool broadcastable to (*batch, L), True at real tokens, each row a prefix (True then
        False). Given both, a step is real iff both say so (zoo.masking.prefix_lengths).
      initial_state: LSTMState(h (*batch, n*H), c (*batch, n*H)), or None for zeros.

    Returns:
      outputs (*batch, L, n*H) in `dtype`, zero at padded steps; [forward, backward] on the last
      axis. final LSTMState(h (*batch, n*H), c (*batch, n*H)) float32: the state after each
      sequence's last real token (forward) and after its first token (backward).
    """
    lead = batching.leading_shape(x, 2, "x")
    checks.floating(x, "x")
    lengths = fold_lengths(valid_lens, mask, lead, x.shape[-2])
    x = batching.fold(x, lead)
    if initial_state is not None:
      initial_state = fold_state(initial_state, "initial_state", lead)
    outputs, final = self._run(x, lengths, initial_state)
    return batching.unfold((outputs, final), lead)

  def _run(self, x: jax.Array, lengths: jax.Array | None,
           initial_state: LSTMState | None) -> tuple[jax.Array, LSTMState]:
    """`__call__` on folded inputs: x (B, L, D), lengths int (B,) or None."""
    batch, steps = x.shape[0], x.shape[1]
    n, hidden = self.num_directions, self.hidden_size
    dtype = nn.dtypes.canonicalize_dtype(x, self.hidden_kernel, dtype=self.dtype)
    gates = self.input_gates(x)  # (B, L, n, 4H): one matmul for all steps and directions
    if self.bidirectional:
      gates = jnp.stack([gates[:, :, 0], reverse_valid(gates[:, :, 1], lengths)], axis=2)
    mask = None if lengths is None else (jnp.arange(steps)[:, None] < lengths[None, :])  # (L, B)
    if initial_state is None:
      init = LSTMState(*(jnp.zeros((n, batch, hidden), jnp.float32),) * 2)
    else:
      initial_state = _check_state(initial_state, "initial_state", batch, n * hidden)
      init = LSTMState(*(directions_first(jnp.asarray(s, jnp.float32), n) for s in initial_state))
    outputs, final = _scan_directions(self.hidden_kernel, gates.transpose(1, 2, 0, 3), init, mask,
                                      dtype)
    outputs = outputs.transpose(2, 0, 1, 3)  # (B, L, n, H)
    if self.bidirectional:
      outputs = jnp.stack([outputs[:, :, 0], reverse_valid(outputs[:, :, 1], lengths)], axis=2)
    final = LSTMState(*(s.transpose(1, 0, 2).reshape(batch, n * hidden) for s in final))
    return outputs.reshape(batch, steps, n * hidden), final


def fold_lengths(valid_lens: jax.Array | None, mask: jax.Array | None, lead: tuple[int, ...],
                 steps: int) -> jax.Array | None:
  """A recurrent encoder's `valid_lens=` and `mask=` for x (*lead, L, D) -> lengths int (B,).

  The zoo's rule (zoo.masking.prefix_lengths): a step is real iff both allow it; None for neither.
  """
  valid_lens = batching.fold_lengths(valid_lens, lead, (), "valid_lens", batching.BATCH_AXES)
  if valid_lens is not None:
    checks.lengths_in_range(valid_lens, "valid_lens", steps)
  mask = batching.fold_mask(mask, lead, (steps,), "mask", "the steps (*batch, L) =")
  lengths = masking.prefix_lengths(valid_lens, mask, steps)
  if lengths is None:
    return None
  return jnp.broadcast_to(lengths, (math.prod(lead),))


def fold_state(state, name: str, lead: tuple[int, ...]) -> LSTMState:
  """One layer's (h, c), each (*lead, W), folded to (B, W); a wrong structure raises naming it."""
  if not isinstance(state, (tuple, list)) or len(state) != 2:
    raise ValueError(f"{name}: expected a pair (h, c), got {type(state).__name__}")
  for part, value in zip("hc", state):
    batching.same_leading(value, f"{name}.{part}", 1, lead, "x")
  return LSTMState(*(batching.fold(value, lead) for value in state))


def directions_first(state: jax.Array, n: int) -> jax.Array:
  """Splits a state of n directions, as LSTM returns it, into one state per direction.

  zoo.LSTM lays the directions side by side in a state (B, n*H) (forward first), while the scan
  here and cuDNN's LSTM (zoo.fast_paths) want the direction as the leading axis.

  Args:
    state: h or c (B, n*H).
    n: the number of directions (1, or 2 when bidirectional).

  Returns:
    (n, B, H): `out[d] = state[:, d*H:(d+1)*H]`.
  """
  batch = state.shape[0]
  return state.reshape(batch, n, -1).transpose(1, 0, 2)  # (B, n, H) -> (n, B, H)


class LSTM(nn.Module):
  """A multi-layer LSTM over padded sequences, with dropout between layers (not after the last).

  Padded steps (t >= lengths[b]) do not change the state and give zero outputs; the backward
  direction of a bidirectional LSTM starts at each sequence's last real token. Layer l + 1 reads
  layer l's outputs (both directions concatenated). Parameters: `layers_{l}` (see LSTMLayer).

  Attributes:
    hidden_size: H, the state width of one direction.
    num_layers: the number of stacked layers.
    dropout_rate: dropout on the outputs of every layer but the last (needs a 'dropout' rng when
      not deterministic).
    bidirectional: run a backward direction in every layer (outputs and states become 2H wide).
    dtype: the dtype of the matmuls and the outputs; None (the default): the promoted type of the
      inputs and parameters (flax's rule). Gates and states are float32 whatever the dtype.
    param_dtype: the dtype parameters are stored in.
    initializers: the initializers of W_ih, W_hh and b of every layer (`LSTMInit`).
  """
  hidden_size: int
  num_layers: int = 1
  dropout_rate: float = 0.0
  bidirectional: bool = False
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32
  initializers: LSTMInit = LSTMInit()

  def setup(self):
    if self.num_layers < 1:
      raise ValueError(f"num_layers: expected at least 1, got {self.num_layers}")
    self.layers = [
        LSTMLayer(self.hidden_size, self.bidirectional, dtype=self.dtype,
                  param_dtype=self.param_dtype, initializers=self.initializers)
        for _ in range(self.num_layers)]
    self.dropout = nn.Dropout(self.dropout_rate)

  @property
  def state_width(self) -> int:
    """The width of outputs and of each state h, c: H, or 2H when bidirectional."""
    return self.hidden_size * (2 if self.bidirectional else 1)

  def __call__(self, x: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None,
               initial_state: Sequence[LSTMState] | None = None,
               deterministic: bool = True) -> tuple[jax.Array, tuple[LSTMState, ...]]:
    """Runs all layers over padded sequences.

    Args:
      x: float (*batch, L, D), any leading batch shape, none included.
      valid_lens: int (*batch,), real tokens per sequence in [0, L]; None means all L are real.
      mask: bool broadcastable to (*batch, L), True at real tokens, each row a prefix (True then
        False). Given both, a step is real iff both say so (zoo.masking.prefix_lengths).
      initial_state: None (zeros) or a tuple of `num_layers` pairs (h, c), each (*batch, W) with
        W = `state_width` (H, or 2H = [forward, backward] when bidirectional).
      deterministic: disables dropout between layers.

    Returns:
      outputs: (*batch, L, W) of the top layer in `dtype`, zero at padded steps.
      final_state: tuple of `num_layers` LSTMState(h (*batch, W), c (*batch, W)), float32, bottom
        layer first: each layer's state after the last real token of each sequence (for the
        backward half: after the first token).
    """
    lead = batching.leading_shape(x, 2, "x")
    checks.floating(x, "x")
    lengths = fold_lengths(valid_lens, mask, lead, x.shape[-2])
    x = batching.fold(x, lead)
    outputs, finals = self._run(x, lengths, self._folded_states(initial_state, lead),
                                deterministic)
    return batching.unfold((outputs, finals), lead)

  def _folded_states(self, initial_state, lead: tuple[int, ...]) -> tuple[LSTMState | None, ...]:
    """initial_state (None, or num_layers pairs each (*lead, W)) -> per layer None or (B, W)."""
    if initial_state is None:
      return (None,) * self.num_layers
    if not isinstance(initial_state, (tuple, list)) or len(initial_state) != self.num_layers:
      check_states(initial_state, "initial_state", self.num_layers, 0, 0)  # raises, naming it
    folded = tuple(fold_state(s, f"initial_state[{i}]", lead) for i, s in enumerate(initial_state))
    return check_states(folded, "initial_state", self.num_layers, math.prod(lead),
                        self.state_width)

  def _run(self, x: jax.Array, lengths: jax.Array | None, initial_state: Sequence,
           deterministic: bool) -> tuple[jax.Array, tuple[LSTMState, ...]]:
    """All layers on folded inputs: x (B, L, D), lengths int (B,) or None, states (B, W)."""
    outputs, finals = jnp.asarray(x, self.dtype), []
    for index, layer in enumerate(self.layers):
      if index > 0:
        outputs = self.dropout(outputs, deterministic=deterministic)
      outputs, final = layer(outputs, valid_lens=lengths, initial_state=initial_state[index])
      finals.append(final)
    return outputs, tuple(finals)

  def input_gates(self, x: jax.Array) -> jax.Array:
    """The bottom layer's x W_ih + b for a forward-only LSTM: x (..., D) -> (..., 4H)."""
    return self.layers[0].input_gates(x)[..., 0, :]

  def step_gates(self, state: Sequence[LSTMState], input_gates: jax.Array, *,
                 deterministic: bool = True) -> tuple[jax.Array, tuple[LSTMState, ...]]:
    """One time step of a forward-only LSTM, given the bottom layer's input gates.

    Decoders use this to add projections of other inputs (attention contexts) to the bottom
    layer's gates, and to compute the embedding part for all steps at once (`input_gates`).

    Args:
      state: tuple of `num_layers` LSTMState(h (N, H), c (N, H)).
      input_gates: (N, 4H) pre-activations of the bottom layer's input part.
      deterministic: disables dropout between layers.

    Returns:
      the top layer's output h (N, H) in `dtype`, and the new state (float32 leaves).
    """
    new_state: list[LSTMState] = []
    gates = input_gates
    for index, layer in enumerate(self.layers):
      if index > 0:
        below = self.dropout(new_state[-1].h.astype(self._out_dtype(input_gates)),
                             deterministic=deterministic)
        gates = layer.input_gates(below)[..., 0, :]
      new_state.append(layer.step(state[index], gates))
    return new_state[-1].h.astype(self._out_dtype(input_gates)), tuple(new_state)

  def _out_dtype(self, input_gates: jax.Array) -> Dtype:
    """`dtype`, or (None) the input gates' dtype, the promoted type of the inputs and W_ih."""
    return input_gates.dtype if self.dtype is None else self.dtype

  def step(self, state: Sequence[LSTMState], x: jax.Array, *,
           deterministic: bool = True) -> tuple[jax.Array, tuple[LSTMState, ...]]:
    """One time step of a forward-only LSTM: x (N, D) -> (top output h (N, H), new state).

    Gives exactly the outputs of `__call__` on the sequence, one step at a time (state as in
    `step_gates`).
    """
    checks.rank(x, 2, "x")
    return self.step_gates(state, self.input_gates(jnp.asarray(x, self.dtype)),
                           deterministic=deterministic)


class BiLSTM(LSTM):
  """`LSTM` with `bidirectional=True`: outputs and states are [forward, backward], 2H wide."""
  bidirectional: bool = True
