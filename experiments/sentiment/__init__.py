"""The IMDB sentiment experiment (nndl chapter 8, the Gluon SANet post): attention models compared.

    python -m experiments train sentiment --model bilstm_attn_dot --data-dir /work/shared/data/imdb
    python -m experiments predict sentiment "this great science fiction film is really awesome" \
        --workdir runs/sentiment-bilstm_attn_dot --heatmap attention.png

Importing this package registers the experiment 'sentiment' with the engine's registry.
"""

from experiments import registry
from experiments.sentiment.configs import CONFIGS
from experiments.sentiment.configs import DEFAULT_MODEL
from experiments.sentiment.predict import predict_command
from experiments.sentiment.task import Prediction
from experiments.sentiment.task import SentimentTask

EXPERIMENT = registry.register(registry.Experiment(
    name="sentiment", make_task=SentimentTask, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=predict_command, aliases=("classify",),
    description="IMDB sentiment: BiLSTM / self-attention classifiers with attention heatmaps"),
    replace=True)
