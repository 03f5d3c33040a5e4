"""Chinese couplets (the Paddle couplet chapter): generate the lower line of an upper line.

    python -m experiments train couplet --model lstm_cpu \
        --data-dir /work/shared/data/couplet/couplet.tar.gz --workdir runs/couplet-lstm_cpu
    python -m experiments couplet "晚风摇树树还挺" --workdir runs/couplet-lstm_cpu --beams 3

Importing this package registers the experiment 'couplet' (command alias `couplet`) with the
engine's registry. Named runs: configs.py; task, evaluation and generation: task.py; scores:
metrics.py; the command: generate.py.
"""

from experiments import registry
from experiments.couplet.configs import CONFIGS
from experiments.couplet.configs import DEFAULT_MODEL
from experiments.couplet.generate import add_couplet_arguments
from experiments.couplet.generate import couplet_command
from experiments.couplet.task import CoupletTask
from experiments.couplet.task import Generation

EXPERIMENT = registry.register(registry.Experiment(
    name="couplet", make_task=CoupletTask, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=couplet_command, add_predict_arguments=add_couplet_arguments,
    description="Chinese couplets: Luong LSTM seq2seq with input feeding, or a Transformer; "
                "length-constrained beam search"),
    replace=True)
