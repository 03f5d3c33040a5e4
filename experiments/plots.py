"""PNG pictures: training curves from metrics.jsonl and attention heatmaps.

Figures are drawn with matplotlib's object API and saved through its Agg renderer, without
pyplot, so no display is needed and the global backend of a notebook is left alone. Chinese tokens
need a CJK font; when none is installed the heatmap is still drawn (the glyphs show as boxes) and a
warning says which fonts would fix it.
"""

from __future__ import annotations

import os
import warnings
from typing import Mapping, Sequence

import numpy as np
from matplotlib import font_manager
from matplotlib.figure import Figure

from experiments import metrics_log

# Fonts tried, in order, for CJK text (common names on Linux, macOS and Windows).
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "Source Han Sans SC",
             "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei",
             "PingFang SC", "Heiti SC", "AR PL UMing CN", "Droid Sans Fallback")

_SPLIT_STYLE = {"train": dict(color="tab:blue"), "dev": dict(color="tab:orange", marker="o"),
                "test": dict(color="tab:green", marker="s", linestyle="none")}


def _is_cjk(text: str) -> bool:
  return any(0x2E80 <= ord(c) <= 0x9FFF or 0xF900 <= ord(c) <= 0xFAFF or 0xFF00 <= ord(c) <= 0xFFEF
             for c in text)


def cjk_font() -> str | None:
  """The first installed font family from CJK_FONTS, or None."""
  installed = {f.name for f in font_manager.fontManager.ttflist}
  for name in CJK_FONTS:
    if name in installed:
      return name
  return None


def _label_panel(ax, xlabel: str, name: str) -> None:
  """A curve panel's axis labels, title (= the metric's name), grid and legend."""
  ax.set_xlabel(xlabel)
  ax.set_ylabel(name)
  ax.set_title(name)
  ax.grid(alpha=0.3)
  ax.legend()


def _finish(fig, title: str | None, out_path: str) -> str:
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  return _save(fig, out_path)


def plot_curves(metrics_path: str, out_path: str,
                names: Sequence[str] | None = None, title: str | None = None,
                best_metric: str | None = None, best_mode: str = "max") -> str:
  """Draws train/dev curves of each metric against the step, one panel per metric.

  Args:
    metrics_path: a metrics.jsonl written by the trainer.
    out_path: the PNG to write.
    names: which metrics to draw; None = 'loss' and 'accuracy' when logged, else every metric
      that the dev split has (or train's if there is no dev record).
    title: the figure title.
    best_metric: the run's train.best_metric ('dev/bleu'): its panel is drawn beside the loss's
      (added to the default names when it is not among them) and its best dev value marked.
    best_mode: 'max' or 'min', the run's train.best_mode: which value is the best.

  Returns:
    `out_path`.
  """
  records = metrics_log.read_metrics(metrics_path)
  if not records:
    raise ValueError(f"{metrics_path} holds no metrics to plot")
  series: dict[tuple[str, str], list[tuple[int, float]]] = {}
  skip = {"step", "split", "epoch", "time"}
  for record in records:
    for name, value in record.items():
      if name not in skip and isinstance(value, (int, float)):
        series.setdefault((record["split"], name), []).append((record["step"], float(value)))
  available = {name for _, name in series}
  if names is None:
    names = [n for n in ("loss", "accuracy") if n in available]
    if not names:
      ref = "dev" if any(s == "dev" for s, _ in series) else "train"
      names = sorted(n for s, n in series if s == ref)
    selecting = best_metric.split("/", 1)[-1] if best_metric else None
    if selecting in available and selecting not in names:
      names.insert(1 if names and names[0] == "loss" else 0, selecting)
  names = [n for n in names if n in available]
  if not names:
    raise ValueError(f"none of the requested metrics are in {metrics_path}; it has "
                     f"{', '.join(sorted(available))}")
  fig = Figure(figsize=(5.2 * len(names), 3.8))
  axes = fig.subplots(1, len(names), squeeze=False)
  for ax, name in zip(axes[0], names):
    for split in ("train", "dev", "test"):
      points = series.get((split, name))
      if points:
        steps, values = zip(*points)
        ax.plot(steps, values, label=split, **_SPLIT_STYLE[split])
    if best_metric and best_metric == f"dev/{name}" and series.get(("dev", name)):
      pick = max if best_mode == "max" else min
      step, value = pick(series[("dev", name)], key=lambda point: point[1])
      ax.plot([step], [value], "k*", markersize=10, label=f"best ({value:.4g})")
    _label_panel(ax, "step", name)
  return _finish(fig, title, out_path)


def plot_runs_by_time(metrics_paths: Mapping[str, str], out_path: str, names: Sequence[str],
                      split: str = "dev", title: str | None = None) -> str:
  """Draws one split's metrics of several runs against wall time (minutes), one panel per metric:
  the comparison of models at equal time rather than equal steps.

  Args:
    metrics_paths: run label -> the metrics.jsonl its trainer wrote (records carry 'time', the
      seconds since the run started).
    out_path: the PNG to write.
    names: the metrics to draw, e.g. ['perplexity', 'bleu'].
    split: the split whose records are drawn.
    title: the figure title.

  Returns:
    `out_path`.

  Raises:
    ValueError: no runs, or a run without any `split` record of a requested metric (naming both).
  """
  if not metrics_paths or not names:
    raise ValueError("plot_runs_by_time needs at least one run and one metric name")
  fig = Figure(figsize=(5.2 * len(names), 3.8))
  axes = fig.subplots(1, len(names), squeeze=False)
  for label, path in metrics_paths.items():
    records = [r for r in metrics_log.read_metrics(path) if r.get("split") == split]
    for ax, name in zip(axes[0], names):
      points = [(r["time"] / 60.0, float(r[name])) for r in records if name in r and "time" in r]
      if not points:
        raise ValueError(f"{path} ({label}) has no {split!r} records of {name!r} with a time")
      minutes, values = zip(*points)
      ax.plot(minutes, values, marker="o", markersize=3, label=label)
  for ax, name in zip(axes[0], names):
    _label_panel(ax, "wall time (minutes)", f"{split} {name}")
  return _finish(fig, title, out_path)


def plot_attention(weights, x_tokens: Sequence[str], y_tokens: Sequence[str] | None,
                   out_path: str, *, title: str | None = None, xlabel: str = "keys",
                   ylabel: str = "queries", cmap: str = "Reds") -> str:
  """Draws attention weights as a heatmap with the tokens on the axes.

  Args:
    weights: (Q, K) weights (rows are queries), or (K,) for a single pooling query.
    x_tokens: the K key tokens (columns).
    y_tokens: the Q query tokens (rows); None labels the rows 0..Q-1 (or nothing for one row).
    out_path: the PNG to write.
    title: the figure title.
    xlabel: label of the key axis.
    ylabel: label of the query axis.
    cmap: matplotlib colour map.

  Returns:
    `out_path`.
  """
  weights = np.asarray(weights, np.float32)
  if weights.ndim == 1:
    weights = weights[None, :]
  if weights.ndim != 2:
    raise ValueError(f"weights: expected shape (Q, K) or (K,), got {weights.shape}")
  q_len, k_len = weights.shape
  if len(x_tokens) != k_len:
    raise ValueError(f"x_tokens has {len(x_tokens)} tokens but weights has shape {weights.shape} "
                     f"(K = {k_len} columns)")
  if y_tokens is not None and len(y_tokens) != q_len:
    raise ValueError(f"y_tokens has {len(y_tokens)} tokens but weights has shape {weights.shape} "
                     f"(Q = {q_len} rows)")
  font = _font_for(list(x_tokens) + list(y_tokens or []) + [title or ""])
  width = min(max(3.0, 0.42 * k_len + 2.2), 30.0)
  height = min(max(1.6, 0.42 * q_len + 1.6), 30.0)
  fig = Figure(figsize=(width, height))
  ax = fig.subplots()
  _draw_weights(fig, ax, weights, x_tokens, y_tokens, font, xlabel=xlabel, ylabel=ylabel,
                cmap=cmap)
  if title:
    ax.set_title(title, fontdict={"family": font} if font else None)
  return _finish_heatmap(fig, out_path)


def plot_pair_attention(block, a_tokens: Sequence[str], b_tokens: Sequence[str], cls_row,
                        packed_tokens: Sequence[str], out_path: str, *,
                        title: str | None = None, cmap: str = "Reds") -> str:
  """Draws a sentence-pair Transformer's attention: the [CLS] row above the a-to-b block.

  Args:
    block: (La, Lb) weights of the first sentence's tokens (rows) over the second's (columns).
    a_tokens: the La tokens of the first sentence.
    b_tokens: the Lb tokens of the second sentence.
    cls_row: (n,) the [CLS] position's weights over the whole packed pair.
    packed_tokens: the n tokens of the packed pair ([CLS] a [SEP] b [SEP]).
    out_path: the PNG to write.
    title: the figure title.
    cmap: matplotlib colour map.

  Returns:
    `out_path`.
  """
  block, cls_row = np.asarray(block, np.float32), np.asarray(cls_row, np.float32)
  if block.shape != (len(a_tokens), len(b_tokens)):
    raise ValueError(f"block has shape {block.shape}, expected (La, Lb) = "
                     f"({len(a_tokens)}, {len(b_tokens)})")
  if cls_row.shape != (len(packed_tokens),):
    raise ValueError(f"cls_row has shape {cls_row.shape}, expected ({len(packed_tokens)},)")
  font = _font_for(list(packed_tokens) + [title or ""])
  width = min(max(4.0, 0.42 * max(len(packed_tokens), len(b_tokens)) + 2.2), 30.0)
  height = min(max(3.0, 0.42 * (len(a_tokens) + 1) + 3.0), 30.0)
  fig = Figure(figsize=(width, height))
  top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1, max(len(a_tokens), 1)]})
  _draw_weights(fig, top, cls_row[None, :], packed_tokens, ["[CLS]"], font,
                xlabel="[CLS] over the pair", ylabel="", cmap=cmap)
  _draw_weights(fig, bottom, block, b_tokens, a_tokens, font, xlabel="second question",
                ylabel="first question", cmap=cmap)
  if title:
    top.set_title(title, fontdict={"family": font} if font else None)
  return _finish_heatmap(fig, out_path)


def _font_for(texts: Sequence[str]) -> str | None:
  """A CJK font when any text needs one (a warning when none is installed), else None."""
  if not any(_is_cjk(str(t)) for t in texts):
    return None
  font = cjk_font()
  if font is None:
    warnings.warn("no CJK font is installed (tried: " + ", ".join(CJK_FONTS[:3]) + ", ...); the "
                  "heatmap is drawn but Chinese tokens show as boxes. Install e.g. "
                  "fonts-noto-cjk to fix it.", stacklevel=3)
  return font


def _draw_weights(fig, ax, weights: np.ndarray, x_tokens: Sequence[str],
                  y_tokens: Sequence[str] | None, font: str | None, *, xlabel: str, ylabel: str,
                  cmap: str) -> None:
  """One heatmap (Q, K) on `ax`, the tokens on its axes, with a colour bar."""
  q_len, k_len = weights.shape
  image = ax.imshow(weights, cmap=cmap, aspect="auto", vmin=0.0)
  fontdict = {"family": font} if font else None
  ax.set_xticks(range(k_len))
  # Slant the key labels when they would run into each other side by side.
  slant = k_len > 8 or max(len(str(t)) for t in x_tokens) > 6
  ax.set_xticklabels([str(t) for t in x_tokens], rotation=45 if slant else 0,
                     ha="right" if slant else "center", rotation_mode="anchor", fontdict=fontdict)
  ax.set_yticks(range(q_len))
  if y_tokens is not None:
    ax.set_yticklabels([str(t) for t in y_tokens], fontdict=fontdict)
  elif q_len == 1:
    ax.set_yticks([])
  ax.set_xlabel(xlabel)
  if y_tokens is not None or q_len > 1:
    ax.set_ylabel(ylabel)
  fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)


def _finish_heatmap(fig, out_path: str) -> str:
  """Lays a heatmap figure out (quiet about missing CJK glyphs) and saves it as a PNG."""
  with warnings.catch_warnings():
    # Without a CJK font matplotlib warns once per missing glyph (when laying out and drawing); the
    # single warning above says it all.
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from")
    fig.tight_layout()
    return _save(fig, out_path)


def numbered_paths(path: str | None, count: int, first: int = 1,
                   numbered: bool | None = None) -> list[str | None]:
  """`path` for one picture; for several (`numbered`, default count > 1), path with -first,
  -(first + 1), ... before the extension ('.png' when it has none), so that a command answering
  its inputs batch by batch numbers them as one batch would; `count` Nones when no path is given
  (no pictures wanted)."""
  if path is None:
    return [None] * count
  if not (count > 1 if numbered is None else numbered):
    return [path] * count
  stem, ext = os.path.splitext(path)
  return [f"{stem}-{i}{ext or '.png'}" for i in range(first, first + count)]


def _save(fig, out_path: str) -> str:
  directory = os.path.dirname(os.path.abspath(out_path))
  os.makedirs(directory, exist_ok=True)
  fig.savefig(out_path, dpi=120, bbox_inches="tight", pad_inches=0.1)
  return out_path
