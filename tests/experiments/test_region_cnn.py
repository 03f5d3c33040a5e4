"""The region CNN (experiments.sentiment.region_cnn): the windows' sums, the pretraining's sampler
and loss against direct computations, and the classifier learning reviews it must tell apart."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.sentiment import region_cnn
from experiments.sentiment.region_cnn import RegionCNN
from experiments.sentiment.region_cnn import RegionConfig
from experiments.sentiment.region_cnn import RegionEmbedding
from experiments.sentiment.region_cnn import RegionSampler

TINY = RegionConfig(region=3, dim=6, negatives=4, subsample=1.0, pretrain_epochs=20.0,
                    pretrain_batch=64, pretrain_lr=0.05, conv_region=3, features=10, epochs=3,
                    batch_size=8, lr=3e-2, dropout=0.0, max_len=64, seed=1)


def _two_topic_reviews(count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
  """Reviews of 9 to 23 ids: label 1 draws its words from 10..29 and the shared 50..79, label 0
  from 30..49 and the shared ones."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 2, count)
  reviews = []
  for label in labels:
    length = int(rng.integers(9, 24))
    own = rng.integers(10, 30, length) if label else rng.integers(30, 50, length)
    shared = rng.integers(50, 80, length)
    reviews.append(np.where(rng.random(length) < 0.4, own, shared).astype(np.int32))
  return reviews, labels


def test_window_sum_adds_each_positions_centred_neighbours():
  x = np.random.default_rng(0).normal(size=(2, 7, 3)).astype(np.float32)
  for width in (1, 3, 5):
    half = width // 2
    want = np.zeros_like(x)
    for t in range(7):
      for j in range(-half, half + 1):
        if 0 <= t + j < 7:
          want[:, t] += x[:, t + j]
    np.testing.assert_allclose(region_cnn.window_sum(jnp.asarray(x), width), want, rtol=1e-6,
                               atol=1e-6)


def test_a_reviews_region_vectors_are_the_bags_of_its_windows():
  """region_vectors (the classifier's, on padded reviews) equals bag_vectors (the pretraining's,
  on rows of ids) at every position, pad ids adding nothing."""
  rng = np.random.default_rng(2)
  table = jnp.asarray(rng.normal(size=(13, 4)), jnp.float32)
  bias = jnp.asarray(rng.normal(size=(4,)), jnp.float32)
  tokens = np.array([[5, 6, 7, 8, 9, 0, 0], [12, 1, 3, 4, 11, 2, 10]], np.int32)  # (2, 7)
  got = region_cnn.region_vectors(table, bias, jnp.asarray(tokens), 5)  # (2, 7, 4)
  padded = np.pad(tokens, ((0, 0), (2, 2)))
  for b in range(2):
    windows = np.stack([padded[b, t:t + 5] for t in range(7)])  # (7, 5)
    want = region_cnn.bag_vectors(table, bias, jnp.asarray(windows))
    np.testing.assert_allclose(got[b], want, rtol=1e-6, atol=1e-6)
  assert float(jnp.min(got)) >= 0.0


def test_tv_loss_is_negative_sampling_over_the_kept_neighbours():
  rng = np.random.default_rng(3)
  v, d = 11, 5
  params = {name: jnp.asarray(rng.normal(size=shape), jnp.float32) for name, shape in
            (("embedding", (v, d)), ("bias", (d,)), ("output", (v, d)), ("output_bias", (v,)))}
  regions = np.array([[4, 5, 6], [0, 7, 8]], np.int32)
  targets = np.array([[1, 2, 3, 7, 8, 9], [4, 5, 6, 9, 10, 4]], np.int32)
  mask = np.array([[1, 0, 1, 1, 1, 0], [0, 1, 1, 1, 0, 1]], np.float32)
  noise = np.array([[9, 10], [4, 4]], np.int32)
  loss, hit = region_cnn.tv_loss(params, regions, targets, mask, noise)
  p = {name: np.asarray(x, np.float64) for name, x in params.items()}
  softplus = lambda x: np.log1p(np.exp(x))  # noqa: E731
  total, above, counted = 0.0, 0, 0
  for n in range(2):
    u = np.maximum(sum(p["embedding"][w] for w in regions[n] if w) + p["bias"], 0.0)
    for w, m in zip(targets[n], mask[n]):
      score = u @ p["output"][w] + p["output_bias"][w]
      total += m * softplus(-score)
      above += m * (score > 0)
      counted += m
    for w in noise[n]:
      total += softplus(u @ p["output"][w] + p["output_bias"][w])
  assert float(loss) == pytest.approx(total / 2, rel=1e-5)
  assert float(hit) == pytest.approx(above / counted, rel=1e-6)


def test_the_sampler_stays_inside_each_review_and_predicts_only_words():
  reviews = [np.array([5, 6, 7, 8], np.int32), np.array([9, 1, 10], np.int32),
             np.array([11, 12, 13, 14, 15, 16, 17], np.int32)]
  config = dataclasses.replace(TINY, region=3, pretrain_batch=500)
  sampler = RegionSampler(reviews, 20, config, seed=4)
  regions, targets, mask, noise = sampler.batch()
  assert regions.shape == (500, 3) and targets.shape == (500, 6) and noise.shape == (500, 4)
  review_of = {w: r for r, review in enumerate(reviews) for w in review}
  for row in range(500):
    centre = regions[row, 1]
    assert centre != 0  # the drawn position is a token
    own = review_of[centre]
    # The region's words are the centre's neighbours in its own review, pad elsewhere.
    review = list(reviews[own])
    t = review.index(centre)
    want = [review[t + j] if 0 <= t + j < len(review) else 0 for j in (-1, 0, 1)]
    assert regions[row].tolist() == want
    for j, offset in enumerate((-4, -3, -2, 2, 3, 4)):
      inside = 0 <= t + offset < len(review)
      if inside:
        assert targets[row, j] == review[t + offset]
      # Only words of the same review count, and never unk (id 1).
      assert mask[row, j] <= (inside and targets[row, j] != 1)
  assert mask.sum() > 0 and set(np.unique(noise)) <= set(range(5, 18)) - {1}
  again = RegionSampler(reviews, 20, config, seed=4).batch()
  for a, b in zip(again, (regions, targets, mask, noise)):
    np.testing.assert_array_equal(a, b)  # the seed fixes the draws


def test_errors_name_what_is_wrong():
  with pytest.raises(ValueError, match="RegionConfig.region must be odd"):
    RegionConfig(region=4)
  with pytest.raises(ValueError, match="RegionConfig.features must be at least 1"):
    RegionConfig(features=0)
  with pytest.raises(ValueError, match=r"RegionConfig.max_len must be in \[1, 1024\]"):
    RegionConfig(max_len=2000)
  with pytest.raises(ValueError, match="RegionConfig.pretrain_lr must be positive, got -0.1"):
    RegionConfig(pretrain_lr=-0.1)
  with pytest.raises(ValueError, match="RegionConfig.lr must be positive, got nan"):
    RegionConfig(lr=float("nan"))
  with pytest.raises(ValueError, match="no review has a word"):
    RegionSampler([[], []], 10, TINY)
  with pytest.raises(ValueError, match=r"ids must be in \[0, 10\), got 0 .. 12"):
    RegionSampler([[0, 12]], 10, TINY)
  with pytest.raises(ValueError, match="no word but pad, unk, bos and eos"):
    RegionSampler([[1, 2, 3]], 10, TINY)
  with pytest.raises(ValueError, match="needs reviews in the split 'dev'"):
    region_cnn.fit_classifier({"train": [[5, 6]]}, {"train": np.array([1])}, 10, TINY)


def test_padding_changes_no_logit():
  model = RegionCNN(20, features=6, conv_region=3, dropout=0.5)
  rng = np.random.default_rng(5)
  pretrained = (RegionEmbedding(jnp.asarray(rng.normal(size=(20, 4)), jnp.float32),
                                jnp.zeros(4), 3),)
  tokens = jnp.asarray([[5, 6, 7, 0, 0], [8, 9, 10, 11, 12]], jnp.int32)
  params = model.init(jax.random.PRNGKey(0), tokens, pretrained)["params"]
  wider = jnp.pad(tokens, ((0, 0), (0, 6)))
  np.testing.assert_allclose(model.apply({"params": params}, tokens, pretrained),
                             model.apply({"params": params}, wider, pretrained), atol=1e-6)
  assert "region" in params and params["words"]["embedding"].shape == (20, 6)
  assert "region" not in model.init(jax.random.PRNGKey(0), tokens)["params"]


def test_the_cnn_over_two_embeddings_of_other_widths_by_hand():
  """h_t = relu(sum of the 3 words' W at t + A_1 u_t^1 + A_2 u_t^2 + a), u^k the region vectors
  of embedding k over its own width (5 and 1 words here), max over the review's positions, then
  the dense layer; computed in numpy from the module's parameters."""
  rng = np.random.default_rng(11)
  v, f = 17, 5
  first = RegionEmbedding(jnp.asarray(rng.normal(size=(v, 4)), jnp.float32),
                          jnp.asarray(rng.normal(size=4), jnp.float32), 5)
  second = RegionEmbedding(jnp.asarray(rng.normal(size=(v, 3)), jnp.float32),
                           jnp.asarray(rng.normal(size=3), jnp.float32), 1)
  tokens = np.array([[4, 9, 16, 5, 7, 0, 0], [3, 12, 8, 6, 10, 11, 13]], np.int32)  # (2, 7)
  model = RegionCNN(v, features=f, conv_region=3, dropout=0.0)
  params = model.init(jax.random.PRNGKey(2), jnp.asarray(tokens), (first, second))["params"]
  assert params["region"]["kernel"].shape == (4, f) and params["region_2"]["kernel"].shape == (3, f)
  params = jax.tree_util.tree_map(lambda x: x + 0.1 * rng.normal(size=x.shape), params)
  got = model.apply({"params": params}, jnp.asarray(tokens), (first, second))  # (2, 2)
  p = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), params)
  tables = [(np.asarray(e.table, np.float64), np.asarray(e.bias, np.float64), e.region)
            for e in (first, second)]
  for b, row in enumerate(tokens):
    length = int(np.sum(row != 0))
    pooled = np.full(f, -np.inf)
    for t in range(length):
      h = sum(p["words"]["embedding"][row[t + j]] for j in (-1, 0, 1) if 0 <= t + j < length)
      for (table, bias, width), name in zip(tables, ("region", "region_2")):
        half = width // 2
        u = np.maximum(sum(table[row[t + j]] for j in range(-half, half + 1)
                           if 0 <= t + j < length) + bias, 0.0)
        h = h + u @ p[name]["kernel"]
      pooled = np.maximum(pooled, np.maximum(h + p["bias"], 0.0))
    want = pooled @ p["classifier"]["kernel"] + p["classifier"]["bias"]
    np.testing.assert_allclose(got[b], want, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def topics():
  reviews, labels = _two_topic_reviews(160, seed=6)
  splits = {"train": (0, 96), "dev": (96, 128), "test": (128, 160)}
  return ({name: reviews[a:b] for name, (a, b) in splits.items()},
          {name: labels[a:b] for name, (a, b) in splits.items()})


def test_pretraining_lowers_the_loss_and_gives_each_word_a_vector(topics):
  reviews, _ = topics
  notes = []
  tv = region_cnn.pretrain(reviews["train"], 80, TINY, notes.append)
  assert tv["embedding"].shape == (80, 6) and tv["bias"].shape == (6,)
  tokens = sum(len(r) for r in reviews["train"])
  assert tv["steps"] == round(20 * tokens / 64) and tv["loss"] < 0.9 * tv["first_loss"]
  assert notes[-1].startswith(f"region embedding: step {tv['steps']}/{tv['steps']}  loss ")


@pytest.mark.parametrize("pretrain", [False, True])
def test_the_classifier_learns_the_topics_and_repeats(topics, pretrain):
  reviews, labels = topics
  pretrained = ()
  if pretrain:
    tv = region_cnn.pretrain(reviews["train"], 80, TINY)
    pretrained = (RegionEmbedding(tv["embedding"], tv["bias"], TINY.region),)
  notes = []
  record, log_odds = region_cnn.fit_classifier(reviews, labels, 80, TINY, pretrained,
                                               notes.append)
  assert [row["epoch"] for row in record["epochs"]] == [1, 2, 3]
  best = max(row["dev_accuracy"] for row in record["epochs"])
  assert record["epochs"][record["chosen_epoch"] - 1]["dev_accuracy"] == best
  assert record["pretrained"] is pretrain and len(notes) == 3
  assert record["embedding_regions"] == ([TINY.region] if pretrain else [])
  assert np.mean((log_odds["dev"] > 0) == labels["dev"]) == best
  assert np.mean((log_odds["test"] > 0) == labels["test"]) >= 0.9
  assert set(log_odds) == {"dev", "test"}
  _, again = region_cnn.fit_classifier(reviews, labels, 80, TINY, pretrained)
  for split in log_odds:
    np.testing.assert_array_equal(again[split], log_odds[split])


def test_a_saved_embedding_loads_as_it_was_and_for_its_own_vocabulary_and_region(tmp_path):
  rng = np.random.default_rng(7)
  tv = {"embedding": rng.normal(size=(23, 5)).astype(np.float32),
        "bias": rng.normal(size=5).astype(np.float32), "steps": 9, "loss": 1.5}
  path = str(tmp_path / "tv.npz")
  region_cnn.save_embedding(path, tv, dataclasses.replace(TINY, region=5))
  loaded = region_cnn.load_embedding(path, 23, 5)
  np.testing.assert_array_equal(loaded.table, tv["embedding"])
  np.testing.assert_array_equal(loaded.bias, tv["bias"])
  assert loaded.region == 5 and region_cnn.load_embedding(path, 23).region == 5
  with pytest.raises(ValueError, match=r"tv.npz: the embedding is \(23, 5\) with bias \(5,\), "
                                       r"but this run's vocabulary has 24 ids"):
    region_cnn.load_embedding(path, 24, 5)
  with pytest.raises(ValueError, match="pretrained with regions of 5 words, but the classifier "
                                       "reads regions of 3"):
    region_cnn.load_embedding(path, 23, 3)
  assert region_cnn.embedding_record(path) == {
      "steps": 9, "loss": 1.5, "settings": {name: getattr(TINY, name) if name != "region" else 5
                                            for name in region_cnn.PRETRAINING_FIELDS}}
  # A file written before the settings were saved tells its region width and size only.
  np.savez(tmp_path / "old.npz", embedding=tv["embedding"], bias=tv["bias"], region=5, steps=9,
           loss=1.5)
  assert region_cnn.embedding_record(str(tmp_path / "old.npz")) == {
      "steps": 9, "loss": 1.5, "settings": {"region": 5, "dim": 5}}
  np.savez(tmp_path / "partial.npz", embedding=tv["embedding"])
  with pytest.raises(ValueError, match="partial.npz: not a region embedding saved by"):
    region_cnn.load_embedding(str(tmp_path / "partial.npz"), 23, 5)
