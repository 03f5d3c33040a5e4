"""The English->French experiment (d2l's fra-eng): a Bahdanau seq2seq and a Transformer, trained
with teacher forcing, decoded with greedy and beam search, scored with sacreBLEU.

    python -m experiments train translation --model transformer_cpu \
        --data-dir /work/shared/data/fra-eng/fra-eng.zip --workdir runs/translation-transformer_cpu
    python -m experiments translate "I won !" --workdir runs/translation-transformer_cpu --beam 4 \
        --heatmap attention.png

Importing this package registers the experiment 'translation' (command alias 'translate').
"""

from experiments import registry
from experiments.translation.configs import CONFIGS
from experiments.translation.configs import DEFAULT_MODEL
from experiments.translation.decode import Decoder
from experiments.translation.decode import add_translate_arguments
from experiments.translation.decode import translate_command
from experiments.translation.task import Translation
from experiments.translation.task import TranslationTask
from experiments.translation.task import sequence_loss

EXPERIMENT = registry.register(registry.Experiment(
    name="translation", make_task=TranslationTask, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=translate_command, add_predict_arguments=add_translate_arguments,
    aliases=("translate",),
    description="English->French: Bahdanau seq2seq / Transformer, greedy and beam search, BLEU"),
    replace=True)
