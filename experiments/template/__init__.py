"""The template experiment: a complete, small experiment to copy when adding one of your own.

It classifies IMDB reviews with the smallest attention model there is: word embeddings, attention
pooling with a learned query (zoo.AttentionPooling), a linear layer. Every file is one concern:

  __init__.py  registers the experiment with the engine (this file)
  configs.py   its typed settings and named runs
  model.py     the Flax module
  task.py      the Task: data, artifacts, init, loss, prediction (what the engine calls)
  cli.py       its `predict` command (parsing and printing only)

    python -m experiments train template --workdir runs/template-pooling
    python -m experiments predict template "a moving, beautifully acted film" \
        --workdir runs/template-pooling

To make your own, copy this folder to a package of yours (inside experiments/ or anywhere on the
Python path), change NAME below, and edit the files; nothing in the engine changes. The modules
import each other relatively, so the copy works under any name. README.md says more.
"""

from experiments import registry

from . import cli
from .configs import CONFIGS
from .configs import DEFAULT_MODEL
from .task import PoolingTask

NAME = "template"

EXPERIMENT = registry.register(registry.Experiment(
    name=NAME, make_task=PoolingTask, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=cli.predict, add_predict_arguments=cli.add_arguments,
    description="the template to copy: IMDB with attention pooling over word embeddings"),
    replace=True)
