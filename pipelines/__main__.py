"""Command line: prepare the raw datasets and show what is prepared.

    python -m pipelines prepare imdb|fra_eng|couplet|question_pairs|all [--source PATH]
                                [--data-dir DIR] [--download] [--no-verify] [--overwrite]
    python -m pipelines info imdb|fra_eng|couplet|question_pairs|all [--full] [--data-dir DIR]

Without --source (or --download) `prepare` builds the small sample shipped in the package. With
--source PATH it builds the full dataset from an archive, an extracted folder, or a folder holding
the canonical archives (`prepare all --source ../shared/data`). --download fetches the canonical
archive when it is not in <data-dir>/downloads/manual/. The data dir defaults to $ZOO_DATA_DIR or
~/.cache/attention_zoo. Split counts and every skipped or dropped record count are printed.
"""

from __future__ import annotations

import argparse
import sys

from pipelines import datasets


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

  show = commands.add_parser("info", help="show split and skip counts of prepared datasets")
  show.add_argument("name", choices=names)
  show.add_argument("--full", action="store_true", help="the full build instead of the sample")
  show.add_argument("--data-dir")
  return parser


def main(argv: list[str] | None = None) -> int:
  args = _parser().parse_args(argv)
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
