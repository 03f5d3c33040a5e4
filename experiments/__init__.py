"""Experiments: the training engine, the experiments built on it, and the command line.

Layers (each imports only the ones above it; docs/ARCHITECTURE.md draws them):
  engine     config, task (what an experiment implements), train_state, steps, parallel,
             checkpoints, metrics_log, plots, trainer (the loop), runs (runs by name, trained runs
             loaded back), registry (how experiments are found), console and cli (commands);
  shared     seq2seq/ (model interface, loss, decoding and task base of the sequence-to-sequence
             experiments);
  experiments  sentiment/, translation/, couplet/, template/: each a package that registers
             itself with the registry when imported, and never imports another experiment.
"""

from experiments.config import Config
from experiments.config import OptimizerConfig
from experiments.config import TrainConfig
from experiments.registry import Experiment
from experiments.registry import register
from experiments.steps import weighted_sum
from experiments.task import Task
from experiments.train_state import TrainState
from experiments.trainer import NonFiniteLossError
from experiments.trainer import evaluate
from experiments.trainer import train
