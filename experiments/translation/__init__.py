"""The English->French experiment (d2l's fra-eng): a Bahdanau seq2seq and a Transformer on
SentencePiece subwords (or d2l's words), trained with teacher forcing, decoded with greedy and beam
search, scored with sacreBLEU (cased, with its signature) and chrF.

    python -m experiments train translation --model transformer_cpu \
        --data-dir ../shared/data/fra-eng/fra-eng.zip --workdir runs/translation-transformer_cpu
    python -m experiments translate "I won!" --workdir runs/translation-transformer_cpu \
        --beam-size 4 --heatmap attention.png
    python -m experiments translate --input-file english.txt --workdir runs/... > french.txt
    python -m experiments evaluate --workdir runs/translation-transformer_cpu --pairs pairs.tsv

Named runs: configs.py; the task (data, scores, translating texts): task.py; the scores:
metrics.py; the commands: cli.py. Models, loss and decoding come from experiments.seq2seq.
Importing this package registers the experiment 'translation' (command alias 'translate').
"""

from experiments import registry
from experiments.translation import answerer
from experiments.translation import by_length
from experiments.translation import cli
from experiments.translation.configs import CONFIGS
from experiments.translation.configs import DEFAULT_MODEL
from experiments.translation.task import Translation
from experiments.translation.task import TranslationTask

EXPERIMENT = registry.register(registry.Experiment(
    name="translation", make_task=TranslationTask, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=cli.predict, add_predict_arguments=cli.add_arguments,
    evaluate_pairs=cli.evaluate_pairs, answerer=answerer.ANSWERER, aliases=("translate",),
    commands={"by-length": by_length.COMMAND},
    description="English->French: Bahdanau seq2seq / Transformer, greedy and beam search, BLEU"),
    replace=True)
