"""LSTM encoder-decoders with attention: Bahdanau (d2l) and Luong with input feeding (Paddle);
and, for comparison, d2l's encoder-decoder without attention (PlainDecoder).

Both decoders run a whole target sequence with teacher forcing (`__call__`, a scan over time) and
expose the single step that greedy and beam search drive (`init_decode_state`, `decode_step`; the
decoding contract of zoo.search). Both paths run the same step function, so they give the same
logits. The embedding part of the bottom LSTM layer's input projection is computed for all target
positions in one matmul before the scan; only the part that depends on the previous step (the
attention context, or the fed attentional vector) is projected inside it.

  BahdanauDecoder   (d2l's Seq2SeqAttentionDecoder, with an LSTM in place of the GRU)
    query_t   = h_{t-1} of the top layer
    context_t = additive attention of query_t over the encoder outputs (padded sources masked)
    h_t       = LSTM([context_t; embed(y_{t-1})], state_{t-1})
    logits_t  = W_out h_t + b_out

  LuongDecoder      (the Paddle couplet chapter's decoder cell: Luong attention, input feeding)
    memory    = input_proj(encoder outputs)                     keys and values, (S, H)
    h_t       = LSTM([embed(y_{t-1}); a_{t-1}], state_{t-1})    a_0 = 0; dropout on h_t
    context_t = dot attention of h_t over memory (padded sources masked)
    a_t       = tanh(output_proj([context_t; h_t]))             the attentional vector, fed back
                                                                (the Paddle chapter has no tanh)
    logits_t  = W_out a_t + b_out

  PlainDecoder      (d2l 10.7's Seq2SeqDecoder, with an LSTM in place of the GRU: no attention)
    c         = the top layer's h of the encoder's final state (which is also state_0)
    h_t       = LSTM([embed(y_{t-1}); c], state_{t-1})
    logits_t  = W_out h_t + b_out

Shape letters: B batch, T target length, S source length, E encoder output width, H decoder hidden
size, V vocabulary, N rows during search (batch or batch * beam).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoo import checks
from zoo import recurrent
from zoo.attention import Attention
from zoo.recurrent import LSTMState

Dtype = Any


class BahdanauState(NamedTuple):
  """Decoding state of `BahdanauDecoder`; every leaf has leading axis N.

  Attributes:
    lstm: tuple of num_layers LSTMState(h (N, H), c (N, H)), float32, bottom layer first.
    enc_outputs: (N, S, E), the keys and values of the attention.
    enc_keys: (N, S, H), the keys projected by the additive score's W_k, once per source.
    src_lens: int (N,), the number of real source tokens.
  """
  lstm: tuple[LSTMState, ...]
  enc_outputs: jax.Array
  enc_keys: jax.Array
  src_lens: jax.Array


class LuongState(NamedTuple):
  """Decoding state of `LuongDecoder`; every leaf has leading axis N.

  Attributes:
    lstm: tuple of num_layers LSTMState(h (N, H), c (N, H)), float32, bottom layer first.
    feed: (N, H), the previous attentional vector (zeros before the first step).
    memory: (N, S, H), the projected encoder outputs (keys and values of the attention).
    src_lens: int (N,), the number of real source tokens.
  """
  lstm: tuple[LSTMState, ...]
  feed: jax.Array
  memory: jax.Array
  src_lens: jax.Array


def _check_source(enc_outputs, src_lens) -> None:
  checks.rank(enc_outputs, 3, "enc_outputs")
  checks.floating(enc_outputs, "enc_outputs")
  checks.sequence_lengths(src_lens, "src_lens", enc_outputs, "enc_outputs")


def _check_tokens(tokens, rank: int, name: str) -> None:
  checks.rank(tokens, rank, name)
  checks.integer(tokens, name)


class _Sizes(nn.Module):
  """The fields shared by the encoder and the decoders.

  Attributes:
    vocab_size: V, the number of token ids (embedding rows; decoders also produce V logits).
    embed_dim: the width of the token embeddings.
    hidden_size: H, the LSTM state width (a decoder seeded with an encoder's final state needs the
      encoder's state width).
    num_layers: the number of LSTM layers.
    dropout_rate: dropout between LSTM layers (decoders also use it as they document).
    dtype: the dtype of the computation and of the outputs; None (the default): the promoted type
      of the inputs and parameters (flax's rule). LSTM states and softmaxes are float32.
    param_dtype: the dtype parameters are stored in.
  """
  vocab_size: int
  embed_dim: int
  hidden_size: int
  num_layers: int = 1
  dropout_rate: float = 0.0
  dtype: Dtype | None = None
  param_dtype: Dtype = jnp.float32

  def _compute_dtype(self, like: jax.Array) -> Dtype:
    """`dtype`, or (None) the promoted type of `like` (e.g. the encoder outputs) and param_dtype."""
    return self.dtype if self.dtype is not None else jnp.promote_types(like.dtype,
                                                                       self.param_dtype)

  def _embedding(self, **kwargs) -> nn.Embed:
    return nn.Embed(self.vocab_size, self.embed_dim, dtype=self.dtype,
                    param_dtype=self.param_dtype, **kwargs)

  def _lstm(self, bidirectional: bool = False, **kwargs) -> recurrent.LSTM:
    return recurrent.LSTM(self.hidden_size, self.num_layers, self.dropout_rate, bidirectional,
                          dtype=self.dtype, param_dtype=self.param_dtype, **kwargs)


def _with_output_layer(decoder: nn.Module, hidden: jax.Array
                       ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(hidden (B, T, H), kernel (H, V), bias (V,)) of the decoder's output layer `output`, whose
  logits are hidden @ kernel + bias (creating its parameters when the decoder is initialized)."""
  if decoder.is_initializing():
    decoder.output(hidden)
  layer = decoder.output.variables["params"]
  return hidden, layer["kernel"], layer["bias"]


class _AttentionDecoder(_Sizes):
  """What both decoders share: the embedding, the LSTM, the output layer, teacher forcing and the
  decoding step. A subclass adds its attention in `setup` and defines
    _initial_state(enc_outputs (B, S, E), src_lens (B,), lstm_state) -> its state NamedTuple, and
    _step(state, embed_gates (N, 4H), deterministic) -> (vector (N, H), weights (N, S), state),
  where embed_gates is the bottom LSTM layer's input projection of the token embeddings and
  `vector` is what the output layer reads. Fields: see `_Sizes` (vocab_size is the target's).
  """

  def setup(self):
    self.embedding = self._embedding()
    self.lstm = self._lstm()
    self.output = nn.Dense(self.vocab_size, dtype=self.dtype, param_dtype=self.param_dtype)

  def _dense(self, features: int, use_bias: bool = True) -> nn.Dense:
    return nn.Dense(features, use_bias=use_bias, dtype=self.dtype, param_dtype=self.param_dtype)

  def init_decode_state(self, enc_outputs: jax.Array, src_lens: jax.Array,
                        enc_final_state: Sequence[LSTMState] | None = None):
    """Builds the state before the first target token.

    Args:
      enc_outputs: float (B, S, E), the encoder outputs (zero or anything at padded positions).
      src_lens: int (B,), the number of real source tokens (the attention masks the rest).
      enc_final_state: the initial LSTM state, a tuple of num_layers pairs (h (B, H), c (B, H)),
        usually the encoder's final state; None for zeros.

    Returns:
      the decoder's state NamedTuple; every leaf has leading axis B.
    """
    _check_source(enc_outputs, src_lens)
    batch = enc_outputs.shape[0]
    if enc_final_state is None:
      lstm_state = recurrent.zero_states(self.num_layers, batch, self.hidden_size)
    else:
      lstm_state = recurrent.check_states(enc_final_state, "enc_final_state", self.num_layers,
                                          batch, self.hidden_size)
      lstm_state = tuple(LSTMState(*(jnp.asarray(s, jnp.float32) for s in pair))
                         for pair in lstm_state)
    return self._initial_state(jnp.asarray(enc_outputs, self.dtype), jnp.asarray(src_lens),
                               lstm_state)

  def decode_step(self, state, tokens: jax.Array) -> tuple[jax.Array, Any]:
    """One decoding step (the zoo.search step interface; no dropout).

    Args:
      state: from `init_decode_state` or the previous step; leaves have leading axis N.
      tokens: int (N,), the previous output token of each row (bos first).

    Returns:
      logits (N, V) in `dtype`, and the new state (same structure, shapes and dtypes).
    """
    _check_tokens(tokens, 1, "tokens")
    checks.equal_dim(tokens, "tokens", 0, state.src_lens, "state.src_lens", 0)
    vector, _, state = self._step(state, self.lstm.input_gates(self.embedding(tokens)), True)
    return self.output(vector), state

  def __call__(self, tokens: jax.Array, enc_outputs: jax.Array, src_lens: jax.Array,
               init_state: Sequence[LSTMState] | None = None, *,
               deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    """Runs a whole target sequence with teacher forcing: (logits (B, T, V) in `dtype`,
    attention weights (B, T, S)); see `hidden`."""
    vectors, weights = self.hidden(tokens, enc_outputs, src_lens, init_state,
                                   deterministic=deterministic)
    return self.output(vectors), weights

  def hidden_and_output_layer(self, tokens: jax.Array, enc_outputs: jax.Array,
                              src_lens: jax.Array, init_state: Sequence[LSTMState] | None = None,
                              *, deterministic: bool = True
                              ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`__call__` stopped before the output layer, for a loss that applies it itself:
    (vectors (B, T, H), kernel (H, V), bias (V,)), whose vectors @ kernel + bias are the logits."""
    vectors, _ = self.hidden(tokens, enc_outputs, src_lens, init_state,
                             deterministic=deterministic)
    return _with_output_layer(self, vectors)

  def hidden(self, tokens: jax.Array, enc_outputs: jax.Array, src_lens: jax.Array,
             init_state: Sequence[LSTMState] | None = None, *,
             deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    """Runs a whole target sequence with teacher forcing, up to the output layer.

    Args:
      tokens: int (B, T), the decoder inputs (bos followed by the target without its last token).
      enc_outputs: float (B, S, E), the encoder outputs.
      src_lens: int (B,), the number of real source tokens.
      init_state: the initial LSTM state (see `init_decode_state`), usually the encoder's final
        state; None for zeros.
      deterministic: disables dropout (training needs a 'dropout' rng otherwise).

    Returns:
      the vectors the output layer reads (B, T, H) in `dtype`, and the attention weights
      (B, T, S) (zero at padded source positions, rows summing to 1 when the source is not
      empty).
    """
    _check_tokens(tokens, 2, "tokens")
    _check_source(enc_outputs, src_lens)
    checks.equal_dim(tokens, "tokens", 0, enc_outputs, "enc_outputs", 0)
    state = self.init_decode_state(enc_outputs, src_lens, init_state)
    embed_gates = self.lstm.input_gates(self.embedding(tokens))  # (B, T, 4H), one matmul

    def body(decoder, state, gates_t):
      vector, weights, state = decoder._step(state, gates_t, deterministic)
      return state, (vector, weights)

    scan = nn.scan(body, variable_broadcast="params", split_rngs={"params": False, "dropout": True},
                   in_axes=1, out_axes=1)
    _, (vectors, weights) = scan(self, state, embed_gates)  # (B, T, H), (B, T, S)
    return vectors, weights


class BahdanauDecoder(_AttentionDecoder):
  """d2l's attention decoder: the previous top hidden state queries the encoder outputs.

  At each step the top layer's previous h (before the first step, that of the initial state given,
  which zoo.Seq2Seq sets to the encoder's final state; zeros without one) scores the encoder
  outputs with additive attention (hidden size H, d2l's AdditiveAttention), masked by
  `src_lens`, with dropout `dropout_rate` on the weights in training; the context (E,) joins the
  token embedding as the bottom LSTM layer's input; a dense layer maps the top output to logits.
  Fields as in `_AttentionDecoder`.

  The encoder outputs are projected by the score's W_k once, in `init_decode_state`
  (BahdanauState.enc_keys), not at every step.

  Parameters: embedding (V, E_t); lstm (see zoo.LSTM); attention/scorer (w_q (H, H), w_k (E, H),
  v (H,)); context_gates/kernel (E, 4H), the context's rows of the bottom layer's W_ih (in PyTorch
  terms, d2l feeds [context; embedding], so its weight_ih_l0.T is context_gates/kernel stacked on
  lstm/layers_0/input/kernel[:, 0]); output (H, V) and bias.
  """

  def setup(self):
    super().setup()
    self.attention = Attention("additive", score_features=self.hidden_size,
                               dropout_rate=self.dropout_rate, dtype=self.dtype,
                               param_dtype=self.param_dtype)
    self.context_gates = self._dense(4 * self.hidden_size, use_bias=False)

  def _initial_state(self, enc_outputs, src_lens, lstm_state):
    # W_k of the encoder outputs once, not at every step: teacher forcing then sums the keys'
    # cotangents over the steps before the two matmuls of W_k's gradient (docs/BENCHMARKS.md).
    enc_keys = self.attention.project_keys(enc_outputs)  # (N, S, H)
    return BahdanauState(lstm_state, enc_outputs, enc_keys, src_lens)

  def _step(self, state: BahdanauState, embed_gates, deterministic):
    query = state.lstm[-1].h.astype(self._compute_dtype(state.enc_outputs))[:, None, :]  # (N,1,H)
    context, weights = self.attention(query, state.enc_keys, state.enc_outputs,
                                      valid_lens=state.src_lens, deterministic=deterministic,
                                      keys_projected=True)  # (N, 1, E), (N, 1, S)
    gates = embed_gates + self.context_gates(context[:, 0])  # (N, 4H)
    top, lstm_state = self.lstm.step_gates(state.lstm, gates, deterministic=deterministic)
    return top, weights[:, 0], state._replace(lstm=lstm_state)


class LuongDecoder(_AttentionDecoder):
  """The Paddle couplet chapter's decoder: Luong attention with input feeding.

  The bottom LSTM layer reads [embedding; previous attentional vector]; the top layer's output,
  after dropout (the same rate as between the LSTM layers), queries input_proj(encoder outputs)
  with a dot score, masked by `src_lens`; tanh(output_proj([context; top output])) is the
  attentional vector, which gives the logits and is fed to the next step. Fields: see `_Sizes`, and
    output_activation: applied to output_proj's result; tanh (Luong et al.'s attentional vector)
      by default. The Paddle chapter applies none: pass None to reproduce it exactly.

  Parameters: embedding (V, E_t); lstm (see zoo.LSTM); feed_gates/kernel (H, 4H), the fed
  vector's rows of the bottom layer's W_ih (Paddle feeds [embedding; feed], so its first LSTM
  cell's input weight is lstm/layers_0/input/kernel[:, 0] stacked on feed_gates/kernel);
  input_proj (E, H) and bias; output_proj (2H, H) and bias; output (H, V) and bias.
  """

  output_activation: Callable[[jax.Array], jax.Array] | None = jnp.tanh

  def setup(self):
    super().setup()
    self.feed_gates = self._dense(4 * self.hidden_size, use_bias=False)
    self.input_proj = self._dense(self.hidden_size)
    self.attention = Attention("dot", dtype=self.dtype, param_dtype=self.param_dtype)
    self.output_proj = self._dense(self.hidden_size)
    self.dropout = nn.Dropout(self.dropout_rate)

  def _initial_state(self, enc_outputs, src_lens, lstm_state):
    memory = self.input_proj(enc_outputs)  # (B, S, H), once for all steps
    feed = jnp.zeros((enc_outputs.shape[0], self.hidden_size), self._compute_dtype(enc_outputs))
    return LuongState(lstm_state, feed, memory, src_lens)

  def _step(self, state: LuongState, embed_gates, deterministic):
    gates = embed_gates + self.feed_gates(state.feed)  # (N, 4H)
    top, lstm_state = self.lstm.step_gates(state.lstm, gates, deterministic=deterministic)
    top = self.dropout(top, deterministic=deterministic)  # (N, H)
    context, weights = self.attention(top[:, None, :], state.memory, state.memory,
                                      valid_lens=state.src_lens)  # (N, 1, H), (N, 1, S)
    vector = self.output_proj(jnp.concatenate([context[:, 0], top], axis=-1))  # (N, H)
    if self.output_activation is not None:
      vector = self.output_activation(vector)
    return vector, weights[:, 0], state._replace(lstm=lstm_state, feed=vector)


class PlainState(NamedTuple):
  """Decoding state of `PlainDecoder`; every leaf has leading axis N.

  Attributes:
    lstm: tuple of num_layers LSTMState(h (N, H), c (N, H)), float32, bottom layer first.
    context: (N, H), the encoder's final top-layer h, the same at every step.
  """
  lstm: tuple[LSTMState, ...]
  context: jax.Array


class PlainDecoder(_Sizes):
  """d2l 10.7's Seq2SeqDecoder with an LSTM: no attention, one fixed context.

  The encoder's final state (every layer's h and c) is the initial state, and its top layer's h
  is the context joined to the token embedding at every step ([embedding; context], d2l's
  order) as the bottom LSTM layer's input; a dense layer maps the top output to logits. The
  encoder's outputs are never read. It has the interface of the attention decoders (so
  zoo.Seq2Seq drives it), and gives None for the attention weights. Fields: see `_Sizes`
  (vocab_size is the target's; hidden_size must be the encoder's state width).

  Parameters: embedding (V, E_t); lstm (see zoo.LSTM; the bottom layer reads E_t + H inputs: in
  PyTorch terms d2l's weight_ih_l0.T is lstm/layers_0/input/kernel[:, 0], rows [embedding;
  context]); output (H, V) and bias.
  """

  def setup(self):
    self.embedding = self._embedding()
    self.lstm = self._lstm()
    self.output = nn.Dense(self.vocab_size, dtype=self.dtype, param_dtype=self.param_dtype)

  def init_decode_state(self, enc_outputs: jax.Array, src_lens: jax.Array,
                        enc_final_state: Sequence[LSTMState] | None = None) -> PlainState:
    """The state before the first target token.

    Args:
      enc_outputs: float (B, S, E), checked and otherwise unused (there is no attention).
      src_lens: int (B,), checked and otherwise unused.
      enc_final_state: the encoder's final state, a tuple of num_layers pairs (h (B, H),
        c (B, H)); required (it is all the decoder knows of the source).
    """
    _check_source(enc_outputs, src_lens)
    if enc_final_state is None:
      raise ValueError("enc_final_state: the decoder without attention needs the encoder's final "
                       "state (it reads nothing else of the source), got None")
    lstm = recurrent.check_states(enc_final_state, "enc_final_state", self.num_layers,
                                  enc_outputs.shape[0], self.hidden_size)
    lstm = tuple(LSTMState(*(jnp.asarray(s, jnp.float32) for s in pair)) for pair in lstm)
    return PlainState(lstm, lstm[-1].h.astype(self._compute_dtype(enc_outputs)))

  def _inputs(self, tokens: jax.Array, context: jax.Array) -> jax.Array:
    """[embedding; context] of tokens int (B,) or (B, T) and context (B, H): (..., E_t + H)."""
    embedded = self.embedding(tokens)
    if embedded.ndim == 3:  # (B, T, E_t): the same context at every step
      context = jnp.broadcast_to(context[:, None, :], (*embedded.shape[:2], context.shape[-1]))
    return jnp.concatenate([embedded, context.astype(embedded.dtype)], axis=-1)

  def decode_step(self, state: PlainState, tokens: jax.Array) -> tuple[jax.Array, PlainState]:
    """One decoding step (zoo.search's step; no dropout): tokens int (N,) -> (logits (N, V),
    new state)."""
    _check_tokens(tokens, 1, "tokens")
    checks.equal_dim(tokens, "tokens", 0, state.context, "state.context", 0)
    top, lstm = self.lstm.step(state.lstm, self._inputs(tokens, state.context))
    return self.output(top), state._replace(lstm=lstm)

  def __call__(self, tokens: jax.Array, enc_outputs: jax.Array, src_lens: jax.Array,
               init_state: Sequence[LSTMState] | None = None, *,
               deterministic: bool = True) -> tuple[jax.Array, None]:
    """Teacher forcing over tokens int (B, T) (arguments as the attention decoders'): logits
    (B, T, V) in `dtype`, and None where they give attention weights."""
    return self.output(self.hidden(tokens, enc_outputs, src_lens, init_state,
                                   deterministic=deterministic)[0]), None

  def hidden_and_output_layer(self, tokens: jax.Array, enc_outputs: jax.Array,
                              src_lens: jax.Array, init_state: Sequence[LSTMState] | None = None,
                              *, deterministic: bool = True
                              ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(top outputs (B, T, H), kernel (H, V), bias (V,)): `__call__` before the output layer."""
    outputs, _ = self.hidden(tokens, enc_outputs, src_lens, init_state,
                             deterministic=deterministic)
    return _with_output_layer(self, outputs)

  def hidden(self, tokens: jax.Array, enc_outputs: jax.Array, src_lens: jax.Array,
             init_state: Sequence[LSTMState] | None = None, *,
             deterministic: bool = True) -> tuple[jax.Array, None]:
    """The top LSTM layer's outputs (B, T, H) under teacher forcing, and None."""
    _check_tokens(tokens, 2, "tokens")
    checks.equal_dim(tokens, "tokens", 0, enc_outputs, "enc_outputs", 0)
    state = self.init_decode_state(enc_outputs, src_lens, init_state)
    outputs, _ = self.lstm(self._inputs(tokens, state.context), initial_state=state.lstm,
                           deterministic=deterministic)  # (B, T, H), one scan over the steps
    return outputs, None


class RecurrentEncoder(_Sizes):
  """Token embedding followed by a (multi-layer) LSTM, the encoder of d2l's and Paddle's seq2seq.

  Fields: see `_Sizes` (vocab_size is the source's), and
    bidirectional: a BiLSTM (outputs and states 2H wide; a decoder seeded by its final state then
      needs hidden size 2H).
  """
  bidirectional: bool = False

  @nn.compact
  def __call__(self, src: jax.Array, *, valid_lens: jax.Array | None = None,
               mask: jax.Array | None = None,
               deterministic: bool = True) -> tuple[jax.Array, tuple[LSTMState, ...]]:
    """Encodes padded source tokens.

    Args:
      src: int (*batch, S), any leading batch shape, none included.
      valid_lens: int (*batch,), real tokens per row; None when all S are real.
      mask: bool broadcastable to (*batch, S), True at real tokens, each row a prefix; given with
        valid_lens, a token is real iff both say so (as zoo.LSTM).
      deterministic: disables dropout.

    Returns:
      outputs (*batch, S, W) (zero at padded positions) and the final state, a tuple of
      num_layers LSTMState(h (*batch, W), c (*batch, W)), with W = H (2H when bidirectional).
    """
    checks.min_rank(src, 1, "src")
    checks.integer(src, "src")
    embedded = self._embedding(name="embedding")(src)  # (*batch, S, embed_dim)
    lstm = self._lstm(self.bidirectional, name="lstm")
    return lstm(embedded, valid_lens=valid_lens, mask=mask, deterministic=deterministic)


class Seq2Seq(nn.Module):
  """An encoder and an attention decoder; thin glue that also exposes the decoding step.

  Attributes:
    encoder: maps (src (B, S), valid_lens=src_lens (B,), deterministic=...) to (outputs, final
      state), e.g. RecurrentEncoder.
    decoder: BahdanauDecoder or LuongDecoder (or anything with their methods).
    encode_padding: run the encoder over every position of src, padding included, as d2l's
      encoder does (its final state, which starts the decoder, then comes after the padding);
      False (the default): it stops at each source's length. The attention masks padded
      positions either way.
  """
  encoder: nn.Module
  decoder: nn.Module
  encode_padding: bool = False

  def encode(self, src: jax.Array, src_lens: jax.Array, *, deterministic: bool = True):
    """src int (B, S), src_lens int (B,) -> (enc_outputs (B, S, E), final state)."""
    return self.encoder(src, valid_lens=None if self.encode_padding else src_lens,
                        deterministic=deterministic)

  def __call__(self, src: jax.Array, src_lens: jax.Array, tokens: jax.Array, *,
               deterministic: bool = True) -> tuple[jax.Array, jax.Array]:
    """Teacher forcing: src (B, S), src_lens (B,), decoder inputs tokens (B, T) ->
    (logits (B, T, V), attention weights (B, T, S))."""
    enc_outputs, final_state = self.encode(src, src_lens, deterministic=deterministic)
    return self.decoder(tokens, enc_outputs, src_lens, final_state, deterministic=deterministic)

  def hidden_and_output_layer(self, src: jax.Array, src_lens: jax.Array, tokens: jax.Array, *,
                              deterministic: bool = True
                              ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`__call__` stopped before the decoder's output layer: (hidden (B, T, H), kernel (H, V),
    bias (V,)), whose hidden @ kernel + bias are the logits (for a loss that applies the layer
    itself)."""
    enc_outputs, final_state = self.encode(src, src_lens, deterministic=deterministic)
    return self.decoder.hidden_and_output_layer(tokens, enc_outputs, src_lens, final_state,
                                                deterministic=deterministic)

  def init_decode_state(self, src: jax.Array, src_lens: jax.Array):
    """Encodes the sources and returns the decoder's state before the first token (leading B)."""
    enc_outputs, final_state = self.encode(src, src_lens)
    return self.decoder.init_decode_state(enc_outputs, src_lens, final_state)

  def decode_step(self, state, tokens: jax.Array) -> tuple[jax.Array, Any]:
    """tokens int (N,) -> (logits (N, V), new state); the zoo.search step interface."""
    return self.decoder.decode_step(state, tokens)


def _seq2seq(decoder_cls, src_vocab_size: int, tgt_vocab_size: int, embed_dim: int,
             hidden_size: int, num_layers: int, dropout_rate: float, dtype: Dtype,
             param_dtype: Dtype, encode_padding: bool = False, **decoder_fields) -> Seq2Seq:
  sizes = dict(embed_dim=embed_dim, hidden_size=hidden_size, num_layers=num_layers,
               dropout_rate=dropout_rate, dtype=dtype, param_dtype=param_dtype)
  return Seq2Seq(RecurrentEncoder(src_vocab_size, **sizes),
                 decoder_cls(tgt_vocab_size, **sizes, **decoder_fields),
                 encode_padding=encode_padding)


def bahdanau_seq2seq(src_vocab_size: int, tgt_vocab_size: int, embed_dim: int, hidden_size: int,
                     num_layers: int = 1, dropout_rate: float = 0.0, dtype: Dtype | None = None,
                     param_dtype: Dtype = jnp.float32, encode_padding: bool = False) -> Seq2Seq:
  """d2l's seq2seq with Bahdanau attention: RecurrentEncoder + BahdanauDecoder of equal sizes
  (section 10.4 of d2l 0.17 trains embed_dim 32, hidden_size 32, num_layers 2, dropout_rate
  0.1); encode_padding: see Seq2Seq."""
  return _seq2seq(BahdanauDecoder, src_vocab_size, tgt_vocab_size, embed_dim, hidden_size,
                  num_layers, dropout_rate, dtype, param_dtype, encode_padding)


def plain_seq2seq(src_vocab_size: int, tgt_vocab_size: int, embed_dim: int, hidden_size: int,
                  num_layers: int = 1, dropout_rate: float = 0.0, dtype: Dtype | None = None,
                  param_dtype: Dtype = jnp.float32, encode_padding: bool = False) -> Seq2Seq:
  """d2l's encoder-decoder without attention: RecurrentEncoder + PlainDecoder of equal sizes
  (d2l 10.7 trains embed_dim 32, hidden_size 32, num_layers 2, dropout_rate 0.1, with GRUs).
  Its __call__ gives (logits, None); encode_padding: see Seq2Seq."""
  return _seq2seq(PlainDecoder, src_vocab_size, tgt_vocab_size, embed_dim, hidden_size,
                  num_layers, dropout_rate, dtype, param_dtype, encode_padding)


def luong_seq2seq(src_vocab_size: int, tgt_vocab_size: int, embed_dim: int, hidden_size: int,
                  num_layers: int = 1, dropout_rate: float = 0.0, dtype: Dtype | None = None,
                  param_dtype: Dtype = jnp.float32,
                  output_activation: Callable[[jax.Array], jax.Array] | None = jnp.tanh
                  ) -> Seq2Seq:
  """The Paddle couplet chapter's model: RecurrentEncoder + LuongDecoder of equal sizes (the
  chapter uses embed_dim = hidden_size = 256, num_layers 2, dropout_rate 0.2, and
  output_activation None)."""
  return _seq2seq(LuongDecoder, src_vocab_size, tgt_vocab_size, embed_dim, hidden_size,
                  num_layers, dropout_rate, dtype, param_dtype,
                  output_activation=output_activation)
