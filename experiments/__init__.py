"""Experiments: task definitions, the training engine, checkpoints, metrics, plots, command line.

The engine (config, train_state, steps, parallel, checkpoints, metrics_log, plots, trainer) is
shared by every experiment; an experiment implements `Task` and registers an `Experiment` (see
registry.py).
"""

from experiments.config import Config
from experiments.config import OptimizerConfig
from experiments.config import TrainConfig
from experiments.registry import Experiment
from experiments.registry import Task
from experiments.registry import register
from experiments.steps import weighted_sum
from experiments.train_state import TrainState
from experiments.trainer import NonFiniteLossError
from experiments.trainer import evaluate
from experiments.trainer import train
