"""Training curves and attention heatmaps are written as readable PNG files."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from matplotlib import image as mpl_image

from experiments import plots


def _png(path):
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  return mpl_image.imread(path)  # (height, width, 4) floats


def _metrics_file(tmp_path):
  path = tmp_path / "metrics.jsonl"
  lines = []
  for step in range(10, 101, 10):
    lines.append({"step": step, "split": "train", "loss": 1.0 / step ** 0.3,
                  "accuracy": 1 - 0.6 / step ** 0.3, "grad_norm": 2.0, "time": step})
    if step % 50 == 0:
      lines.append({"step": step, "split": "dev", "loss": 1.2 / step ** 0.3,
                    "accuracy": 1 - 0.8 / step ** 0.3})
  lines.append({"step": 100, "split": "test", "loss": 0.3, "accuracy": 0.82})
  path.write_text("\n".join(json.dumps(r) for r in lines) + "\n{\"step\": 1")  # torn last line
  return str(path)


def test_curves_png_has_a_panel_per_metric(tmp_path):
  source = _metrics_file(tmp_path)
  two = _png(plots.plot_curves(source, str(tmp_path / "curves.png"), title="toy"))
  one = _png(plots.plot_curves(source, str(tmp_path / "loss.png"), names=["loss"]))
  assert two.shape[1] > 1.8 * one.shape[1]  # two panels side by side
  assert abs(two.shape[0] - one.shape[0]) < 0.15 * one.shape[0]  # the title adds a little
  assert two[..., :3].std() > 0.05  # something was drawn
  with pytest.raises(ValueError, match=r"none of the requested metrics.*accuracy, grad_norm, loss"):
    plots.plot_curves(source, str(tmp_path / "x.png"), names=["bleu"])
  (tmp_path / "empty.jsonl").write_text("")
  with pytest.raises(ValueError, match="holds no metrics"):
    plots.plot_curves(str(tmp_path / "empty.jsonl"), str(tmp_path / "y.png"))


def test_runs_by_time_draw_one_line_per_run_in_a_panel_per_metric(tmp_path):
  slow = tmp_path / "slow.jsonl"
  slow.write_text("\n".join(json.dumps({"step": s, "split": "dev", "time": 7.0 * s, "bleu": s / 3,
                                         "perplexity": 9.0 / s}) for s in (3, 5, 11)) + "\n")
  fast = _metrics_file(tmp_path)  # dev records without a time: not drawable by time
  two = _png(plots.plot_runs_by_time({"slow": str(slow), "again": str(slow)},
                                     str(tmp_path / "t2.png"), ["bleu", "perplexity"], title="t"))
  one = _png(plots.plot_runs_by_time({"slow": str(slow)}, str(tmp_path / "t1.png"), ["bleu"]))
  assert two.shape[1] > 1.8 * one.shape[1] and two[..., :3].std() > 0.05
  with pytest.raises(ValueError, match=r"\(fast\) has no 'dev' records of 'loss' with a time"):
    plots.plot_runs_by_time({"fast": fast}, str(tmp_path / "t3.png"), ["loss"])
  with pytest.raises(ValueError, match="at least one run and one metric"):
    plots.plot_runs_by_time({}, str(tmp_path / "t4.png"), ["bleu"])


def test_attention_heatmap_pooling_row_and_matrix(tmp_path):
  words = "this great science fiction film is really awesome".split()
  weights = np.linspace(1, 2, len(words)) / np.linspace(1, 2, len(words)).sum()
  row = _png(plots.plot_attention(weights, words, None, str(tmp_path / "row.png"),
                                  title="attention pooling"))
  matrix = np.random.default_rng(0).dirichlet(np.ones(5), size=3)  # (Q=3, K=5)
  grid = _png(plots.plot_attention(matrix, list("abcde"), ["x", "y", "z"],
                                   str(tmp_path / "grid.png"), xlabel="source", ylabel="target"))
  assert row.shape[1] > row.shape[0] and grid.shape[0] > row.shape[0]
  with pytest.raises(ValueError, match=r"x_tokens has 4 tokens but weights has shape \(3, 5\)"):
    plots.plot_attention(matrix, list("abcd"), None, str(tmp_path / "bad.png"))
  with pytest.raises(ValueError, match=r"y_tokens has 2 tokens but weights has shape \(3, 5\)"):
    plots.plot_attention(matrix, list("abcde"), ["x", "y"], str(tmp_path / "bad.png"))
  with pytest.raises(ValueError, match=r"weights: expected shape \(Q, K\) or \(K,\)"):
    plots.plot_attention(np.ones((2, 3, 4)), list("abcd"), None, str(tmp_path / "bad.png"))


def test_chinese_tokens_render_with_or_without_a_cjk_font(tmp_path):
  upper, lower = list("晚风摇树树还挺"), list("晨露润花花更红")
  weights = np.eye(7) * 0.7 + 0.3 / 7
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = plots.plot_attention(weights, upper, lower, str(tmp_path / "couplet.png"))
  messages = [str(w.message) for w in caught]
  if plots.cjk_font() is None:
    assert any("no CJK font is installed" in m for m in messages), messages
  else:
    assert not any("CJK" in m for m in messages), messages
  assert not any("Glyph" in m for m in messages), messages  # one warning, not one per glyph
  assert _png(out).shape[0] > 100


def test_curves_draw_the_metric_that_selects_the_best_checkpoint_beside_the_loss(tmp_path):
  path = tmp_path / "metrics.jsonl"
  records = [{"step": s, "split": split, "loss": 3.0 / s, "bleu": 5.0 + s % 7}
             for s in (10, 20, 30) for split in ("train", "dev")]
  path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
  loss_only = _png(plots.plot_curves(str(path), str(tmp_path / "a.png")))
  with_bleu = _png(plots.plot_curves(str(path), str(tmp_path / "b.png"), best_metric="dev/bleu"))
  assert with_bleu.shape[1] > 1.8 * loss_only.shape[1]  # loss, then bleu beside it
  # A best metric that is already drawn (accuracy) adds no panel.
  source = _metrics_file(tmp_path)
  default = _png(plots.plot_curves(source, str(tmp_path / "c.png")))
  marked = _png(plots.plot_curves(source, str(tmp_path / "d.png"), best_metric="dev/accuracy"))
  assert default.shape == marked.shape and not np.array_equal(default, marked)  # the best star
