"""The IMDB sentiment experiment (nndl chapter 8, the Gluon SANet post): attention models compared.

    python -m experiments train sentiment --model bilstm_attn_dot --data-dir ../shared/data/imdb
    python -m experiments predict sentiment "this great science fiction film is really awesome" \
        --workdir runs/sentiment-bilstm_attn_dot --heatmap attention.png

Named runs: configs.py (the LSTM language model's: lm_configs.py); models: models.py (lstm_lm.py);
the task (data, loss, prediction): task.py (lm_tasks.py), and the models fitted without gradient
steps (NBSVM, paragraph vectors): fitted.py; the command: cli.py; its own commands `pseudo-label
sentiment` (a trained run labels IMDB's unlabelled reviews for a self-training student:
pseudo_label.py), `ensemble sentiment` (a trained run blended on dev with NBSVM, paragraph vectors
and saved members: ensemble.py) and `blend sentiment` (saved members blended again, nothing
refitted: blend.py). Importing this package registers the experiment 'sentiment' (command alias
'classify').
"""

from experiments import registry
from experiments.sentiment import answerer
from experiments.sentiment import blend
from experiments.config import Config
from experiments.sentiment import cli
from experiments.sentiment import configs
from experiments.sentiment import ensemble
from experiments.sentiment import lm_configs
from experiments.sentiment.configs import DEFAULT_MODEL
from experiments.sentiment import fitted
from experiments.sentiment import lm_tasks
from experiments.sentiment import pseudo_label
from experiments.sentiment.task import Prediction
from experiments.sentiment.task import SentimentTask

CONFIGS = {**configs.CONFIGS, **lm_configs.CONFIGS}


def make_task(config: Config, **kwargs) -> SentimentTask:
  """The task of a run: a fitted model's (fitted.TASKS) for its model config, else the language
  model's, its classifier's or SentimentTask (lm_tasks.make_task)."""
  fitted_task = fitted.TASKS.get(type(config.model))
  if fitted_task is not None:
    return fitted_task(config, **kwargs)
  return lm_tasks.make_task(config, **kwargs)


EXPERIMENT = registry.register(registry.Experiment(
    name="sentiment", make_task=make_task, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=cli.predict, add_predict_arguments=cli.add_arguments, answerer=answerer.ANSWERER,
    aliases=("classify",),
    commands={"pseudo-label": pseudo_label.COMMAND, "ensemble": ensemble.COMMAND,
              "blend": blend.COMMAND},
    description="IMDB sentiment: BiLSTM / self-attention classifiers with attention heatmaps"),
    replace=True)
