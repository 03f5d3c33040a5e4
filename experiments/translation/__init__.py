"""The English->French experiment (d2l's fra-eng): a Bahdanau seq2seq and a Transformer, trained
with teacher forcing, decoded with greedy and beam search, scored with sacreBLEU.

    python -m experiments train translation --model transformer_cpu \
        --data-dir ../shared/data/fra-eng/fra-eng.zip --workdir runs/translation-transformer_cpu
    python -m experiments translate "I won !" --workdir runs/translation-transformer_cpu \
        --beam-size 4 --heatmap attention.png

Named runs: configs.py; the task (data, BLEU, translating texts): task.py; BLEU: metrics.py; the
command: cli.py. Models, loss and decoding come from experiments.seq2seq. Importing this package
registers the experiment 'translation' (command alias 'translate').
"""

from experiments import registry
from experiments.translation import cli
from experiments.translation.configs import CONFIGS
from experiments.translation.configs import DEFAULT_MODEL
from experiments.translation.task import Translation
from experiments.translation.task import TranslationTask

EXPERIMENT = registry.register(registry.Experiment(
    name="translation", make_task=TranslationTask, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=cli.predict, add_predict_arguments=cli.add_arguments, aliases=("translate",),
    description="English->French: Bahdanau seq2seq / Transformer, greedy and beam search, BLEU"),
    replace=True)
