"""The IMDB sentiment experiment on the shipped sample: models, steps, training and predict."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments import cli
from experiments import config as config_lib
from experiments import metrics_log
from experiments import plots
from experiments import runs
from experiments import steps
from experiments import trainer
from experiments.sentiment import configs
from experiments.sentiment import models
from experiments.sentiment.task import SentimentTask
from experiments.train_state import TrainState
from pipelines import text as text_lib
from pipelines.tasks import SentimentData
from pipelines.vocab import Vocab
import zoo

B, L = 3, 11  # batch and padded width of the small batches
LENGTHS = np.array([L, 4, 1], np.int32)
SMALL = ("embed_dim=12", "hidden_size=10", "num_heads=4", "ffn_hidden=14")  # applied where a model has the field


pytestmark = pytest.mark.usefixtures("quick_compiles")


@pytest.fixture(scope="module")
def sample():
  return SentimentData.load(max_len=32, boundaries=(32,))


@pytest.fixture(scope="module")
def small_batch(sample):
  """Three real sample reviews cut to lengths 11, 4 and 1 (pad = 0 after them)."""
  batch = next(sample.eval_batches("train", batch_size=B))
  tokens = np.where(np.arange(L)[None, :] < LENGTHS[:, None], batch["tokens"][:, :L], 0)
  return {"tokens": tokens.astype(np.int32), "lengths": LENGTHS, "label": batch["label"],
          "weight": np.ones(B, np.float32)}


def _small_config(name: str, extra=()) -> config_lib.Config:
  cfg = configs.CONFIGS[name]()
  cfg.experiment, cfg.model_name = "sentiment", name
  keys = set(config_lib.leaf_paths(cfg))
  wanted = [f"--model.{s}" for s in SMALL if f"model.{s.split('=')[0]}" in keys]
  # Word bigrams have tests of their own (the `sample` fixture has none).
  return config_lib.override(cfg, wanted + ["--data.bigrams=False"] + list(extra))


# The *_nndl runs are four of these models under another data protocol (checked below); the
# fitted runs (nbsvm, paragraph_vectors: test_fitted_runs.py) take no gradient steps.
FITTED_RUNS = ("nbsvm", "paragraph_vectors")
MODEL_RUNS = sorted(name for name in configs.CONFIGS
                    if not name.endswith("_nndl") and name not in FITTED_RUNS)
NNDL_RUNS = sorted(name for name in configs.CONFIGS if name.endswith("_nndl"))


@pytest.mark.parametrize("name", MODEL_RUNS)
def test_every_model_runs_and_trains(name, sample, small_batch):
  """Shapes, per-word weights, padding invariance, and a few steps that change every parameter
  (the default model, with a larger learning rate, must also lower its loss at every step)."""
  default = name == configs.DEFAULT_MODEL
  cfg = _small_config(name, ["--optimizer.learning_rate=0.01"] if default else [])
  task = SentimentTask(cfg, data=sample)
  tx = optax.adam(cfg.optimizer.learning_rate)
  train_step = steps.make_train_step(task, tx)
  num_steps = 8 if default else 2

  @jax.jit
  def run(rng, batch, noisy_tokens):
    params = task.init(rng, batch)
    outputs = task.forward(params, batch["tokens"], batch["lengths"])
    noisy_logits, _ = task.forward(params, noisy_tokens, batch["lengths"])

    def body(state, _):
      state, metrics = train_step(state, batch)
      return state, metrics["loss"][0] / metrics["loss"][1]

    state, losses = jax.lax.scan(body, TrainState.create(params, tx, jax.random.key(1)), None,
                                 length=num_steps)
    return params, outputs, noisy_logits, state.params, losses

  noisy = np.where(small_batch["tokens"] == 0, 7, small_batch["tokens"])  # other ids in padding
  params, (logits, weights), noisy_logits, trained, losses = run(jax.random.key(0), small_batch,
                                                                 noisy)
  assert logits.shape == (B, 2) and logits.dtype == jnp.float32
  assert weights.shape in ((B, L), (B, L, L))
  per_word = np.asarray(models.word_weights(weights, LENGTHS))
  np.testing.assert_allclose(per_word.sum(1), 1.0, rtol=1e-5)
  assert np.all(per_word[np.arange(L)[None, :] >= LENGTHS[:, None]] == 0)
  np.testing.assert_allclose(noisy_logits, logits, rtol=1e-5, atol=1e-6)
  for (path, old), now in zip(jax.tree_util.tree_leaves_with_path(params),
                              jax.tree.leaves(trained)):
    assert not np.array_equal(old, now), f"{name}: {jax.tree_util.keystr(path)} did not change"
  losses = np.asarray(losses)
  assert np.all(np.isfinite(losses))
  if default:
    assert np.all(np.diff(losses) < 0) and losses[-1] < 0.8 * losses[0], losses


def test_word_weights_of_self_attention_are_the_mean_over_real_query_rows():
  rng = np.random.default_rng(3)
  weights = rng.random((2, 5, 5)).astype(np.float32)
  lengths = np.array([5, 3], np.int32)
  expected = np.stack([weights[0].mean(0), weights[1, :3].mean(0)])
  np.testing.assert_allclose(models.word_weights(weights, lengths), expected, rtol=1e-6)
  np.testing.assert_allclose(models.mean_pool_weights(lengths, 5),
                             [[0.2] * 5, [1 / 3] * 3 + [0, 0]], rtol=1e-6)


def test_train_then_predict_prints_a_label_line_and_word_weights_on_request(tmp_path, capsys,
                                                                           sample):
  workdir = str(tmp_path / "run")
  cfg = _small_config("bilstm_attn_dot", ["--data.max_len=32", "--data.boundaries=32",
                                          "--train.num_steps=1", "--train.batch_size=16",
                                          "--train.progress_bar=False"])
  result = trainer.train(SentimentTask(cfg, data=sample), cfg, workdir)
  assert 0.0 <= result.results["test"]["accuracy"] <= 1.0
  for name in ("results.json", "curves.png", "attention.png", "vocab.json"):
    assert (tmp_path / "run" / name).exists(), name
  capsys.readouterr()

  text = "This great science fiction film is really awesome"
  other = "a dull one"
  assert cli.main(["predict", "sentiment", text, other, "--workdir", workdir]) == 0
  captured = capsys.readouterr()
  plain = captured.out.splitlines()  # one line per input, as the other experiments print
  assert [line.split("\t")[2] for line in plain] == [text, other]
  assert captured.err.splitlines()[0].endswith("): label, probability, text")
  heatmap = tmp_path / "heat.png"
  assert cli.main(["predict", "sentiment", text, "--workdir", workdir, "--weights",
                   "--heatmap", str(heatmap)]) == 0
  captured = capsys.readouterr()
  lines = captured.out.splitlines()
  assert captured.err.splitlines()[0].startswith("# bilstm_attn_dot from")
  assert captured.err.splitlines()[0].endswith(
      "): label, probability, text; then the attention weight per word")
  assert len(lines) == 1 + 8 and lines[0] == plain[0]
  label, probability, echoed = lines[0].split("\t")
  assert label in ("negative", "positive") and echoed == text
  assert 0.5 <= float(probability) <= 1.0
  rows = [line.split() for line in lines[1:1 + 8]]
  assert [r[0] for r in rows] == text.lower().split()
  assert sum(float(r[1]) for r in rows) == pytest.approx(1.0, abs=5e-4)
  assert heatmap.exists() and heatmap.stat().st_size > 0


# Each run under the chapter's protocol: the seed-recipe run it is made from and how its model
# differs (None: the same model; the attention-only runs are checked below).
NNDL_BASES = {"bilstm_mean_nndl": ("bilstm_mean", {}),
              "bilstm_attn_additive_nndl": ("bilstm_attn_additive", {}),
              "bilstm_attn_dot_nndl": ("bilstm_attn_dot", {}),
              "bilstm_mha_nndl": ("bilstm_mha", {"use_bias": False}),
              "bilstm_attn_scaled_dot_nndl": ("bilstm_attn_scaled_dot", {}),
              "bilstm_attn_bilinear_nndl": ("bilstm_attn_bilinear", {}),
              "bilstm_sa_attn_dot_nndl": ("bilstm_attn_dot", {"self_attention": True}),
              "attn_dot_nndl": ("bilstm_attn_dot", None),
              "attn_dot_pos_nndl": ("bilstm_attn_dot", None)}
NNDL_EXERCISES = ["attn_dot_nndl", "attn_dot_pos_nndl", "bilstm_attn_bilinear_nndl",
                  "bilstm_attn_scaled_dot_nndl", "bilstm_sa_attn_dot_nndl"]


def test_nndl_runs_are_the_seed_models_under_the_chapters_protocol():
  assert NNDL_RUNS == sorted(NNDL_BASES)
  for name in NNDL_RUNS:
    cfg = configs.CONFIGS[name]()
    base_name, model_change = NNDL_BASES[name]
    base = configs.CONFIGS[base_name]()
    if model_change is not None:
      assert cfg.model == dataclasses.replace(base.model, **model_change), name
    assert cfg.optimizer == base.optimizer, name
    assert base.data.protocol == "movie_dev" and base.train.eval_every is None, name
    assert cfg.data == dataclasses.replace(base.data, protocol="test_halves"), name
    assert cfg.train == dataclasses.replace(base.train, eval_every=10), name
    assert cfg.train.best_metric == "dev/accuracy" and cfg.train.best_mode == "max"
    assert cfg.model.init == "paddle", name
    doc = configs.CONFIGS[name].__doc__  # the commands of the three seeds
    assert f"--model {name}" in doc and "for seed in 0 1 2" in doc
    assert f"{name}-seed$seed" in doc and "--train.seed $seed" in doc
    if name in NNDL_EXERCISES:
      assert "The chapter's test accuracy: none (an exercise)" in doc, name
  attention_only = configs.CONFIGS["attn_dot_nndl"]().model
  assert (attention_only.embed_dim, attention_only.score) == (128, "dot")
  assert not attention_only.position_encoding
  assert configs.CONFIGS["attn_dot_pos_nndl"]().model == dataclasses.replace(
      attention_only, position_encoding=True)


def _param_paths(cfg, batch) -> set[str]:
  task = SentimentTask(cfg, artifacts={"vocab": Vocab.build([["a", "b"]], min_freq=1)})
  shapes = jax.eval_shape(task.init, jax.random.key(0), batch)
  return {"/".join(str(k.key) for k in path)
          for path, _ in jax.tree_util.tree_leaves_with_path(shapes)}


def test_nndl_exercises_have_the_intended_parameters(small_batch):
  batch = {k: v for k, v in small_batch.items()}
  batch["tokens"] = np.minimum(batch["tokens"], 3)  # ids of a 4-word vocabulary
  paths = {name: _param_paths(_small_config(name), batch) for name in
           ("bilstm_mha_nndl", "bilstm_mha", "attn_dot_nndl", "attn_dot_pos_nndl",
            "bilstm_sa_attn_dot_nndl", "bilstm_attn_dot_nndl", "bilstm_attn_bilinear_nndl")}
  # The chapter's multi-head self-attention has no biases; the seed-recipe run keeps them.
  assert not [p for p in paths["bilstm_mha_nndl"] if "bias" in p and "attention" in p]
  assert {p for p in paths["bilstm_mha"] if "bias" in p and "attention" in p} == {
      f"attention/{n}/bias" for n in ("query", "key", "value", "out")}
  # No LSTM without it; positions add no parameter; simple self-attention adds none either.
  assert paths["attn_dot_nndl"] == {"embed/embedding", "pool/query", "head/out/kernel",
                                    "head/out/bias"}
  assert paths["attn_dot_pos_nndl"] == paths["attn_dot_nndl"]
  assert paths["bilstm_sa_attn_dot_nndl"] == paths["bilstm_attn_dot_nndl"]
  assert any(p.startswith("encoder/bilstm/") for p in paths["bilstm_sa_attn_dot_nndl"])
  # q^T U: the bilinear pooling's U beside the plain query.
  assert paths["bilstm_attn_bilinear_nndl"] == paths["bilstm_attn_dot_nndl"] | {
      "pool/scorer/w"}


def test_saved_bilstm_mha_nndl_runs_load_with_the_biases_they_had():
  """A config.json written before model.use_bias existed had biases (every docs/runs record)."""
  saved = config_lib.to_dict(configs.bilstm_mha_nndl())
  del saved["model"]["use_bias"]
  loaded = config_lib.update_from_dict(configs.bilstm_mha_nndl(), saved)
  assert loaded.model.use_bias and loaded.model.init == "paddle"
  record = "docs/runs/imdb-bilstm_mha_nndl-paddle-seed0/config.json"
  with open(record) as f:
    assert config_lib.update_from_dict(configs.bilstm_mha_nndl(),
                                       json.load(f)).model.use_bias, record
  assert not configs.bilstm_mha_nndl().model.use_bias


@pytest.mark.parametrize("name", ["attn_dot_pos_nndl", "bilstm_sa_attn_dot_nndl"])
def test_nndl_exercises_train(name, sample, small_batch):
  """A few steps on the sample change every parameter and lower the loss; padding is ignored."""
  cfg = _small_config(name, ["--optimizer.learning_rate=0.01"])
  task = SentimentTask(cfg, data=sample)
  params = task.init(jax.random.key(0), small_batch)
  logits, weights = task.forward(params, small_batch["tokens"], small_batch["lengths"])
  noisy = np.where(small_batch["tokens"] == 0, 7, small_batch["tokens"])
  np.testing.assert_allclose(task.forward(params, noisy, small_batch["lengths"])[0], logits,
                             rtol=1e-5, atol=1e-6)
  assert weights.shape == (B, L)
  np.testing.assert_allclose(np.asarray(weights).sum(1), 1.0, rtol=1e-5)
  _four_steps_lower_the_loss_and_change_every_parameter(name, task, params, small_batch)


def test_sanet_gluon_is_the_post_s_model(small_batch):
  """Bias-free heads of width 100, Uniform(0.1) weights, no positions, and the NCW pooling: the
  dense layer reads the mean over the features of each of max_len positions (zero past a
  review's end)."""
  cfg = configs.sanet_gluon()
  assert (cfg.data.max_len, cfg.train.batch_size, cfg.model.dropout_rate) == (100, 32, 0.5)
  model = cfg.model.build(50, jnp.float32, jnp.float32)
  tokens = np.minimum(small_batch["tokens"], 49)
  params = model.init(jax.random.key(0), tokens, small_batch["lengths"])["params"]
  shapes = jax.tree.map(np.shape, params)
  assert shapes == {"embed": {"embedding": (50, 128)},
                    "attention": {"query": {"kernel": (128, 8, 100)},
                                  "key": {"kernel": (128, 8, 100)},
                                  "value": {"kernel": (128, 8, 100)},
                                  "out": {"kernel": (8, 100, 128)}},
                    "head": {"out": {"kernel": (100, 2), "bias": (2,)}}}
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    if "bias" in jax.tree_util.keystr(path):
      np.testing.assert_array_equal(leaf, 0.0)
    else:
      assert np.abs(leaf).max() <= 0.1 and np.abs(leaf).max() > 0.09, jax.tree_util.keystr(path)
  logits, _ = model.apply({"params": params}, tokens, small_batch["lengths"])
  attended = _sanet_gluon_attended(params, tokens, small_batch["lengths"])  # (B, L, 128)
  real = np.arange(L)[None, :] < LENGTHS[:, None]
  per_position = np.where(real, attended.mean(-1), 0.0)  # (B, L)
  per_position = np.pad(per_position, ((0, 0), (0, 100 - L)))
  head = params["head"]["out"]
  np.testing.assert_allclose(logits, per_position @ head["kernel"] + head["bias"], rtol=1e-4,
                             atol=1e-6)
  with pytest.raises(ValueError, match="pooling 'gluon_ncw' feeds max_len=100 positions"):
    model.init(jax.random.key(0), np.zeros((2, 101), np.int32), np.array([101, 3], np.int32))
  with pytest.raises(ValueError, match="pooling: unknown 'ncw'"):
    configs.SANetConfig(pooling="ncw")


def _sanet_gluon_attended(params, tokens, lengths):
  """The attended vectors (B, L, D) inside sanet_gluon (no positions, so the embeddings attend)."""
  embeddings = params["embed"]["embedding"][tokens]  # (B, L, D)
  mha = zoo.MultiHeadAttention(8, qkv_features=800, use_bias=False)
  return np.asarray(mha.apply({"params": params["attention"]}, jnp.asarray(embeddings),
                              valid_lens=lengths))


def test_nndl_run_trains_on_all_of_train_and_picks_by_dev_every_10_steps(tmp_path):
  cfg = _small_config("bilstm_attn_dot_nndl", [
      "--data.max_len=32", "--data.boundaries=32", "--data.prepared_dir", str(tmp_path / "data"),
      "--train.num_steps=20", "--train.batch_size=16", "--train.progress_bar=False"])
  task = SentimentTask(cfg)
  # The sample's 2,000 training reviews all train; its 1,000 test reviews are halved by label.
  assert [task.data.num_examples(s) for s in ("train", "dev", "test")] == [2000, 500, 500]
  assert task.data.splits["dev"].scalars["label"].sum() == 250
  result = trainer.train(task, cfg, str(tmp_path / "run"))
  dev_steps = [r["step"] for r in metrics_log.read_metrics(
      str(tmp_path / "run" / metrics_log.METRICS_FILE)) if r["split"] == "dev"]
  assert dev_steps == [10, 20]
  assert result.results["best"]["step"] in (10, 20) and result.results["test_params"] == "best"
  assert runs.load_config(str(tmp_path / "run")).data.protocol == "test_halves"


def test_heatmap_paths_are_numbered_for_several_texts():
  assert plots.numbered_paths("a/out.png", 1) == ["a/out.png"]
  assert plots.numbered_paths("a/out.png", 2) == ["a/out-1.png", "a/out-2.png"]
  assert plots.numbered_paths("a/out", 2) == ["a/out-1.png", "a/out-2.png"]


def _four_steps_lower_the_loss_and_change_every_parameter(name, task, params, batch):
  tx = optax.adam(task.config.optimizer.learning_rate)
  train_step = jax.jit(steps.make_train_step(task, tx))
  state = TrainState.create(params, tx, jax.random.key(1))
  losses = []
  for _ in range(4):
    state, metrics = train_step(state, batch)
    losses.append(float(metrics["loss"][0] / metrics["loss"][1]))
  assert losses[-1] < losses[0], losses
  for (path, old), now in zip(jax.tree_util.tree_leaves_with_path(params),
                              jax.tree.leaves(state.params)):
    assert not np.array_equal(old, now), f"{name}: {jax.tree_util.keystr(path)} did not change"


# ---- word bigrams


@pytest.fixture(scope="module")
def sample_bigrams():
  return SentimentData.load(max_len=32, boundaries=(32,), bigrams=True)


@pytest.fixture(scope="module")
def bigram_batch(sample_bigrams):
  """small_batch's reviews with their bigram ids (pad = 0 after the lengths)."""
  batch = next(sample_bigrams.eval_batches("train", batch_size=B))
  keep = np.arange(L)[None, :] < LENGTHS[:, None]
  return {"tokens": np.where(keep, batch["tokens"][:, :L], 0).astype(np.int32),
          "bigrams": np.where(keep, batch["bigrams"][:, :L], 0).astype(np.int32),
          "lengths": LENGTHS, "label": batch["label"], "weight": np.ones(B, np.float32)}


@pytest.mark.parametrize("name", ["ngram_attn", "bilstm_attn_additive", "bilstm_mha"])
def test_bigram_models_add_a_bigram_embedding_and_train_it(name, sample_bigrams, bigram_batch):
  cfg = _small_config(name, ["--data.bigrams=True", "--optimizer.learning_rate=0.01"])
  task = SentimentTask(cfg, data=sample_bigrams)
  params = task.init(jax.random.key(0), bigram_batch)
  leaves = jax.tree_util.tree_leaves_with_path(params)
  embeds = {jax.tree_util.keystr(p): v.shape for p, v in leaves if "embed" in jax.tree_util.keystr(p)}
  width = cfg.model.embed_dim
  assert sorted(embeds.values()) == sorted([(len(sample_bigrams.vocab), width),
                                            (len(sample_bigrams.bigram_vocab), width)]), embeds
  # Other bigram ids change the output: the model reads them.
  logits, _ = task.forward(params, bigram_batch["tokens"], bigram_batch["lengths"], None,
                           bigram_batch["bigrams"])
  shifted = np.where(bigram_batch["bigrams"] > 0, bigram_batch["bigrams"] % 50 + 4, 0)
  other, _ = task.forward(params, bigram_batch["tokens"], bigram_batch["lengths"], None, shifted)
  assert not np.allclose(logits, other)
  _four_steps_lower_the_loss_and_change_every_parameter(name, task, params, bigram_batch)


def test_ngram_attention_pool_matches_the_formula():
  """logits = W (sum_t a_t x_t) + c with x_t = E[w_t] + F[b_t] and a the masked softmax of the
  additive scores v . tanh(W_q q + W_k x_t)."""
  model = models.NgramAttentionPool(vocab_size=9, embed_dim=5, bigram_vocab_size=7,
                                    score_features=3)
  tokens = np.array([[4, 5, 6, 0], [8, 7, 0, 0]], np.int32)
  bigrams = np.array([[4, 6, 5, 0], [5, 4, 0, 0]], np.int32)
  lengths = np.array([3, 2], np.int32)
  params = model.init(jax.random.key(2), tokens, lengths, bigrams=bigrams)["params"]
  logits, weights = model.apply({"params": params}, tokens, lengths, bigrams=bigrams)
  p = jax.tree.map(np.asarray, params)
  x = p["embed"]["embedding"][tokens] + p["bigram_embed"]["embedding"][bigrams]  # (2, 4, 5)
  scorer = p["pool"]["scorer"]
  hidden = np.tanh(p["pool"]["query"] @ scorer["w_q"] + x @ scorer["w_k"])  # (2, 4, 3)
  scores = hidden @ scorer["v"]  # (2, 4)
  scores = np.where(np.arange(4)[None, :] < lengths[:, None], scores, -1e6)  # d2l's fill value
  expected_weights = np.exp(scores - scores.max(1, keepdims=True))
  expected_weights /= expected_weights.sum(1, keepdims=True)
  pooled = np.einsum("bl,bld->bd", expected_weights, x)
  expected = pooled @ p["head"]["out"]["kernel"] + p["head"]["out"]["bias"]
  np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)


def test_bigram_inputs_are_checked(sample, sample_bigrams, bigram_batch):
  tokens, lengths, bigrams = (bigram_batch[k] for k in ("tokens", "lengths", "bigrams"))
  with_bigrams = models.NgramAttentionPool(vocab_size=50, embed_dim=4, bigram_vocab_size=60)
  with pytest.raises(ValueError, match="pass bigrams="):
    with_bigrams.init(jax.random.key(0), tokens % 50, lengths)
  with pytest.raises(ValueError, match="must have the shape of tokens"):
    with_bigrams.init(jax.random.key(0), tokens % 50, lengths, bigrams=bigrams[:, :5] % 60)
  with pytest.raises(ValueError, match="built without bigram_vocab_size"):
    models.NgramAttentionPool(vocab_size=50, embed_dim=4).init(
        jax.random.key(0), tokens % 50, lengths, bigrams=bigrams % 60)
  for name in ("sanet", "transformer"):
    with pytest.raises(ValueError, match="does not read bigrams"):
      SentimentTask(_small_config(name, ["--data.bigrams=True"]), data=sample_bigrams)
  task = SentimentTask(_small_config("ngram_attn", ["--data.bigrams=True"]), data=sample)
  with pytest.raises(ValueError, match="loaded without bigrams"):
    task.model  # pylint: disable=pointless-statement


def test_bigram_run_saves_its_bigram_vocabulary_and_predicts(tmp_path, capsys, sample_bigrams):
  workdir = str(tmp_path / "run")
  cfg = _small_config("ngram_attn", ["--data.bigrams=True", "--data.max_len=32", "--data.boundaries=32",
                                     "--train.num_steps=2", "--train.batch_size=16",
                                     "--train.progress_bar=False"])
  trainer.train(SentimentTask(cfg, data=sample_bigrams), cfg, workdir)
  assert Vocab.load(tmp_path / "run" / "bigram_vocab.json") == sample_bigrams.bigram_vocab
  capsys.readouterr()
  text = "Not good at all"
  assert cli.main(["predict", "sentiment", text, "--workdir", workdir, "--weights"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[0].split("\t")[2] == text
  assert [line.split()[0] for line in lines[1:]] == ["not", "good", "at", "all"]
  # The prediction equals the model applied to the ids the pipeline gives this text.
  run = runs.load_run(workdir)
  task, params = run.task, run.params
  words = text.lower().split()
  ids = np.array([sample_bigrams.vocab.encode(words)], np.int32)
  pair_ids = np.array([sample_bigrams.bigram_vocab.encode(text_lib.word_bigrams(words))], np.int32)
  logits, _ = task.forward(params, ids, np.array([4], np.int32), None, pair_ids)
  probability = float(jax.nn.softmax(logits[0]).max())
  assert float(lines[0].split("\t")[1]) == pytest.approx(probability, abs=1e-4)
