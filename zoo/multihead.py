"""Multi-head attention: the attention of one head is a pure function, multi-head is that function
vmapped over the head axis and the batch axis.

One head maps queries (Q, Dh), keys (K, Dh), values (K, Dh) and a mask (Q, K) to an output (Q, Dh)
and weights (Q, K) (`head_attention`). `MultiHeadAttention` projects the inputs into H heads, maps
that function over heads and examples (`jax.vmap` for the parameter-free scores 'dot' and
'scaled_dot'; `nn.vmap` with `variable_axes={'params': 0}` for scores that own parameters, so every
head gets its own), and projects the heads back. Its parameters are laid out exactly like
`flax.linen.MultiHeadDotProductAttention`, so a params tree moves between the two.

With `implementation='fused'` the scaled-dot score runs through `jax.nn.dot_product_attention`
instead of the explicit vmap, on the back end `zoo.fast_paths.attention_backend` picks: cuDNN flash
attention on a GPU where dtype and shapes allow (bfloat16/float16, Dh <= 128 and a multiple of 8,
key padding given as `valid_lens` (B,) and no other mask), XLA otherwise. `implementation='auto'`
makes that choice per call (`zoo.fast_paths.multihead_implementation`): the fused path on a GPU
where it computes what was asked for (score 'scaled_dot', no weights, no active dropout), the
vmapped path otherwise; both have the same parameters and results.

Grouped-query attention (`num_kv_heads` = Hkv < H): the vmapped path maps over the Hkv key/value
heads and, inside, over the G = H / Hkv query heads of each group, which all read their group's keys
and values in place (no per-query-head copy); jax.nn.dot_product_attention groups them natively.

With `decode=True` the module keeps a key/value cache in the 'cache' collection for incremental
decoding; see `MultiHeadAttention.__call__`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from zoo import batching
from zoo import checks
from zoo import fast_paths
from zoo import masking
from zoo import scoring

Dtype = Any
Initializer = Callable[..., jax.Array]

IMPLEMENTATIONS: tuple[str, ...] = ("vmap", "fused", "auto")

# Scores without parameters are plain functions and map over heads with jax.vmap.
_PARAMETER_FREE_SCORES: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "dot": scoring.dot_score,
    "scaled_dot": scoring.scaled_dot_score,
}


def attend(scores: jax.Array, values: jax.Array, mask: jax.Array | None = None,
           keep: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
  """Pools one head's values with the masked softmax of its scores.

  Args:
    scores: float (Q, K).
    values: (K, Dh).
    mask: bool (Q, K), True = may attend, or None.
    keep: dropout multipliers (Q, K) (0 where dropped, 1 / (1 - rate) elsewhere), or None.

  Returns:
    (out (Q, Dh), weights (Q, K)); the weights are the ones before dropout. A query with nothing to
    attend to has zero weights and a zero output.
  """
  weights = masking.softmax_where(scores, mask)
  pooling = weights if keep is None else weights * keep.astype(weights.dtype)
  return pooling @ values, weights


def head_attention(score: Callable[[jax.Array, jax.Array], jax.Array], q: jax.Array, k: jax.Array,
                   v: jax.Array, mask: jax.Array | None = None,
                   keep: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
  """The attention of ONE head on one example.

  Args:
    score: maps q (Q, Dh), k (K, Dh) to scores (Q, K): a pure function, or a bound score module.
    q: queries (Q, Dh).
    k: keys (K, Dh).
    v: values (K, Dh).
    mask: bool (Q, K), True = may attend, or None.
    keep: dropout multipliers (Q, K), or None.

  Returns:
    (out (Q, Dh), weights (Q, K)).
  """
  return attend(score(q, k), v, mask, keep)


# The maps over heads, per example. Without groups: q (Q, H, Dh), k/v (K, H, Dh), mask/keep
# (H, Q, K) -> out (Q, H, Dh), weights (H, Q, K). With Hkv key/value heads, each shared by a group
# of G = H / Hkv query heads, the map runs over the kv heads with q (Q, Hkv, G, Dh), k/v
# (K, Hkv, Dh), mask/keep (Hkv, G, Q, K) -> out (Q, Hkv, G, Dh), weights (Hkv, G, Q, K); inside
# it, a map over the G query heads of the group passes their k and v unmapped (in_axes None), so
# keys and values are never copied.
_HEAD_IN_AXES = (1, 1, 1, 0, 0)
_HEAD_OUT_AXES = (1, 0)
_GROUP_IN_AXES = (1, None, None, 0, 0)
_GROUP_OUT_AXES = (1, 0)


def _map_heads_and_batch_pure(score: Callable, grouped: bool) -> Callable:
  """head_attention over (kv) heads, then over the batch, for a parameter-free score."""
  per_kv_head = functools.partial(head_attention, score)
  if grouped:
    per_kv_head = jax.vmap(per_kv_head, in_axes=_GROUP_IN_AXES, out_axes=_GROUP_OUT_AXES)
  over_heads = jax.vmap(per_kv_head, in_axes=_HEAD_IN_AXES, out_axes=_HEAD_OUT_AXES)
  return jax.vmap(over_heads)


def _map_heads_and_batch_module(group_size: int, initializing: bool) -> Callable:
  """head_attention over (kv) heads, each query head with its own score parameters, then over the
  batch (parameters shared).

  Args:
    group_size: G, the query heads per key/value head; 1 without groups.
    initializing: whether the parameters are being created (the module's is_initializing()).
  """
  per_head: dict[str, Any] = {"variable_axes": {"params": 0}, "split_rngs": {"params": True}}
  per_kv_head = head_attention
  if group_size > 1:
    per_kv_head = nn.vmap(head_attention, in_axes=_GROUP_IN_AXES, out_axes=_GROUP_OUT_AXES,
                          **per_head)
  over_heads = nn.vmap(per_kv_head, in_axes=_HEAD_IN_AXES, out_axes=_HEAD_OUT_AXES, **per_head)
  if group_size > 1:
    # The nested maps see the score parameters as (Hkv, G, ...); they are stored as (H, ...), the
    # layout without groups, so that a parameter tree does not depend on num_kv_heads.
    def by_group(tree):
      return jax.tree.map(lambda x: x.reshape((-1, group_size) + x.shape[1:]), tree)

    def by_head(tree):
      return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)

    over_heads = nn.map_variables(over_heads, "params", trans_in_fn=by_group, trans_out_fn=by_head,
                                  init=initializing)
  return nn.vmap(over_heads, variable_axes={"params": None}, split_rngs={"params": False})


_PROJECT_KEY_VALUE: Any = object()  # MultiHeadAttention.__call__'s inputs_q for project_key_value


class MultiHeadAttention(nn.Module):
  """Multi-head attention with any score, vmapped over heads; a drop-in for flax's MHA.

  Parameters (exactly flax.linen.MultiHeadDotProductAttention's layout, with D = inputs_q width,
  Dkv = inputs_kv width, Dh = qkv_features // num_heads, Hkv = num_kv_heads):
    query/kernel (D, H, Dh), key/kernel and value/kernel (Dkv, Hkv, Dh), biases (H, Dh) and
    (Hkv, Dh); out/kernel (H, Dh, D_out), out/bias (D_out,); plus 'score' (each leaf with a leading
    head axis H) for the scores with parameters ('additive', 'bilinear', 'concat',
    'concat_linear').

  Attributes:
    num_heads: H.
    qkv_features: H * Dh, the width of queries, keys and values together; default D.
    out_features: D_out; default D.
    score: one of zoo.SCORE_NAMES ('dot', 'scaled_dot', 'additive', 'bilinear', 'concat',
      'concat_linear').
    dropout_rate: dropout on the attention weights (active with deterministic=False; it needs a
      'dropout' rng).
    use_bias: whether the four projections have biases.
    dtype: the dtype of the computation; None (the default) computes in the promoted type of the
      inputs and parameters, as flax's MHA. The softmax runs in float32 whatever the dtype (flax's
      force_fp32_for_softmax), its weights cast back to the scores' dtype.
    implementation: 'auto' (the default: per call, 'fused' on a GPU where it applies, 'vmap'
      otherwise, so always 'vmap' on the CPU), 'vmap' (the explicit per-head function) or
      'fused' (jax.nn.dot_product_attention, cuDNN on a GPU where it applies; only for
      score='scaled_dot', no weights, no dropout).
    num_kv_heads: Hkv for grouped-query attention (default H): query heads h*G ... h*G + G - 1 with
      G = H // Hkv share key/value head h, which is read in place, never copied per query head.
      The 'score' parameters stay per query head (H, ...).
    score_features: the hidden size of the 'additive' and 'concat' scores (default Dh); must be
      None for the others.
    param_dtype: the dtype parameters are stored in.
    kernel_init: initializer of all kernels (flax's default).
    bias_init: initializer of all biases.
  """
  # The first eight fields keep the order of the documented positional signature; new ones go last.
  num_heads: int
  qkv_features: int | None = None
  out_features: int | None = None
  score: str = "scaled_dot"
  dropout_rate: float = 0.0
  use_bias: bool = True
  dtype: Dtype | None = None
  implementation: str = "auto"
  num_kv_heads: int | None = None
  score_features: int | None = None
  param_dtype: Dtype = jnp.float32
  kernel_init: Initializer = nn.linear.default_kernel_init
  bias_init: Initializer = nn.initializers.zeros_init()

  def _check_config(self, width: int) -> tuple[int, int, int]:
    """Returns (H, Hkv, Dh) after checking the hyperparameters against the input width D."""
    if self.implementation not in IMPLEMENTATIONS:
      raise ValueError(f"implementation: unknown {self.implementation!r}; known are "
                       f"{', '.join(IMPLEMENTATIONS)}")
    scoring.score_class(self.score)  # ValueError for an unknown name
    if self.implementation == "fused" and self.score != "scaled_dot":
      raise ValueError(f"implementation='fused' computes only score='scaled_dot', got "
                       f"score={self.score!r}; use implementation='vmap'")
    qkv_features = self.qkv_features or width
    if qkv_features % self.num_heads:
      raise ValueError(f"qkv_features ({qkv_features}) must be divisible by num_heads "
                       f"({self.num_heads})")
    num_kv_heads = self.num_kv_heads or self.num_heads
    if self.num_heads % num_kv_heads:
      raise ValueError(f"num_heads ({self.num_heads}) must be divisible by num_kv_heads "
                       f"({num_kv_heads})")
    return self.num_heads, num_kv_heads, qkv_features // self.num_heads

  def _projection(self, name: str, heads: int, head_dim: int) -> nn.DenseGeneral:
    return nn.DenseGeneral(features=(heads, head_dim), axis=-1, use_bias=self.use_bias,
                           dtype=self.dtype, param_dtype=self.param_dtype,
                           kernel_init=self.kernel_init, bias_init=self.bias_init, name=name)

  def _cached(self, key: jax.Array,
              value: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """Writes the new keys/values (B, T, Hkv, Dh) into the cache at cache_index.

    Returns the whole key cache and value cache, each (B, max_len, Hkv, Dh), and the mask bool
    (1, 1, T, max_len) that lets new position i see the cached positions <= cache_index + i. On
    the call that creates the cache (flax's convention: init or a first apply with the full-length
    input) nothing is written, the inputs are returned unchanged and the mask is None.
    """
    initialized = self.has_variable("cache", "cached_key")
    cached_key = self.variable("cache", "cached_key", jnp.zeros, key.shape, key.dtype)
    cached_value = self.variable("cache", "cached_value", jnp.zeros, value.shape, value.dtype)
    cache_index = self.variable("cache", "cache_index", lambda: jnp.array(0, jnp.int32))
    if not initialized:
      return key, value, None
    batch, max_len, kv_heads, head_dim = cached_key.value.shape
    chunk = key.shape[1]
    if key.shape != (batch, chunk, kv_heads, head_dim) or chunk > max_len:
      raise ValueError(f"inputs_q: decoding appends (B, T) = {key.shape[:2]} positions to a cache "
                       f"of shape (B, max_len, Hkv, Dh) = {cached_key.value.shape}; B must match "
                       "and T must not exceed max_len")
    index = cache_index.value
    cached_key.value = lax.dynamic_update_slice(cached_key.value, key, (0, index, 0, 0))
    cached_value.value = lax.dynamic_update_slice(cached_value.value, value, (0, index, 0, 0))
    cache_index.value = index + chunk
    causal = masking.causal_mask(chunk, max_len, offset=index)  # (T, max_len)
    return cached_key.value, cached_value.value, causal[None, None]

  def _vmapped(self, query, key, value, mask, dropout: bool) -> tuple[jax.Array, jax.Array]:
    """head_attention mapped over heads and batch; grouped query heads share their kv head.

    Args:
      query: (B, Q, H, Dh).
      key, value: (B, K, Hkv, Dh).
      mask: bool broadcastable to (B, H, Q, K), or None.
      dropout: whether to drop attention weights.

    Returns:
      out (B, Q, H, Dh), weights (B, H, Q, K).
    """
    batch, num_q, heads, head_dim = query.shape
    kv_heads = key.shape[2]
    group_size = heads // kv_heads
    full = (batch, heads, num_q, key.shape[1])
    mask = None if mask is None else jnp.broadcast_to(mask, full)
    keep = None
    if dropout:
      kept = jax.random.bernoulli(self.make_rng("dropout"), 1.0 - self.dropout_rate, full)
      keep = kept.astype(query.dtype) / jnp.asarray(1.0 - self.dropout_rate, query.dtype)
    grouped = group_size > 1
    if grouped:
      # Query head h uses kv head h // G; splitting the head axis is a reshape, not a copy.
      query = query.reshape(batch, num_q, kv_heads, group_size, head_dim)  # (B, Q, Hkv, G, Dh)
      by_group = (batch, kv_heads, group_size) + full[2:]
      mask = None if mask is None else mask.reshape(by_group)  # (B, Hkv, G, Q, K)
      keep = None if keep is None else keep.reshape(by_group)  # (B, Hkv, G, Q, K)
    if self.score in _PARAMETER_FREE_SCORES:
      heads_fn = _map_heads_and_batch_pure(_PARAMETER_FREE_SCORES[self.score], grouped)
      out, weights = heads_fn(query, key, value, mask, keep)
    else:
      score = scoring.make_score(self.score, features=self.score_features, dtype=self.dtype,
                                 param_dtype=self.param_dtype, kernel_init=self.kernel_init,
                                 name="score")
      heads_fn = _map_heads_and_batch_module(group_size, self.is_initializing())
      out, weights = heads_fn(score, query, key, value, mask, keep)
    if grouped:
      out = out.reshape(batch, num_q, heads, head_dim)  # (B, Q, H, Dh)
      weights = weights.reshape(full)  # (B, H, Q, K)
    return out, weights

  @nn.compact
  def __call__(self, inputs_q: jax.Array, inputs_kv: jax.Array | None = None, *,
               valid_lens: jax.Array | None = None, mask: jax.Array | None = None,
               deterministic: bool = True, return_weights: bool = False,
               decode: bool = False, key_value: tuple[jax.Array, jax.Array] | None = None
               ) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Attends from each query position to the key/value positions.

    Args:
      inputs_q: float (*batch, Q, D): any leading batch shape, none included (as flax's MHA), except
        with decode=True or key_value, which take exactly (B, Q, D).
      inputs_kv: float (*batch, K, Dkv); None for self-attention (inputs_kv = inputs_q).
      valid_lens: int (*batch,) (or (*batch, Q)): the number of valid keys; later keys are padding.
        When decoding it counts positions of the whole cache.
      mask: bool broadcastable to (*batch, H, Q, K), True = may attend (K = max_len when decoding).
        Given both, a key may be attended iff both allow it (zoo.masking.key_mask).
      deterministic: False applies dropout to the attention weights.
      return_weights: also return the weights (not available with implementation='fused';
        'auto' then runs the vmapped path).
      decode: incremental decoding with a key/value cache in the 'cache' collection (cached_key,
        cached_value (B, max_len, Hkv, Dh), cache_index int32 scalar shared by the batch). The call
        that creates the cache (init, or an apply without a cache) sizes it from the input, i.e.
        pass the full-length input then, and computes ordinary attention. Later calls (with
        mutable=['cache']) append T >= 1 new positions at cache_index: a prefill of any length,
        then one position per step; new position i attends to all cached positions and causally
        within the chunk. Queries and new keys must be the same positions (self-attention). The
        caller keeps cache_index + T <= max_len.
      key_value: the keys and values already projected by this module's `project_key_value`
        (each (B, K, Hkv, Dh)); `inputs_kv` is then not used (may be None). A decoder whose
        cross-attention reads the same encoder outputs at every step projects them once.

    Returns:
      out (*batch, Q, D_out), and with return_weights=True also weights (*batch, H, Q, K).
    """
    if inputs_q is _PROJECT_KEY_VALUE:
      return self._project_key_value(cast(jax.Array, inputs_kv))  # checked there
    lead = tuple(jnp.shape(inputs_q))[:1]  # decoding and key_value take (B, Q, D) only
    if not decode and key_value is None:  # any leading batch shape: fold it into one axis B
      lead = batching.leading_shape(inputs_q, 2, "inputs_q")
      if inputs_kv is not None:
        batching.same_leading(inputs_kv, "inputs_kv", 2, lead, "inputs_q")
        num_k = inputs_kv.shape[-2]
      else:
        num_k = inputs_q.shape[-2]
      num_q = inputs_q.shape[-2]
      valid_lens = batching.fold_lengths(valid_lens, lead, (num_q,), "valid_lens")
      mask = batching.fold_mask(mask, lead, (self.num_heads, num_q, num_k), "mask",
                                "the scores (*batch, H, Q, K) =")
      inputs_q = batching.fold(inputs_q, lead)
      inputs_kv = None if inputs_kv is None else batching.fold(inputs_kv, lead)
    checks.rank(inputs_q, 3, "inputs_q")
    checks.floating(inputs_q, "inputs_q")
    heads, kv_heads, head_dim = self._check_config(inputs_q.shape[-1])
    if key_value is not None:
      if decode:
        raise ValueError("key_value: projected keys and values serve attention over fixed inputs "
                         "(a decoder's cross-attention); with decode=True the keys are the "
                         "self-attention cache")
      key, value = self._check_key_value(key_value, inputs_q.shape[0], kv_heads, head_dim)
    else:
      if inputs_kv is None:
        inputs_kv = inputs_q
      checks.rank(inputs_kv, 3, "inputs_kv")
      checks.floating(inputs_kv, "inputs_kv")
      checks.equal_dim(inputs_q, "inputs_q", 0, inputs_kv, "inputs_kv", 0)
      if decode:
        checks.equal_dim(inputs_q, "inputs_q", 1, inputs_kv, "inputs_kv", 1)
    dropout = self.dropout_rate > 0.0 and not deterministic
    implementation = self.implementation
    if implementation == "auto":
      implementation = fast_paths.multihead_implementation(
          score=self.score, dropout=dropout, return_weights=return_weights)
    fused = implementation == "fused"
    if fused and return_weights:
      raise ValueError("return_weights=True: implementation='fused' does not compute the attention "
                       "weights; use implementation='vmap'")
    if fused and dropout:
      raise ValueError(f"implementation='fused' has no attention dropout (dropout_rate="
                       f"{self.dropout_rate}, deterministic=False); use implementation='vmap'")

    query = self._projection("query", heads, head_dim)(inputs_q)  # (B, Q, H, Dh)
    if key_value is None:
      # each (B, K, Hkv, Dh); inputs_kv was set to inputs_q above when None
      key, value = self._key_value(cast(jax.Array, inputs_kv), kv_heads, head_dim)
    cache_mask = None
    if decode:
      key, value, cache_mask = self._cached(key, value)  # (B, max_len, Hkv, Dh), (1, 1, Q, max_len)

    batch, num_q, num_k = query.shape[0], query.shape[1], key.shape[1]
    scores_shape = (batch, heads, num_q, num_k)
    if mask is not None:
      checks.boolean(mask, "mask")
      checks.broadcastable(mask, "mask", scores_shape, "the scores (B, H, Q, K) =")
    mask = masking.combine_masks(mask, cache_mask)
    lens_mask = None
    if valid_lens is not None:
      checks.rank(valid_lens, {1, 2}, "valid_lens")
      valid_lens = jnp.asarray(valid_lens)
      lens_mask = masking.key_mask(valid_lens, None, scores_shape, heads=True)  # (B, 1, 1|Q, K)
    if fused:
      out, weights = self._fused(query, key, value, mask, valid_lens, lens_mask), None
    else:
      out, weights = self._vmapped(query, key, value, masking.combine_masks(mask, lens_mask),
                                   dropout)
    out = nn.DenseGeneral(features=self.out_features or inputs_q.shape[-1], axis=(-2, -1),
                          use_bias=self.use_bias, dtype=self.dtype, param_dtype=self.param_dtype,
                          kernel_init=self.kernel_init, bias_init=self.bias_init,
                          name="out")(out)  # (B, Q, D_out)
    return batching.unfold((out, weights) if return_weights else out, lead)

  def project_key_value(self, inputs_kv: jax.Array) -> tuple[jax.Array, jax.Array]:
    """This module's key and value projections of float inputs_kv (B, K, Dkv): (key, value), each
    (B, K, Hkv, Dh), to pass as `key_value` to later calls over the same inputs.

    With qkv_features unset, Dh is taken from Dkv, so the query and key/value widths must then be
    equal (as in a Transformer); set qkv_features otherwise.
    """
    return cast(tuple[jax.Array, jax.Array], self(_PROJECT_KEY_VALUE, inputs_kv))

  def _project_key_value(self, inputs_kv: jax.Array) -> tuple[jax.Array, jax.Array]:
    checks.rank(inputs_kv, 3, "inputs_kv")
    checks.floating(inputs_kv, "inputs_kv")
    _, kv_heads, head_dim = self._check_config(inputs_kv.shape[-1])
    return self._key_value(inputs_kv, kv_heads, head_dim)

  def _key_value(self, inputs_kv: jax.Array, kv_heads: int,
                 head_dim: int) -> tuple[jax.Array, jax.Array]:
    """The key and value projections of inputs_kv (B, K, Dkv): each (B, K, Hkv, Dh)."""
    return (self._projection("key", kv_heads, head_dim)(inputs_kv),
            self._projection("value", kv_heads, head_dim)(inputs_kv))

  @staticmethod
  def _check_key_value(key_value, batch: int, kv_heads: int,
                       head_dim: int) -> tuple[jax.Array, jax.Array]:
    if not isinstance(key_value, (tuple, list)) or len(key_value) != 2:
      raise ValueError(f"key_value: expected (key, value) from project_key_value, got "
                       f"{type(key_value).__name__}")
    key, value = key_value
    for name, x in (("key_value[0] (key)", key), ("key_value[1] (value)", value)):
      checks.floating(x, name)
      if x.ndim != 4 or x.shape[0] != batch or x.shape[2:] != (kv_heads, head_dim):
        raise ValueError(f"{name}: expected shape (B, K, Hkv, Dh) = ({batch}, K, {kv_heads}, "
                         f"{head_dim}) from project_key_value, got {x.shape}")
    if key.shape != value.shape:
      raise ValueError(f"key_value: key {key.shape} and value {value.shape} differ in shape")
    return key, value

  def _fused(self, query, key, value, mask, valid_lens, lens_mask) -> jax.Array:
    """query (B, Q, H, Dh), key/value (B, K, Hkv, Dh), masks broadcastable to (B, H, Q, K)
    -> (B, Q, H, Dh) via jax.nn.dot_product_attention on the back end zoo.fast_paths picks."""
    combined = masking.combine_masks(mask, lens_mask)
    lens = None
    if valid_lens is not None and valid_lens.ndim == 1:
      # Key padding as lengths, which cuDNN takes natively. A length of 0 is given to the kernel as
      # 1 (such rows are zeroed below), so the cuDNN kernel (used only when no mask is passed) never
      # sees a row with no key at all.
      lens = jnp.maximum(valid_lens, 1).astype(jnp.int32)
    else:
      mask = combined
    if mask is not None:
      mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)  # rank 4, broadcasts to (B, H, Q, K)
    out = fast_paths.dot_product_attention(query, key, value, mask=mask,
                                           key_lens=lens)  # (B, Q, H, Dh)
    if combined is None:
      return out
    # The fused softmax averages the values for a query with no key to attend to; the zoo's
    # convention is zero weights there, hence a zero output.
    has_keys = jnp.any(combined, axis=-1, keepdims=True)  # (B?, H?, Q?, 1)
    has_keys = has_keys.reshape((1,) * (4 - has_keys.ndim) + has_keys.shape)  # rank 4
    return jnp.where(jnp.swapaxes(has_keys, 1, 2), out, jnp.zeros((), out.dtype))  # (B, Q, H, Dh)
