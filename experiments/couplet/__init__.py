"""Chinese couplets (the Paddle couplet chapter): generate the lower line of an upper line.

    python -m experiments train couplet --model lstm_cpu \
        --data-dir ../shared/data/couplet/couplet.tar.gz --workdir runs/couplet-lstm_cpu
    python -m experiments couplet "晚风摇树树还挺" --workdir runs/couplet-lstm_cpu --num-results 3

Named runs: configs.py; the task (data, evaluation, generation): task.py; the rules of a
couplet's form (measured and enforced): form.py; scores: metrics.py;
the command: cli.py; its own commands `report couplet` (a trained run scored on whole splits:
report.py) and `table couplet` (random couplets side by side: table.py). Models, loss and decoding
come from experiments.seq2seq. Importing this package registers the experiment 'couplet' (command
alias 'couplet').
"""

from experiments import registry
from experiments.couplet import answerer
from experiments.couplet import cli
from experiments.couplet import report
from experiments.couplet import table
from experiments.couplet.configs import CONFIGS
from experiments.couplet.configs import DEFAULT_MODEL
from experiments.couplet.task import CoupletTask
from experiments.couplet.task import Generation

EXPERIMENT = registry.register(registry.Experiment(
    name="couplet", make_task=CoupletTask, configs=CONFIGS, default_model=DEFAULT_MODEL,
    predict=cli.predict, add_predict_arguments=cli.add_predict_arguments,
    answerer=answerer.ANSWERER, aliases=("couplet",),
    commands={"report": report.COMMAND, "table": table.COMMAND},
    description="Chinese couplets: Luong LSTM seq2seq with input feeding, or a Transformer; "
                "beam search that keeps the form (length; optionally punctuation, no copies)"),
    replace=True)
