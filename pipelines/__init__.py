"""Real-data pipelines: raw archives -> tfds datasets -> token ids -> padded, bucketed batches."""

from pipelines.batching import Batcher, Ragged, TrainIterator
from pipelines.subword import SubwordVocab
from pipelines.tasks import (CoupletData, CoupletOptions, SentimentData, SentimentOptions,
                             TranslationData, TranslationOptions)
from pipelines.text import (couplet_detokenize, couplet_tokenize, fra_eng_detokenize,
                            fra_eng_tokenize, imdb_tokenize)
from pipelines.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab
