"""Attention scoring functions: how well each query matches each key.

Every score is first a pure function on ONE example, mapping queries q (Q, Dq) and keys k (K, Dk) to
scores (Q, K), with its parameters passed in explicitly:

  dot_score(q, k)                        q k^T                      (Dq == Dk)
  scaled_dot_score(q, k)                 q k^T / sqrt(D)            (Dq == Dk == D)
  additive_score(q, k, w_q, w_k, v)      v^T tanh(W_q q + W_k k)    (Bahdanau, d2l's MLP attention)
  additive_score_projected(qh, kh, v)    v^T tanh(qh + kh)          (the same, from W_q q and W_k k)
  bilinear_score(q, k, w)                q^T W k                    (Luong's "general")
  concat_score(q, k, w, v)               v^T tanh(W [q; k])         (Luong's "concat")
  concat_linear_score(q, k, w)           w^T [q; k]                 (Gluon's SANet post's "concat")

Each has a Flax module that holds its parameters and maps any leading axes with `jax.vmap` (the
parameters shared across them): `__call__(q (..., Q, Dq), k (..., K, Dk)) -> (..., Q, K)`. Called on
unbatched (Q, Dq) and (K, Dk) inputs, a module can be wrapped in `nn.vmap` over a head axis with
`variable_axes={'params': 0}`, which gives every head its own parameters. `make_score(name)` picks a
module by name.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoo import checks

Dtype = Any
Initializer = Callable[..., jax.Array]


def _check_pair(q, k, same_width: bool) -> None:
  checks.rank(q, 2, "q")
  checks.rank(k, 2, "k")
  if same_width:
    checks.equal_dim(q, "q", -1, k, "k", -1)


def dot_score(q: jax.Array, k: jax.Array) -> jax.Array:
  """Dot-product score of one example.

  Args:
    q: queries (Q, D).
    k: keys (K, D).

  Returns:
    scores (Q, K), `scores[i, j] = q[i] . k[j]`.
  """
  _check_pair(q, k, same_width=True)
  return q @ k.T


def scaled_dot_score(q: jax.Array, k: jax.Array) -> jax.Array:
  """Dot-product score divided by sqrt(D) (Vaswani et al.), so its variance does not grow with D.

  Args:
    q: queries (Q, D).
    k: keys (K, D).

  Returns:
    scores (Q, K) in the dtype of `q`.
  """
  _check_pair(q, k, same_width=True)
  return dot_score(q, k) / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))


def additive_score(q: jax.Array, k: jax.Array, w_q: jax.Array, w_k: jax.Array,
                   v: jax.Array) -> jax.Array:
  """Additive (MLP) score of one example: v^T tanh(W_q q + W_k k).

  Args:
    q: queries (Q, Dq).
    k: keys (K, Dk).
    w_q: (Dq, A), projects queries to the hidden size A.
    w_k: (Dk, A), projects keys to the hidden size A.
    v: (A,), reads one number off each hidden vector.

  Returns:
    scores (Q, K).
  """
  _check_pair(q, k, same_width=False)
  return additive_score_projected(q @ w_q, k @ w_k, v)


def additive_score_projected(q_hidden: jax.Array, k_hidden: jax.Array, v: jax.Array) -> jax.Array:
  """The additive score from projected queries and keys: v^T tanh(q_hidden + k_hidden).

  additive_score(q, k, w_q, w_k, v) == additive_score_projected(q @ w_q, k @ w_k, v); a decoder
  that scores the same keys at every step projects them once (AdditiveScore.project_keys).

  Args:
    q_hidden: projected queries (Q, A), W_q q.
    k_hidden: projected keys (K, A), W_k k.
    v: (A,).

  Returns:
    scores (Q, K).
  """
  checks.rank(q_hidden, 2, "q_hidden")
  checks.rank(k_hidden, 2, "k_hidden")
  checks.equal_dim(q_hidden, "q_hidden", -1, k_hidden, "k_hidden", -1)
  return _tanh_features_scored(q_hidden, k_hidden, v)


@jax.checkpoint
def _tanh_features_scored(q_hidden: jax.Array, k_hidden: jax.Array, v: jax.Array) -> jax.Array:
  """v^T tanh(q_hidden + k_hidden): (Q, A), (K, A), (A,) -> (Q, K).

  Rematerialized: the backward pass recomputes the tanh features (Q, K, A) from the projections
  instead of keeping them. Inside a decoder's scan the kept features would be a (T, N, Q, K, A)
  array written, zero-filled and read again every training step (113 MB at bahdanau_cpu's
  size); recomputing them is cheaper there (docs/BENCHMARKS.md, "Levers") and gives the same
  gradients.
  """
  hidden = jnp.tanh(q_hidden[:, None, :] + k_hidden[None, :, :])  # (Q, K, A)
  return hidden @ v


def bilinear_score(q: jax.Array, k: jax.Array, w: jax.Array) -> jax.Array:
  """Bilinear ("general") score of one example: q^T W k.

  Args:
    q: queries (Q, Dq).
    k: keys (K, Dk).
    w: (Dq, Dk).

  Returns:
    scores (Q, K).
  """
  _check_pair(q, k, same_width=False)
  return (q @ w) @ k.T


def concat_score(q: jax.Array, k: jax.Array, w: jax.Array, v: jax.Array) -> jax.Array:
  """Concat score of one example: v^T tanh(W [q; k]).

  W applied to the concatenation [q; k] equals W_q q + W_k k with W split by rows into its first
  Dq and last Dk rows, so this is the additive score with one stacked kernel.

  Args:
    q: queries (Q, Dq).
    k: keys (K, Dk).
    w: (Dq + Dk, A).
    v: (A,).

  Returns:
    scores (Q, K).
  """
  _check_pair(q, k, same_width=False)
  dq = q.shape[-1]
  if w.shape[0] != dq + k.shape[-1]:
    raise ValueError(f"w: expected {dq + k.shape[-1]} rows (Dq + Dk), got shape {w.shape}")
  return additive_score(q, k, w[:dq], w[dq:], v)


def concat_linear_score(q: jax.Array, k: jax.Array, w: jax.Array) -> jax.Array:
  """Linear concat score of one example: w^T [q; k], with no tanh and no v.

  The Gluon SANet post's "concat" score. It splits as w[:Dq] . q + w[Dq:] . k, a query term plus
  a key term, so a softmax over the keys cancels the query term: every query gets the same
  weights, those of a learned query dotted with the keys.

  Args:
    q: queries (Q, Dq).
    k: keys (K, Dk).
    w: (Dq + Dk,).

  Returns:
    scores (Q, K), `scores[i, j] = w[:Dq] . q[i] + w[Dq:] . k[j]`.
  """
  _check_pair(q, k, same_width=False)
  checks.rank(w, 1, "w")
  dq = q.shape[-1]
  if w.shape[0] != dq + k.shape[-1]:
    raise ValueError(f"w: expected {dq + k.shape[-1]} entries (Dq + Dk), got shape {w.shape}")
  return (q @ w[:dq])[:, None] + (k @ w[dq:])[None, :]  # (Q, 1) + (1, K)


def _map_leading(fn: Callable[[jax.Array, jax.Array], jax.Array], q, k) -> jax.Array:
  """Applies a per-example score to q (..., Q, Dq), k (..., K, Dk); leading axes broadcast."""
  try:
    lead = jnp.broadcast_shapes(q.shape[:-2], k.shape[:-2])
  except ValueError:
    raise ValueError(f"the leading (batch) axes of q {q.shape} and k {k.shape} do not "
                     "broadcast") from None
  q = jnp.broadcast_to(q, lead + q.shape[-2:])
  k = jnp.broadcast_to(k, lead + k.shape[-2:])
  for _ in lead:
    fn = jax.vmap(fn)
  return fn(q, k)


def _column_init(init: Initializer) -> Initializer:
  """Initializes a vector (A,) as if it were a kernel (A, 1), so fan-in based inits apply."""
  def vector_init(key, shape, dtype=jnp.float32):
    return init(key, (*shape, 1), dtype)[..., 0]
  return vector_init


class _Score(nn.Module):
  """Base of the score modules: holds the parameters of a pure score and maps its leading axes.

  `__call__(q (..., Q, Dq), k (..., K, Dk)) -> scores (..., Q, K)`: inputs and parameters are cast
  to `dtype`, or with dtype=None (the default, flax's rule) to their promoted type
  (flax.linen.dtypes.promote_dtype), the leading axes of q and k broadcast against each other and
  are mapped with `jax.vmap`, all sharing one set of parameters (built from Dq and Dk on first use).

  Attributes:
    dtype: the dtype of the computation; None (the default): the promoted type of the inputs and
      parameters.
    param_dtype: the dtype parameters are stored in.
    kernel_init: initializer of the kernels (and, as an (A, 1) kernel, of the vector v); unused by
      the parameter-free scores, accepted so every score takes the same arguments.
  """
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32
  kernel_init: Initializer = nn.initializers.lecun_normal()

  # True for the scores that need Dq == Dk (callers can check early with better names).
  requires_equal_widths: ClassVar[bool] = False
  # Set by each subclass: the pure score function; its arguments after (q, k) are the parameters
  # that `_score_params` returns.
  score_fn: ClassVar[Callable[..., jax.Array]]

  def _score_params(self, dq: int, dk: int) -> tuple[jax.Array, ...]:
    del dq, dk
    return ()

  def _kernel(self, name: str, shape: tuple[int, ...], vector: bool = False) -> jax.Array:
    """The parameter `name` as stored (callers cast it with the inputs: `promote_dtype`)."""
    init = _column_init(self.kernel_init) if vector else self.kernel_init
    return self.param(name, init, shape, self.param_dtype)

  @nn.compact
  def __call__(self, q: jax.Array, k: jax.Array) -> jax.Array:
    """Scores every query against every key.

    Args:
      q: float queries (..., Q, Dq).
      k: float keys (..., K, Dk); the leading axes of q and k broadcast against each other.

    Returns:
      scores (..., Q, K) in `dtype` (None: the promoted type of q, k and the parameters).
    """
    checks.min_rank(q, 2, "q")
    checks.min_rank(k, 2, "k")
    checks.floating(q, "q")
    checks.floating(k, "k")
    if self.requires_equal_widths:
      checks.equal_dim(q, "q", -1, k, "k", -1)
    q, k, *promoted = nn.dtypes.promote_dtype(q, k, *self._score_params(q.shape[-1], k.shape[-1]),
                                              dtype=self.dtype)
    return _map_leading(lambda qi, ki: self.score_fn(qi, ki, *promoted), q, k)


class DotScore(_Score):
  """Parameter-free dot-product score: q (..., Q, D), k (..., K, D) -> (..., Q, K)."""
  requires_equal_widths: ClassVar[bool] = True
  score_fn = staticmethod(dot_score)


class ScaledDotScore(_Score):
  """Parameter-free scaled dot-product score: q (..., Q, D), k (..., K, D) -> (..., Q, K)."""
  requires_equal_widths: ClassVar[bool] = True
  score_fn = staticmethod(scaled_dot_score)


class _HiddenScore(_Score):
  """A score with a tanh hidden layer of size `features` (A); None uses the key width Dk."""
  features: int | None = None

  def _hidden_size(self, dk: int) -> int:
    return dk if self.features is None else self.features


_ONLY_KEYS: Any = object()  # AdditiveScore.__call__'s q when only the keys are to be projected


class AdditiveScore(_HiddenScore):
  """Additive score v^T tanh(W_q q + W_k k): q (..., Q, Dq), k (..., K, Dk) -> (..., Q, K).

  Parameters: w_q (Dq, A), w_k (Dk, A), v (A,).

  Keys scored again and again (a decoder's encoder outputs, one query per step) can be projected
  once: `project_keys(k)` gives W_k k (..., K, A), and `__call__(q, k_hidden, keys_projected=True)`
  scores against it; the two together equal `__call__(q, k)` and share its parameters. In a
  training step this also saves the backward pass the two matmuls of W_k's gradient at every step
  (zoo.BahdanauDecoder does this). Initialized through `project_keys` first, the parameters are
  drawn in another order than by the plain call: the same names, shapes and distributions, other
  values for the same seed.

  Attributes:
    features: the hidden size A; None uses the key width Dk.
  """
  score_fn = staticmethod(additive_score)

  def _score_params(self, dq, dk):
    hidden = self._hidden_size(dk)
    return (self._kernel("w_q", (dq, hidden)), self._kernel("w_k", (dk, hidden)),
            self._kernel("v", (hidden,), vector=True))

  @nn.compact
  def __call__(self, q: jax.Array, k: jax.Array, *, keys_projected: bool = False) -> jax.Array:
    """Scores every query against every key.

    Args:
      q: float queries (..., Q, Dq).
      k: float keys (..., K, Dk), or with keys_projected=True their projection W_k k (..., K, A)
        from `project_keys` of this module; the leading axes of q and k broadcast.
      keys_projected: whether k is already projected.

    Returns:
      scores (..., Q, K) in `dtype`.
    """
    only_keys = q is _ONLY_KEYS
    if not only_keys:
      checks.min_rank(q, 2, "q")
    checks.min_rank(k, 2, "k")
    if not only_keys:
      checks.floating(q, "q")
    checks.floating(k, "k")
    if only_keys:
      w_k = self._kernel("w_k", (k.shape[-1], self._hidden_size(k.shape[-1])))
      k, w_k = nn.dtypes.promote_dtype(k, w_k, dtype=self.dtype)
      return k @ w_k  # (..., K, A)
    if not keys_projected:
      params = self._score_params(q.shape[-1], k.shape[-1])
      q, k, w_q, w_k, v = nn.dtypes.promote_dtype(q, k, *params, dtype=self.dtype)
      return _map_leading(lambda qi, ki: additive_score(qi, ki, w_q, w_k, v), q, k)
    if not self.has_variable("params", "w_k"):
      raise ValueError("keys_projected=True needs the keys projected by this module's "
                       "project_keys (its w_k); it has none yet")
    hidden: int = self.get_variable("params", "w_k").shape[-1]
    if k.shape[-1] != hidden:
      raise ValueError(f"k: projected keys must have width A = {hidden} (the score's hidden "
                       f"size), got shape {k.shape}")
    w_q = self._kernel("w_q", (q.shape[-1], hidden))
    v = self._kernel("v", (hidden,), vector=True)
    q, k, w_q, v = nn.dtypes.promote_dtype(q, k, w_q, v, dtype=self.dtype)
    return _map_leading(lambda qi, ki: additive_score_projected(qi @ w_q, ki, v), q, k)

  def project_keys(self, k: jax.Array) -> jax.Array:
    """W_k k: float keys (..., K, Dk) -> (..., K, A) in `dtype`, for `keys_projected=True`."""
    return self(_ONLY_KEYS, k)


class BilinearScore(_Score):
  """Bilinear ("general") score q^T W k: q (..., Q, Dq), k (..., K, Dk) -> (..., Q, K).

  Parameters: w (Dq, Dk).
  """
  score_fn = staticmethod(bilinear_score)

  def _score_params(self, dq, dk):
    return (self._kernel("w", (dq, dk)),)


class ConcatScore(_HiddenScore):
  """Concat score v^T tanh(W [q; k]): q (..., Q, Dq), k (..., K, Dk) -> (..., Q, K).

  Parameters: w (Dq + Dk, A), v (A,).

  Attributes:
    features: the hidden size A; None uses the key width Dk.
  """
  score_fn = staticmethod(concat_score)

  def _score_params(self, dq, dk):
    hidden = self._hidden_size(dk)
    return self._kernel("w", (dq + dk, hidden)), self._kernel("v", (hidden,), vector=True)


class ConcatLinearScore(_Score):
  """Linear concat score w^T [q; k]: q (..., Q, Dq), k (..., K, Dk) -> (..., Q, K).

  Parameters: w (Dq + Dk,), initialized as a (Dq + Dk, 1) kernel. See concat_linear_score: under a
  softmax over keys the weights do not depend on the query.
  """
  score_fn = staticmethod(concat_linear_score)

  def _score_params(self, dq, dk):
    return (self._kernel("w", (dq + dk,), vector=True),)


_SCORES: dict[str, type[_Score]] = {
    "dot": DotScore,
    "scaled_dot": ScaledDotScore,
    "additive": AdditiveScore,
    "bilinear": BilinearScore,
    "concat": ConcatScore,
    "concat_linear": ConcatLinearScore,
}
SCORE_NAMES: tuple[str, ...] = tuple(_SCORES)


def score_class(name: str) -> type[_Score]:
  """The score module class called `name` (one of SCORE_NAMES); ValueError for an unknown name."""
  if name not in _SCORES:
    raise ValueError(f"score: unknown name {name!r}; known names are {', '.join(SCORE_NAMES)}")
  return _SCORES[name]


def make_score(name: str, /, **kwargs) -> nn.Module:
  """Builds the score module called `name`.

  Args:
    name: one of SCORE_NAMES: 'dot', 'scaled_dot', 'additive', 'bilinear', 'concat',
      'concat_linear' (positional-only, so `name=` in kwargs names the Flax submodule).
    **kwargs: module fields (dtype, param_dtype, kernel_init, name, and `features` for 'additive'
      and 'concat'). `features=None` is accepted (and ignored) by every score, so callers can pass
      their hidden-size setting through unconditionally; a non-None `features` for a score without
      a hidden layer is a ValueError.

  Returns:
    an unbound module mapping q (..., Q, Dq), k (..., K, Dk) to scores (..., Q, K).
  """
  cls = score_class(name)
  if "features" in kwargs and not issubclass(cls, _HiddenScore):
    if kwargs["features"] is not None:
      raise ValueError(f"features: the {name!r} score has no hidden layer, so features must be "
                       f"None, got {kwargs['features']}")
    del kwargs["features"]
  return cls(**kwargs)
