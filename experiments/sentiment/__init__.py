"""The IMDB sentiment experiment (nndl chapter 8, the Gluon SANet post): attention models compared.

    python -m experiments train sentiment --model bilstm_attn_dot --data-dir ../shared/data/imdb
    python -m experiments predict sentiment "this great science fiction film is really awesome" \
        --workdir runs/sentiment-bilstm_attn_dot --heatmap attention.png

Named runs: configs.py; models: models.py; the task (data, loss, prediction): task.py, and the
models fitted without gradient steps (NBSVM, paragraph vectors): fitted.py; the command: cli.py.
Importing this package registers the experiment 'sentiment' (command alias
'classify').
"""

from experiments import registry
from experiments.sentiment import answerer
from experiments.config import Config
from experiments.sentiment import cli
from experiments.sentiment import fitted
from experiments.sentiment.configs import CONFIGS
from experiments.sentiment.configs import DEFAULT_MODEL
from experiments.sentiment.task import Prediction
from experiments.sentiment.task import SentimentTask


def make_task(config: Config, **kwargs) -> SentimentTask:
  """The task of a run: a fitted model's (fitted.TASKS) for its model config, else SentimentTask."""
  return fitted.TASKS.get(type(config.model), SentimentTask)(config, **kwargs)


EXPERIMENT = registry.register(registry.Experiment(
    name="sentiment", make_task=make_task, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=cli.predict, add_predict_arguments=cli.add_arguments, answerer=answerer.ANSWERER, aliases=("classify",),
    description="IMDB sentiment: BiLSTM / self-attention classifiers with attention heatmaps"),
    replace=True)
