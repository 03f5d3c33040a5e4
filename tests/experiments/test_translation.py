"""The English->French experiment on the shipped sample: loss, BLEU, overfitting, search, CLI."""

from __future__ import annotations

import copy
import json
import math
import os

import jax
import numpy as np
import optax
import pytest
import sacrebleu

from experiments import cli
from experiments import config as config_lib
from experiments import trainer
from experiments.checkpoints import Checkpoints
from experiments.translation import configs
from experiments.translation import metrics
from experiments.seq2seq.loss import sequence_loss
from experiments.translation import task as task_lib
from pipelines.tasks import TranslationData
from pipelines.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

WIDTH = 8  # source and target widths of the tiny runs, in pieces
PIECES = 1501  # the tiny runs' SentencePiece vocabulary
B = 5  # sentences in the overfit batch
TINY = (f"--data.vocab_size={PIECES}", "--model.model_dim=32", "--model.num_heads=2",
        "--model.ffn_hidden=48",
        "--model.num_encoder_layers=1", "--model.num_decoder_layers=1", "--model.dropout_rate=0.0",
        "--model.label_smoothing=0.0", f"--data.max_src_len={WIDTH}", f"--data.max_tgt_len={WIDTH}",
        f"--data.boundaries={WIDTH}", "--data.decode_batch_size=8", "--data.beam_size=3",
        "--data.length_penalty=0.0", "--data.test_bleu_examples=11", "--train.batch_size=8",
        "--train.eval_batch_size=256")


# ---- the masked loss


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_sequence_loss_exact_value_and_padding_weighs_nothing():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 4, 7)).astype(np.float32)  # B=3, T=4, V=7
  targets = np.array([[1, 4, 6, 3], [5, 3, 0, 0], [2, 3, 0, 0]], np.int32)
  lengths = np.array([4, 2, 2], np.int32)
  weight = np.array([1.0, 1.0, 0.0], np.float32)  # the third row is a filler row

  loss_fn = jax.jit(sequence_loss)
  loss, m = loss_fn(logits, targets, lengths, weight)
  logp = _log_softmax(logits.astype(np.float64))
  real = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
  nlls = [-logp[b, t, targets[b, t]] for b, t in real]
  np.testing.assert_allclose(float(loss), np.mean(nlls), rtol=1e-6)
  np.testing.assert_allclose([float(v) for v in m["loss"]], [np.sum(nlls), 6.0], rtol=1e-6)
  np.testing.assert_allclose([float(v) for v in m["nll"]], [np.sum(nlls), 6.0], rtol=1e-6)
  correct = sum(int(np.argmax(logits[b, t]) == targets[b, t]) for b, t in real)
  np.testing.assert_allclose([float(v) for v in m["token_accuracy"]], [correct, 6.0])

  # Anything at padded positions or in the filler row changes neither the loss nor the metrics,
  # and gets no gradient.
  noisy_logits = logits.copy()
  noisy_targets = targets.copy()
  noisy_logits[1, 2:] += 5.0
  noisy_logits[2] = rng.normal(size=(4, 7))
  noisy_targets[1, 2:], noisy_targets[2] = 6, 1
  loss2, m2 = loss_fn(noisy_logits, noisy_targets, lengths, weight)
  assert float(loss2) == float(loss)
  assert jax.tree.map(float, m2) == jax.tree.map(float, m)
  grad = jax.jit(jax.grad(lambda x: loss_fn(x, targets, lengths, weight)[0]))(logits)
  assert np.all(np.asarray(grad)[1, 2:] == 0) and np.all(np.asarray(grad)[2] == 0)
  assert np.all(np.abs(np.asarray(grad)[0]) > 0)


def test_sequence_sum_reduction_exact_value():
  """'sequence_sum' (the Paddle couplet chapter's): each real row's summed cross-entropy, averaged
  over the real rows; the logged 'loss' pair counts rows, 'nll' still counts tokens."""
  rng = np.random.default_rng(1)
  logits = rng.normal(size=(3, 5, 7)).astype(np.float32)  # B=3, T=5, V=7
  targets = np.array([[1, 4, 6, 3, 2], [5, 3, 0, 0, 0], [2, 3, 1, 0, 0]], np.int32)
  lengths = np.array([5, 2, 3], np.int32)
  weight = np.array([1.0, 1.0, 0.0], np.float32)  # the third row is a filler row
  loss, m = jax.jit(sequence_loss, static_argnums=(4, 5))(logits, targets, lengths, weight, 0.0,
                                                         "sequence_sum")
  logp = _log_softmax(logits.astype(np.float64))
  sums = [-sum(logp[b, t, targets[b, t]] for t in range(lengths[b])) for b in (0, 1)]
  np.testing.assert_allclose(float(loss), np.mean(sums), rtol=1e-6)
  np.testing.assert_allclose([float(v) for v in m["loss"]], [np.sum(sums), 2.0], rtol=1e-6)
  np.testing.assert_allclose([float(v) for v in m["nll"]], [np.sum(sums), 7.0], rtol=1e-6)
  token_mean, _ = sequence_loss(logits, targets, lengths, weight)
  np.testing.assert_allclose(float(token_mean), np.sum(sums) / 7.0, rtol=1e-6)
  with pytest.raises(ValueError, match="reduction"):
    sequence_loss(logits, targets, lengths, weight, 0.0, "sum")


def test_label_smoothing_exact_value():
  logits = np.array([[[2.0, 0.5, -1.0, 0.0, 1.0], [0.0, 3.0, 1.0, -2.0, 0.5]]], np.float32)
  targets = np.array([[4, 1]], np.int32)
  lengths, weight = np.array([2], np.int32), np.ones(1, np.float32)
  eps = 0.2
  loss, m = jax.jit(sequence_loss, static_argnums=4)(logits, targets, lengths, weight,
                                                              eps)
  logp = _log_softmax(logits.astype(np.float64))[0]
  per_token = [(1 - eps) * -logp[t, targets[0, t]] + eps * -logp[t].mean() for t in range(2)]
  np.testing.assert_allclose(float(loss), np.mean(per_token), rtol=1e-6)
  nll = -logp[0, 4] - logp[1, 1]
  np.testing.assert_allclose(float(m["nll"][0]), nll, rtol=1e-6)  # nll stays unsmoothed


# ---- BLEU


def test_corpus_bleu_known_values():
  hyps = ["the cat sat on the mat.", "a dog runs"]
  refs = ["the cat sat on a mat.", "a dog runs fast today"]
  # 13a splits the final period off. Clipped 1- to 4-gram matches: sentence 1 6/7, 4/6, 2/5,
  # 1/4; sentence 2 3/3, 2/2, 1/1, 0/0. Lengths 7 + 3 (hypotheses), 7 + 5 (references).
  precisions = [(6 + 3) / (7 + 3), (4 + 2) / (6 + 2), (2 + 1) / (5 + 1), (1 + 0) / (4 + 0)]
  expected = 100 * math.exp(1 - 12 / 10) * math.prod(precisions) ** 0.25
  scores = metrics.score_translations(hyps, refs)
  assert scores.bleu == pytest.approx(expected, rel=1e-12) and scores.sources == 2
  assert metrics.score_translations(["va!"], ["va !"]).bleu == pytest.approx(
      metrics.score_translations(["va !"], ["va !"]).bleu)  # 13a splits "!" off either way
  with pytest.raises(ValueError, match="same length"):
    metrics.score_translations(["a"], ["a", "b"])
  with pytest.raises(ValueError, match="at least one line"):
    metrics.score_translations([], [])


def test_multi_reference_grouping_and_bleu():
  sources = [("i", "won"), ("go",), ("i", "won"), ("i", "won")]
  hyps = ["h1", "h2", "h1", "h1"]
  refs = ["r1", "r2", "r3", "r4"]
  grouped_hyps, streams = metrics.group_by_source(sources, hyps, refs)
  assert grouped_hyps == ["h1", "h2"]
  assert streams == [["r1", "r2"], ["r3", None], ["r4", None]]

  # One source with two translations, the hypothesis equal to the second: once against both
  # is a perfect score; one pair per line scores the two copies against one translation each.
  line = "the cat sat on the mat ."
  other = "a feline was sitting upon the rug ."
  sources, hyps, refs = [("k",), ("k",)], [line, line], [other, line]
  scores = metrics.score_translations(hyps, refs, sources)
  assert scores.bleu == pytest.approx(100.0, rel=1e-12) and scores.sources == 1
  assert scores.signatures["bleu"].startswith("nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|")
  # Pairs: matches 7+2 of 7+7 unigrams ("the", "."), 6+0 of 6+6 bigrams ... 4+0 of 4+4; the
  # references have 7 + 8 tokens, the hypotheses 14 (brevity penalty).
  expected = 100 * math.exp(1 - 15 / 14) * math.prod([9 / 14, 6 / 12, 5 / 10, 4 / 8]) ** 0.25
  assert metrics.score_translations(hyps, refs).bleu == pytest.approx(expected, rel=1e-12)


# ---- a tiny Transformer overfit on one batch, searched, saved and translated from the CLI


def _tiny_config(name: str = "transformer") -> config_lib.Config:
  cfg = configs.CONFIGS[name]()
  cfg.experiment, cfg.model_name = "translation", name
  return config_lib.override(cfg, TINY)


@pytest.fixture(scope="module")
def sample():
  return TranslationData.load(tokenizer="sentencepiece", vocab_size=PIECES, max_src_len=WIDTH,
                              max_tgt_len=WIDTH, boundaries=(WIDTH,))


def test_scores_equal_sacrebleu_on_real_sample_lines(sample):
  """Cased, lowercased BLEU and chrF of outputs against the raw French references of the sample's
  test split, exactly as sacrebleu computes them when called directly."""
  refs, sources = sample.references("test"), sample.sources("test")
  multi = next(s for s in sources if sources.count(s) == 3)  # an English sentence, 3 references
  lines = [i for i, s in enumerate(sources) if s == multi] + [
      i for i, s in enumerate(sources) if sources.count(s) == 1][:6]
  refs, sources = [refs[i] for i in lines], [sources[i] for i in lines]
  assert len(lines) == 9 and any(ref != ref.lower() for ref in refs)
  # Outputs a model might give: the first reference lowercased, words dropped, one exact.
  hyps = [refs[0].lower()] * 3 + [refs[3], " ".join(refs[4].split()[:-1]), refs[5].lower(),
                                    refs[6].upper(), " ".join(refs[7].split()[1:]), refs[8]]
  scores = metrics.score_translations(hyps, refs, sources)
  streams = [[refs[0], *refs[3:]], [refs[1]] + [None] * 6, [refs[2]] + [None] * 6]
  outputs = [hyps[0], *hyps[3:]]  # the 7 distinct sources, each once
  direct = {"bleu": sacrebleu.BLEU(), "bleu_lowercase": sacrebleu.BLEU(lowercase=True),
            "chrf": sacrebleu.CHRF()}
  for name, metric in direct.items():
    assert getattr(scores, name) == metric.corpus_score(outputs, streams).score
    assert scores.signatures[name] == str(metric.get_signature())
  assert scores.sources == 7 and scores.bleu < scores.bleu_lowercase
  version = sacrebleu.__version__
  assert scores.signatures == {
      "bleu": f"nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:{version}",
      "bleu_lowercase": f"nrefs:var|case:lc|eff:no|tok:13a|smooth:exp|version:{version}",
      "chrf": f"nrefs:var|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{version}"}
  # One reference per line: sacrebleu's corpus_bleu on the lines as they are.
  single = metrics.score_translations(hyps, refs)
  assert single.bleu == sacrebleu.corpus_bleu(hyps, [refs]).score
  assert single.chrf == sacrebleu.corpus_chrf(hyps, [refs]).score
  assert single.signatures["bleu"].startswith("nrefs:1|") and single.sources == 9


def _overfit_batch(data: TranslationData) -> dict[str, np.ndarray]:
  """B training pairs with different sources that fit the width whole, as one padded batch."""
  train = data.splits["train"].sequences
  chosen, seen = [], set()
  for i in range(len(train["src"])):
    src = tuple(train["src"][i])
    if src not in seen and 3 <= len(src) < WIDTH and 3 <= len(train["tgt_out"][i]) < WIDTH:
      seen.add(src)
      chosen.append(i)
    if len(chosen) == B:
      break
  idx = np.array(chosen)
  batch = {}
  for field, length_key in (("src", "src_len"), ("tgt_in", "tgt_len"), ("tgt_out", None)):
    ids, lengths = train[field].padded(idx, WIDTH)
    batch[field] = ids
    if length_key:
      batch[length_key] = lengths
  batch["weight"] = np.ones(B, np.float32)
  return batch


@pytest.fixture(scope="module")
def overfit(sample):
  task = task_lib.TranslationTask(_tiny_config(), data=sample)
  batch = _overfit_batch(sample)
  params = jax.jit(task.init)(jax.random.key(0), batch)
  tx = optax.adam(1e-2)

  @jax.jit
  def step(params, opt_state):
    (loss, _), grads = jax.value_and_grad(task.loss, has_aux=True)(params, batch, None)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  opt_state = jax.jit(tx.init)(params)
  for _ in range(300):
    params, opt_state, loss = step(params, opt_state)
    if float(loss) < 0.02:
      break
  return task, params, batch, float(loss)


def _targets(batch) -> list[list[int]]:
  return [list(batch["tgt_out"][b, :batch["tgt_len"][b] - 1]) for b in range(B)]  # eos dropped


def test_overfit_one_batch_then_greedy_translates_it_back(overfit):
  task, params, batch, loss = overfit
  assert loss < 0.02
  decoded = task.decode(params, [batch["src"][b, :batch["src_len"][b]] for b in range(B)])
  assert [list(hyps[0]) for hyps, _ in decoded] == _targets(batch)


def test_beam_search_on_the_trained_model(overfit):
  task, params, batch, _ = overfit
  sources = [batch["src"][b, :batch["src_len"][b]] for b in range(B)]
  beams = task.decode(params, sources, beam_size=3, length_penalty=0.0)
  suppressed = set(task.suppressed_ids)
  assert suppressed == {PAD_ID, UNK_ID, BOS_ID}  # subword targets never hold them
  log_probs = jax.jit(lambda *args: jax.nn.log_softmax(task.model.logits(*args), axis=-1))
  logp = np.asarray(log_probs(params, batch["src"], batch["src_len"], batch["tgt_in"]))  # (B,T,V)
  for b, ((hyps, scores), target) in enumerate(zip(beams, _targets(batch))):
    assert len(hyps) == 3 and list(hyps[0]) == target
    assert scores[0] >= scores[1] >= scores[2]
    assert len({tuple(h) for h in hyps}) == 3  # three different hypotheses
    assert not suppressed & {token for h in hyps for token in h}
    # The best score is the teacher-forced log-probability of the target and eos.
    path = [*target, EOS_ID]
    expected = sum(logp[b, t, token] for t, token in enumerate(path))
    assert scores[0] == pytest.approx(expected, abs=1e-4)


def test_decoding_never_emits_unk_pad_or_bos_with_subwords(overfit):
  task, params, batch, _ = overfit
  sources = [batch["src"][b, :batch["src_len"][b]] for b in range(B)]
  # An output bias that makes unk the most likely token at every step.
  biased = {**params, "output": {**params["output"],
                                 "bias": params["output"]["bias"].at[UNK_ID].add(1e3)}}
  raw = task.decoder(biased, batch["src"], batch["src_len"], max_len=WIDTH)  # no ban: all unk
  assert np.all(raw.tokens[:, 0, :WIDTH - 1] == UNK_ID)
  for beam in (1, 3):
    for hyps, scores in task.decode(biased, sources, beam_size=beam):
      assert not {PAD_ID, UNK_ID, BOS_ID} & {token for h in hyps for token in h}
      assert all(np.isfinite(scores))
  # Bans of one's own add to them: the first source may not start with its own first token.
  first = _targets(batch)[0][0]
  banned = [np.array([first], np.int32)] + [np.zeros((0,), np.int32)] * (B - 1)
  (hyps, _), *rest = task.decode(params, sources, banned_tokens=banned)
  assert hyps[0][0] != first and [h[0] for h, _ in rest] == _targets(batch)[1:]
  (hyps, _), *_ = task.decode(biased, sources, banned_tokens=banned)
  assert hyps[0][0] != first and UNK_ID not in hyps[0]
  with pytest.raises(ValueError, match=r"banned_tokens\[0\]: expected ids of shape"):
    task.decode(params, sources, banned_tokens=[np.zeros((WIDTH + 1,), np.int32)] * B)


def test_attention_rows_are_distributions_over_the_source(overfit):
  task, params, batch, _ = overfit
  src = batch["src"][0, :batch["src_len"][0]]
  target = _targets(batch)[0]
  weights = task.attention(params, src, target)
  assert weights.shape == (len(target) + 1, len(src))
  np.testing.assert_allclose(weights.sum(1), 1.0, rtol=1e-5)


def test_attention_of_a_fused_attention_model_is_the_vmap_models(overfit):
  """The fused path computes no weights: heatmaps of a model trained with it come from the same
  parameters through the weight-computing path."""
  task, params, batch, _ = overfit
  assert task.model.module.implementation == "auto"  # the vmapped path on this CPU
  fused = copy.copy(task.model)
  fused.module = task.model.module.clone(implementation="fused")
  args = (params, batch["src"][:2], batch["src_len"][:2], batch["tgt_in"][:2])
  np.testing.assert_allclose(fused.cross_attention(*args), task.model.cross_attention(*args),
                             rtol=1e-6, atol=1e-7)


@pytest.fixture(scope="module")
def workdir(overfit, tmp_path_factory):
  """A run directory holding the overfit parameters as its best checkpoint and the subword
  model; its config names data that does not exist, so a command that opened the data fails."""
  task, params, _, _ = overfit
  path = str(tmp_path_factory.mktemp("translation_run"))
  saved = config_lib.to_dict(task.config)
  saved["data_dir"] = os.path.join(path, "moved-away", "fra-eng.zip")
  with open(os.path.join(path, trainer.CONFIG_FILE), "w", encoding="utf-8") as f:
    json.dump(saved, f)
  ckpts = Checkpoints(path, best_metric="dev/bleu", best_mode="max", asynchronous=False)
  ckpts.save_best(1, params, {"dev/bleu": 1.0})
  ckpts.close()
  assert sorted(map(os.path.basename, task.save_artifacts(path))) == ["sentencepiece.model"]
  return path


def test_cli_translate_prints_the_learned_translation_and_saves_a_heatmap(
    overfit, workdir, capsys, tmp_path):
  task, _, batch, _ = overfit
  source = task.data.source_text(batch["src"][1])
  expected = task.target_text(_targets(batch)[1])
  png = str(tmp_path / "heat.png")
  assert cli.main(["translate", source, "--workdir", workdir, "--beam", "3", "--num-results",
                   "2", "--tsv", "--heatmap", png]) == 0
  captured = capsys.readouterr()
  lines, notes = captured.out.splitlines(), captured.err.splitlines()
  assert notes[0].startswith("# transformer from") and "beam 3" in notes[0]
  assert notes[0].endswith("translation, log-probability, input")
  assert notes[-1] == f"heatmap saved to {png}"
  assert len(lines) == 2  # --num-results 2: two rows for the one input, best first
  (text, score, echoed), (_, second, again) = (line.split("\t") for line in lines)
  assert (text, echoed, again) == (expected, source, source)
  assert 0 >= float(score) >= float(second)
  with open(png, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_translate_writes_one_line_per_input_in_order(overfit, workdir, capsys, tmp_path,
                                                          monkeypatch):
  task, _, batch, _ = overfit
  sources = [task.data.source_text(batch["src"][b]) for b in range(B)]
  expected = [task.target_text(target) for target in _targets(batch)]
  order = [3, 0, 4, 1, 2, 3]  # a repeated input gets its line twice
  path = tmp_path / "english.txt"
  path.write_text("".join(sources[i] + "\n" for i in order), encoding="utf-8")
  assert cli.main(["translate", "--input-file", str(path), "--workdir", workdir]) == 0
  assert capsys.readouterr().out.splitlines() == [expected[i] for i in order]
  with open(path, encoding="utf-8") as stdin:
    monkeypatch.setattr("sys.stdin", stdin)
    assert cli.main(["translate", "--workdir", workdir, "--tsv", "--beam-size", "3"]) == 0
  rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
  assert [(text, source) for text, _, source in rows] == [(expected[i], sources[i]) for i in order]
  assert cli.main(["translate", sources[0], "--workdir", workdir, "--beam-size", "3",
                   "--num-results", "2"]) == 2
  assert "--num-results above 1 needs --tsv" in capsys.readouterr().err
  assert cli.main(["translate", " ", "--workdir", workdir]) == 2
  assert "has nothing to translate" in capsys.readouterr().err


def test_cli_evaluate_pairs_prints_sacrebleu_with_signatures(overfit, workdir, capsys, tmp_path):
  task, params, batch, _ = overfit
  sources = [task.data.source_text(batch["src"][b]) for b in range(B)]
  targets = [task.target_text(target) for target in _targets(batch)]
  # A second reference for the first source (multi-reference), one wrong reference, and the
  # references in another case than the outputs.
  english = [*sources, sources[0], sources[2]]
  french = [targets[0], targets[1].upper(), *targets[2:], "Autre chose, vraiment.",
            "Une tout autre phrase."]
  path = tmp_path / "pairs.tsv"
  path.write_text("".join(f"{e}\t{f}\n" for e, f in zip(english, french)), encoding="utf-8")
  assert cli.main(["evaluate", "--workdir", workdir, "--pairs", str(path), "--beam-size",
                   "1"]) == 0
  printed = json.loads(capsys.readouterr().out)
  # The same figures from sacrebleu called directly: the first and third sources against two
  # references each, the others against one.
  hyps = [task.target_text(h[0]) for h, _ in task.decode(
      params, [batch["src"][b, :batch["src_len"][b]] for b in range(B)])]
  assert hyps == targets
  streams = [[french[0], french[1], french[2], french[3], french[4]],
             [french[5], None, french[6], None, None]]
  expected = {"bleu": sacrebleu.BLEU(), "bleu_lowercase": sacrebleu.BLEU(lowercase=True),
              "chrf": sacrebleu.CHRF()}
  for name, metric in expected.items():
    assert printed["metrics"][name] == pytest.approx(metric.corpus_score(hyps, streams).score,
                                                     rel=1e-12)
    assert printed["signatures"][name] == str(metric.get_signature())
  assert printed["signatures"]["bleu"].startswith("nrefs:var|case:mixed|eff:no|tok:13a|")
  assert printed["signatures"]["bleu_lowercase"].startswith("nrefs:var|case:lc|")
  assert printed["metrics"]["bleu_lowercase"] > printed["metrics"]["bleu"] > 0  # upper-case line
  assert (printed["lines"], printed["sources"], printed["beam_size"]) == (7, 5, 1)

  for content, message in (("Go.\tVa !\nHi.\n", "line 2: expected English<TAB>French (two "
                                                   "fields), got 1 field: 'Hi.'"),
                           ("Go.\tVa !\tAllez !\n", "line 1: expected English<TAB>French "
                                                      "(two fields), got 3 fields"),
                           ("Go.\tVa !\n\tSalut.\n", "line 2: the English side is empty"),
                           ("Go.\t \n", "line 1: the French side is empty"),
                           ("", "holds no pairs")):
    path.write_text(content, encoding="utf-8")
    assert cli.main(["evaluate", "--workdir", workdir, "--pairs", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_d2l_words_stay_one_option_away(tmp_path):
  cfg = config_lib.override(_tiny_config(), ["--data.tokenizer", "d2l_words"])
  words = TranslationData.load(max_src_len=WIDTH, max_tgt_len=WIDTH, boundaries=(WIDTH,))
  task = task_lib.TranslationTask(cfg, data=words)
  assert not task.subwords and task.suppressed_ids == ()  # word targets do hold unk
  assert task.text.tokenize("I won!") == ["i", "won", "!"]
  assert task.text.detokenize(["j'ai", "gagné", "!"]) == "j'ai gagné!"
  assert task.src_vocab is words.src_vocab and task.tgt_vocab is words.tgt_vocab
  assert len(task.src_vocab) != len(task.tgt_vocab)  # one vocabulary per language
  written = task.save_artifacts(str(tmp_path))
  assert sorted(map(os.path.basename, written)) == ["src_vocab.json", "tgt_vocab.json"]
  assert task.encode_source("Go.")[0] == ["go", "."]


def test_extra_eval_and_on_train_end(overfit, tmp_path):
  task, params, _, _ = overfit
  result = trainer.evaluate(task, params, "test")
  assert set(result) == {"loss", "nll", "token_accuracy", "perplexity", "bleu", "bleu_lowercase",
                         "chrf", "bleu_beam", "bleu_lowercase_beam", "chrf_beam", "sources"}
  assert result["perplexity"] == pytest.approx(np.exp(result["nll"]), rel=1e-6)
  assert result["perplexity"] > 1 and 0 <= result["bleu"] <= result["bleu_lowercase"] <= 100
  assert 1 <= result["sources"] <= 11
  signatures = task.metric_signatures("test")
  assert set(signatures) == set(result) - {"loss", "nll", "token_accuracy", "perplexity",
                                           "sources"}
  assert signatures["bleu_beam"].startswith("nrefs:") and "|tok:13a|" in signatures["bleu_beam"]
  assert signatures["chrf"].startswith("nrefs:") and "|nc:6|nw:0|" in signatures["chrf"]
  # Several test lines translate one English sentence: the scores group them by source.
  sources = task.data.sources("test")
  assert len(sources) == task.data.num_examples("test") and len(set(sources)) < len(sources)
  task.on_train_end(params, str(tmp_path))
  with open(tmp_path / task_lib.EXAMPLES_FILE, encoding="utf-8") as f:
    examples = json.load(f)
  assert set(examples["greedy"]) == set(task_lib.D2L_SENTENCES) == set(examples["beam3"])
  assert not any("<unk>" in text or "\u2047" in text for text in examples["greedy"].values())
  lines = (tmp_path / task_lib.TEST_TRANSLATIONS_FILE).read_text(encoding="utf-8").splitlines()
  assert len(lines) == 12 and lines[0] == "source\treference\tgreedy\tbeam"
  assert all(os.path.exists(tmp_path / f"attention-{i}.png") for i in range(1, 5))


def test_translate_and_evaluate_decode_with_the_runs_beam_unless_told(overfit, workdir, capsys,
                                                                       tmp_path):
  task, _, batch, _ = overfit
  d = task.config.data
  source = task.data.source_text(batch["src"][0])
  # No --beam-size: the run's own beam and length penalty, and --num-results 2 gives 2 rows.
  assert cli.main(["translate", source, "--workdir", workdir, "--tsv", "--num-results", "2"]) == 0
  captured = capsys.readouterr()
  assert len(captured.out.splitlines()) == 2
  assert (f"beam search, beam {d.beam_size}, length penalty {d.length_penalty:g}"
          in captured.err.splitlines()[0])
  assert cli.main(["translate", source, "--workdir", workdir, "--beam-size", "1"]) == 0
  assert "greedy search" in capsys.readouterr().err
  # A request that cannot be met is refused, not shrunk.
  assert cli.main(["translate", source, "--workdir", workdir, "--tsv", "--num-results", "3",
                   "--beam-size", "2"]) == 2
  assert "--num-results 3 needs a beam of at least 3, got --beam-size 2" in capsys.readouterr().err
  assert cli.main(["translate", source, "--workdir", workdir, "--beam-size", "1",
                   "--length-penalty", "1"]) == 2
  assert "--length-penalty applies to beam search only" in capsys.readouterr().err
  pairs = tmp_path / "pairs.tsv"
  pairs.write_text(f"{source}\tx\n", encoding="utf-8")
  assert cli.main(["evaluate", "--workdir", workdir, "--pairs", str(pairs)]) == 0
  printed = json.loads(capsys.readouterr().out)
  assert (printed["beam_size"], printed["length_penalty"]) == (d.beam_size, d.length_penalty)
  assert cli.main(["evaluate", "--workdir", workdir, "--pairs", str(pairs), "--length-penalty",
                   "0.2"]) == 0
  assert json.loads(capsys.readouterr().out)["length_penalty"] == 0.2
  # A split's evaluation decodes as the run says: a decoding flag there would be ignored.
  with pytest.raises(SystemExit) as info:
    cli.main(["evaluate", "--workdir", workdir, "--split", "test", "--beam-size", "2"])
  assert info.value.code == 2
  assert "--beam-size apply to --pairs only" in capsys.readouterr().err


def test_decoding_commands_help_prints_the_named_runs_beams(capsys):
  expected = {"translate": "transformer_cpu beam 4, length penalty 0.6",
              "couplet": "lstm_cpu beam 10, length penalty 0",
              "evaluate": "translation transformer_cpu beam 4, length penalty 0.6"}
  for command, named_run in expected.items():
    with pytest.raises(SystemExit):
      cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the epilog
    assert "uses the run's own data.beam_size and data.length_penalty" in text
    assert named_run in text
