"""The attention zoo: attention mechanisms as pure functions and thin Flax linen modules.

Shape letters: B batch, L length, Q queries, K keys/values, D width, H heads, Dh head width, V vocab.
Masks are boolean, True = may attend.
"""

from zoo.masking import causal_mask
from zoo.masking import combine_masks
from zoo.masking import key_padding_mask
from zoo.masking import masked_softmax
from zoo.masking import sequence_mask
from zoo.masking import softmax_where
