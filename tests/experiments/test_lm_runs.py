"""The LSTM language model's runs on the engine (`train sentiment --model lstm_lm` and
`lstm_lm_classifier`) compute what the side loops of lstm_lm.py (`lstm_lm.py pretrain` and
`finetune`, deleted once these runs matched them) computed: on the shipped IMDB sample, for the
same seed and settings, pretraining ends with their parameters, and fine-tuning (plain; and with
head and tail read twice, adversarial from the second epoch and weight drop) chooses the same
epoch with the same accuracies and log-odds.

The side loops' figures below were recorded from them on the same sample and settings (the
reviews as the engine's run reads them, exported; the same seed 3), where the engine's runs were
compared with them directly: a step of the engine's, compiled alone, was the side loop's to the
bit; a whole run, whose steps the engine compiles into one program with its metric sums, agreed to
1e-6 (XLA rounds a few sums in another order there), every accuracy and epoch exactly.
"""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments import cli as experiments_cli
from experiments import config as config_lib
from experiments import metrics_log
from experiments import runs
from experiments import steps
from experiments import train_state
from experiments import trainer
from experiments.console import echo
from experiments.explorer import service
from experiments.sentiment import lm_configs
from experiments.sentiment.lm_tasks import make_task
from experiments.sentiment.lm_tasks import pooling_shares

pytestmark = pytest.mark.usefixtures("quick_compiles")

SEED = 3
TRUNK = ["--model.embed_dim=8", "--model.hidden_size=12", "--model.vocab_cap=500"]
DATA = ["--data.max_len=8", "--train.progress_bar=False", f"--train.seed={SEED}"]

# `lstm_lm.py pretrain` on these reviews (--embed-dim 8 --hidden-size 12 --vocab-cap 500 --window
# 8 --batch-size 64 --steps 40 --warmup-steps 5 --lr 1e-2 --seed 3 --log-every 10): per
# parameter, the sum of its entries (float64) and its first three.
SIDE_PRETRAINED = {
    "['output_bias']":
        (-67.38162772, [-0.199879423, 0.196925119, -0.190965295]),
    "['project']['bias']":
        (0.84400849, [0.189382911, 0.194906414, 0.229032606]),
    "['project']['kernel']":
        (-1.65527025, [0.472938925, -0.243713915, 0.250277668]),
    "['trunk']['embed']['embedding']":
        (-238.33745348, [-0.745354176, -0.793443143, 0.179137111]),
    "['trunk']['lstm']['layers_0']['hidden_kernel']":
        (-5.32121143, [-0.075685710, 0.293177187, -0.034655672]),
    "['trunk']['lstm']['layers_0']['input']['bias']":
        (2.90682880, [0.143334702, 0.170444146, -0.041890886]),
    "['trunk']['lstm']['layers_0']['input']['kernel']":
        (10.51940126, [-0.530488312, -0.148281202, 0.225958943]),
}
SIDE_CURVE = {10: 6.1325, 20: 5.5779, 30: 4.9537}  # its logged train losses (4 decimals)
SIDE_HELD_OUT_LOSS = 4.6166  # dev's next-token loss (4 decimals)
# `lstm_lm.py finetune` from that language model (--epochs 2 --batch-size 64 --max-len 6
# --widths 4 6 --head 2 --lr 1e-2 --seeds 3, and the levers): the chosen epoch, dev's accuracy
# after each epoch, the chosen epoch's test accuracy, its first six test log-odds, and with the
# adversarial lever the second epoch's mean adversarial loss (4 decimals).
SIDE_FINETUNED = {
    "plain": ([], 1, [0.56, 0.555], 0.533,
              [-0.020658851, -0.083216630, -0.019454755,
               -0.046512052, -0.101816706, 0.115411095], None),
    "every_lever": (["--model.also_first=True", "--model.adversarial=0.5",
                     "--model.adversarial_from=2", "--model.weight_drop=0.3"], 2,
                    [0.58, 0.59], 0.551,
                    [-0.011696095, -0.018576181, 0.002161382,
                     -0.052919650, -0.025789542, 0.029975990], 0.7479),
}


def _train(name: str, workdir: str, flags: list[str]) -> trainer.TrainResult:
  config = lm_configs.CONFIGS[name]()
  config.experiment, config.model_name = "sentiment", name
  config = config_lib.override(config, [*TRUNK, *DATA, *flags])
  # One device: each batch's sums in one order, as the side loop's (the tests' 4 fake devices
  # would sum each batch in four parts).
  return trainer.train(make_task(config), config, workdir, devices=jax.devices()[:1])


def _records(workdir: str) -> list[dict]:
  return metrics_log.read_metrics(os.path.join(workdir, metrics_log.METRICS_FILE))


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, quick_compiles):
  """The engine's language model, 40 steps of 64 windows of 8 (past the first epoch's 36):
  (workdir, the TrainResult)."""
  del quick_compiles
  workdir = str(tmp_path_factory.mktemp("lm_runs") / "lm")
  result = _train("lstm_lm", workdir, [
      "--model.window=8", "--train.batch_size=64", "--train.num_steps=40",
      "--train.log_every=10", "--train.checkpoint_every=10", "--optimizer.warmup_steps=5",
      "--optimizer.learning_rate=1e-2"])
  return workdir, result


def test_the_schedule_warms_up_from_the_first_step_then_decays_to_a_tenth_at_the_last():
  peak, warmup, total = 0.3, 4, 15  # the cosine runs over steps 4 .. 14, its midpoint step 9
  rates = train_state.cosine_to_last_rates(peak, warmup, total, 0.1)
  assert rates.dtype == np.float32 and rates.shape == (15,)
  for step, rate in ((0, 0.075), (1, 0.15), (3, 0.3), (4, 0.3), (9, 0.165), (14, 0.03)):
    assert rates[step] == np.float32(rate), step  # the float64 rate, rounded once
  assert all(a > b for a, b in zip(rates[4:], rates[5:]))
  cfg = config_lib.OptimizerConfig(learning_rate=peak, schedule="cosine_to_last",
                                   warmup_steps=warmup, min_lr_ratio=0.1)
  schedule = train_state.make_schedule(cfg, total)
  np.testing.assert_array_equal([schedule(jnp.int32(s)) for s in range(17)],
                                [*rates, rates[-1], rates[-1]])
  cfg.warmup_fraction = 0.3  # int(0.3 * 15) = 4 steps
  np.testing.assert_array_equal([train_state.make_schedule(cfg, total)(s) for s in range(15)],
                                rates)
  assert train_state.warmup_steps(config_lib.OptimizerConfig(warmup_fraction=0.01), 15) == 1


def test_pretraining_on_the_engine_ends_with_the_side_loops_parameters(pretrained):
  workdir, result = pretrained
  assert result.step == 40
  assert make_task(runs.load_config(workdir)).steps_per_epoch == 36
  params = jax.device_get(result.state.params)
  got = {jax.tree_util.keystr(path): leaf for path, leaf
         in jax.tree_util.tree_leaves_with_path(params)}
  assert set(got) == set(SIDE_PRETRAINED)
  for name, (total, first) in SIDE_PRETRAINED.items():
    np.testing.assert_allclose(np.asarray(got[name]).reshape(-1)[:3], first, rtol=0, atol=1e-6)
    assert np.sum(np.asarray(got[name], np.float64)) == pytest.approx(total, abs=1e-6 * got[
        name].size)
  dev = result.results["dev"]
  assert dev["loss"] == pytest.approx(SIDE_HELD_OUT_LOSS, abs=6e-5)
  assert dev["perplexity"] == pytest.approx(np.exp(dev["loss"]), rel=1e-12)
  # The logged train losses: means of the same steps' losses (the engine also logs at the
  # epoch's end, step 36, so its last interval is steps 37-40, not the side loop's 31-40).
  logged = {r["step"]: r["loss"] for r in _records(workdir) if r["split"] == "train"}
  assert sorted(logged) == [10, 20, 30, 36, 40]
  for step, loss in SIDE_CURVE.items():
    assert logged[step] == pytest.approx(loss, abs=6e-5)


def _reference_step(model, optimizer):
  """lstm_lm.py pretrain's step: (params, opt_state, inputs, targets, key, lr) -> (params,
  opt_state, loss): Adam's direction of the mean cross-entropy's clipped gradient, p - lr u."""
  @jax.jit
  def step(params, opt_state, inputs, targets, key, lr):
    def loss_fn(params):
      logits = model.apply({"params": params}, inputs, deterministic=False,
                           rngs={"dropout": key})
      return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return jax.tree_util.tree_map(lambda p, u: p - lr * u, params, updates), opt_state, loss
  return step


def test_a_pretraining_step_is_the_side_loops_step_to_the_bit(pretrained):
  """The engine's train step, compiled alone, against the side loop's: its keys (PRNGKey(seed)
  split into the initialisation's and a dropout key, split again at every step), its rates and
  its update, bit for bit, over 12 steps."""
  config = runs.load_config(pretrained[0])
  task = make_task(config)
  tx, schedule = train_state.make_optimizer(config.optimizer, 40)
  batches = task.train_batches()
  batch = next(batches)
  state = train_state.make_init(task, tx)(jax.random.key(SEED), batch)
  engine_step = jax.jit(steps.make_train_step(task, tx, schedule))
  optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.scale_by_adam())
  side_step = _reference_step(task.model, optimizer)
  init_key, key = jax.random.split(jax.random.PRNGKey(SEED))
  params = task.model.init(init_key, jnp.ones((1, 8), jnp.int32))["params"]
  opt_state = optimizer.init(params)
  rates = train_state.cosine_to_last_rates(1e-2, 5, 40, 0.1)
  _assert_same(state.params, params)
  for step in range(12):
    key, step_key = jax.random.split(key)
    params, opt_state, loss = side_step(params, opt_state, batch["inputs"], batch["targets"],
                                        step_key, rates[step])
    state, metrics = engine_step(state, batch)
    assert float(metrics["objective"][0]) == float(loss)
    _assert_same(state.params, params)
    batch = next(batches)


def _assert_same(ours, theirs):
  ours, theirs = jax.device_get(ours), jax.device_get(theirs)
  assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
  for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("levers", sorted(SIDE_FINETUNED))
def test_fine_tuning_on_the_engine_is_the_side_loops(pretrained, tmp_path, levers):
  flags, chosen, dev_accuracy, test_accuracy, test_log_odds, adversarial = SIDE_FINETUNED[levers]
  workdir = str(tmp_path / "classifier")
  result = _train("lstm_lm_classifier", workdir, [
      f"--model.init_from={pretrained[0]}", "--model.read_len=6", "--model.widths", "4", "6",
      "--model.head=2", "--train.batch_size=64", "--train.num_epochs=2",
      "--train.log_every=28", "--optimizer.learning_rate=1e-2", *flags])
  assert result.results["best"]["step"] == chosen * 28  # 28 steps an epoch
  assert result.results["test"]["accuracy"] == pytest.approx(test_accuracy, abs=1e-7)
  records = _records(workdir)
  assert [r["accuracy"] for r in records if r["split"] == "dev"] == pytest.approx(dev_accuracy,
                                                                                   abs=1e-7)
  if adversarial is not None:
    [second] = [r for r in records if r["split"] == "train" and r["step"] == 56]
    assert second["adversarial_loss"] == pytest.approx(adversarial, abs=6e-5)
  # The chosen parameters score the test reviews as the side loop's did.
  run = runs.load_run(workdir, "best")
  np.testing.assert_allclose(_engine_log_odds(run, "test")[:6], test_log_odds, rtol=0,
                             atol=1e-6)


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
  labels = [line.split("\t") for line in out]  # one line per review: no --weights
  assert [text for _, _, text in labels] == [echo(review) for review in REVIEWS]
  for (label, probability, _), text, prediction in zip(labels, REVIEWS,
                                                       task.predict(run.params, REVIEWS)):
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


def test_init_from_must_name_a_language_model_run(pretrained, classifier, tmp_path):
  for init_from, message in [
      (str(tmp_path / "none"), "model.init_from: .*none is not a directory; train it first with "
                               "`python -m experiments train sentiment --model lstm_lm"),
      (classifier, "is a lstm_lm_classifier run, not a language model run"),
  ]:
    with pytest.raises(ValueError, match=message):
      _train("lstm_lm_classifier", str(tmp_path / "c"), [f"--model.init_from={init_from}"])
  with pytest.raises(ValueError, match="was pretrained with model.hidden_size 12, this run has 9"):
    _train("lstm_lm_classifier", str(tmp_path / "c"), [f"--model.init_from={pretrained[0]}",
                                                      "--model.hidden_size=9"])


@pytest.mark.parametrize("flags, message", [
    (["--model.head=9", "--model.read_len=8"], r"model.head: expected 0 to model.read_len \(8\)"),
    (["--model.head=None", "--model.also_first=True"], "model.also_first scores a second view"),
    (["--model.adversarial=-1"], "model.adversarial: expected a perturbation norm >= 0"),
    (["--model.adversarial_from=0"], "model.adversarial_from: expected an epoch from 1"),
    (["--model.weight_drop=1"], r"model.weight_drop: expected a share .* in \[0, 1\)"),
], ids=["head", "also_first", "adversarial", "adversarial_from", "weight_drop"])
def test_a_bad_lever_is_refused_naming_it(flags, message):
  with pytest.raises(ValueError, match=message):
    config_lib.override(lm_configs.lstm_lm_classifier(), flags)


def test_the_reviews_are_read_capped_and_backward_as_configured(pretrained):
  forward = make_task(runs.load_config(pretrained[0]))
  config = runs.load_config(pretrained[0])
  config.model.backward = True
  backward = make_task(config)
  raw = forward.data.splits["dev"].sequences["tokens"]
  for split in ("train", "dev", "test", "unlabelled"):
    ours, theirs = forward.review_ids(split), backward.review_ids(split)
    np.testing.assert_array_equal(theirs.lengths, ours.lengths)
    for i in (0, 1, len(ours) - 1):
      np.testing.assert_array_equal(theirs[i], ours[i][::-1])
    assert ours.flat.max() < 500  # model.vocab_cap
  np.testing.assert_array_equal(forward.review_ids("dev").flat,
                                np.where(raw.flat < 500, raw.flat, 1))  # unk from the cap on
  assert len(forward.review_ids("unlabelled")) == 300
  # The labelled training reviews, then the unlabelled ones, each followed by eos.
  train = forward.stream("train")
  counts = [forward.review_ids(split) for split in ("train", "unlabelled")]
  assert len(train) == sum(len(r.flat) + len(r) for r in counts)
  assert train[len(counts[0][0])] == 3 and train[-1] == 3  # EOS_ID


def test_the_window_batches_resume_where_they_stopped(pretrained):
  task = make_task(runs.load_config(pretrained[0]))
  batches = task.train_batches()
  for _ in range(33):  # into the first epoch's end (36 batches), and past it below
    next(batches)
  state = batches.get_state()
  ahead = [next(batches) for _ in range(6)]
  again = task.train_batches()
  again.set_state(state)
  for want in ahead:
    got = next(again)
    np.testing.assert_array_equal(got["inputs"], want["inputs"])
    np.testing.assert_array_equal(got["targets"], want["targets"])
  assert again.get_state()["epoch"] == 1
