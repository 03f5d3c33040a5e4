"""The LSTM language model's runs on the engine (`train sentiment --model lstm_lm` and
`lstm_lm_classifier`) compute what lstm_lm.py's own loops computed: on the shipped IMDB sample,
for the same seed and settings, pretraining ends with the very same parameters, and fine-tuning
(plain; and with head and tail read twice, adversarial from the second epoch and weight drop)
chooses the same epoch with the same accuracies and log-odds."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import cli as experiments_cli
from experiments import config as config_lib
from experiments import metrics_log
from experiments import runs
from experiments import steps
from experiments import train_state
from experiments import trainer
from experiments.console import Console
from experiments.sentiment import export_reviews
from experiments.sentiment import lm_configs
from experiments.sentiment import lstm_lm
from experiments.explorer import service
from experiments.sentiment.lm_tasks import make_task
from experiments.sentiment.lm_tasks import pooling_shares

pytestmark = pytest.mark.usefixtures("quick_compiles")

SEED = 3
TRUNK = ["--model.embed_dim=8", "--model.hidden_size=12", "--model.vocab_cap=500"]
NETWORK = lstm_lm.ModelConfig(embed_dim=8, hidden_size=12, num_layers=1, word_dropout=0.1)
DATA = ["--data.max_len=8", "--train.progress_bar=False", f"--train.seed={SEED}"]


def _train(name: str, workdir: str, flags: list[str]) -> trainer.TrainResult:
  config = lm_configs.CONFIGS[name]()
  config.experiment, config.model_name = "sentiment", name
  config = config_lib.override(config, [*TRUNK, *DATA, *flags])
  # One device: the batch's sums in one order, as the side loop's (the tests' 4 fake devices would
  # sum each batch in four parts).
  return trainer.train(make_task(config), config, workdir, devices=jax.devices()[:1])


def _side_reviews(workdir: str, tmp_path) -> lstm_lm.Reviews:
  """The engine run's reviews as lstm_lm.py read them: export_reviews' file, capped."""
  arrays = export_reviews.review_arrays(runs.load_run(workdir), Console())
  np.savez(tmp_path / "reviews.npz", **arrays)
  return lstm_lm.cap_vocabulary(lstm_lm.load_reviews(str(tmp_path / "reviews.npz")), 500)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, quick_compiles):
  """The engine's language model, 40 steps of 64 windows of 8 (past the first epoch's 36), and
  lstm_lm.py pretrain's on the same reviews: (workdir, engine result, side params, side record,
  the side's reviews)."""
  del quick_compiles
  root = tmp_path_factory.mktemp("lm_runs")
  workdir = str(root / "lm")
  result = _train("lstm_lm", workdir, [
      "--model.window=8", "--train.batch_size=64", "--train.num_steps=40",
      "--train.log_every=10", "--train.checkpoint_every=10", "--optimizer.warmup_steps=5",
      "--optimizer.learning_rate=1e-2"])
  reviews = _side_reviews(workdir, root)
  params, record = lstm_lm.pretrain(reviews, NETWORK, lstm_lm.PretrainConfig(
      window=8, batch_size=64, steps=40, output_dropout=0.2, lr=1e-2, warmup_steps=5, clip=1.0,
      seed=SEED, log_every=10))
  return workdir, result, params, record, reviews


def _assert_same(ours, theirs, tol: float = 0.0):
  ours, theirs = jax.device_get(ours), jax.device_get(theirs)
  assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
  for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_the_schedule_is_the_side_loops_learning_rate_to_the_bit():
  for peak, warmup, total in ((1e-2, 5, 40), (2e-3, 200, 8000), (1e-3, 1, 3)):
    ours = train_state.cosine_to_last_rates(peak, warmup, total, 0.1)
    # The side loop's, in float64, rounded to float32 as it passed into the step.
    theirs = np.asarray([lstm_lm.warmup_cosine(s, total, peak, warmup)
                         for s in range(total)]).astype(np.float32)
    np.testing.assert_array_equal(ours, theirs)


def test_pretraining_on_the_engine_ends_with_the_side_loops_parameters(pretrained):
  workdir, result, params, record, reviews = pretrained
  assert result.step == record["steps"] == 40
  assert record["steps_per_epoch"] == make_task(runs.load_config(workdir)).steps_per_epoch == 36
  # The same computation, compiled into the engine's loop program with the metric sums: XLA
  # rounds some sums in another order there (a step's standalone program is bitwise the side
  # loop's: the test below).
  _assert_same(result.state.params, params, tol=1e-6)
  dev = result.results["dev"]
  assert dev["loss"] == pytest.approx(record["held_out_loss"], abs=1e-4)  # the record rounds
  assert dev["perplexity"] == pytest.approx(np.exp(dev["loss"]), rel=1e-12)
  # The logged train losses, means of the same steps' losses (the engine also logs at the epoch's
  # end, step 36, so its last interval is steps 37-40).
  logged = {r["step"]: r["loss"] for r in _records(workdir) if r["split"] == "train"}
  assert sorted(logged) == [10, 20, 30, 36, 40]
  assert [p["step"] for p in record["curve"]] == [10, 20, 30, 40]
  for point in record["curve"][:3]:
    assert logged[point["step"]] == pytest.approx(point["train_loss"], abs=1e-4)  # rounded
  assert reviews.vocab_size == 500


def _records(workdir: str) -> list[dict]:
  return metrics_log.read_metrics(os.path.join(workdir, metrics_log.METRICS_FILE))


def test_a_pretraining_step_is_the_side_loops_step_to_the_bit(pretrained):
  """The engine's train step, compiled alone, against lstm_lm.lm_train_step: the same keys
  (the carried key split each step), learning rates and updates, bit for bit, over 12 steps."""
  config = runs.load_config(pretrained[0])
  task = make_task(config)
  tx, schedule = train_state.make_optimizer(config.optimizer, 40)
  batches = task.train_batches()
  first = next(batches)
  state = train_state.make_init(task, tx)(jax.random.key(SEED), first)
  engine_step = jax.jit(steps.make_train_step(task, tx, schedule))
  side_optimizer = lstm_lm.optimizer_for(1.0)
  side_step = lstm_lm.lm_train_step(task.model, side_optimizer)
  init_key, key = jax.random.split(jax.random.PRNGKey(SEED))
  params = task.model.init(init_key, jnp.ones((1, 8), jnp.int32))["params"]
  opt_state = side_optimizer.init(params)
  _assert_same(state.params, params)
  batch = first
  for step in range(12):
    key, step_key = jax.random.split(key)
    params, opt_state, loss = side_step(params, opt_state, batch["inputs"], batch["targets"],
                                        step_key, lstm_lm.warmup_cosine(step, 40, 1e-2, 5))
    state, metrics = engine_step(state, batch)
    assert float(metrics["objective"][0]) == float(loss)
    _assert_same(state.params, params)
    batch = next(batches)


FINETUNE = {
    "plain": ([], {}),
    "every_lever": (["--model.also_first=True", "--model.adversarial=0.5",
                     "--model.adversarial_from=2", "--model.weight_drop=0.3"],
                    {"also_first": True, "adversarial": 0.5, "adversarial_from": 2,
                     "weight_drop": 0.3}),
}


@pytest.mark.parametrize("levers", sorted(FINETUNE))
def test_fine_tuning_on_the_engine_is_the_side_loops(pretrained, tmp_path, levers):
  lm_dir, lm_result, _, _, reviews = pretrained
  flags, settings = FINETUNE[levers]
  result = _train("lstm_lm_classifier", str(tmp_path / "classifier"), [
      f"--model.init_from={lm_dir}", "--model.read_len=6", "--model.widths", "4", "6",
      "--model.head=2", "--train.batch_size=64", "--train.num_epochs=2", "--train.log_every=28",
      "--optimizer.learning_rate=1e-2", *flags])
  trunk = jax.device_get(lm_result.state.params)["trunk"]
  config = lstm_lm.FinetuneConfig(epochs=2, batch_size=64, max_len=6, widths=(4, 6),
                                  dropout=0.5, lr=1e-2, seed=SEED, head=2, **settings)
  record, log_odds = lstm_lm.finetune(reviews, NETWORK, config, trunk)
  results = result.results
  assert results["best"]["step"] == record["chosen_epoch"] * 28
  assert results["test"]["accuracy"] == pytest.approx(record["test_accuracy"], abs=1e-7)
  dev = [r for r in _records(str(tmp_path / "classifier")) if r["split"] == "dev"]
  assert [r["accuracy"] for r in dev] == pytest.approx(
      [epoch["dev_accuracy"] for epoch in record["epochs"]], abs=1e-7)
  train = [r for r in _records(str(tmp_path / "classifier")) if r["split"] == "train"]
  ends = [r for r in train if r["step"] % 28 == 0]
  for ours, theirs in zip(ends, record["epochs"]):
    if "adversarial_loss" in theirs:
      assert ours["adversarial_loss"] == pytest.approx(theirs["adversarial_loss"], abs=2e-4)
  # The chosen parameters score every test review as the side loop's did.
  run = runs.load_run(str(tmp_path / "classifier"), "best")
  ours = _engine_log_odds(run, "test")
  np.testing.assert_allclose(ours, log_odds["test"], rtol=1e-6, atol=1e-6)


def _engine_log_odds(run, split: str) -> np.ndarray:
  """(N,) the run's log-odds of `split`'s reviews (the head-and-tail view), by row."""
  task = run.task
  out = np.zeros(len(task.review_ids(split)))
  for batch in task.batcher(split, 64).eval_batches():
    logits = np.asarray(task._logits(run.params, batch["tokens"], batch["tokens_len"]))
    real = batch["weight"] > 0
    values = logits[:, 1] - logits[:, 0]
    out[batch["row"][real]] = values[real]
  if task.config.model.also_first:
    long = np.flatnonzero(task.review_ids(split).lengths > task.config.model.read_len)
    first = task.review_ids(split).take(long)
    ids = np.zeros((len(long), 6), np.int32)
    lengths = np.minimum(first.lengths, 6).astype(np.int32)
    for i in range(len(long)):
      ids[i, :lengths[i]] = first[i][:lengths[i]]
    logits = np.asarray(task._logits(run.params, ids, lengths))
    out[long] = (out[long] + (logits[:, 1] - logits[:, 0])) / 2
  return out



# ---- the classifier run classifies new reviews: predict, evaluate, serve


def test_pooling_shares_count_what_each_step_decides():
  outputs = np.array([[[1.0, 5.0], [3.0, 0.0], [2.0, 9.0], [7.0, 7.0]],
                      [[4.0, 1.0], [4.0, 2.0], [0.0, 0.0], [0.0, 0.0]]], np.float32)  # (2, 4, 2)
  lengths = np.array([3, 2], np.int32)
  got = np.asarray(pooling_shares(jnp.asarray(outputs), jnp.asarray(lengths)))
  # Row 0 (3 steps): the max of feature 0 at step 1, of feature 1 at step 2; h_n at step 2.
  # Row 1 (2 steps): feature 0's max first reached at step 0, feature 1's at step 1.
  want = np.array([[2 / 3, 1 + 2 / 3, 1 + 2 / 3 + 2, 0], [1 + 1, 1 + 1 + 2, 0, 0]]) / 6
  np.testing.assert_allclose(got, want, rtol=1e-6)
  np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-6)


@pytest.fixture(scope="module")
def classifier(pretrained, tmp_path_factory):
  """A classifier fine-tuned for 6 steps from the language model, reading head 3 and tail 4 of
  a review longer than 7 tokens and its first 7 too."""
  workdir = str(tmp_path_factory.mktemp("classifier") / "run")
  _train("lstm_lm_classifier", workdir, [
      f"--model.init_from={pretrained[0]}", "--model.read_len=7", "--model.widths", "4", "7",
      "--model.head=3", "--model.also_first=True", "--train.batch_size=16",
      "--train.num_steps=6"])
  return workdir


REVIEWS = ["this great science fiction film is really awesome and i loved every minute",
           "dull"]


def test_predict_classifies_new_reviews_by_both_views(classifier, capsys):
  assert experiments_cli.main(["predict", "sentiment", *REVIEWS, "--workdir", classifier]) == 0
  out = capsys.readouterr().out.splitlines()
  run = runs.load_run(classifier)
  task = run.task
  labels = [line.split("\t") for line in out if not line.startswith("  ")]
  assert [text for _, _, text in labels] == REVIEWS
  for (label, probability, text), prediction in zip(labels, task.predict(run.params, REVIEWS)):
    # The mean of the log-odds of the head and tail and of the first 7 words, by hand.
    ids = task.encode(text)[1]
    ids = [i if i < 500 else 1 for i in ids]
    views = [ids[:3] + ids[-4:], ids[:7]] if len(ids) > 7 else [ids]
    log_odds = np.mean([_log_odds(task, run.params, view) for view in views])
    assert label == ("positive" if log_odds > 0 else "negative")
    assert float(probability) == pytest.approx(1 / (1 + np.exp(-abs(log_odds))), abs=1e-4)
    read = len(views[0])
    assert len(prediction.words) == read and prediction.word_weights.sum() == pytest.approx(1.0)
  kept = REVIEWS[0].split()[:8]  # data.max_len
  assert task.predict(run.params, REVIEWS[:1])[0].words == kept[:3] + kept[-4:]


def _log_odds(task, params, ids: list[int]) -> float:
  logits = np.asarray(task._logits(params, np.asarray([ids], np.int32),
                                   np.asarray([len(ids)], np.int32)))
  return float(logits[0, 1] - logits[0, 0])


def test_evaluate_gives_the_runs_recorded_test_figures(classifier):
  with open(os.path.join(classifier, metrics_log.RESULTS_FILE), encoding="utf-8") as f:
    recorded = json.load(f)["test"]
  assert runs.evaluate_run(classifier, "test")["metrics"] == pytest.approx(recorded, abs=1e-7)


def test_serve_answers_with_each_words_share_of_the_pooled_features(classifier):
  explorer = service.Explorer([classifier])
  answer = explorer.answer("0", REVIEWS[0])
  run = runs.load_run(classifier)
  prediction = run.task.predict(run.params, REVIEWS[:1])[0]
  assert answer["output"]["lines"][0].startswith(f"{prediction.label_name}\t")
  assert answer["output"]["words"] == prediction.words
  [pooling] = answer["attention"]
  assert pooling["name"] == "pooling" and pooling["key_tokens"] == prediction.words
  np.testing.assert_allclose(np.asarray(pooling["weights"], np.float32).reshape(-1),
                             prediction.word_weights, rtol=1e-6)


def test_a_language_model_run_does_not_classify_and_says_how_to(pretrained, capsys):
  assert experiments_cli.main(["predict", "sentiment", "a fine film", "--workdir",
                               pretrained[0]]) == 2
  assert ("this is a language model run (lstm_lm): it does not classify reviews; fine-tune it "
          "with --model lstm_lm_classifier --model.init_from DIR") in capsys.readouterr().err
