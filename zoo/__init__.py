"""The attention zoo: attention mechanisms as pure functions and thin Flax linen modules.

Shape letters: B batch, L length, Q queries, K keys/values, D width, H heads, Dh head width,
V vocab.
Masks are boolean, True = may attend; a row with nothing to attend to gets zero weights, never NaN.
Every module whose inputs can be padded takes keyword-only `valid_lens=` and `mask=` (both given:
their AND, zoo.masking.key_mask) and any leading batch shape, none included (zoo.batching);
`dtype=None` computes in the promoted type of inputs and parameters, as flax does, with softmaxes
and LayerNorm statistics in float32.
Each module's docstring has its math; everything below is importable from `zoo` directly.

  masking         sequence_mask, masked_softmax (d2l's semantics), softmax_where, causal_mask,
                  key_padding_mask, lengths_to_mask, combine_masks; key_mask and prefix_lengths,
                  the one rule for valid_lens= and mask= (import zoo.masking)
  batching        any leading batch shape: fold (*batch, ...) into (B, ...) and back
  scoring         scores of one example, (Q, Dq) x (K, Dk) -> (Q, K): dot_score, scaled_dot_score,
                  additive_score(_projected), bilinear_score, concat_score,
                  concat_linear_score; the modules holding their parameters, DotScore ...
                  ConcatScore, ConcatLinearScore; make_score(name),
                  SCORE_NAMES
  attention       Attention: one head, any score by name, valid_lens or mask, dropout on weights
  pooling         AttentionPooling (a learned query), masked_mean_pool, masked_max_pool,
                  cls_pool
  alignment       soft_align (one pair of sequences, both directions), SoftAlignment, Alignment:
                  the attend step of decomposable attention and ESIM
  segments        pair_segments ([CLS] a [SEP] b [SEP] -> 0/1 ids), SegmentEmbedding
  self_attention  SimpleSelfAttention (softmax(X X^T) X), SelfAttention (Q/K/V projections)
  positional      sinusoidal_encoding(_at), SinusoidalPositionEncoding, LearnedPositionEmbedding
  multihead       MultiHeadAttention: head_attention (one head, a pure function) vmapped over
                  heads; flax's parameter layout, implementation='vmap'|'fused'|'auto',
                  num_kv_heads, key/value cache
  transformer     PositionwiseFFN, EncoderBlock, DecoderBlock (post- or pre-norm),
                  TransformerEncoder/TransformerDecoder stacks, Transformer (cached decode_step)
  recurrent       LSTM, BiLSTM, LSTMLayer (per-example lengths), lstm_step, lstm_update,
                  LSTMState, LSTMInit
  seq2seq         RecurrentEncoder, BahdanauDecoder, LuongDecoder (input feeding), Seq2Seq,
                  bahdanau_seq2seq, luong_seq2seq; PlainDecoder and plain_seq2seq (d2l's
                  encoder-decoder without attention, the baseline)
  search          greedy_search, beam_search over any step_fn(state, tokens) -> (logits, state),
                  optionally with exact lengths, forced / banned tokens per position and
                  tied / distinct positions (zoo.search_constraints); Decoded, Beams
  fast_paths      GPU back ends (cuDNN LSTM, cuDNN attention choice); import zoo.fast_paths
  nnx             any module in a Flax NNX model, with its linen parameter tree (wrap,
                  from_linen, linen_variables); import zoo.nnx
  checks          argument checks that raise a ValueError naming the argument: rank,
                  floating, integer, boolean, broadcastable, sequence_lengths,
                  positive_int ...; from zoo import checks
"""

from zoo import checks
from zoo.attention import Attention
from zoo.masking import causal_mask
from zoo.masking import combine_masks
from zoo.masking import key_padding_mask
from zoo.masking import lengths_to_mask
from zoo.masking import masked_softmax
from zoo.masking import sequence_mask
from zoo.masking import softmax_where
from zoo.pooling import AttentionPooling
from zoo.pooling import cls_pool
from zoo.pooling import masked_max_pool
from zoo.pooling import masked_mean_pool
from zoo.alignment import Alignment
from zoo.alignment import SoftAlignment
from zoo.alignment import soft_align
from zoo.segments import SegmentEmbedding
from zoo.segments import pair_segments
from zoo.positional import LearnedPositionEmbedding
from zoo.positional import SinusoidalPositionEncoding
from zoo.positional import sinusoidal_encoding
from zoo.positional import sinusoidal_encoding_at
from zoo.scoring import SCORE_NAMES
from zoo.scoring import AdditiveScore
from zoo.scoring import BilinearScore
from zoo.scoring import ConcatLinearScore
from zoo.scoring import ConcatScore
from zoo.scoring import DotScore
from zoo.scoring import ScaledDotScore
from zoo.scoring import additive_score
from zoo.scoring import additive_score_projected
from zoo.scoring import bilinear_score
from zoo.scoring import concat_linear_score
from zoo.scoring import concat_score
from zoo.scoring import dot_score
from zoo.scoring import make_score
from zoo.scoring import scaled_dot_score
from zoo.self_attention import SelfAttention
from zoo.self_attention import SimpleSelfAttention
from zoo.recurrent import LSTM
from zoo.recurrent import LSTMInit
from zoo.recurrent import BiLSTM
from zoo.recurrent import LSTMLayer
from zoo.recurrent import LSTMState
from zoo.recurrent import lstm_step
from zoo.recurrent import lstm_update
from zoo.seq2seq import BahdanauDecoder
from zoo.seq2seq import LuongDecoder
from zoo.seq2seq import PlainDecoder
from zoo.seq2seq import RecurrentEncoder
from zoo.seq2seq import Seq2Seq
from zoo.seq2seq import bahdanau_seq2seq
from zoo.seq2seq import luong_seq2seq
from zoo.seq2seq import plain_seq2seq
from zoo.multihead import MultiHeadAttention
from zoo.multihead import head_attention
from zoo.search import Beams
from zoo.search import Decoded
from zoo.search import beam_search
from zoo.search import greedy_search
from zoo.transformer import DecoderBlock
from zoo.transformer import EncoderBlock
from zoo.transformer import PositionwiseFFN
from zoo.transformer import Transformer
from zoo.transformer import TransformerDecoder
from zoo.transformer import TransformerEncoder

__all__ = [
    "checks",
    "Attention",
    "causal_mask", "combine_masks", "key_padding_mask", "lengths_to_mask", "masked_softmax",
    "sequence_mask", "softmax_where",
    "AttentionPooling", "cls_pool", "masked_max_pool", "masked_mean_pool",
    "Alignment", "SoftAlignment", "soft_align",
    "SegmentEmbedding", "pair_segments",
    "LearnedPositionEmbedding", "SinusoidalPositionEncoding", "sinusoidal_encoding",
    "sinusoidal_encoding_at",
    "SCORE_NAMES", "AdditiveScore", "BilinearScore", "ConcatLinearScore", "ConcatScore", "DotScore",
    "ScaledDotScore", "additive_score", "additive_score_projected", "bilinear_score",
    "concat_linear_score", "concat_score", "dot_score", "make_score", "scaled_dot_score",
    "SelfAttention", "SimpleSelfAttention",
    "LSTM", "LSTMInit", "BiLSTM", "LSTMLayer", "LSTMState", "lstm_step", "lstm_update",
    "BahdanauDecoder", "LuongDecoder", "PlainDecoder", "RecurrentEncoder", "Seq2Seq",
    "bahdanau_seq2seq", "luong_seq2seq", "plain_seq2seq",
    "MultiHeadAttention", "head_attention",
    "Beams", "Decoded", "beam_search", "greedy_search",
    "DecoderBlock", "EncoderBlock", "PositionwiseFFN", "Transformer", "TransformerDecoder",
    "TransformerEncoder",
]
