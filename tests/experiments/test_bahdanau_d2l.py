"""The Bahdanau translator against an independent numpy re-statement of d2l's model.

d2l 11.4 (Seq2SeqAttentionDecoder over d2l 10.7's Seq2SeqEncoder), written here from the chapter's
equations in PyTorch's parameter layout (Linear weights (out, in), RNN weight_ih (4H, in) over
[context; embedding], separate bias_ih and bias_hh), with the one change this project makes: an
LSTM where d2l has a GRU (gates i, f, g, o as torch.nn.LSTM). At every target step the top layer's
previous h queries the encoder outputs with additive attention (W_q, W_k without bias, w_v),
masked to the valid source length (d2l's masked softmax); the context joins the token embedding
as the bottom layer's input; a dense layer maps the top output to logits. The encoder is an
embedding and a stacked LSTM whose final state starts the decoder.

d2l runs its encoder over padded positions too; zoo's stops at each source's length (as PyTorch's
packed sequences do) unless asked to read the padding (`encode_padding`, d2l's way). With
full-length sources the two are the same model; with padded ones this re-statement runs each
source over its own tokens only, or over all S positions for `encode_padding`.

The model's parameters are converted to that layout (and every one replaced by random values
first, so none is zero or symmetric), and both compute teacher-forced logits and attention
weights for odd, all-different sizes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.seq2seq.models import BahdanauTranslator

B, S, T, EMBED, H, V_SRC, V_TGT, LAYERS = 3, 7, 5, 9, 6, 13, 11, 2


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _lstm_layer_step(w, x, h, c):
  """torch.nn.LSTM's cell: x (B, in), h, c (B, H) -> new (h, c)."""
  gates = x @ w["weight_ih"].T + w["bias_ih"] + h @ w["weight_hh"].T + w["bias_hh"]  # (B, 4H)
  i, f, g, o = np.split(gates, 4, axis=-1)
  c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
  return _sigmoid(o) * np.tanh(c), c


def _lstm_stack_step(layers, x, state):
  """One time step of a stacked LSTM (no dropout): x (B, in), state [(h, c)] per layer."""
  new = []
  for w, (h, c) in zip(layers, state):
    h, c = _lstm_layer_step(w, x, h, c)
    new.append((h, c))
    x = h
  return x, new


def d2l_encoder(d2l, src, src_len):
  """Seq2SeqEncoder: outputs (B, S, H) (zero after each source's length) and the final state."""
  embedded = d2l["enc_embedding"][src]  # (B, S, E)
  outputs = np.zeros((B, S, H))
  final = []
  for b in range(B):
    state = [(np.zeros((1, H)), np.zeros((1, H))) for _ in range(LAYERS)]
    for s in range(src_len[b]):
      top, state = _lstm_stack_step(d2l["enc_rnn"], embedded[b, s][None], state)
      outputs[b, s] = top[0]
    final.append(state)
  state = [(np.concatenate([final[b][l][0] for b in range(B)]),
            np.concatenate([final[b][l][1] for b in range(B)])) for l in range(LAYERS)]
  return outputs, state


def d2l_masked_softmax(scores, valid_lens):
  """d2l's masked_softmax: positions at or after the valid length get -1e6 before the softmax."""
  mask = np.arange(scores.shape[-1])[None, :] < valid_lens[:, None]  # (B, S)
  scores = np.where(mask, scores, -1e6)
  e = np.exp(scores - scores.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def d2l_decoder(d2l, tgt_in, enc_outputs, state, valid_lens):
  """Seq2SeqAttentionDecoder.forward: logits (B, T, V) and attention weights (B, T, S)."""
  embedded = d2l["dec_embedding"][tgt_in]  # (B, T, E)
  keys = enc_outputs @ d2l["W_k"].T  # (B, S, H)
  outputs, weights = [], []
  for t in range(T):
    query = state[-1][0] @ d2l["W_q"].T  # (B, H): the top layer's h
    features = np.tanh(query[:, None, :] + keys)  # (B, S, H)
    scores = (features @ d2l["w_v"].T)[..., 0]  # (B, S)
    attention = d2l_masked_softmax(scores, valid_lens)
    context = np.einsum("bs,bsh->bh", attention, enc_outputs)  # (B, H)
    x = np.concatenate([context, embedded[:, t]], axis=-1)  # (B, H + E)
    top, state = _lstm_stack_step(d2l["dec_rnn"], x, state)
    outputs.append(top)
    weights.append(attention)
  outputs = np.stack(outputs, axis=1)  # (B, T, H)
  return outputs @ d2l["dense_weight"].T + d2l["dense_bias"], np.stack(weights, axis=1)


def _torch_layout(params, rng):
  """zoo's parameters as d2l's PyTorch modules hold them; the one LSTM bias per layer is split
  into a random bias_ih and the bias_hh that completes it."""

  def rnn(lstm, first_input=None):
    layers = []
    for l in range(LAYERS):
      p = lstm[f"layers_{l}"]
      weight_ih = p["input"]["kernel"][:, 0].T  # (4H, in)
      if l == 0 and first_input is not None:
        weight_ih = np.concatenate([first_input, p["input"]["kernel"][:, 0]], axis=0).T
      bias_ih = rng.normal(size=4 * H)
      layers.append({"weight_ih": weight_ih, "weight_hh": p["hidden_kernel"][0].T,
                     "bias_ih": bias_ih, "bias_hh": p["input"]["bias"][0] - bias_ih})
    return layers

  enc, dec = params["encoder"], params["decoder"]
  scorer = dec["attention"]["scorer"]
  return {"enc_embedding": enc["embedding"]["embedding"], "enc_rnn": rnn(enc["lstm"]),
          "dec_embedding": dec["embedding"]["embedding"],
          "dec_rnn": rnn(dec["lstm"], first_input=dec["context_gates"]["kernel"]),
          "W_q": scorer["w_q"].T, "W_k": scorer["w_k"].T, "w_v": scorer["v"][None, :],
          "dense_weight": dec["output"]["kernel"].T, "dense_bias": dec["output"]["bias"]}


@pytest.fixture(scope="module")
def model_and_params():
  model = BahdanauTranslator(V_SRC, V_TGT, embed_dim=EMBED, hidden_size=H, num_layers=LAYERS,
                             dropout_rate=0.3)
  shapes = model.init(jax.random.key(0), jnp.zeros((B, S), jnp.int32), jnp.full((B,), S),
                      jnp.zeros((B, T), jnp.int32))
  rng = np.random.default_rng(11)
  params = jax.tree.map(lambda x: rng.normal(scale=0.5, size=x.shape).astype(np.float32), shapes)
  return model, params


@pytest.mark.parametrize("src_len, encode_padding", [([S, S, S], False), ([S, 4, 1], False),
                                                     ([S, 4, 1], True)],
                         ids=["full", "padded", "padded-encoder-reads-padding"])
def test_logits_and_attention_match_d2l(model_and_params, src_len, encode_padding):
  model, params = model_and_params
  if encode_padding:
    model = BahdanauTranslator(V_SRC, V_TGT, embed_dim=EMBED, hidden_size=H, num_layers=LAYERS,
                               dropout_rate=0.3, encode_padding=True)
  rng = np.random.default_rng(5)
  src_len = np.array(src_len, np.int32)
  src = rng.integers(1, V_SRC, size=(B, S)).astype(np.int32)
  src[np.arange(S)[None, :] >= src_len[:, None]] = 0  # padding
  tgt_in = rng.integers(1, V_TGT, size=(B, T)).astype(np.int32)
  logits = np.asarray(jax.jit(model.logits)(params, src, src_len, tgt_in))  # (B, T, V)
  weights = np.asarray(jax.jit(model.cross_attention)(params, src, src_len, tgt_in))  # (B, T, S)

  d2l = _torch_layout(jax.tree.map(lambda x: np.asarray(x, np.float64), params), rng)
  enc_outputs, state = d2l_encoder(d2l, src, np.full(B, S) if encode_padding else src_len)
  expected_logits, expected_weights = d2l_decoder(d2l, tgt_in, enc_outputs, state, src_len)
  assert logits.shape == (B, T, V_TGT) and weights.shape == (B, T, S)
  np.testing.assert_allclose(logits, expected_logits, atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
  padded = np.broadcast_to(np.arange(S)[None, None, :] >= src_len[:, None, None], weights.shape)
  assert np.all(weights[padded] == 0)
  assert np.abs(expected_logits).max() > 1  # a comparison of values, not of zeros
