"""Prepared data for the tasks: records -> tokens -> ids -> batches, with reports.

    data = SentimentData.load()                       # the shipped IMDB sample
    data = SentimentData.load(source="../shared/data/imdb/aclImdb_v1.tar.gz", max_len=400)
    train = data.train_batches(batch_size=64, seed=0)  # endless, resumable (get_state/set_state)
    for batch in data.eval_batches("dev", batch_size=64): ...

Each task object holds its splits in memory as token ids, its vocabulary (built from the training
split only: words counted, or a SentencePiece model trained, see pipelines.subword), and a
`report` of what happened to every record. fra-eng is tokenized into d2l's words or into
SentencePiece subwords (`TranslationOptions.tokenizer`, see translation.py). The options that
shape the ids are a small frozen dataclass per task (`SentimentOptions`, `TranslationOptions`,
`CoupletOptions`, `MatchingOptions`); pass them as keyword arguments. The splits are named 'train', 'dev' and 'test'
in every task: 'dev' is the tfds 'validation' split for fra-eng and couplets; IMDB has none, and
its option `protocol` says where 'dev' comes from: a random part of IMDB train ('random_dev'),
whole movies of IMDB train ('movie_dev'), or half of IMDB test ('test_halves', the nndl chapter's
protocol).

Files: `load()` keeps, in the prepared dataset's folder (pipelines.datasets) under tokenized/,
  - the vocabulary as JSON (pipelines.vocab), or the SentencePiece model (pipelines.subword,
    '.model'), reloaded identically on the next run; a file built with other options or from
    other data is rebuilt and the report says why;
  - a cache of the encoded splits (npz, one per set of options), so that a later run skips reading
    and tokenizing the records (full couplets: minutes -> about a second). A cache that is stale
    or unreadable is rebuilt, and the report says so. Rebuilding the dataset removes both.
Built directly from records (`SentimentData.from_records(train, test, vocab_dir=...)`,
`TranslationData.from_records({'train': ..., 'dev': ...}, vocab_dir=...)`), only the vocabulary is
kept, in `vocab_dir` (None: nothing is written).

Batches (numpy, leading axis b = batch_size // process_count; see pipelines.batching):
  SentimentData: 'tokens' int32 (b, L), 'lengths' int32 (b,), 'label' int32 (b,) (0 negative,
      1 positive), 'index' int32 (b,), 'weight' float32 (b,); with the option bigrams=True also
      'bigrams' int32 (b, L): the id of each word's bigram with the word before it.
  TranslationData, CoupletData: 'src' int32 (b, Ls): source ids followed by eos; 'src_len' (b,);
      'tgt_in' int32 (b, Lt): bos followed by the target ids (decoder input, teacher forcing);
      'tgt_out' int32 (b, Lt): the target ids followed by eos (what the decoder predicts);
      'tgt_len' (b,): the length of both; 'index' int32 (b,); 'weight' float32 (b,).
      For couplets the number of characters to generate is tgt_len - 1 == src_len - 1.
  MatchingData (question pairs): 'a' int32 (b, La), 'a_len' (b,): sentence1's ids; 'b' int32
      (b, Lb), 'b_len' (b,): sentence2's ids (no special tokens in either); 'pair' int32 (b, Lp),
      'pair_len' (b,): [CLS] a [SEP] b [SEP] with [CLS] = bos (2) and [SEP] = eos (3);
      'segments' int32 (b, Lp): 0 on [CLS] a [SEP], 1 on b [SEP], 0 on padding; 'label' int32
      (b,) (1 same meaning, 0 not), 'index', 'weight'. Lp = 2 * La + 3 (La = Lb, the bucket's
      per-sentence width). `data.texts(split)` gives each example's two sentences by index.
  'index' is the example's position in its split (`data.num_examples(split)` of them), which lines
  a prediction up with `data.references(split)` and `data.sources(split)` (eval batches come in
  length order, not index order); 'weight' is 0.0 on the filler rows that complete the last
  evaluation batch. fra-eng keeps the raw, cased texts as references and sources; couplets the
  lines as their characters joined.

Nothing is dropped silently. Per split, `report[split]` counts:
  records        records read;
  kept           examples in the split (records - skipped_empty - skipped_unequal);
  skipped_empty  records with an empty text (no tokens) in any field: left out, since an empty
                 sequence carries nothing to learn or score;
  skipped_unequal (couplets) pairs whose lines differ in length: left out;
  truncated      per field, examples longer than the maximum length, cut to it (the first tokens
                 are kept; eos is added after cutting, so it is never lost);
  all_unknown    per field, examples whose every token is unknown to the vocabulary: kept (they
                 are valid input; a high count means the vocabulary is too small);
  unk_rate       per field, the fraction of tokens that map to unk.
`report['vocab']` says whether each vocabulary was built or loaded, and from where;
`report['cache']` the same for the cache of encoded splits.

Modules: common.py (records, splits, vocabularies, reports, the cache: the TaskData base class),
sentiment.py (with holdout.py, the pure functions that choose held-out reviews), seq2seq.py (what
translation and couplets share), translation.py, couplet.py, matching.py (question pairs; also
`read_pairs_tsv`, a user's pairs file); each task's options dataclass sits beside its data class.
"""

from pipelines.tasks.common import (SPLITS, AnyVocab, Records, Split, TaskData, read_records,
                                    read_vocab_file)
from pipelines.tasks.couplet import CoupletData, CoupletOptions
from pipelines.tasks.matching import MatchingData, MatchingOptions, read_pairs_tsv
from pipelines.tasks.sentiment import SentimentData, SentimentOptions
from pipelines.tasks.seq2seq import Seq2SeqData, Seq2SeqOptions
from pipelines.tasks.translation import FraEngText, TranslationData, TranslationOptions

__all__ = ["SPLITS", "AnyVocab", "CoupletData", "CoupletOptions", "FraEngText", "MatchingData",
           "MatchingOptions", "Records", "SentimentData", "SentimentOptions", "Seq2SeqData",
           "Seq2SeqOptions", "Split", "TaskData", "TranslationData", "TranslationOptions",
           "read_pairs_tsv", "read_records", "read_vocab_file"]
