"""How the classifiers initialize their parameters: flax's defaults, the chapter's, or Gluon's.

The nndl chapter trains its models in PaddlePaddle 2.x and leaves every initializer at the
framework's default except its pooling query's, and those defaults are not flax's:

  parameter                    'flax' (the default here)          'paddle' (the chapter's)
  word embedding (V, E)        normal, std 1 / sqrt(E)             Xavier uniform: +- sqrt(6 / (V + E))
  LSTM W_ih (D, n, 4H)         LeCun normal, std 1 / sqrt(D)       uniform +- 1 / sqrt(H)
  LSTM W_hh (n, H, 4H)         orthogonal                          uniform +- 1 / sqrt(H)
  LSTM bias (n, 4H)            zeros                               b_ih + b_hh, each uniform +- 1 / sqrt(H)
  dense kernels (in, out)      LeCun normal, std 1 / sqrt(in)      Xavier uniform: +- sqrt(6 / (in + out))
  dense biases                 zeros                               zeros
  pooling query (1, D)         normal, std 1 / sqrt(D)             uniform +- 0.5 (set by the chapter)

With the chapter's vocabulary of V ~ 10^5 words, its embeddings start some 10 times smaller than
flax's (+- 0.006 against a standard deviation of 0.088 for E = 128), so a rare word's vector is
mostly what training wrote into it rather than its random start. Paddle keeps the LSTM's two
biases apart; zoo.LSTMLayer has one, initialized here as the sum of two such draws: the same
function at the start, though under Adam Paddle's two biases move their sum up to twice as far a
step, which one bias does not reproduce.

Which part carries the chapter's gain of about a point is no single one: in paired runs
(docs/RESULTS.md, "Which part of the initialization"), the whole initialization raised test
accuracy in each of three seeds, while swapping one part (the embedding table, the LSTM's or the
pooling query's initializers) moved it by half a point or more in some seeds, in either direction,
and the dense kernels' by less than 0.1 point: the parts act together.

'gluon' is the Gluon SANet post's `net.initialize(init.Uniform(0.1))`: MXNet's initializer draws
every weight (embedding, LSTM, dense kernels, query) uniform on +- 0.1 and leaves biases zero.

`named(name)` returns the `Initializers` of a name: one of NAMES, or for an ablation one of them
with parts taken from the other, '+'-joined as `<source>_<part>` with a part of PARTS:
'paddle+flax_embedding' is the chapter's initialization with flax's embedding table,
'flax+paddle_embedding+paddle_lstm' flax's with the chapter's embedding table and LSTM
initializers.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

import zoo

Initializer = Callable[..., jax.Array]
NAMES = ("flax", "paddle", "gluon")


class Initializers(NamedTuple):
  """The initializers of a BiLSTM classifier's parameters (see the module docstring).

  Attributes:
    embedding: of the word (and bigram) embedding tables (V, E).
    lstm: of every BiLSTM layer (a function of the layer's hidden size H).
    dense_kernel: of the dense layers' kernels: the output layer, the pooling scores' W, U and v,
      the self-attention projections.
    query: of the attention-pooling query (1, D).
  """
  embedding: Initializer
  lstm: Callable[[int], zoo.LSTMInit]
  dense_kernel: Initializer
  query: Initializer | None  # None: zoo.AttentionPooling's own default


def symmetric_uniform(limit: float) -> Initializer:
  """Uniform on [-limit, limit), any shape."""
  def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
    return jax.random.uniform(key, shape, dtype, -limit, limit)
  return init


def sum_of_uniforms(limit: float) -> Initializer:
  """The sum of two independent draws uniform on [-limit, limit): b_ih + b_hh as one bias."""
  def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
    first, second = jax.random.split(key)
    return (jax.random.uniform(first, shape, dtype, -limit, limit)
            + jax.random.uniform(second, shape, dtype, -limit, limit))
  return init


def paddle_lstm(hidden_size: int) -> zoo.LSTMInit:
  """Paddle's LSTM defaults for state width H: every weight and both biases uniform +- 1/sqrt(H)."""
  limit = 1.0 / math.sqrt(hidden_size)
  return zoo.LSTMInit(kernel=symmetric_uniform(limit), recurrent_kernel=symmetric_uniform(limit),
                      bias=sum_of_uniforms(limit))


FLAX = Initializers(embedding=nn.linear.default_embed_init, lstm=lambda hidden_size: zoo.LSTMInit(),
                    dense_kernel=nn.linear.default_kernel_init, query=None)
# Xavier uniform over (V, E) is Paddle's default for any weight, the embedding table included.
PADDLE = Initializers(embedding=nn.initializers.xavier_uniform(), lstm=paddle_lstm,
                      dense_kernel=nn.initializers.xavier_uniform(),
                      query=symmetric_uniform(0.5))


# MXNet's init.Uniform(0.1) as the Gluon post applies it: every weight +- 0.1, biases zero.
GLUON = Initializers(embedding=symmetric_uniform(0.1),
                     lstm=lambda hidden_size: zoo.LSTMInit(kernel=symmetric_uniform(0.1),
                                                           recurrent_kernel=symmetric_uniform(0.1),
                                                           bias=nn.initializers.zeros_init()),
                     dense_kernel=symmetric_uniform(0.1), query=symmetric_uniform(0.1))


BASES = {"flax": FLAX, "paddle": PADDLE, "gluon": GLUON}  # by name, in NAMES order
PARTS = Initializers._fields  # what an ablation name can take from the other base


def named(name: str) -> Initializers:
  """The initializers called `name`: 'flax', 'paddle', or an ablation such as
  'paddle+flax_embedding' (see the module docstring)."""
  base, *swaps = name.split("+")
  if base not in BASES:
    raise ValueError(f"unknown initialization {name!r}: it must start with one of "
                     f"{', '.join(NAMES)}")
  initializers, taken = BASES[base], set()
  for swap in swaps:
    source, _, part = swap.partition("_")
    if source not in BASES or part not in PARTS:
      raise ValueError(f"initialization {name!r}: {swap!r} is not <source>_<part> with a source "
                       f"of {', '.join(NAMES)} and a part of {', '.join(PARTS)}")
    if source == base or part in taken:
      raise ValueError(f"initialization {name!r}: {swap!r} " + (
          f"takes from the base {base!r} itself" if source == base else f"takes {part!r} twice"))
    taken.add(part)
    initializers = initializers._replace(**{part: getattr(BASES[source], part)})
  return initializers
