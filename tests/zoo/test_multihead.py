import functools

import chex
import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo
from _helpers import random_variables
from _helpers import rbg_key
from zoo import fast_paths
from zoo import scoring

B, Q, K, D, DKV, H = 3, 5, 7, 12, 10, 4
QKV, D_OUT = 8, 9  # Dh = 2
IMPLEMENTATIONS = ["vmap", "fused"]


def _inputs(seed=0, q_len=Q, k_len=K):
  # numpy draws: jax.random would compile a threefry kernel per shape, slow on a busy CPU.
  rng = np.random.default_rng(seed)
  inputs_q = jnp.asarray(rng.normal(size=(B, q_len, D)), jnp.float32)
  inputs_kv = jnp.asarray(rng.normal(size=(B, k_len, DKV)), jnp.float32)
  mask = rng.random((B, 1, q_len, k_len)) < 0.6
  mask[..., 0] = True  # no row fully masked (flax averages such rows, the zoo zeroes them)
  return inputs_q, inputs_kv, jnp.asarray(mask)


def _flax_mha(**kwargs):
  return nn.MultiHeadDotProductAttention(num_heads=H, qkv_features=QKV, out_features=D_OUT,
                                         **kwargs)


def _zoo_mha(**kwargs):
  return zoo.MultiHeadAttention(num_heads=H, qkv_features=QKV, out_features=D_OUT, **kwargs)


def test_params_move_between_flax_and_zoo_and_outputs_agree_for_both_implementations():
  inputs_q, inputs_kv, mask = _inputs()
  valid_lens = jnp.array([7, 2, 5])
  flax_mask = jnp.logical_and(mask, zoo.key_padding_mask(valid_lens, K))
  flax_mha = _flax_mha(dropout_rate=0.3)
  ours = [_zoo_mha(dropout_rate=0.3, implementation=name) for name in IMPLEMENTATIONS]
  flax_vars = random_variables(flax_mha, inputs_q, inputs_kv, seed=1, deterministic=True)
  zoo_vars = random_variables(ours[0], inputs_q, inputs_kv, seed=2, mask=mask,
                              valid_lens=valid_lens)
  chex.assert_trees_all_equal_shapes_and_dtypes(flax_vars, zoo_vars)

  @jax.jit
  def outputs(variables):  # one compilation: flax's MHA, then ours in both implementations
    return flax_mha.apply(variables, inputs_q, inputs_kv, mask=flax_mask, deterministic=True), [
        mha.apply(variables, inputs_q, inputs_kv, mask=mask, valid_lens=valid_lens)
        for mha in ours]

  for variables in (flax_vars, zoo_vars):
    expected, got = outputs(variables)
    for out in got:
      assert out.shape == (B, Q, D_OUT)
      np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_weights_equal_flax_sown_weights():
  inputs_q, inputs_kv, mask = _inputs(seed=3)
  variables = random_variables(_flax_mha(), inputs_q, inputs_kv)

  @jax.jit
  def both(variables):  # one compilation
    _, state = _flax_mha().apply(variables, inputs_q, inputs_kv, mask=mask, sow_weights=True,
                                 mutable=["intermediates"])
    return state, _zoo_mha().apply(variables, inputs_q, inputs_kv, mask=mask, return_weights=True)

  state, (out, weights) = both(variables)
  (expected,) = state["intermediates"]["attention_weights"]
  assert out.shape == (B, Q, D_OUT) and weights.shape == (B, H, Q, K)
  np.testing.assert_allclose(weights, expected, rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(np.where(np.broadcast_to(mask, weights.shape), 0, weights), 0)


def _fully_masked_case():
  inputs_q, inputs_kv, mask = _inputs(seed=5)
  mask = mask.at[1, :, 2].set(False)  # query 2 of example 1 may attend to nothing
  valid_lens = jnp.array([0, 4, 7])  # example 0 has no valid key at all
  return inputs_q, inputs_kv, mask, valid_lens


def test_fused_equals_vmap_with_masks_lengths_and_empty_rows():
  inputs_q, inputs_kv, mask, valid_lens = _fully_masked_case()
  per_row_lens = jnp.array([[1, 2, 3, 4, 5], [7, 6, 0, 4, 3], [2, 2, 7, 7, 1]])
  vmap_mha = _zoo_mha()
  fused_mha = _zoo_mha(implementation="fused")
  variables = random_variables(vmap_mha, inputs_q, inputs_kv)
  cases = (dict(mask=mask), dict(valid_lens=valid_lens), dict(valid_lens=per_row_lens),
           dict(mask=mask, valid_lens=valid_lens), dict())

  @jax.jit
  def both(variables):  # one compilation for all cases
    return [[mha.apply(variables, inputs_q, inputs_kv, **kwargs) for mha in (vmap_mha, fused_mha)]
            for kwargs in cases], vmap_mha.apply(variables, inputs_q, inputs_kv, mask=mask,
                                                 valid_lens=valid_lens, return_weights=True)

  pairs, (out, weights) = both(variables)
  for expected, got in pairs:
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  # Rows with nothing to attend to: zero weights, and the output is just the out bias.
  np.testing.assert_array_equal(weights[0], 0.0)
  np.testing.assert_array_equal(weights[1, :, 2], 0.0)
  out_bias = variables["params"]["out"]["bias"]
  np.testing.assert_allclose(out[0], np.broadcast_to(out_bias, (Q, D_OUT)))


def test_auto_runs_the_path_the_platform_choice_names(monkeypatch):
  # On this CPU 'auto' is the vmapped path; with the choice made as on a GPU it is the fused path
  # where that computes what was asked for, and the vmapped one for weights, dropout, other scores.
  inputs_q, inputs_kv, mask, valid_lens = _fully_masked_case()
  vmap_mha, fused_mha, auto_mha = (_zoo_mha(dropout_rate=0.5, implementation=name)
                                   for name in ("vmap", "fused", "auto"))
  variables = random_variables(vmap_mha, inputs_q, inputs_kv)
  chosen, real = [], fast_paths.multihead_implementation

  def run(platform):
    def choose(**kwargs):
      chosen.append(real(**kwargs, backend=platform))
      return chosen[-1]
    monkeypatch.setattr(fast_paths, "multihead_implementation", choose)

    @jax.jit
    def outputs(variables):
      plain = dict(mask=mask, valid_lens=valid_lens)
      weighted = dict(plain, return_weights=True)
      dropped = dict(plain, deterministic=False, rngs={"dropout": jax.random.key(2)})
      auto = [auto_mha.apply(variables, inputs_q, inputs_kv, **kw)
              for kw in (plain, weighted, dropped)]
      expected = [(fused_mha if platform == "gpu" else vmap_mha).apply(
                       variables, inputs_q, inputs_kv, **plain),
                  vmap_mha.apply(variables, inputs_q, inputs_kv, **weighted),
                  vmap_mha.apply(variables, inputs_q, inputs_kv, **dropped)]
      return auto, expected

    return outputs(variables)

  for platform in ("cpu", "gpu"):
    chosen.clear()
    auto, expected = run(platform)
    assert chosen == (["vmap"] * 3 if platform == "cpu" else ["fused", "vmap", "vmap"])
    chex.assert_trees_all_equal(auto, expected)


def test_one_head_is_a_pure_function_equal_to_single_head_attention():
  rng = np.random.default_rng(4)
  q, k, v = (jnp.asarray(rng.normal(size=s), jnp.float32) for s in [(Q, 6), (K, 6), (K, 3)])
  mask = jnp.asarray(rng.random((Q, K)) < 0.5).at[:, 1].set(True)
  out, weights = jax.jit(functools.partial(zoo.head_attention, zoo.scaled_dot_score))(q, k, v, mask)
  context, expected = zoo.Attention().apply({}, q[None], k[None], v[None], mask=mask[None])
  np.testing.assert_allclose(weights, expected[0], rtol=1e-6)
  np.testing.assert_allclose(out, context[0], rtol=1e-5, atol=1e-6)


def _repeat_kv_heads(params, groups):
  """Turns grouped-query params (Hkv key/value heads) into plain MHA params with H heads."""
  params = jax.tree.map(lambda x: x, params)  # a copy to edit
  for name in ("key", "value"):
    params[name] = {"kernel": jnp.repeat(params[name]["kernel"], groups, axis=1),  # (D, H, Dh)
                    "bias": jnp.repeat(params[name]["bias"], groups, axis=0)}  # (H, Dh)
  return params


def test_grouped_query_attention_equals_repeated_kv_heads_for_both_implementations():
  inputs_q, inputs_kv, mask = _inputs(seed=7)
  gqa = [zoo.MultiHeadAttention(num_heads=6, qkv_features=18, num_kv_heads=2,
                                implementation=name) for name in IMPLEMENTATIONS]
  variables = random_variables(gqa[0], inputs_q, inputs_kv)
  assert variables["params"]["key"]["kernel"].shape == (DKV, 2, 3)
  assert variables["params"]["value"]["bias"].shape == (2, 3)
  assert variables["params"]["query"]["kernel"].shape == (D, 6, 3)
  full = {"params": _repeat_kv_heads(dict(variables["params"]), 3)}
  plain = zoo.MultiHeadAttention(num_heads=6, qkv_features=18)

  @jax.jit
  def outputs(variables, full):  # one compilation
    return plain.apply(full, inputs_q, inputs_kv, mask=mask), [
        mha.apply(variables, inputs_q, inputs_kv, mask=mask) for mha in gqa]

  expected, got = outputs(variables, full)
  for out in got:
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


# Grouped-query attention: H = 6 query heads over Hkv = 2 or 3 kv heads, Dh = 4.
GQA_H, GQA_DH = 6, 4
_PURE_SCORES = {"dot": scoring.dot_score, "scaled_dot": scoring.scaled_dot_score,
                "additive": scoring.additive_score, "bilinear": scoring.bilinear_score,
                "concat": scoring.concat_score}


def _repeated_kv_reference(params, inputs_q, inputs_kv, allowed, score):
  """The formula the module used before grouping, in float64: copy each kv head to the query heads
  of its group (jnp.repeat), then attend one head at a time.

  Returns out (B, Q, D_out) and weights (B, H, Q, K); allowed: bool (B, H, Q, K).
  """
  with jax.enable_x64(True):
    p = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), params)
    xq, xkv = jnp.asarray(inputs_q, jnp.float64), jnp.asarray(inputs_kv, jnp.float64)
    q = jnp.einsum("bqd,dhe->bqhe", xq, p["query"]["kernel"]) + p["query"]["bias"]  # (B, Q, H, Dh)
    k = jnp.einsum("bkd,dge->bkge", xkv, p["key"]["kernel"]) + p["key"]["bias"]  # (B, K, Hkv, Dh)
    v = jnp.einsum("bkd,dge->bkge", xkv, p["value"]["kernel"]) + p["value"]["bias"]
    groups = q.shape[2] // k.shape[2]
    k = jnp.repeat(k, groups, axis=2)  # (B, K, H, Dh): query head h reads kv head h // groups
    v = jnp.repeat(v, groups, axis=2)  # (B, K, H, Dh)
    scores = []
    for h in range(q.shape[2]):
      head_params = {name: leaf[h] for name, leaf in p.get("score", {}).items()}
      scores.append(jax.vmap(lambda qi, ki: _PURE_SCORES[score](qi, ki, **head_params))(
          q[:, :, h], k[:, :, h]))  # (B, Q, K)
    scores = np.stack([np.asarray(s) for s in scores], axis=1)  # (B, H, Q, K)
    v, out_kernel, out_bias = (np.asarray(a) for a in (v, p["out"]["kernel"], p["out"]["bias"]))
  top = np.max(np.where(allowed, scores, -np.inf), axis=-1, keepdims=True)
  exp = np.where(allowed, np.exp(scores - np.where(np.isfinite(top), top, 0.0)), 0.0)
  total = exp.sum(-1, keepdims=True)
  weights = exp / np.where(total > 0, total, 1.0)  # a row with no key: zeros
  heads = np.einsum("bhqk,bkhe->bqhe", weights, v)  # (B, Q, H, Dh)
  return np.einsum("bqhe,heo->bqo", heads, out_kernel) + out_bias, weights


def _gqa_case(seed):
  """inputs_q (B, Q, D), inputs_kv (B, K, DKV), mask (B, H, Q, K) per head, valid_lens (B,)."""
  rng = np.random.default_rng(seed)
  inputs_q = jnp.asarray(rng.normal(size=(B, Q, D)), jnp.float32)
  inputs_kv = jnp.asarray(rng.normal(size=(B, K, DKV)), jnp.float32)
  mask = rng.random((B, GQA_H, Q, K)) < 0.7
  mask[1, 4, 2] = False  # one query of one head with nothing to attend to
  return inputs_q, inputs_kv, jnp.asarray(mask), jnp.array([7, 4, 2])


@pytest.mark.parametrize("kv_heads", [2, 3])
@pytest.mark.parametrize("score, implementation", [
    ("dot", "vmap"), ("scaled_dot", "vmap"), ("additive", "vmap"), ("bilinear", "vmap"),
    ("concat", "vmap"), ("scaled_dot", "fused")])
def test_grouped_heads_equal_the_repeated_kv_formula(score, implementation, kv_heads):
  inputs_q, inputs_kv, mask, valid_lens = _gqa_case(seed=20 + kv_heads)
  mha = zoo.MultiHeadAttention(num_heads=GQA_H, qkv_features=GQA_H * GQA_DH, out_features=D_OUT,
                               score=score, implementation=implementation, num_kv_heads=kv_heads)
  params = random_variables(mha, inputs_q, inputs_kv)["params"]
  assert params["key"]["kernel"].shape == (DKV, kv_heads, GQA_DH)
  # Score parameters stay per query head, as without groups.
  assert all(leaf.shape[0] == GQA_H for leaf in jax.tree.leaves(params.get("score", {})))
  fused = implementation == "fused"
  result = jax.jit(lambda p: mha.apply({"params": p}, inputs_q, inputs_kv, mask=mask,
                                       valid_lens=valid_lens, return_weights=not fused))(params)
  allowed = np.asarray(mask) & (np.arange(K) < np.asarray(valid_lens)[:, None, None, None])
  expected_out, expected_weights = _repeated_kv_reference(params, inputs_q, inputs_kv, allowed,
                                                          score)
  out, weights = (result, None) if fused else result
  np.testing.assert_allclose(out, expected_out, rtol=1e-5, atol=1e-5)
  if not fused:
    chex.assert_shape(weights, (B, GQA_H, Q, K))
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(weights[1, 4, 2], np.zeros(K))


def test_grouped_dropout_drops_what_repeated_kv_heads_drop():
  inputs_q, inputs_kv, mask, valid_lens = _gqa_case(seed=24)
  gqa = zoo.MultiHeadAttention(num_heads=GQA_H, qkv_features=GQA_H * GQA_DH, dropout_rate=0.4,
                               num_kv_heads=3)
  plain = gqa.clone(num_kv_heads=None)
  variables = random_variables(gqa, inputs_q, inputs_kv)
  full = {"params": _repeat_kv_heads(dict(variables["params"]), 2)}

  @jax.jit
  def both(variables, full):  # one compilation
    run = lambda mha, v: mha.apply(v, inputs_q, inputs_kv, mask=mask, valid_lens=valid_lens,
                                   deterministic=False, rngs={"dropout": rbg_key(5)})
    return run(gqa, variables), run(plain, full), run(gqa.clone(dropout_rate=0.0), variables)

  got, expected, quiet = both(variables, full)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  assert not np.allclose(got, quiet)


def _all_shapes(jaxpr) -> list[tuple[int, ...]]:
  """The shapes of every value a jaxpr computes, sub-jaxprs (jit, custom_jvp, scan ...) included."""
  shapes = []
  for eqn in jaxpr.eqns:
    shapes += [tuple(var.aval.shape) for var in eqn.outvars]
    for param in eqn.params.values():
      for sub in param if isinstance(param, (tuple, list)) else [param]:
        sub = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr holds its Jaxpr
        if hasattr(sub, "eqns"):
          shapes += _all_shapes(sub)
  return shapes


def _kv_copies(fn, *args, kv_heads: int) -> list[tuple[int, ...]]:
  """Shapes in fn's jaxpr laid out as (B, K, H, Dh) or (B, K, Hkv, G, Dh), in any axis order:
  keys or values copied out to the query heads."""
  copies = [sorted((B, K, GQA_H, GQA_DH)), sorted((B, K, kv_heads, GQA_H // kv_heads, GQA_DH))]
  return [s for s in _all_shapes(jax.make_jaxpr(fn)(*args).jaxpr) if sorted(s) in copies]


@pytest.mark.parametrize("case", ["scaled_dot", "bilinear", "fused", "decode"])
def test_grouped_heads_never_copy_keys_and_values(case):
  kv_heads = 2
  # The check finds the copy the module used to make: it can fail.
  old_copy = lambda k: jnp.repeat(k, GQA_H // kv_heads, axis=2)  # (B, K, Hkv, Dh) -> (B, K, H, Dh)
  assert _kv_copies(old_copy, jnp.zeros((B, K, kv_heads, GQA_DH)), kv_heads=kv_heads)
  inputs_q, inputs_kv, mask, valid_lens = _gqa_case(seed=25)
  mha = zoo.MultiHeadAttention(num_heads=GQA_H, qkv_features=GQA_H * GQA_DH, num_kv_heads=kv_heads,
                               score="scaled_dot" if case in ("fused", "decode") else case,
                               implementation="fused" if case == "fused" else "vmap")
  if case == "decode":
    x = jnp.asarray(np.random.default_rng(26).normal(size=(B, K, D)), jnp.float32)
    variables = random_variables(mha, x, decode=True)  # a cache of K positions
    apply = lambda v: mha.apply(v, x[:, :1], valid_lens=valid_lens, decode=True,
                                mutable=["cache"])
  else:
    variables = random_variables(mha, inputs_q, inputs_kv)
    apply = lambda v: mha.apply(v, inputs_q, inputs_kv, mask=mask, valid_lens=valid_lens,
                                return_weights=case != "fused")
  assert _kv_copies(apply, variables, kv_heads=kv_heads) == []


def _reference_with_score(params, inputs_q, inputs_kv, mask, head_score):
  """Multi-head attention written head by head with einsum; head_score(h, q, k) -> (B, Q, K)."""
  p = params
  q = jnp.einsum("bqd,dhe->bqhe", inputs_q, p["query"]["kernel"]) + p["query"]["bias"]
  k = jnp.einsum("bkd,dhe->bkhe", inputs_kv, p["key"]["kernel"]) + p["key"]["bias"]
  v = jnp.einsum("bkd,dhe->bkhe", inputs_kv, p["value"]["kernel"]) + p["value"]["bias"]
  heads = []
  for h in range(q.shape[2]):
    scores = head_score(h, q[:, :, h], k[:, :, h])  # (B, Q, K)
    scores = jnp.where(mask[:, 0], scores, -jnp.inf)
    heads.append(jax.nn.softmax(scores, axis=-1) @ v[:, :, h])  # (B, Q, Dh)
  stacked = jnp.stack(heads, axis=2)  # (B, Q, H, Dh)
  return jnp.einsum("bqhe,heo->bqo", stacked, p["out"]["kernel"]) + p["out"]["bias"]


@pytest.mark.parametrize("score", ["dot", "additive", "bilinear", "concat"])
def test_other_scores_have_per_head_parameters_and_match_a_loop_over_heads(score):
  inputs_q, inputs_kv, mask = _inputs(seed=9)
  mha = _zoo_mha(score=score)
  variables = random_variables(mha, inputs_q, inputs_kv)
  params = variables["params"]
  pure = {"dot": scoring.dot_score, "additive": scoring.additive_score,
          "bilinear": scoring.bilinear_score, "concat": scoring.concat_score}[score]
  if score == "dot":
    assert "score" not in params
  else:
    assert all(leaf.shape[0] == H for leaf in jax.tree.leaves(params["score"]))

  @jax.jit
  def both(params):  # one compilation
    def head_score(h, q, k):
      head_params = {name: leaf[h] for name, leaf in params.get("score", {}).items()}
      return jax.vmap(lambda qi, ki: pure(qi, ki, **head_params))(q, k)
    return (_reference_with_score(params, inputs_q, inputs_kv, mask, head_score),
            mha.apply({"params": params}, inputs_q, inputs_kv, mask=mask))

  expected, got = both(params)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_score_parameters_are_initialized_apart_per_head():
  inputs_q, inputs_kv, _ = _inputs()
  # A plain normal init compiles faster than the default truncated normal.
  mha = _zoo_mha(score="concat", kernel_init=nn.initializers.normal(0.5))
  params = jax.jit(mha.init)(rbg_key(10), inputs_q, inputs_kv)["params"]["score"]
  assert params["w"].shape == (H, 2 * QKV // H, QKV // H) and params["v"].shape == (H, QKV // H)
  for leaf in jax.tree.leaves(params):
    assert not np.allclose(leaf[0], leaf[1]) and not np.allclose(leaf[1], leaf[3])


def test_score_features_sets_the_hidden_size():
  inputs_q, inputs_kv, _ = _inputs()
  mha = _zoo_mha(score="additive", score_features=5)
  params = random_variables(mha, inputs_q, inputs_kv)["params"]
  assert params["score"]["w_q"].shape == (H, QKV // H, 5)
  assert params["score"]["v"].shape == (H, 5)


def test_dropout_on_weights():
  inputs_q, inputs_kv, mask = _inputs(seed=11)
  mha = _zoo_mha(dropout_rate=0.5)
  variables = random_variables(mha, inputs_q, inputs_kv)
  apply = functools.partial(mha.apply, variables, inputs_q, inputs_kv, mask=mask,
                            return_weights=True)

  @jax.jit
  def run(key):  # one compilation: without and with dropout
    return apply(), apply(deterministic=False, rngs={"dropout": key})

  (quiet, quiet_weights), (noisy, weights) = run(rbg_key(13))
  again, other = run(rbg_key(13))[1][0], run(rbg_key(14))[1][0]
  np.testing.assert_array_equal(noisy, again)
  assert not np.allclose(noisy, quiet) and not np.allclose(noisy, other)
  np.testing.assert_array_equal(weights, quiet_weights)  # returned weights are before dropout
  with pytest.raises(flax.errors.InvalidRngError, match="dropout"):
    mha.apply(variables, inputs_q, inputs_kv, deterministic=False)


def _self_attention_case(seed, length):
  return jnp.asarray(np.random.default_rng(seed).normal(size=(B, length, D)), jnp.float32)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_cached_decoding_equals_causal_self_attention(implementation):
  length = 7
  x = _self_attention_case(13, length)
  valid_lens = jnp.array([7, 4, 6])
  mha = zoo.MultiHeadAttention(num_heads=4, num_kv_heads=2, implementation=implementation)
  variables = random_variables(mha, x, decode=True)
  cache = variables["cache"]
  assert cache["cached_key"].shape == (B, length, 2, 3)
  assert cache["cached_value"].shape == (B, length, 2, 3)
  assert cache["cache_index"].shape == () and cache["cache_index"].dtype == jnp.int32
  @jax.jit
  def both(variables):  # one compilation
    expected = mha.apply(variables, x, mask=zoo.causal_mask(length), valid_lens=valid_lens)
    run = lambda cache, chunk: mha.apply({"params": variables["params"], "cache": cache}, chunk,
                                         valid_lens=valid_lens, decode=True, mutable=["cache"])
    prefix, state = run(variables["cache"], x[:, :3])  # a prefill of 3 positions

    def step(cache, x_t):  # then one position per step: x_t (B, D)
      out, state = run(cache, x_t[:, None])  # (B, 1, D)
      return state["cache"], out[:, 0]

    cache, steps = jax.lax.scan(step, state["cache"], x[:, 3:].swapaxes(0, 1))  # (L - 3, B, D)
    return expected, jnp.concatenate([prefix, steps.swapaxes(0, 1)], axis=1), cache

  expected, cached, cache = both(variables)
  assert int(cache["cache_index"]) == length
  np.testing.assert_allclose(cached, expected, rtol=1e-5, atol=1e-6)


def test_decoding_a_chunk_longer_than_the_cache_is_an_error():
  x = _self_attention_case(15, 4)
  mha = zoo.MultiHeadAttention(num_heads=2)
  variables = random_variables(mha, x, decode=True)
  with pytest.raises(ValueError, match="max_len"):
    mha.apply(variables, jnp.zeros((B, 5, D)), decode=True, mutable=["cache"])
  with pytest.raises(ValueError, match="max_len"):
    mha.apply(variables, jnp.zeros((B + 1, 1, D)), decode=True, mutable=["cache"])


def test_argument_errors_name_the_argument_and_shapes():
  inputs_q, inputs_kv, mask = _inputs()
  mha = _zoo_mha()
  variables = random_variables(mha, inputs_q, inputs_kv)
  apply = lambda *args, **kwargs: mha.apply(variables, *args, **kwargs)
  with pytest.raises(ValueError, match=r"inputs_q: expected an array of rank >= 2.*\(12,\)"):
    apply(inputs_q[0, 0])
  with pytest.raises(ValueError, match=r"inputs_kv: expected the batch axes \(3,\) of inputs_q "
                                       r"followed by 2 per-example axes, got shape \(7, 10\)"):
    apply(inputs_q, inputs_kv[0])
  with pytest.raises(ValueError, match=r"inputs_kv: expected the batch axes \(3,\)"):
    apply(inputs_q, inputs_kv[:2])
  with pytest.raises(ValueError, match=r"mask with shape \(3, 1, 5, 6\) does not broadcast.*"
                     r"\(3, 4, 5, 7\)"):
    apply(inputs_q, inputs_kv, mask=mask[..., :6])
  with pytest.raises(ValueError, match=r"mask with shape \(1, 3, 1, 5, 7\)"):
    apply(inputs_q, inputs_kv, mask=mask[None])
  with pytest.raises(ValueError, match="mask: expected a boolean"):
    apply(inputs_q, inputs_kv, mask=mask.astype(jnp.float32))
  with pytest.raises(ValueError, match=r"valid_lens with shape \(2,\)"):
    apply(inputs_q, inputs_kv, valid_lens=jnp.array([1, 2]))
  with pytest.raises(ValueError, match="valid_lens: expected an integer"):
    apply(inputs_q, inputs_kv, valid_lens=jnp.array([1.0, 2.0, 3.0]))
  with pytest.raises(ValueError, match=r"valid_lens must lie in \[0, 7\]"):
    apply(inputs_q, inputs_kv, valid_lens=jnp.array([1, 8, 3]))
  with pytest.raises(ValueError, match=r"qkv_features \(10\) must be divisible by num_heads \(4\)"):
    zoo.MultiHeadAttention(num_heads=4, qkv_features=10).init(jax.random.key(0), inputs_q)
  with pytest.raises(ValueError, match=r"num_heads \(4\) must be divisible by num_kv_heads \(3\)"):
    zoo.MultiHeadAttention(num_heads=4, num_kv_heads=3).init(jax.random.key(0), inputs_q)
  with pytest.raises(ValueError, match="implementation: unknown 'flash'"):
    zoo.MultiHeadAttention(num_heads=4, implementation="flash").init(jax.random.key(0), inputs_q)
  with pytest.raises(ValueError, match="score: unknown name 'cosine'"):
    zoo.MultiHeadAttention(num_heads=4, score="cosine").init(jax.random.key(0), inputs_q)
  with pytest.raises(ValueError, match="only score='scaled_dot', got score='additive'"):
    zoo.MultiHeadAttention(num_heads=4, score="additive", implementation="fused").init(
        jax.random.key(0), inputs_q)


def test_fused_path_asks_for_cudnn_where_it_applies(monkeypatch):
  # No GPU here: record what zoo.fast_paths would pick on one for the arguments the fused path
  # passes (benchmarks/gpu_checks.py compares the cuDNN result with the vmap path on a GPU).
  on_gpu, real = [], fast_paths.attention_backend

  def spy(query, key, value, *, mask=None, backend=None):
    on_gpu.append(real(query, key, value, mask=mask, backend="gpu"))
    return real(query, key, value, mask=mask, backend=backend)

  monkeypatch.setattr(fast_paths, "attention_backend", spy)
  x = jnp.zeros((B, Q, 16), jnp.bfloat16)
  mha = zoo.MultiHeadAttention(2, dtype=jnp.bfloat16, implementation="fused")  # Dh = 8
  variables = random_variables(mha, x)
  trace = lambda **kwargs: jax.eval_shape(lambda v: mha.apply(v, x, **kwargs), variables)
  on_gpu.clear()  # _variables traced an init
  trace(valid_lens=jnp.array([5, 0, 2]))  # key padding as lengths: cuDNN
  trace(mask=zoo.causal_mask(Q))  # a dense mask: XLA
  trace(valid_lens=jnp.ones((B, Q), jnp.int32))  # lengths per query row become a mask: XLA
  assert on_gpu == ["cudnn", "xla", "xla"]
  assert real(x[..., None], x[..., None], x[..., None]) == "xla"  # and on this CPU: XLA


def test_constructor_takes_the_documented_positional_order():
  mha = zoo.MultiHeadAttention(4, 8, 9, "dot", 0.25, False, jnp.bfloat16, "fused")
  assert (mha.num_heads, mha.qkv_features, mha.out_features, mha.score, mha.dropout_rate,
          mha.use_bias, mha.dtype, mha.implementation) == (
              4, 8, 9, "dot", 0.25, False, jnp.bfloat16, "fused")


def test_fused_refuses_weights_and_dropout():
  inputs_q, inputs_kv, _ = _inputs()
  fused = _zoo_mha(implementation="fused", dropout_rate=0.1)
  variables = random_variables(fused, inputs_q, inputs_kv)
  with pytest.raises(ValueError, match="return_weights=True: implementation='fused'"):
    fused.apply(variables, inputs_q, inputs_kv, return_weights=True)
  with pytest.raises(ValueError, match="no attention dropout"):
    fused.apply(variables, inputs_q, inputs_kv, deterministic=False,
                rngs={"dropout": jax.random.key(1)})


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_jit_no_retrace_grad_and_batching(implementation):
  inputs_q, inputs_kv, mask = _inputs(seed=16)
  mha = _zoo_mha(implementation=implementation)
  variables = random_variables(mha, inputs_q, inputs_kv)
  lens = jnp.array([3, 7, 5])
  chex.clear_trace_counter()

  def attend(variables, inputs_q, inputs_kv, lens):
    return mha.apply(variables, inputs_q, inputs_kv, mask=mask, valid_lens=lens)

  @jax.jit
  @chex.assert_max_traces(n=1)
  def loss(variables, inputs_q, inputs_kv, lens):
    return jnp.sum(attend(variables, inputs_q, inputs_kv, lens) ** 2)

  eager = loss(variables, inputs_q, inputs_kv, lens)
  loss(variables, inputs_q + 1.0, inputs_kv, lens[::-1])  # equal shapes: no second trace
  grads = jax.grad(loss)(variables, inputs_q, inputs_kv, lens)
  chex.assert_trees_all_equal_shapes(grads, variables)
  chex.assert_tree_all_finite(grads)
  assert all(float(jnp.abs(g).sum()) > 0 for g in jax.tree.leaves(grads))
  # An extra leading axis mapped with jax.vmap equals applying to each slice.
  stacked_q = jnp.stack([inputs_q, -inputs_q])  # (2, B, Q, D)
  mapped, alone = jax.jit(lambda v: (jax.vmap(lambda x: attend(v, x, inputs_kv, lens))(stacked_q),
                                     attend(v, -inputs_q, inputs_kv, lens)))(variables)
  np.testing.assert_allclose(mapped[1], alone, rtol=1e-5, atol=1e-6)
  assert np.isfinite(float(eager))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_bfloat16_compute_float32_params_and_empty_rows_finite(implementation):
  inputs_q, inputs_kv, mask, valid_lens = _fully_masked_case()
  f32 = _zoo_mha(implementation=implementation)
  bf16 = _zoo_mha(implementation=implementation, dtype=jnp.bfloat16)
  variables = random_variables(bf16, inputs_q, inputs_kv)
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))
  apply = lambda mha, v: mha.apply(v, inputs_q, inputs_kv, mask=mask, valid_lens=valid_lens)

  @jax.jit
  def run(variables):  # one compilation
    loss = lambda v: jnp.sum(apply(bf16, v).astype(jnp.float32) ** 2)
    return apply(bf16, variables), apply(f32, variables), jax.grad(loss)(variables)

  out, expected, grads = run(variables)
  assert out.dtype == jnp.bfloat16
  chex.assert_tree_all_finite(out)
  np.testing.assert_allclose(np.asarray(out, np.float32), expected, atol=0.06)
  chex.assert_tree_all_finite(grads)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_projected_key_value_give_exactly_the_inputs_kv_result(implementation):
  inputs_q = _self_attention_case(21, 5)  # (B, 5, D)
  inputs_kv = jnp.asarray(np.random.default_rng(22).normal(size=(B, 9, D)), jnp.float32)
  valid_lens = jnp.array([9, 2, 6])
  mha = zoo.MultiHeadAttention(num_heads=4, num_kv_heads=2, implementation=implementation)
  variables = random_variables(mha, inputs_q, inputs_kv)

  @jax.jit
  def both(variables):
    expected = mha.apply(variables, inputs_q, inputs_kv, valid_lens=valid_lens)
    key_value = mha.apply(variables, inputs_kv, method=zoo.MultiHeadAttention.project_key_value)
    got = mha.apply(variables, inputs_q, None, valid_lens=valid_lens, key_value=key_value)
    return expected, got, key_value

  expected, got, (key, value) = both(variables)
  p = variables["params"]
  np.testing.assert_allclose(key, np.einsum("bkd,dhe->bkhe", inputs_kv, p["key"]["kernel"])
                             + p["key"]["bias"], rtol=1e-5, atol=1e-5)
  assert key.shape == value.shape == (B, 9, 2, D // 4)
  np.testing.assert_array_equal(got, expected)


def test_projected_key_value_refuse_decoding_and_wrong_shapes():
  inputs_q = _self_attention_case(23, 4)
  mha = zoo.MultiHeadAttention(num_heads=4, num_kv_heads=2)
  variables = random_variables(mha, inputs_q)
  key_value = mha.apply(variables, inputs_q, method=zoo.MultiHeadAttention.project_key_value)
  with pytest.raises(ValueError, match="with decode=True the keys are the self-attention cache"):
    mha.apply(variables, inputs_q, key_value=key_value, decode=True)
  with pytest.raises(ValueError, match=r"key_value\[0\] \(key\): expected shape \(B, K, Hkv, Dh\)"):
    mha.apply(variables, inputs_q, key_value=(key_value[0][:, :, :1], key_value[1]))
  with pytest.raises(ValueError, match="expected \\(key, value\\) from project_key_value"):
    mha.apply(variables, inputs_q, key_value=key_value[0])
  with pytest.raises(ValueError, match="differ in shape"):
    mha.apply(variables, inputs_q, key_value=(key_value[0], key_value[1][:, :3]))
