"""Time to prepare each dataset at full size (raw archive -> array_record), with count checks.

    python benchmarks/bench_prepare.py --source ../shared/data [--names imdb fra_eng couplet ...]
        [--json runs/benchmarks/bench_prepare.json] [--data-dir DIR]

For each dataset, one at a time (the machine is shared), in a fresh data dir:
  1. raw read: decompress and read every file of the archive (sources.read_files), the reference;
  2. read + check: the builder's dry run (parse, UTF-8, layout and pair checks, split assignment);
  3. prepare: `pipelines.datasets.prepare` from scratch (all of the above plus the tfds array_record
     writing and shuffling).
Each is run once (a full prepare takes up to minutes); `prepare / raw read` is the ratio that
stays meaningful when the shared machine's load changes, and the CPU seconds of the prepare
(process time, all threads) move much less with the load than its wall time. Afterwards the counts are checked against
../shared/data/README.md and the splits are checked to be disjoint by English sentence / upper line
/ question pair on the prepared data. Writes a JSON file and prints a markdown table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipelines import datasets, sources  # noqa: E402
from pipelines.builders import _common  # noqa: E402
from pipelines.builders import question_pairs  # noqa: E402

# From ../shared/data/README.md. question_pairs: AFQMC's labelled train.json pairs, carved into
# train / validation / test, and its test.json pairs, the 'unlabelled' split.
EXPECTED = {
    "imdb": {"train": 25_000, "test": 25_000, "unsupervised": 50_000},
    "fra_eng": {"total": 162_810},
    "couplet": {"total": 702_204},
    "question_pairs": {"labelled": 34_334, "unlabelled": 3_861},
}
_text = lambda record, field: record[field].decode("utf-8")
# The key that must not appear in two splits (the builders' grouping), and the splits it covers.
GROUP_KEY = {
    "fra_eng": (lambda r: _common.group_key(_text(r, "en")), ("train", "validation", "test")),
    "couplet": (lambda r: _common.group_key(_text(r, "upper")), ("train", "validation", "test")),
    "question_pairs": (lambda r: question_pairs.pair_key(_text(r, "sentence1"),
                                                         _text(r, "sentence2")),
                       ("train", "validation", "test")),
}


def machine() -> dict:
  model = "unknown"
  try:
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
      if line.startswith("Model name:"):
        model = line.split(":", 1)[1].strip()
  except OSError:
    pass
  return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
          "load_average_1min": os.getloadavg()[0]}


def check(name: str, report: datasets.PrepareReport, data_dir: Path) -> list[str]:
  """Compares the counts with the README and checks the grouping; returns the problems found."""
  problems = []
  expected = EXPECTED[name]
  dropped = sum(report.skipped.values())
  if "total" in expected:
    total = sum(report.splits.values())
    if total + dropped != expected["total"]:
      problems.append(f"{total:,} kept + {dropped:,} skipped != {expected['total']:,}")
  elif "labelled" in expected:
    labelled = sum(n for split, n in report.splits.items() if split != "unlabelled")
    if labelled + dropped != expected["labelled"]:
      problems.append(f"{labelled:,} labelled kept + {dropped:,} skipped != "
                      f"{expected['labelled']:,}")
    if report.splits.get("unlabelled") != expected["unlabelled"]:
      problems.append(f"unlabelled {report.splits.get('unlabelled')} != "
                      f"{expected['unlabelled']:,}")
  elif report.splits != expected:
    problems.append(f"splits {report.splits} != {expected}")
  if name in GROUP_KEY:
    key, split_names = GROUP_KEY[name]
    b = datasets.builder(name, data_dir=data_dir, full=True)
    seen = {}
    for split in split_names:
      ds = b.as_data_source(split)
      seen[split] = {key(r) for r in ds.__getitems__(list(range(len(ds))))}
    for i, a in enumerate(seen):
      for b_split in list(seen)[i + 1:]:
        shared = len(seen[a] & seen[b_split])
        if shared:
          problems.append(f"{shared} grouping keys in both {a} and {b_split}")
  return problems


def bench(name: str, source: Path, data_dir: Path) -> dict:
  path = sources.resolve(name, source, data_dir=data_dir)
  start = time.perf_counter()
  raw = sources.read_files(path, lambda rel: True)
  raw_s = time.perf_counter() - start
  raw_bytes = sum(len(v) for v in raw.values())
  del raw
  start = time.perf_counter()
  splits, _, _ = datasets.builder(name, source=source, data_dir=data_dir).read_source(path)
  read_s = time.perf_counter() - start
  del splits
  cpu_start = time.process_time()
  report = datasets.prepare(name, source=source, data_dir=data_dir)
  prepare_cpu_s = time.process_time() - cpu_start
  problems = check(name, report, data_dir)
  records = sum(report.splits.values())
  return {
      "name": name, "source": str(path), "raw_bytes": raw_bytes, "splits": report.splits,
      "skipped": report.skipped, "records": records, "raw_read_s": raw_s,
      "read_check_s": read_s, "prepare_s": report.seconds, "prepare_cpu_s": prepare_cpu_s,
      "records_per_s": records / report.seconds, "prepare_over_raw": report.seconds / raw_s,
      "checks": problems or "ok",
  }


def table(rows: list[dict]) -> str:
  lines = ["| dataset | records (splits) | skipped | raw read s | read + check s | prepare s "
           "| prepare CPU s | records/s | prepare / raw read | checks |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
  for r in rows:
    splits = " / ".join(f"{n:,}" for n in r["splits"].values())
    lines.append(
        f"| {r['name']} | {r['records']:,} ({splits}) | {sum(r['skipped'].values()):,} "
        f"| {r['raw_read_s']:.1f} | {r['read_check_s']:.1f} | {r['prepare_s']:.1f} "
        f"| {r['prepare_cpu_s']:.1f} | {r['records_per_s']:,.0f} | {r['prepare_over_raw']:.1f} "
        f"| {r['checks'] if isinstance(r['checks'], str) else '; '.join(r['checks'])} |")
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--source", type=Path, default=REPO.parent / "shared" / "data",
                      help="a folder holding imdb/, fra-eng/, couplet/ archives")
  parser.add_argument("--names", nargs="+", default=list(datasets.NAMES),
                      choices=list(datasets.NAMES))
  parser.add_argument("--data-dir", type=Path, help="keep the builds here (must not hold them "
                      "yet); default: a temporary folder, removed afterwards")
  parser.add_argument("--json", type=Path, default=REPO / "runs" / "benchmarks" /
                      "bench_prepare.json")
  args = parser.parse_args(argv)
  data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="bench_prepare_"))
  rows = []
  try:
    for name in args.names:  # one at a time: the machine is shared
      rows.append(bench(name, args.source, data_dir))
      print(f"{name}: {rows[-1]['prepare_s']:.1f} s, checks {rows[-1]['checks']}", flush=True)
  finally:
    if args.data_dir is None:
      shutil.rmtree(data_dir, ignore_errors=True)
  result = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]), "rows": rows}
  args.json.parent.mkdir(parents=True, exist_ok=True)
  args.json.write_text(json.dumps(result, indent=2))
  print(f"machine: {result['machine']}")
  print(table(rows))
  return 0 if all(r["checks"] == "ok" for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
