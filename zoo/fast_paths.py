"""Fast paths for the GPU, with the portable versions elsewhere; same parameters, same results.

Attention. `jax.nn.dot_product_attention(implementation=None)` runs XLA's version, never cuDNN's
flash attention, so the fast kernel must be asked for by name, and it only exists for some inputs.
`attention_backend` says which applies; `dot_product_attention` calls it; `multihead_implementation`
is the choice zoo.MultiHeadAttention's implementation='auto' makes (the fused path where it can
compute what was asked for and is faster; the vmapped path otherwise).

LSTM. cuDNN's LSTM (`jax.experimental.rnn.lstm`, GPU only) keeps its weights in one flat vector;
`lstm_to_cudnn_weights` packs a zoo.LSTM parameter tree into that vector and
`cudnn_weights_to_lstm` unpacks it (the round trip zoo -> cuDNN -> zoo is exact). `cudnn_lstm`
runs a zoo.LSTM's parameters through cuDNN with zoo.LSTM's conventions (padded steps give zero
outputs and keep the state, the backward direction starts at each sequence's last real token,
final states per layer as LSTMState(h, c) of shape (B, n*H)); gradients flow back to the zoo
parameters through the packing. `FastLSTM` is zoo.LSTM with that choice made per call
(`lstm_implementation`): the scan, on every backend for now, since the one GPU measurement made
(H100, jax 0.11.2, 2026-11-27, docs/BENCHMARKS.md) found the cuDNN path 1.7x slower than the scan
for the IMDB classifier's BiLSTM training step (21.3 against 12.4 ms; batch 128, 256 steps, H 128);
`implementation='cudnn'` asks for it by name.

A bidirectional LSTM runs as 2 x layers one-layer forward-only cuDNN calls (the backward direction
over each sequence reversed within its length), not as one bidirectional call: on an H200 with jax
0.11.2 (2026-11-26, benchmarks/gpu_checks.py) the bidirectional kernel's outputs matched zoo.LSTM
but its final states h_n, c_n did not (relative error 3.1), while the forward-only kernel's final
states did, ragged and empty sequences included (to 5e-4, the TF32 rounding of the scan they were
compared with). This form passed benchmarks/gpu_checks.py on an H100 (jax 0.11.2, 2026-11-27):
outputs, final states and gradients of both directions within 3e-7 of the scan at full precision.

cuDNN flat layout, for pseudo-layers p = layer * n + direction (n = 2 when bidirectional):
  W_ih[p] (4H, D_in) for every p, each followed by W_hh[p] (4H, H); then b_ih[p] (4H,) and
  b_hh[p] (4H,) for every p. Gates in the order i, f, g, o (zoo's order too). zoo has one bias b per
  direction: it is packed as b_ih with b_hh = 0, and unpacked as b_ih + b_hh.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, Sequence, cast

import jax
import jax.numpy as jnp
import numpy as np

from zoo import batching
from zoo import checks
from zoo import recurrent

Params = Mapping[str, Any]

LSTM_IMPLEMENTATIONS: tuple[str, ...] = ("auto", "scan", "cudnn")
ATTENTION_BACKENDS: tuple[str, ...] = ("auto", "xla", "cudnn")
_CUDNN_ATTENTION_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


# ------------------------------------------------------------------------------------------------
# Attention


def attention_backend(query: jax.Array, key: jax.Array, value: jax.Array, *,
                      mask: jax.Array | None = None, backend: str | None = None) -> str:
  """'cudnn' where cuDNN flash attention applies to these inputs, else 'xla'.

  cuDNN applies on a GPU for bfloat16 or float16 inputs of one dtype, rank 4 (B, L, H, Dh), head
  widths Dh = Dv <= 128 and a multiple of 8, and no general boolean mask (padding goes through
  lengths and causality through is_causal; an arbitrary mask would become a dense bias).

  Args:
    query: (B, Q, H, Dh).
    key: (B, K, Hkv, Dh).
    value: (B, K, Hkv, Dv).
    mask: the boolean mask that would be passed, or None.
    backend: the JAX platform ('gpu', 'cpu', ...); None asks `jax.default_backend()`.

  Returns:
    'cudnn' or 'xla'.
  """
  backend = jax.default_backend() if backend is None else backend
  dtypes = {jnp.dtype(query.dtype), jnp.dtype(key.dtype), jnp.dtype(value.dtype)}
  head_dim, value_dim = query.shape[-1], value.shape[-1]
  applies = (backend == "gpu" and len(dtypes) == 1 and dtypes.pop() in _CUDNN_ATTENTION_DTYPES
             and query.ndim == 4 and key.ndim == 4 and value.ndim == 4
             and head_dim == value_dim and head_dim <= 128 and head_dim % 8 == 0
             and mask is None)
  return "cudnn" if applies else "xla"


def dot_product_attention(query: jax.Array, key: jax.Array, value: jax.Array, *,
                          mask: jax.Array | None = None, key_lens: jax.Array | None = None,
                          is_causal: bool = False, implementation: str = "auto") -> jax.Array:
  """jax.nn.dot_product_attention with the implementation chosen by `attention_backend`.

  Args:
    query: (B, Q, H, Dh).
    key: (B, K, Hkv, Dh).
    value: (B, K, Hkv, Dv).
    mask: bool broadcastable to (B, H, Q, K), True = may attend, or None.
    key_lens: int32 (B,), the number of valid keys of each example, or None.
    is_causal: query i attends to keys j <= i only.
    implementation: 'auto', 'xla' or 'cudnn'.

  Returns:
    (B, Q, H, Dv). As with jax.nn.dot_product_attention, a query with no key to attend to gets the
    mean of the values, not zeros; callers with the zoo's convention zero those rows themselves.
  """
  if implementation not in ATTENTION_BACKENDS:
    raise ValueError(f"implementation: unknown {implementation!r}; known are "
                     f"{', '.join(ATTENTION_BACKENDS)}")
  if implementation == "auto":
    implementation = attention_backend(query, key, value, mask=mask)
  lens = None if key_lens is None else jnp.asarray(key_lens, jnp.int32)
  backend = cast(Literal["xla", "cudnn"], implementation)  # checked above, "auto" resolved
  return jax.nn.dot_product_attention(query, key, value, mask=mask, key_value_seq_lengths=lens,
                                      is_causal=is_causal, implementation=backend)


def multihead_implementation(*, score: str = "scaled_dot", dropout: bool = False,
                             return_weights: bool = False, backend: str | None = None) -> str:
  """What zoo.MultiHeadAttention(implementation='auto') should run: 'fused' or 'vmap'.

  The fused path computes only the scaled-dot score, without weights or attention dropout; where it
  can, it is chosen on a GPU (where it reaches cuDNN's flash attention and saves the (B, H, Q, K)
  scores in memory). On the CPU the vmapped path was never slower than the fused one and faster at
  L = 1024 (docs/BENCHMARKS.md), and it supports everything, so it stays.

  Args:
    score: the score name.
    dropout: whether attention dropout is active in this call.
    return_weights: whether the caller wants the attention weights.
    backend: the JAX platform; None asks `jax.default_backend()`.

  Returns:
    'fused' or 'vmap'.
  """
  backend = jax.default_backend() if backend is None else backend
  can_fuse = score == "scaled_dot" and not dropout and not return_weights
  return "fused" if can_fuse and backend == "gpu" else "vmap"


# ------------------------------------------------------------------------------------------------
# LSTM: parameter packing


def _lstm_layout(params: Params) -> tuple[int, int, int, int]:
  """(num_layers, n, D_in of layer 0, H) read off a zoo.LSTM parameter tree."""
  names = sorted((k for k in params if k.startswith("layers_")), key=lambda k: int(k[7:]))
  if not names or names != [f"layers_{i}" for i in range(len(names))]:
    raise ValueError(f"params: expected a zoo.LSTM parameter tree with keys layers_0, layers_1, "
                     f"..., got keys {sorted(params)}")
  kernel = params["layers_0"]["input"]["kernel"]  # (D, n, 4H)
  hidden_kernel = params["layers_0"]["hidden_kernel"]  # (n, H, 4H)
  return len(names), kernel.shape[1], kernel.shape[0], hidden_kernel.shape[1]


def lstm_to_cudnn_weights(params: Params) -> jax.Array:
  """Packs a zoo.LSTM (or LSTMLayer-stack) parameter tree into cuDNN's flat weight vector.

  Args:
    params: {'layers_0': {'input': {'kernel': (D, n, 4H), 'bias': (n, 4H)},
             'hidden_kernel': (n, H, 4H)}, 'layers_1': ...} (layer l > 0 has D = n * H).

  Returns:
    float (P,) with P = jax.experimental.rnn.get_num_params_in_lstm(D, H, layers, n == 2), in the
    parameters' dtype.
  """
  num_layers, n, _, _ = _lstm_layout(params)
  matrices, biases = [], []
  for layer in range(num_layers):
    p = params[f"layers_{layer}"]
    kernel, bias = p["input"]["kernel"], p["input"]["bias"]  # (D_in, n, 4H), (n, 4H)
    for direction in range(n):
      matrices.append(kernel[:, direction, :].T.reshape(-1))  # W_ih (4H, D_in)
      matrices.append(p["hidden_kernel"][direction].T.reshape(-1))  # W_hh (4H, H)
      biases.append(bias[direction])  # b_ih (4H,)
      biases.append(jnp.zeros_like(bias[direction]))  # b_hh (4H,)
  return jnp.concatenate(matrices + biases)


def cudnn_weights_to_lstm(weights: jax.Array, input_size: int, hidden_size: int,
                          num_layers: int, bidirectional: bool) -> dict[str, Any]:
  """Unpacks cuDNN's flat LSTM weights into a zoo.LSTM parameter tree (b = b_ih + b_hh).

  Args:
    weights: (P,) in cuDNN's layout (module docstring).
    input_size: D, the width of the first layer's input.
    hidden_size: H.
    num_layers: the number of layers.
    bidirectional: n = 2 directions per layer.

  Returns:
    {'layers_{l}': {'input': {'kernel': (D_in, n, 4H), 'bias': (n, 4H)},
                    'hidden_kernel': (n, H, 4H)}}.
  """
  n, gates = (2 if bidirectional else 1), 4 * hidden_size
  inputs = [input_size] + [n * hidden_size] * (num_layers - 1)
  expected = lstm_parameter_count(input_size, hidden_size, num_layers, bidirectional)
  checks.rank(weights, 1, "weights")
  if weights.shape[0] != expected:
    raise ValueError(f"weights: expected {expected} values for input_size={input_size}, "
                     f"hidden_size={hidden_size}, num_layers={num_layers}, "
                     f"bidirectional={bidirectional}, got shape {tuple(weights.shape)}")
  offset = 0

  def take(size: int) -> jax.Array:
    nonlocal offset
    part = weights[offset:offset + size]
    offset += size
    return part

  w_ih, w_hh = [], []
  for d_in in inputs:
    for _ in range(n):
      w_ih.append(take(gates * d_in).reshape(gates, d_in))
      w_hh.append(take(gates * hidden_size).reshape(gates, hidden_size))
  bias = []
  for _ in range(num_layers * n):
    b_ih, b_hh = take(gates), take(gates)
    bias.append(b_ih + b_hh)
  params = {}
  for layer in range(num_layers):
    pseudo = range(layer * n, (layer + 1) * n)
    params[f"layers_{layer}"] = {
        "input": {"kernel": jnp.stack([w_ih[p].T for p in pseudo], axis=1),  # (D_in, n, 4H)
                  "bias": jnp.stack([bias[p] for p in pseudo])},  # (n, 4H)
        "hidden_kernel": jnp.stack([w_hh[p].T for p in pseudo]),  # (n, H, 4H)
    }
  return params


# ------------------------------------------------------------------------------------------------
# LSTM: running through cuDNN


def _states_to_cudnn(states: Sequence[recurrent.LSTMState], n: int) -> tuple[jax.Array, jax.Array]:
  """Per-layer LSTMState (B, n*H) -> h_0, c_0 (layers * n, B, H)."""
  def stack(parts):
    return jnp.concatenate([recurrent.directions_first(p.astype(jnp.float32), n) for p in parts])
  return stack([s.h for s in states]), stack([s.c for s in states])


def _states_from_cudnn(h_n: jax.Array, c_n: jax.Array, num_layers: int,
                       n: int) -> tuple[recurrent.LSTMState, ...]:
  """h_n, c_n (layers * n, B, H) -> per-layer LSTMState (B, n*H)."""
  def layer_state(x, layer):
    part = x[layer * n:(layer + 1) * n]  # (n, B, H)
    return part.transpose(1, 0, 2).reshape(part.shape[1], -1)  # (B, n*H)
  return tuple(recurrent.LSTMState(layer_state(h_n, l), layer_state(c_n, l))
               for l in range(num_layers))


def cudnn_lstm(params: Params, x: jax.Array, lengths: jax.Array | None = None, *,
               initial_state: Sequence[recurrent.LSTMState] | None = None,
               precision: Any = None) -> tuple[jax.Array, tuple[recurrent.LSTMState, ...]]:
  """zoo.LSTM's forward pass through cuDNN (GPU only), from a zoo.LSTM parameter tree.

  Args:
    params: a zoo.LSTM parameter tree (see lstm_to_cudnn_weights), float32.
    x: float32 (B, L, D).
    lengths: int (B,), real steps per sequence in [0, L]; None means all L.
    initial_state: None (zeros) or one (h, c) pair per layer, each (B, n*H).
    precision: passed to jax.experimental.rnn.lstm (None: TF32 allowed; 'highest': exact float32).

  Returns:
    outputs (B, L, n*H), zero at padded steps, and the final LSTMState per layer (B, n*H), as
    zoo.LSTM returns them (dropout between layers is not supported here).
  """
  from jax.experimental import rnn  # pylint: disable=import-outside-toplevel

  num_layers, n, input_size, hidden_size = _lstm_layout(params)
  checks.rank(x, 3, "x")
  batch, steps = x.shape[:2]
  if lengths is None:
    lengths = jnp.full((batch,), steps, jnp.int32)
  lengths = jnp.asarray(lengths, jnp.int32)
  if initial_state is None:
    initial_state = recurrent.zero_states(num_layers, batch, n * hidden_size)
  else:
    initial_state = recurrent.check_states(initial_state, "initial_state", num_layers, batch,
                                           n * hidden_size)
  h_0, c_0 = _states_to_cudnn(initial_state, n)
  # cuDNN wants lengths >= 1; an empty sequence runs one step here and is put back below.
  run_lengths = jnp.maximum(lengths, 1)
  x = jnp.asarray(x, jnp.float32)
  if n == 1:
    outputs, h_n, c_n = rnn.lstm(x, h_0, c_0, lstm_to_cudnn_weights(params).astype(jnp.float32),
                                 run_lengths, input_size=input_size, hidden_size=hidden_size,
                                 num_layers=num_layers, dropout=0.0, bidirectional=False,
                                 precision=precision)
  else:
    # cuDNN's bidirectional h_n/c_n did not match zoo.LSTM's final states on a real GPU (H200,
    # jax 0.11.2) although its outputs did; so each direction of each layer runs as a
    # one-layer forward-only cuDNN LSTM (whose final states were checked there), the backward
    # one over each sequence reversed within its length: its final state is then the state
    # after the first token, zoo's convention.
    outputs, h_parts, c_parts = x, [], []
    for layer in range(num_layers):
      p = params[f"layers_{layer}"]
      directions = []
      for d in range(2):
        one = {"layers_0": {"input": {"kernel": p["input"]["kernel"][:, d:d + 1],
                                      "bias": p["input"]["bias"][d:d + 1]},
                            "hidden_kernel": p["hidden_kernel"][d:d + 1]}}
        seq = outputs if d == 0 else recurrent.reverse_valid(outputs, lengths)
        pseudo = slice(2 * layer + d, 2 * layer + d + 1)
        y, h_d, c_d = rnn.lstm(seq, h_0[pseudo], c_0[pseudo],
                               lstm_to_cudnn_weights(one).astype(jnp.float32), run_lengths,
                               input_size=seq.shape[-1], hidden_size=hidden_size, num_layers=1,
                               dropout=0.0, bidirectional=False, precision=precision)
        directions.append(y if d == 0 else recurrent.reverse_valid(y, lengths))
        h_parts.append(h_d)
        c_parts.append(c_d)
      outputs = jnp.concatenate(directions, axis=-1)
    h_n, c_n = jnp.concatenate(h_parts), jnp.concatenate(c_parts)  # (layers * 2, B, H)
  valid = jnp.arange(steps)[None, :] < lengths[:, None]  # (B, L)
  outputs = jnp.where(valid[..., None], outputs, 0.0)
  finals = _states_from_cudnn(h_n, c_n, num_layers, n)
  empty = (lengths == 0)[:, None]  # (B, 1)
  finals = tuple(recurrent.LSTMState(jnp.where(empty, s0.h, s.h), jnp.where(empty, s0.c, s.c))
                 for s, s0 in zip(finals, initial_state))
  return outputs, finals


def lstm_implementation(*, dtype: Any = jnp.float32, dropout: bool = False,
                        backend: str | None = None) -> str:
  """What FastLSTM(implementation='auto') runs: 'scan' everywhere for now.

  cuDNN applies on a GPU to a float32 LSTM without active dropout (`cudnn_applies`), but measured
  there (H100, 2026-11-27: the IMDB classifier's training step, 21.3 ms against the scan's 12.4)
  it is the slower path, so it is not chosen; ask for implementation='cudnn' to run it.
  """
  del dtype, dropout, backend  # the rule has no case where cuDNN wins yet
  return "scan"


def cudnn_applies(*, dtype: Any = jnp.float32, dropout: bool = False,
                  backend: str | None = None) -> bool:
  """Whether implementation='cudnn' can run: a GPU, float32, no active dropout."""
  backend = jax.default_backend() if backend is None else backend
  return backend == "gpu" and jnp.dtype(dtype) == jnp.dtype(jnp.float32) and not dropout


class FastLSTM(recurrent.LSTM):
  """zoo.LSTM (same fields, parameters and results) that runs through cuDNN where it applies.

  Attributes:
    implementation: 'auto' (`lstm_implementation` decides per call), 'scan' or 'cudnn'.
  """
  implementation: str = "auto"

  def __call__(self, x: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None,
               initial_state: Sequence[recurrent.LSTMState] | None = None,
               deterministic: bool = True) -> tuple[jax.Array, tuple[recurrent.LSTMState, ...]]:
    """As zoo.LSTM.__call__ (valid_lens and mask, any leading batch shape)."""
    if self.implementation not in LSTM_IMPLEMENTATIONS:
      raise ValueError(f"implementation: unknown {self.implementation!r}; known are "
                       f"{', '.join(LSTM_IMPLEMENTATIONS)}")
    dropout = self.dropout_rate > 0.0 and not deterministic and self.num_layers > 1
    # dtype=None: the promoted type of the inputs and the parameters (flax's rule).
    dtype = self.dtype if self.dtype is not None else jnp.promote_types(jnp.result_type(x),
                                                                        self.param_dtype)
    chosen = self.implementation
    if chosen == "auto":
      chosen = lstm_implementation(dtype=dtype, dropout=dropout)
    if chosen == "scan" or self.is_initializing():
      return super().__call__(x, valid_lens=valid_lens, mask=mask, initial_state=initial_state,
                              deterministic=deterministic)
    if dropout:
      raise ValueError("implementation='cudnn': dropout between layers is not supported; use "
                       "deterministic=True or implementation='scan'")
    lead = batching.leading_shape(x, 2, "x")
    lengths = recurrent.fold_lengths(valid_lens, mask, lead, x.shape[-2])
    states = None if initial_state is None else cast(  # given: every layer's state, checked
        tuple[recurrent.LSTMState, ...], self._folded_states(initial_state, lead))
    outputs, finals = cudnn_lstm(self.variables["params"], batching.fold(x, lead), lengths,
                                 initial_state=states)
    return batching.unfold((outputs.astype(dtype), finals), lead)


def lstm_parameter_count(input_size: int, hidden_size: int, num_layers: int,
                         bidirectional: bool) -> int:
  """P, the length of cuDNN's flat weight vector (biases b_ih and b_hh both counted)."""
  n, gates = (2 if bidirectional else 1), 4 * hidden_size
  inputs = [input_size] + [n * hidden_size] * (num_layers - 1)
  return int(np.sum([n * (gates * d + gates * hidden_size + 2 * gates) for d in inputs]))
