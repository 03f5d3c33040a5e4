"""What the sequence-to-sequence experiments (translation, couplet) share; no experiment of its
own, and it imports none.

  models.py    the Translator interface (pure functions of params and arrays) over zoo's
               Bahdanau, Luong and Transformer encoder-decoders
  configs.py   their typed hyperparameters, each with `build`
  loss.py      the masked, optionally label-smoothed token cross-entropy
  decoding.py  one jit-compiled greedy / beam search decoder over zoo.search, length-sorted source
               batches, hypotheses
  task.py      Seq2SeqTask: model, init, loss, perplexity from the engine's metrics, batched
               decoding and attention weights, for a subclass that says where its data is
"""
