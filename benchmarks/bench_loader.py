"""Batches per second of the lean numpy loader against grain, on the full IMDB train split.

    python benchmarks/bench_loader.py --source ../shared/data/imdb/aclImdb_v1.tar.gz

With --tasks, it times instead how long pipelines.tasks takes to make each full task ready to
serve batches from an already prepared dataset: once from the records (read, tokenize, build or
load the vocabulary, encode, write the cache of encoded splits) and once from that cache.

    python benchmarks/bench_loader.py --tasks --imdb ../shared/data/imdb/aclImdb_v1.tar.gz \
        --fra-eng ../shared/data/fra-eng/fra-eng.zip --couplet ../shared/data/couplet/couplet.tar.gz

All loaders produce the same kind of batch: int32 token ids (64, L) padded with 0, lengths, labels.
  numpy (ours)           pipelines.batching.Batcher over in-memory ids, length-bucketed (the
                         default of pipelines.tasks); what the experiments use.
  grain, bucketed plan   grain.MapDataset over the same bucketed batch plan, one map per batch:
                         grain as the executor of our plan (the grain overhead on top of ours).
  grain, per example     the idiomatic grain pipeline over in-memory ids: source -> shuffle ->
                         map(pad to max_len) -> batch (no bucketing; every batch is (64, 256)).
  grain over tfds        grain.MapDataset over the tfds array_record data source itself, with the
                         tokenizer and vocabulary mapped over every record, every epoch:
                         source -> shuffle -> map(read, tokenize, encode, pad) -> batch.
The first three start from ids tokenized once (that one-off cost is printed separately); the last
one pays the tokenizer again in every epoch, which is the honest cost of "grain over the source".
Each figure is the best of `--repeats` timed runs of `--batches` batches (fewer for the slow
tfds variant), after one warm-up batch. A ratio to our loader, measured in the same run, is given.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time

import grain
import numpy as np

from pipelines import datasets, tasks
from pipelines.batching import Batcher
from pipelines.tasks import read_records
from pipelines.text import imdb_tokenize
from pipelines.vocab import Vocab


def _rate(make_iter, batches: int, repeats: int) -> float:
  """Best batches/second over `repeats` runs of `batches` batches from fresh iterators."""
  best = 0.0
  for r in range(repeats):
    it = make_iter(r)
    next(it)  # warm-up: iterator set-up and first-touch costs
    start = time.perf_counter()
    for _ in range(batches):
      batch = next(it)
    elapsed = time.perf_counter() - start
    assert batch["tokens"].dtype == np.int32
    best = max(best, batches / elapsed)
  return best


def _cpu_name() -> str:
  try:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
      if line.startswith("Model name:"):
        return line.split(":", 1)[1].strip()
  except (OSError, subprocess.CalledProcessError):
    pass
  return platform.processor() or "unknown CPU"


def time_tasks(sources: dict[str, str], data_dir: str | None) -> None:
  """Seconds to make each task ready: from the records, then from the cache of encoded splits."""
  print("| task | examples (train/dev/test) | from records (s) | from cache (s) |")
  print("|---|---|---:|---:|")
  for cls, source in sources.items():
    data = cls.load(source=source, data_dir=data_dir)  # prepares the dataset if needed
    os.remove(data.cache_path(data.files_dir))
    start = time.perf_counter()
    data = cls.load(source=source, data_dir=data_dir)
    t_records = time.perf_counter() - start
    start = time.perf_counter()
    data = cls.load(source=source, data_dir=data_dir)
    t_cache = time.perf_counter() - start
    assert data.report["cache"].startswith("loaded from")
    counts = "/".join(f"{data.num_examples(s):,}" for s in ("train", "dev", "test"))
    print(f"| {cls.task} | {counts} | {t_records:.1f} | {t_cache:.2f} |")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--source", default=None,
                      help="IMDB archive or folder (default: the shipped sample)")
  parser.add_argument("--data-dir", default=None, help="where prepared datasets live")
  parser.add_argument("--batch-size", type=int, default=64)
  parser.add_argument("--max-len", type=int, default=256)
  parser.add_argument("--batches", type=int, default=300)
  parser.add_argument("--tfds-batches", type=int, default=20)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--tasks", action="store_true", help="time pipelines.tasks loads instead")
  parser.add_argument("--imdb", help="with --tasks: the IMDB source")
  parser.add_argument("--fra-eng", help="with --tasks: the fra-eng source")
  parser.add_argument("--couplet", help="with --tasks: the couplet source")
  args = parser.parse_args()
  if args.tasks:
    sources = {cls: path for cls, path in ((tasks.SentimentData, args.imdb),
                                           (tasks.TranslationData, args.fra_eng),
                                           (tasks.CoupletData, args.couplet)) if path}
    print(f"machine: {_cpu_name()}")
    time_tasks(sources, args.data_dir)
    return
  batch_size, max_len = args.batch_size, args.max_len
  boundaries = tuple(max_len * k // 4 for k in range(1, 5))

  start = time.perf_counter()
  source = datasets.load("imdb", "train", source=args.source, data_dir=args.data_dir)
  t_open = time.perf_counter() - start
  start = time.perf_counter()
  records = read_records(source)
  t_read = time.perf_counter() - start
  start = time.perf_counter()
  tokens = [imdb_tokenize(r["text"]) for r in records]
  t_tok = time.perf_counter() - start
  start = time.perf_counter()
  vocab = Vocab.build(tokens, min_freq=5)
  ids = [vocab.encode(t[:max_len]) for t in tokens]
  labels = np.array([r["label"] for r in records], dtype=np.int32)
  t_vocab = time.perf_counter() - start
  n = len(ids)
  print(f"IMDB train: {n} reviews, {sum(map(len, ids)):,} ids after truncation to {max_len}, "
        f"vocab {len(vocab):,}")
  print(f"one-off: open/prepare {t_open:.1f} s, read records {t_read:.1f} s, tokenize "
        f"{t_tok:.1f} s, vocab + encode {t_vocab:.1f} s")

  start = time.perf_counter()
  batcher = Batcher({"tokens": ids}, {"label": labels}, boundaries=boundaries,
                    batch_size=batch_size, length_keys={"tokens": "lengths"}, process_index=0,
                    process_count=1)
  t_batcher = time.perf_counter() - start
  rates = {}
  rates["numpy (ours), bucketed"] = _rate(
      lambda r: batcher.train_batches(seed=r), args.batches, args.repeats)

  def plan_dataset(r):
    plan = batcher.epoch_plan(seed=r, epoch=0)
    return iter(grain.MapDataset.source(plan).map(lambda item: batcher.make_batch(*item)))
  rates["grain, bucketed plan"] = _rate(plan_dataset, min(args.batches, len(batcher.epoch_plan(
      0, 0)) - 1), args.repeats)

  def pad_example(i):
    seq = ids[i]
    row = np.zeros(max_len, dtype=np.int32)
    row[:len(seq)] = seq
    return {"tokens": row, "lengths": np.int32(len(seq)), "label": labels[i]}

  def per_example(r):
    ds = grain.MapDataset.range(n).shuffle(seed=r).map(pad_example).batch(batch_size)
    return iter(ds)
  rates["grain, per example (no buckets)"] = _rate(per_example, args.batches, args.repeats)

  def encode_record(record):
    seq = vocab.encode(imdb_tokenize(record["text"])[:max_len])
    row = np.zeros(max_len, dtype=np.int32)
    row[:len(seq)] = seq
    return {"tokens": row, "lengths": np.int32(len(seq)), "label": np.int32(record["label"])}

  def over_tfds(r):
    ds = grain.MapDataset.source(source).shuffle(seed=r).map(encode_record).batch(batch_size)
    return iter(ds)
  rates["grain over tfds source (tokenize each epoch)"] = _rate(
      over_tfds, args.tfds_batches, args.repeats)

  ours = rates["numpy (ours), bucketed"]
  print(f"\nmachine: {_cpu_name()}; batch {batch_size}, max_len {max_len}, buckets {boundaries}; "
        f"Batcher set-up {t_batcher:.2f} s")
  print("| loader | batches/s | relative to ours |")
  print("|---|---:|---:|")
  for name, rate in rates.items():
    print(f"| {name} | {rate:,.0f} | {rate / ours:.3f} |")
  print(f"\nshapes per epoch (ours): {len(batcher.shapes())} padded widths {boundaries}; "
        f"mean padded width over an epoch: "
        f"{np.mean([boundaries[k] for k, _ in batcher.epoch_plan(0, 0)]):.0f}")


if __name__ == "__main__":
  main()
