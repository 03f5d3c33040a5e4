"""The conventions every public zoo module keeps, checked by enumerating them.

1. Masks: every module whose inputs can be padded takes keyword-only `valid_lens=` and `mask=`
   (True = may attend); equivalent lengths and masks give the same outputs, and given both, the
   result is that of the AND of the two (zoo.masking.key_mask).
2. Batch shapes: the same modules take any leading batch shape, none included: a vmapped
   per-example call equals the batched call, and two batch axes equal the batched call on each.

The modules are enumerated from zoo's public names; each is either a CASE here or listed in
NOT_PADDED with the reason it has nothing to mask, so a new module cannot slip past both.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _helpers import rand
from _helpers import random_variables

import zoo
from zoo import batching
from zoo import fast_paths

B, Q, K, D, H = 3, 5, 7, 6, 2
LENS = np.array([4, 0, 7], np.int32)  # valid keys (steps) of each example; one is empty
OTHER_LENS = np.array([2, 6, 5], np.int32)  # a second padding, ANDed with LENS
BLOCK = dict(num_heads=H, ffn_hidden=8, dropout_rate=0.0)

# The public modules without padded inputs to mask, and why.
NOT_PADDED = {
    # Scores of every query against every key; the modules that use them mask the scores.
    "DotScore", "ScaledDotScore", "AdditiveScore", "BilinearScore", "ConcatScore",
    "ConcatLinearScore",
    # Position-wise: each position is computed alone, so padding cannot reach a real position.
    "PositionwiseFFN", "SinusoidalPositionEncoding", "LearnedPositionEmbedding",
    "SegmentEmbedding",
    # Whole encoder-decoder models over two token sequences: the source lengths are named for the
    # source (src_valid_lens / src_lens) and passed to their encoders and attentions as
    # valid_lens=.
    "Transformer", "Seq2Seq", "BahdanauDecoder", "LuongDecoder", "PlainDecoder",
}


def _key_mask(lens):
  """bool (B, K): True at the first lens[b] keys."""
  return np.arange(K) < np.asarray(lens)[:, None]


@dataclasses.dataclass(frozen=True)
class Case:
  """One padded module: how to build it, its inputs, and how its mask is shaped.

  Attributes:
    module: the module.
    inputs: the positional inputs, batched (B, ...).
    as_mask: the mask equivalent to key lengths (B,), in the shape the module takes.
    lengths: valid_lens built from key lengths (B,) (SoftAlignment takes a pair).
  """
  module: nn.Module
  inputs: tuple[Any, ...]
  as_mask: Callable[[np.ndarray], np.ndarray]
  lengths: Callable[[np.ndarray], Any] = lambda lens: lens


def _attention_inputs():
  return rand(1, B, Q, D), rand(2, B, K, D), rand(3, B, K, 4)


def _cases() -> dict[str, Case]:
  rows = lambda lens: _key_mask(lens)[:, None, :]  # (B, 1, K)
  heads = lambda lens: _key_mask(lens)[:, None, None, :]  # (B, 1, 1, K)
  x = rand(4, B, K, D)
  q, kv = rand(5, B, Q, D), rand(6, B, K, D)
  a_lens = np.array([3, 5, 1], np.int32)
  tokens = np.random.default_rng(0).integers(0, 11, (B, K)).astype(np.int32)
  return {
      "Attention": Case(zoo.Attention(score="additive"), _attention_inputs(), rows),
      "AttentionPooling": Case(zoo.AttentionPooling(), (x,), _key_mask),
      "SimpleSelfAttention": Case(zoo.SimpleSelfAttention(scale=True), (x,), rows),
      "SelfAttention": Case(zoo.SelfAttention(features=4), (x,), rows),
      "MultiHeadAttention": Case(zoo.MultiHeadAttention(H), (q, kv), heads),
      "SoftAlignment": Case(
          zoo.SoftAlignment(score="bilinear"), (q, kv),
          lambda lens: (np.arange(Q) < a_lens[:, None])[:, :, None] & _key_mask(lens)[:, None],
          lambda lens: (a_lens, lens)),
      "EncoderBlock": Case(zoo.EncoderBlock(**BLOCK), (x,), heads),
      "TransformerEncoder": Case(zoo.TransformerEncoder(2, normalize_before=True, **BLOCK), (x,),
                                 heads),
      "DecoderBlock": Case(zoo.DecoderBlock(**BLOCK), (q, kv), heads),
      "TransformerDecoder": Case(zoo.TransformerDecoder(1, **BLOCK), (q, kv), heads),
      "LSTMLayer": Case(zoo.LSTMLayer(4, bidirectional=True), (x,), _key_mask),
      "LSTM": Case(zoo.LSTM(4, num_layers=2), (x,), _key_mask),
      "BiLSTM": Case(zoo.BiLSTM(4), (x,), _key_mask),
      "RecurrentEncoder": Case(zoo.RecurrentEncoder(11, 5, 4, bidirectional=True), (tokens,),
                               _key_mask),
      "FastLSTM": Case(fast_paths.FastLSTM(4, bidirectional=True), (x,), _key_mask),
  }


CASES = _cases()


def _public_modules() -> set[str]:
  names = getattr(zoo, "__all__", None) or [n for n in dir(zoo) if not n.startswith("_")]
  return {n for n in names
          if isinstance(getattr(zoo, n), type) and issubclass(getattr(zoo, n), nn.Module)}


def test_every_public_module_is_a_case_or_has_nothing_to_mask():
  public = _public_modules()
  assert public, "zoo exports no modules?"
  assert public - set(CASES) - NOT_PADDED == set(), "a public module outside the convention"
  assert set(CASES) - public == {"FastLSTM"}  # zoo.fast_paths.FastLSTM, imported on its own
  assert NOT_PADDED <= public


@pytest.mark.parametrize("name", sorted(CASES))
def test_valid_lens_and_mask_are_keyword_only(name):
  parameters = inspect.signature(type(CASES[name].module).__call__).parameters
  for keyword in ("valid_lens", "mask"):
    assert parameters[keyword].kind is inspect.Parameter.KEYWORD_ONLY, keyword
    assert parameters[keyword].default is None, keyword


def _apply(case: Case, variables, inputs, **kwargs):
  return case.module.apply(variables, *inputs, **kwargs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_lengths_and_the_equivalent_mask_agree_and_both_combine_by_and(name):
  case = CASES[name]
  variables = random_variables(case.module, *case.inputs, seed=1)
  run = jax.jit(lambda v, lens, mask, other: (
      _apply(case, v, case.inputs, valid_lens=case.lengths(lens)),
      _apply(case, v, case.inputs, mask=mask),
      _apply(case, v, case.inputs, valid_lens=case.lengths(lens), mask=other),
      _apply(case, v, case.inputs, mask=mask & other),
      _apply(case, v, case.inputs)))
  mask, other = case.as_mask(LENS), case.as_mask(OTHER_LENS)
  by_lengths, by_mask, both, anded, plain = run(variables, LENS, mask, other)
  chex.assert_trees_all_equal(by_lengths, by_mask)
  chex.assert_trees_all_equal(both, anded)
  # The padding changes something (the test would pass trivially otherwise).
  assert not all(np.allclose(a, b) for a, b in zip(jax.tree.leaves(by_lengths),
                                                   jax.tree.leaves(plain)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_unbatched_and_two_batch_axes_match_the_batched_call(name):
  case = CASES[name]
  variables = random_variables(case.module, *case.inputs, seed=2)
  mask = case.as_mask(OTHER_LENS)
  swap = lambda tree: jax.tree.map(lambda a: a[::-1], tree)  # another batch of the same shapes
  stack = lambda *trees: jax.tree.map(lambda *a: jnp.stack(a), *trees)

  lengths = case.lengths(LENS)

  @jax.jit
  def run(v):
    call = lambda inputs, lens, m: _apply(case, v, inputs, valid_lens=lens, mask=m)
    batched = call(case.inputs, lengths, mask)
    per_example = jax.vmap(call)(case.inputs, lengths, mask)
    two_axes = call(stack(case.inputs, swap(case.inputs)), stack(lengths, swap(lengths)),
                    stack(mask, swap(mask)))
    swapped = call(swap(case.inputs), swap(lengths), swap(mask))
    return batched, per_example, two_axes, swapped

  batched, per_example, two_axes, swapped = run(variables)
  chex.assert_trees_all_close(per_example, batched, rtol=1e-5, atol=1e-6)
  chex.assert_trees_all_close(jax.tree.map(lambda a: a[0], two_axes), batched, rtol=1e-5,
                              atol=1e-6)
  chex.assert_trees_all_close(jax.tree.map(lambda a: a[1], two_axes), swapped, rtol=1e-5,
                              atol=1e-6)


def test_a_mask_shared_by_the_batch_axes_is_not_copied_per_example():
  # A causal mask (L, L) broadcasts over any batch shape, as flax's masks do, and stays one row.
  causal = zoo.causal_mask(K)
  assert batching.fold_mask(causal, (2, B), (K, K), "mask", "the scores =").shape == (1, K, K)
  per_example = np.asarray(_key_mask(LENS))[:, None, :]  # (B, 1, K): one row per example
  assert batching.fold_mask(per_example, (B,), (K, K), "mask", "the scores =").shape == (B, 1, K)
  x = rand(7, 2, B, K, D)
  module = zoo.SimpleSelfAttention()
  got, _ = module.apply({}, x, mask=causal)
  want = np.stack([module.apply({}, x[i], mask=causal)[0] for i in range(2)])
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
  with pytest.raises(ValueError, match=r"mask with shape \(4, 7, 7\) does not broadcast to the "
                                       r"scores \(\*batch, Q, K\) = \(2, 3, 7, 7\)"):
    module.apply({}, x, mask=jnp.ones((4, K, K), bool))


# bfloat16 against float32, relative to the largest output: bfloat16 keeps 8 significant bits, so
# each rounding is within 2^-8 = 0.4%; a few layers of matmuls stay within this.
BFLOAT16_TOLERANCE = 0.05
RECURRENT = {"LSTMLayer", "LSTM", "BiLSTM", "FastLSTM", "RecurrentEncoder"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dtype_none_follows_the_inputs_and_parameters(name):
  """flax's rule: dtype=None computes in the promoted type of inputs and parameters, so bfloat16
  inputs and parameters give bfloat16 outputs, close to the float32 ones (softmax and LayerNorm
  statistics run in float32); float32 inputs and parameters give float32, bit for bit what an
  explicit dtype=float32 gives."""
  case = CASES[name]
  assert case.module.dtype is None
  has_parameters = "param_dtype" in {f.name for f in dataclasses.fields(case.module)}
  half = case.module.clone(param_dtype=jnp.bfloat16) if has_parameters else case.module
  variables = random_variables(case.module, *case.inputs, seed=4)
  rounded = jax.tree.map(lambda a: a.astype(jnp.bfloat16).astype(jnp.float32), variables)
  to_half = lambda tree: jax.tree.map(
      lambda a: a.astype(jnp.bfloat16) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree)
  lengths = case.lengths(LENS)

  explicit = case.module.clone(dtype=jnp.float32)  # what the experiments' configs pass

  @jax.jit
  def run(v32, v16):
    inputs = jax.tree.map(lambda a: to_half(a).astype(a.dtype), case.inputs)
    full = case.module.apply(v32, *inputs, valid_lens=lengths)
    return (full, half.apply(v16, *to_half(case.inputs), valid_lens=lengths),
            explicit.apply(v32, *inputs, valid_lens=lengths))

  full, halved, float32 = run(rounded, to_half(variables))
  chex.assert_trees_all_equal(full, float32)  # float32 results unchanged to the bit
  halved, full = jax.tree.leaves(halved), jax.tree.leaves(full)
  # A recurrent encoder's states (every leaf after its outputs) are float32 whatever the dtype
  # (documented); everything else follows the dtype.
  states = len(halved) - 1 if name in RECURRENT else 0
  want_dtypes = [jnp.bfloat16] * (len(halved) - states) + [jnp.float32] * states
  assert [a.dtype for a in halved] == want_dtypes
  for got, want in zip(halved, full):
    assert want.dtype == jnp.float32
    scale = max(float(jnp.max(jnp.abs(want))), 1e-3)
    np.testing.assert_allclose(np.asarray(got, np.float32), want,
                               atol=BFLOAT16_TOLERANCE * scale)
