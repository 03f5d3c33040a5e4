"""The bad-input matrix: what every kind of wrong or awkward input does, one test per case.

Each row of CASES is one input and its answer, in one of two kinds:
  * an error: the exception type and a pattern its message must match; the message names the
    argument (or file, config key, parameter) and what arrived, so the user knows what to fix;
  * a documented behaviour: the call succeeds and `check` asserts exactly what it returns (empty
    sequences, NaN, over-long or unknown text).
Rows marked `also=` are covered in more depth by the named test elsewhere; they are repeated here
in one line so that this table is the complete index (docs/RELIABILITY.md lists it by area).

Sizes are small and all different: B=3 examples, Q=5 queries, K=7 keys, D=12 query/key width,
V=9 value width.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
from typing import Any, Callable

import flax
import jax
import numpy as np
import pytest

import engine_toy
import toy_runs
from experiments import registry
from experiments import runs
from experiments import trainer
from experiments.cli import main
from experiments.checkpoints import Checkpoints
from experiments.train_state import TrainState
from experiments.train_state import make_optimizer
from pipelines import datasets
from pipelines import sources
from pipelines import tasks
from pipelines import text
from pipelines.batching import Batcher
from pipelines.sources import SourceError
from pipelines.vocab import UNK_ID
from pipelines.vocab import Vocab
import zoo

B, Q, K, D, V = 3, 5, 7, 12, 9
_rng = np.random.default_rng(0)
QUERIES = _rng.normal(size=(B, Q, D)).astype(np.float32)
KEYS = _rng.normal(size=(B, K, D)).astype(np.float32)
VALUES = _rng.normal(size=(B, K, V)).astype(np.float32)
LENS = np.array([7, 3, 1], np.int32)


@dataclasses.dataclass
class Env:
  """What a case may use: a fresh temporary folder and pytest's monkeypatch."""
  tmp: str
  monkeypatch: pytest.MonkeyPatch


@dataclasses.dataclass(frozen=True)
class Case:
  """One input of the matrix.

  Attributes:
    id: the test id: area-what.
    run: does the thing with the bad input.
    error: the exception it must raise (None: it must succeed, see `check`).
    message: a regular expression the error message must contain.
    check: for a documented behaviour, asserts on what `run` returned.
    also: another test that covers the case in more depth.
  """
  id: str
  run: Callable[[Env], Any]
  error: type[BaseException] | None = None
  message: str = ""
  check: Callable[[Any], None] | None = None
  also: str = ""


# --------------------------------------------------------------------------------------------------
# zoo


def _attention(queries=QUERIES, keys=KEYS, values=VALUES, valid_lens=None, score="dot", **kw):
  module = zoo.Attention(score=score)
  variables = module.init(jax.random.key(0), queries, keys, values, valid_lens=valid_lens, **kw)
  return jax.device_get(module.apply(variables, queries, keys, values, valid_lens=valid_lens,
                                     **kw))


def _nan_rows(x) -> list[bool]:
  """Per example: whether any entry is NaN."""
  return np.isnan(np.asarray(x)).reshape(len(x), -1).any(axis=1).tolist()


def _with_nan(array, index):
  out = array.copy()
  out[index] = np.nan
  return out


def _zero_length_row(result) -> None:
  context, weights = result
  np.testing.assert_array_equal(context[0], 0)  # example 0 has no valid key
  np.testing.assert_array_equal(weights[0], 0)
  np.testing.assert_allclose(weights[1:].sum(-1), 1.0, rtol=1e-6)


def _no_keys(result) -> None:
  context, weights = result
  assert context.shape == (B, Q, V) and weights.shape == (B, Q, 0)
  np.testing.assert_array_equal(context, 0)


def _nan_in(context: tuple[int, ...], weights: tuple[int, ...]) -> Callable[[Any], None]:
  """Checks which examples' context and weights hold a NaN (exactly those listed)."""
  def check(result):
    assert _nan_rows(result[0]) == [b in context for b in range(B)], result[0]
    assert _nan_rows(result[1]) == [b in weights for b in range(B)], result[1]
  return check


def _zero_from_length_on(result) -> None:
  """LSTM outputs (B, K, H) with lengths (0, 3, 7): zero past each length, finite everywhere."""
  np.testing.assert_array_equal(result[0], 0)
  np.testing.assert_array_equal(result[1, 3:], 0)
  assert np.isfinite(result).all()


def _pooled_zero_for_empty(result) -> None:
  pooled, weights = result
  np.testing.assert_array_equal(pooled[0], 0)
  np.testing.assert_array_equal(weights[0], 0)
  assert np.isfinite(pooled).all() and np.isfinite(weights).all()


def _lstm_with_lengths(lengths, features=D):
  x = _rng.normal(size=(B, K, features)).astype(np.float32)
  module = zoo.LSTM(hidden_size=6)
  variables = module.init(jax.random.key(0), np.zeros((B, K, D), np.float32), valid_lens=LENS)
  outputs, _ = module.apply(variables, x, valid_lens=lengths)
  return jax.device_get(outputs)


def _pool_with_lengths(lengths):
  module = zoo.AttentionPooling(score="additive")
  variables = module.init(jax.random.key(0), KEYS, valid_lens=LENS)
  return jax.device_get(module.apply(variables, KEYS, valid_lens=lengths))


ZOO_CASES = [
    Case("zoo-queries-wrong-rank", lambda env: _attention(queries=QUERIES[0, 0]), ValueError,
         r"queries: expected an array of rank >= 2, got shape \(12,\)",
         also="tests/zoo/test_attention.py::test_bad_arguments_are_named"),
    Case("zoo-integer-queries", lambda env: _attention(queries=QUERIES.astype(np.int32)),
         ValueError, r"queries: expected a floating-point array, got shape \(3, 5, 12\) and "
         r"dtype int32"),
    Case("zoo-query-key-widths-differ", lambda env: _attention(queries=QUERIES[..., :11]),
         ValueError, r"queries and keys disagree: queries.shape\[2\] = 11 but keys.shape\[2\] = "
         r"12"),
    Case("zoo-keys-values-lengths-differ", lambda env: _attention(values=VALUES[:, :6]),
         ValueError, r"keys and values disagree: keys.shape\[1\] = 7 but values.shape\[1\] = 6"),
    Case("zoo-valid-lens-negative",
         lambda env: _attention(valid_lens=np.array([-1, 3, 7], np.int32)), ValueError,
         r"valid_lens must lie in \[0, 7\] \(the sequence length\), got values from -1 to 7"),
    Case("zoo-valid-lens-longer-than-keys",
         lambda env: _attention(valid_lens=np.array([8, 3, 7], np.int32)), ValueError,
         r"valid_lens must lie in \[0, 7\] .* got values from 3 to 8"),
    Case("zoo-valid-lens-float", lambda env: _attention(valid_lens=LENS.astype(np.float32)),
         ValueError, r"valid_lens: expected an integer array, got shape \(3,\) and dtype float32"),
    Case("zoo-valid-lens-batch-differs", lambda env: _attention(valid_lens=LENS[:2]),
         ValueError, r"valid_lens with shape \(2,\) does not match the score rows \(\*batch, Q\) = "
         r"\(3, 5\)"),
    Case("zoo-mask-not-boolean",
         lambda env: _attention(mask=np.ones((B, Q, K), np.int32)), ValueError,
         r"mask: expected a boolean array \(True = may attend\), got shape \(3, 5, 7\)"),
    Case("zoo-unknown-score", lambda env: zoo.make_score("cosine"), ValueError,
         r"score: unknown name 'cosine'; known names are dot, scaled_dot, additive, bilinear, "
         r"concat", also="tests/zoo/test_scoring.py"),
    Case("zoo-lstm-lengths-longer-than-sequence",
         lambda env: _lstm_with_lengths(np.array([8, 3, 1], np.int32)), ValueError,
         r"valid_lens must lie in \[0, 7\] \(the sequence length\), got values from 1 to 8",
         also="tests/zoo/test_recurrent.py"),
    # Parameters built for D=12 applied to D=13 inputs: flax refuses, naming the parameter.
    Case("zoo-lstm-features-differ-from-parameters",
         lambda env: _lstm_with_lengths(LENS, features=D + 1), flax.errors.ScopeParamShapeError,
         r'"kernel" in "/layers_0/input".*\(13, 1, 24\).*\(12, 1, 24\)'),
    Case("zoo-positions-beyond-max-len",
         lambda env: zoo.SinusoidalPositionEncoding(max_len=5).apply({}, KEYS), ValueError,
         r"positions must lie in \[0, 5\) \(max_len = 5\), got 0 to 6 for x of shape \(3, 7, 12\)"),
    # Documented: a zero-length sequence attends to nothing: zero weights, zero output, no NaN.
    Case("zoo-zero-valid-lens-gives-zero-output",
         lambda env: _attention(valid_lens=np.array([0, 3, 7], np.int32)),
         check=_zero_length_row, also="tests/zoo/test_masking.py"),
    Case("zoo-no-keys-at-all-gives-zero-output",
         lambda env: _attention(keys=KEYS[:, :0], values=VALUES[:, :0]), check=_no_keys),
    Case("zoo-lstm-zero-length-gives-zero-outputs",
         lambda env: _lstm_with_lengths(np.array([0, 3, 7], np.int32)),
         check=_zero_from_length_on),
    Case("zoo-pooling-zero-length-gives-zero-vector",
         lambda env: _pool_with_lengths(np.array([0, 3, 7], np.int32)),
         check=_pooled_zero_for_empty),
    # Documented: NaN is never hidden, and never crosses from one example into another.
    Case("zoo-nan-query-stays-in-its-example",
         lambda env: _attention(queries=_with_nan(QUERIES, (1, 2, 3))),
         check=_nan_in(context=(1,), weights=(1,))),
    # Documented: masked keys are never scored, so NaN there is harmless ...
    Case("zoo-nan-in-masked-key-is-ignored",
         lambda env: _attention(keys=_with_nan(KEYS, (1, 5)), valid_lens=LENS),
         check=_nan_in(context=(), weights=())),
    # ... but a NaN value at a masked position still reaches its example's output (0 * NaN = NaN);
    # padding must be finite (the pipelines pad with id 0, whose embedding is finite).
    Case("zoo-nan-in-masked-value-reaches-the-output",
         lambda env: _attention(values=_with_nan(VALUES, (1, 5)), valid_lens=LENS),
         check=_nan_in(context=(1,), weights=())),
]


# --------------------------------------------------------------------------------------------------
# pipelines


def _reviews(texts, label=1):
  return [{"text": t.encode(), "label": label, "rating": 9} for t in texts]


def _sentiment(env, texts, **options):
  """SentimentData with the given test reviews, 8 ordinary training reviews, min_freq=1."""
  train = _reviews(["good film", "great film", "fine acting", "good plot"], 1) + _reviews(
      ["bad film", "dull film", "poor acting", "bad plot"], 0)
  return tasks.SentimentData.from_records(train, _reviews(texts), min_freq=1, dev_fraction=0.25,
                                          **options)


def _write(env, files: dict[str, bytes]) -> str:
  for rel, data in files.items():
    path = os.path.join(env.tmp, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
      f.write(data)
  return env.tmp


def _prepare(env, name, source):
  return datasets.prepare(name, source=source, data_dir=os.path.join(env.tmp, "prepared"))


def _missing_source_after_a_full_build(env):
  """A full fra_eng build from a 60-pair fra.txt, then the same data folder with a mistyped path."""
  root = _write(env, {"fra.txt": "".join(f"I see {n} birds.\tJe vois {n} oiseaux.\n"
                                         for n in range(2, 62)).encode()})
  _prepare(env, "fra_eng", os.path.join(root, "fra.txt"))
  return datasets.load("fra_eng", "train", source=os.path.join(root, "fra.tx"),
                       data_dir=os.path.join(env.tmp, "prepared"))


def _cut_sample(env, name):
  sample = sources.sample_path(name)
  path = os.path.join(env.tmp, f"cut_{sample.name}")
  with open(sample, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:len(data) // 2])
  return _prepare(env, name, path)


def _unequal_couplets(env):
  root = _write(env, {"couplet/train/in.txt": "春 风\n明 月\n青 山\n".encode(),
                      "couplet/train/out.txt": "秋 雨\n清 风\n".encode()})
  return _prepare(env, "couplet", root)


def _all_empty(token_lists) -> None:
  assert token_lists == [[]] * len(token_lists), token_lists


def _two_of_four_kept(data) -> None:
  assert data.report["test"]["skipped_empty"] == 2 and data.report["test"]["kept"] == 2
  assert data.splits["test"].sequences["tokens"].lengths.min() > 0


def _one_all_unknown(data) -> None:
  assert data.report["test"]["all_unknown"] == {"tokens": 1}
  ids = data.splits["test"].sequences["tokens"]
  assert ids.flat[:ids.lengths[0]].tolist() == [UNK_ID, UNK_ID]


def _one_cut_to_8(data) -> None:
  assert data.report["test"]["truncated"] == {"tokens": 1}
  assert data.splits["test"].sequences["tokens"].lengths.tolist() == [8, 2]


PIPELINE_CASES = [
    # Documented: empty or whitespace-only text has no tokens; the task layer leaves such
    # examples out and counts them, so no zero-length sequence reaches a model.
    Case("pipelines-empty-and-blank-text-tokenize-to-nothing",
         lambda env: [text.TOKENIZERS[n](t) for n in text.TOKENIZERS
                      for t in ("", " \t\r\n", b"\n", "<br /><br />" if n == "imdb" else "")],
         check=_all_empty,
         also="tests/pipelines/test_text.py::test_empty_text_gives_no_tokens"),
    Case("pipelines-empty-review-is-skipped-and-counted",
         lambda env: _sentiment(env, ["good plot", "   ", "", "bad acting"]),
         check=_two_of_four_kept),
    # Documented: unknown words become unk (id 1); an all-unknown text is kept and counted.
    Case("pipelines-all-unknown-tokens-are-unk-and-counted",
         lambda env: _sentiment(env, ["zyzzyva quokka", "good film"]),
         check=_one_all_unknown),
    # Documented: text beyond the maximum length keeps its first max_len tokens and is counted.
    Case("pipelines-too-long-text-is-cut-and-counted",
         lambda env: _sentiment(env, ["good " * 30, "bad film"], max_len=8, boundaries=(4, 8)),
         check=_one_cut_to_8,
         also="tests/pipelines/test_tasks.py::test_sentiment_splits_report_and_batches"),
    Case("pipelines-too-long-sequence-refused-on-request",
         lambda env: Batcher({"tokens": [[4] * 9, [5]]}, boundaries=(4, 8), batch_size=2,
                             overflow="error", process_index=0, process_count=1), ValueError,
         r"1 sequences of field 'tokens' are longer than the largest boundary 8 \(longest: 9\)",
         also="tests/pipelines/test_batching.py"),
    Case("pipelines-non-utf8-text", lambda env: text.imdb_tokenize(b"fine \xff film"), ValueError,
         r"text is not valid UTF-8 \(invalid start byte at byte 5\)"),
    Case("pipelines-non-utf8-file",
         lambda env: _prepare(env, "fra_eng", os.path.join(
             _write(env, {"fra.txt": b"Go.\tVa !\n\xff\xfe\tOui.\n"}), "fra.txt")),
         SourceError, r"fra.txt: line 2: invalid UTF-8 \(byte 0xff",
         also="tests/pipelines/test_sources.py::test_fra_eng_bad_inputs"),
    Case("pipelines-truncated-archive", lambda env: _cut_sample(env, "couplet"), SourceError,
         r"cut_couplet_sample.tar.gz: truncated or corrupt archive",
         also="tests/pipelines/test_sources.py::test_corrupt_and_truncated_archives"),
    Case("pipelines-missing-source-file",
         lambda env: _prepare(env, "imdb", os.path.join(env.tmp, "aclImdb_v1.tar.gz")),
         SourceError, r"imdb source .*aclImdb_v1.tar.gz does not exist.*obtain aclImdb_v1.tar.gz "
         r"from http"),
    Case("pipelines-missing-source-although-a-full-build-exists",
         _missing_source_after_a_full_build, SourceError,
         r"fra_eng source .*fra.tx does not exist\. no raw data for fra_eng",
         also="tests/reliability/test_followups.py::"
         "test_a_missing_source_is_refused_although_a_full_build_exists"),
    Case("pipelines-couplet-line-counts-differ", _unequal_couplets, SourceError,
         r"couplet: train/in.txt has 3 lines but train/out.txt has 2; the two files must pair "
         r"line by line",
         also="tests/pipelines/test_sources.py::test_couplet_bad_inputs"),
    Case("pipelines-missing-vocabulary-file",
         lambda env: Vocab.load(os.path.join(env.tmp, "vocab.json")), ValueError,
         r"vocabulary file .*vocab.json does not exist"),
    Case("pipelines-unknown-dataset", lambda env: datasets.load("imbd", "train"), ValueError,
         r"name: unknown dataset 'imbd'; known datasets are \['imdb', 'fra_eng', 'couplet'"
         r"(, '\w+')*\]"),  # the first three; experiments added since follow
]


# --------------------------------------------------------------------------------------------------
# the command line and the engine


@dataclasses.dataclass
class Exit:
  """How `python -m experiments ...` ended: its status, its stderr, the --workdir it was given."""
  status: int
  err: str
  workdir: str | None = None


def _cli(argv: list[str]) -> Exit:
  """Runs the command line in this process (argparse errors exit through SystemExit)."""
  err = io.StringIO()
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    try:
      status = main(argv)
    except SystemExit as e:
      status = e.code
  workdir = argv[argv.index("--workdir") + 1] if "--workdir" in argv else None
  return Exit(status, err.getvalue(), workdir)


def _fails_with(status: int, message: str, untouched: bool = False) -> Callable[[Exit], None]:
  """Checks the status and the message (no traceback); `untouched`: nothing was trained, logged
  or saved in the work directory."""
  def check(result: Exit):
    assert result.status == status, result
    assert message in result.err and "Traceback" not in result.err, result.err
    if untouched:
      assert not os.path.exists(os.path.join(result.workdir, "metrics.jsonl"))
      assert not os.path.exists(os.path.join(result.workdir, "checkpoints"))
  return check


def _train_other_model_over(env):
  """A checkpoint of the toy's 'mlp' model (embedding width 10), then `train --model wide`."""
  cfg = runs.make_config("toy", "mlp")
  task = engine_toy.ToyTask(cfg)
  tx, _ = make_optimizer(cfg.optimizer, total_steps=10)
  state = jax.jit(lambda rng, batch: TrainState.create(task.init(rng, batch), tx, rng))(
      jax.random.key(0), task.example_batch())
  ckpts = Checkpoints(env.tmp, asynchronous=False)
  ckpts.save(state, {})
  ckpts.close()
  return _cli(["train", "toy", "--model", "wide", "--workdir", env.tmp])


class _ToyReadingImdb(engine_toy.ToyTask):
  """The toy task, except that, like a real experiment, it first loads its data from data_dir."""

  def __init__(self, config):
    datasets.load("imdb", "train", source=config.data_dir)
    super().__init__(config)


def _train_with_missing_data(env):
  env.monkeypatch.setenv(sources.ENV_DATA_DIR, os.path.join(env.tmp, "prepared"))
  registry.register(dataclasses.replace(engine_toy.EXPERIMENT, name="toy_imdb",
                                        make_task=_ToyReadingImdb, aliases=()), replace=True)
  try:
    return _cli(["train", "toy_imdb", "--data-dir", os.path.join(env.tmp, "no-such-imdb"),
                 "--workdir", os.path.join(env.tmp, "run")])
  finally:
    registry.unregister("toy_imdb")


def _train_toy_over_a_best_of_another_metric(env):
  """A best checkpoint chosen by dev/accuracy, then `train toy` selecting by dev/loss."""
  ckpts = Checkpoints(env.tmp, best_metric="dev/accuracy", best_mode="max", asynchronous=False)
  ckpts.save_best(4, {"w": np.ones(3, np.float32)}, {"dev/accuracy": 0.75, "dev/loss": 0.5})
  ckpts.close()
  return _cli(["train", "toy", "--workdir", env.tmp, "--train.best_metric=dev/loss",
               "--train.best_mode=min"])


def _nothing_trained(check: Callable[[Exit], None]) -> Callable[[Exit], None]:
  """`check`, and the run wrote no config.json and no metrics.jsonl (its folders may exist)."""
  def checked(result: Exit):
    check(result)
    for name in ("config.json", "metrics.jsonl"):
      assert not os.path.exists(os.path.join(result.workdir, name)), name
  return checked


def _train_toy(env, *overrides):
  """`python -m experiments train toy` with overrides, in a new work directory."""
  argv = ["train", "toy", "--workdir", os.path.join(env.tmp, "run")]
  for override in overrides:
    argv += [override]
  return _cli(argv)


CLI_CASES = [
    Case("cli-unknown-experiment", lambda env: _cli(["train", "toyy"]),
         check=_fails_with(2, "unknown experiment 'toyy'; known experiments: "),
         also="tests/experiments/test_cli.py::test_bad_names_and_keys_exit_2_with_the_known_ones"),
    Case("cli-unknown-model", lambda env: _cli(["train", "toy", "--model", "big"]),
         check=_fails_with(2, "unknown model 'big' for experiment 'toy'; known models: mlp, wide")),
    Case("cli-unknown-config-key",
         lambda env: _cli(["train", "toy", "--optimizer.learning_rat=0.1"]),
         check=_fails_with(2, "Unrecognized options: --optimizer.learning_rat=0.1\nPerhaps you "
                           "meant:\n--optimizer.learning_rate FLOAT")),
    Case("cli-config-value-of-the-wrong-type",
         lambda env: _cli(["train", "toy", "--train.num_epochs=two"]),
         check=_fails_with(2, "Error parsing --train.num_epochs: invalid literal for int() with "
                           "base 10: 'two'")),
    Case("cli-checkpoint-of-another-model-configuration", _train_other_model_over,
         check=_fails_with(1, "params/Embed_0/embedding: the current model has shape (13, 14) "
                           "float32, the checkpoint has shape (13, 10) float32"),
         also="tests/experiments/test_trainer.py::"
         "test_checkpoint_of_another_model_config_names_the_parameter"),
    Case("cli-resume-selecting-the-best-by-another-metric",
         _train_toy_over_a_best_of_another_metric,
         check=_nothing_trained(_fails_with(
             1, "best holds the best checkpoint chosen by 'dev/accuracy' (step 4), not by "
             "best_metric 'dev/loss'")),
         also="tests/reliability/test_followups.py::"
         "test_best_checkpoints_of_another_metric_are_refused_naming_both"),
    Case("cli-evaluate-a-folder-that-is-not-a-run",
         lambda env: _cli(["evaluate", "--workdir", env.tmp]),
         check=_fails_with(2, "config.json does not exist: is")),  # an input error (#34)
    Case("cli-data-dir-that-does-not-exist", _train_with_missing_data,
         check=_fails_with(2, "no-such-imdb does not exist", untouched=True)),
    Case("cli-batch-the-devices-cannot-split",
         lambda env: _train_toy(env, "--train.batch_size=10"),
         check=_fails_with(1, "train.batch_size = 10 must be a multiple of the number of devices "
                           "(4)", untouched=True)),
    Case("cli-best-metric-the-task-does-not-report",
         lambda env: _train_toy(env, "--train.best_metric=dev/bleu"),
         check=_fails_with(1, "train.best_metric 'dev/bleu' is not among the dev metrics of the "
                           "task (dev/accuracy, dev/loss)", untouched=True)),
]

CASES = ZOO_CASES + PIPELINE_CASES + CLI_CASES


def test_the_matrix_is_wide_and_its_references_exist():
  ids = [case.id for case in CASES]
  assert len(ids) == len(set(ids)) and len(ids) >= 25
  assert all(case.message for case in CASES if case.error)
  assert all(case.check for case in CASES if not case.error)
  root = os.path.dirname(os.path.dirname(toy_runs.HERE))
  for case in CASES:
    if case.also:
      path, _, name = case.also.partition("::")
      with open(os.path.join(root, path), encoding="utf-8") as f:
        assert not name or f"def {name}(" in f.read(), case.also


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input(case, tmp_path, monkeypatch):
  env = Env(str(tmp_path), monkeypatch)
  if case.error is not None:
    with pytest.raises(case.error, match=case.message):
      case.run(env)
  else:
    case.check(case.run(env))
