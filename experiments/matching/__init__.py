"""Sentence-pair semantic matching (the nndl chapter's practice): do two questions mean the same?

    python -m experiments train matching --model transformer --data-dir ../shared/data/afqmc
    python -m experiments predict matching "花呗怎么还款" "怎么还花呗" \
        --workdir runs/matching-transformer --heatmap pair.png

The practice trains a Transformer over [CLS] a [SEP] b [SEP] on LCQMC; LCQMC cannot be had here,
so the runs use AFQMC (CLUE's question matching set: the same task and label scheme), and a user
with LCQMC or BQ runs the same commands with its folder as --data-dir. Named runs: configs.py
(transformer, decomposable, esim, siamese); models: models.py; the task (data, loss, metrics,
prediction): task.py; the metrics: metrics.py; the commands: cli.py. Importing this package
registers the experiment 'matching' (command alias 'match'). The lexical-overlap baseline
(`--model overlap`, overlap.py) is fitted without gradient steps.
"""

from experiments import registry
from experiments.config import Config
from experiments.matching import answerer
from experiments.matching import cli
from experiments.matching import ensemble
from experiments.matching import report
from experiments.matching import task
from experiments.matching.configs import CONFIGS
from experiments.matching.configs import DEFAULT_MODEL
from experiments.matching.configs import OverlapConfig
from experiments.matching.overlap import OverlapTask
from experiments.matching.task import MatchingTask
from experiments.matching.task import Prediction


def make_task(config: Config, **kwargs) -> MatchingTask:
  """The task of a run: OverlapTask for the overlap baseline (fitted without gradient steps),
  else task.make_task's."""
  if isinstance(config.model, OverlapConfig):
    return OverlapTask(config, **kwargs)
  return task.make_task(config, **kwargs)


EXPERIMENT = registry.register(registry.Experiment(
    name="matching", make_task=make_task, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=cli.predict, add_predict_arguments=cli.add_arguments,
    evaluate_pairs=cli.evaluate_pairs, answerer=answerer.ANSWERER, aliases=("match",),
    commands={"report": report.COMMAND, "ensemble": ensemble.COMMAND},
    description="question-pair matching (AFQMC/LCQMC): Transformer, decomposable attention, "
    "ESIM, siamese BiLSTM"),
    replace=True)
