"""The attention zoo: attention mechanisms as pure functions and thin Flax linen modules.

Shape letters: B batch, L length, Q queries, K keys/values, D width, H heads, Dh head width, V vocab.
Masks are boolean, True = may attend.
"""

from zoo.attention import Attention
from zoo.masking import causal_mask
from zoo.masking import combine_masks
from zoo.masking import key_padding_mask
from zoo.masking import lengths_to_mask
from zoo.masking import masked_softmax
from zoo.masking import sequence_mask
from zoo.masking import softmax_where
from zoo.pooling import AttentionPooling
from zoo.pooling import masked_mean_pool
from zoo.positional import LearnedPositionEmbedding
from zoo.positional import SinusoidalPositionEncoding
from zoo.positional import sinusoidal_encoding
from zoo.positional import sinusoidal_encoding_at
from zoo.scoring import SCORE_NAMES
from zoo.scoring import AdditiveScore
from zoo.scoring import BilinearScore
from zoo.scoring import ConcatScore
from zoo.scoring import DotScore
from zoo.scoring import ScaledDotScore
from zoo.scoring import additive_score
from zoo.scoring import bilinear_score
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
from zoo.seq2seq import RecurrentEncoder
from zoo.seq2seq import Seq2Seq
from zoo.seq2seq import bahdanau_seq2seq
from zoo.seq2seq import luong_seq2seq
from zoo.multihead import MultiHeadAttention
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
