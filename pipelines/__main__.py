"""Command line: download and prepare the raw datasets and show what is prepared.

    python -m pipelines download imdb|fra_eng|couplet|question_pairs|lcqmc|all [--to DIR]
                                [--data-dir DIR] [--no-verify] [--no-prepare]
    python -m pipelines prepare imdb|fra_eng|couplet|question_pairs|all [--source PATH]
                                [--data-dir DIR] [--download] [--no-verify] [--overwrite]
    python -m pipelines info imdb|fra_eng|couplet|question_pairs|all [--full] [--data-dir DIR]

Without --source (or --download) `prepare` builds the small sample shipped in the package. With
--source PATH it builds the full dataset from an archive, an extracted folder, or a folder holding
the canonical archives (`prepare all --source ../shared/data`). --download fetches the canonical
archive when it is not in <data-dir>/downloads/manual/. The data dir defaults to $ZOO_DATA_DIR or
~/.cache/attention_zoo. Split counts and every skipped or dropped record count are printed.

`download` fetches each canonical archive (pipelines/download.py) into DIR/<dataset folder>/
(default DIR: data), resuming a cut download, checks its size and digest, and prepares it, so that
`python -m experiments train ... --data-dir DIR` reads it (lcqmc, a second source of the
question_pairs builder: `train matching --data-dir DIR/lcqmc`, or DIR when it holds no afqmc/).
Results go to standard output, notes and progress to standard error. Exit status: 0 done, 1 a
download, check or build failed, 2 bad arguments or input (an unknown name, a --source that does
not exist or is not the dataset).
"""

from __future__ import annotations

import argparse
import sys

import tqdm

from pipelines import datasets
from pipelines import download
from pipelines import sources


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m pipelines", description=__doc__.split("\n")[0])
  commands = parser.add_subparsers(dest="command", required=True)
  names = list(datasets.NAMES) + ["all"]

  prep = commands.add_parser("prepare", help="build datasets as array_record files")
  prep.add_argument("name", choices=names)
  prep.add_argument("--source", help="raw data path (archive, folder); omit for the sample")
  prep.add_argument("--data-dir", help="where prepared data lives "
                    "(default $ZOO_DATA_DIR or ~/.cache/attention_zoo)")
  prep.add_argument("--download", action="store_true",
                    help="full data without --source: the manual folder, else the canonical URL")
  prep.add_argument("--no-verify", action="store_true",
                    help="do not check the sha256 of canonical archives")
  prep.add_argument("--overwrite", action="store_true", help="rebuild an existing build")

  fetch = commands.add_parser(
      "download", help="download full datasets from their canonical addresses, check and "
      "prepare them", description="Downloads each dataset's canonical archive into "
      "TO/<dataset folder>/ (resuming a cut download), checks its size and sha256, and prepares "
      "it; then `python -m experiments train ... --data-dir TO` trains on it. $ZOO_DATA_MIRROR "
      "(a base URL) fetches the files from a mirror instead.")
  fetch.add_argument("name", choices=list(sources.CANONICAL) + ["all"])
  fetch.add_argument("--to", default="data", help="the download folder (default: data)")
  fetch.add_argument("--data-dir", help="where prepared data lives "
                     "(default $ZOO_DATA_DIR or ~/.cache/attention_zoo)")
  fetch.add_argument("--no-verify", action="store_true",
                     help="accept a file of another size or digest (another release)")
  fetch.add_argument("--no-prepare", action="store_true", help="download and check only")

  show = commands.add_parser("info", help="show split and skip counts of prepared datasets")
  show.add_argument("name", choices=names)
  show.add_argument("--full", action="store_true", help="the full build instead of the sample")
  show.add_argument("--data-dir")
  return parser


def _progress_bar(name: str):
  """A byte progress bar on standard error, only when it is a terminal (no escape codes in logs)."""
  bar = tqdm.tqdm(desc=name, unit="B", unit_scale=True, disable=not sys.stderr.isatty(),
                  file=sys.stderr)

  def update(done: int, total: int | None) -> None:
    if total is not None and bar.total != total:
      bar.total = total
    bar.update(done - bar.n)
  return bar, update


def _download(args: argparse.Namespace) -> int:
  """`download`: fetch, check and prepare each named dataset; 1 at the first failure."""
  names = list(sources.CANONICAL) if args.name == "all" else [args.name]
  prepared = {}  # builder -> the archive it was prepared from in this call
  for name in names:
    bar, update = _progress_bar(name)
    try:
      with bar:
        path, how = download.fetch(name, args.to, verify=not args.no_verify, progress=update)
      canon = sources.CANONICAL[name]
      if not canon.pinned:
        print(f"note: {name} has no pinned checksum; the file's sha256 is "
              f"{sources.file_digests(path)[0]}", file=sys.stderr)
      print(f"{name}: {path} ({how}, {path.stat().st_size:,} bytes)", flush=True)
      builder = sources.builder_of(name)
      if builder in prepared:  # one full build of a builder per data dir
        print(f"note: {name} is not prepared: this data dir holds one {builder} build, just "
              f"made from {prepared[builder]}; `python -m pipelines download {name} --data-dir "
              "OTHER` prepares it in another", file=sys.stderr)
      elif not args.no_prepare:
        report = datasets.prepare(builder, source=path, data_dir=args.data_dir,
                                  verify=not args.no_verify)
        print("\n".join(report.lines()), flush=True)
        prepared[builder] = path.name
    except (download.DownloadError, ValueError) as exc:
      print(f"error: {exc}", file=sys.stderr)
      return 1
  print(f"train on it with: python -m experiments train EXPERIMENT --data-dir {args.to}",
        file=sys.stderr)
  return 0


def main(argv: list[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  if args.command == "download":
    return _download(args)
  names = datasets.NAMES if args.name == "all" else (args.name,)
  try:
    for name in names:
      if args.command == "prepare":
        report = datasets.prepare(name, source=args.source, data_dir=args.data_dir,
                                  download=args.download, verify=not args.no_verify,
                                  overwrite=args.overwrite)
      else:
        report = datasets.info(name, full=args.full, data_dir=args.data_dir)
        if report is None:
          config = "full" if args.full else "sample"
          print(f"{name} ({config}): not prepared in "
                f"{datasets.builder(name, data_dir=args.data_dir, full=args.full).data_dir_root}; "
                f"run: python -m pipelines prepare {name}"
                + (" --source PATH" if args.full else ""))
          continue
      print("\n".join(report.lines(timing=args.command == "prepare")), flush=True)
  except ValueError as exc:  # SourceError and argument errors: a message, not a traceback
    print(f"error: {exc}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
