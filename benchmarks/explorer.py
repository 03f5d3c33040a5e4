"""Latency of the attention explorer: one answer with all its attention, through the HTTP API.

    python -m benchmarks.explorer --workdir runs/quickstart \
        --workdir runs/translation-transformer_cpu [--repeats 15] [--browser] \
        [--out docs/BENCHMARKS.md]

Serves the runs as `python -m experiments serve` does (experiments/explorer/app.py's app, under
uvicorn, on a free port of 127.0.0.1, in a thread of this process) and times POST
/api/runs/{id}/answer from a plain HTTP client: the request, the model's answer and every attention
map, the JSON encoding and decoding of the response; with the weights as float32 bytes
(`weights_format` float32, as the page asks for them) and, for comparison, as nested lists. Each run
gets its experiment's input: a sentiment run the first review of the shipped IMDB sample's test
split with 220 to 240 words (near IMDB's median review length), a translation or couplet run a fixed
sentence (20 English words, beam 4 / a 7-character upper line, beam 4), a matching run a fixed pair.
After `--warmup` calls (the first compiles the model for that input's shapes), `--repeats` timed
calls of each run are made round-robin over the runs, so a change in the load of a shared machine
hits them alike; the figures are the median and the spread (fastest, 90th percentile, slowest).
Beside them, the median of the same answer computed in-process (service.Explorer.answer, no HTTP),
so what the web layer adds can be read off. With --browser, also the page itself in headless
Chromium (Playwright driving the system's browser, as tests/explorer/test_browser.py does): the
seconds from a click on Answer to the heatmap drawn.

The goal (issue 35): under 1 s an answer on a 2-core CPU after warm-up. Not asserted anywhere:
written as the 'explorer' block of docs/BENCHMARKS.md (--out '' prints it only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import sys
import tarfile
import textwrap
import threading
import time
import urllib.request
from typing import Any

from benchmarks import common
from benchmarks import report
from pipelines import text as text_lib

IMDB_SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "pipelines", "samples", "imdb_sample.tar.gz")
SENTENCE_20_WORDS = ("When the rain finally stopped, my grandmother walked slowly to the old "
                     "market to buy fresh bread and some cheese.")
UPPER_LINE = "春风得意马蹄疾"
PAIR = {"a": "花呗怎么还款", "b": "花呗如何还钱"}
BEAM = 4
FORMATS = ("float32", "lists")  # the page's weights_format first, then the API's default
CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def sample_review(low: int = 220, high: int = 240) -> str:
  """The first review (by file name) of the shipped IMDB sample's test split of `low` to `high`
  words (separated by spaces; the task's tokens, punctuation included, are more)."""
  with tarfile.open(IMDB_SAMPLE, "r:gz") as archive:
    members = sorted((m for m in archive.getmembers()
                      if m.isfile() and "/test/" in m.name and m.name.endswith(".txt")),
                     key=lambda m: m.name)
    for member in members:
      text = archive.extractfile(member).read().decode("utf-8")
      if low <= len(text.split()) <= high:
        return text
  raise ValueError(f"no review of {low} to {high} words in {IMDB_SAMPLE}")


def request_for(run: dict[str, Any]) -> tuple[dict[str, Any], str]:
  """The answer request for one run (as /api/runs lists it) and a description of its input."""
  experiment = run["experiment"]
  if experiment == "sentiment":
    review = sample_review()
    return {"input": review}, (f"IMDB review, {len(review.split())} words "
                               f"({len(text_lib.imdb_tokenize(review))} tokens)")
  if experiment == "translation":
    return ({"input": SENTENCE_20_WORDS, "options": {"beam_size": BEAM}},
            f"{len(SENTENCE_20_WORDS.split())} words, beam {BEAM}")
  if experiment == "couplet":
    return ({"input": UPPER_LINE, "options": {"beam_size": BEAM}},
            f"{len(UPPER_LINE)} characters, beam {BEAM}")
  if experiment == "matching":
    return {"input": PAIR}, "a question pair"
  raise ValueError(f"no benchmark input for the {experiment!r} experiment")


class Server:
  """The explorer's app served by uvicorn on a free local port, in a daemon thread."""

  def __init__(self, app):
    import uvicorn  # pylint: disable=g-import-not-at-top
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      self.port = s.getsockname()[1]
    self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                log_level="warning"))
    self.thread = threading.Thread(target=self.server.run, daemon=True)

  def __enter__(self) -> "Server":
    self.thread.start()
    deadline = time.monotonic() + 60
    while not self.server.started:
      if time.monotonic() > deadline or not self.thread.is_alive():
        raise RuntimeError("the explorer's server did not start")
      time.sleep(0.05)
    return self

  def __exit__(self, *exc) -> None:
    self.server.should_exit = True
    self.thread.join(timeout=30)

  def post(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """POSTs JSON; returns the decoded answer and its size in bytes (an error raises)."""
    request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
      raw = response.read()
    return json.loads(raw), len(raw)


def percentile(values: list[float], q: float) -> float:
  """The q-th percentile (0..100) by the nearest rank."""
  ordered = sorted(values)
  return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def measure(workdirs: list[str], warmup: int, repeats: int, browser: bool = False
            ) -> dict[str, Any]:
  """Times every run's answer over HTTP (weights as float32 bytes, as the page asks, and as
  nested lists, the API's default), in-process, and (with `browser`) on the page in headless
  Chromium; returns the rows of the table."""
  from experiments.explorer import app as app_lib  # pylint: disable=g-import-not-at-top
  from experiments.explorer import service  # pylint: disable=g-import-not-at-top
  load_before = os.getloadavg()
  explorer = service.Explorer(workdirs)
  cases = []
  for run in explorer.describe():
    body, described = request_for(run)
    cases.append({"run": run, "body": body, "input": described, "bytes": {},
                  "times": {form: [] for form in (*FORMATS, "direct")}})
  with Server(app_lib.create_app(explorer)) as server:
    for case in cases:
      path = f"/api/runs/{case['run']['id']}/answer"
      for form in FORMATS:
        for _ in range(warmup):
          answer, case["bytes"][form] = server.post(path, {**case["body"],
                                                           "weights_format": form})
      case["shape"] = answer_shape(answer)
    for repeat in range(repeats):
      for case in cases[repeat % len(cases):] + cases[:repeat % len(cases)]:
        path = f"/api/runs/{case['run']['id']}/answer"
        for form in FORMATS:
          start = time.perf_counter()
          server.post(path, {**case["body"], "weights_format": form})
          case["times"][form].append(time.perf_counter() - start)
        start = time.perf_counter()
        explorer.answer(case["run"]["id"], case["body"]["input"], case["body"].get("options"),
                        FORMATS[0])
        case["times"]["direct"].append(time.perf_counter() - start)
    if browser:
      for case, seconds_each in zip(cases, page_times(server.port, cases, warmup, repeats)):
        case["times"]["browser"] = seconds_each
  rows = []
  for case in cases:
    run, times, page = case["run"], case["times"], case["times"][FORMATS[0]]
    rows.append({"workdir": run["workdir"], "experiment": run["experiment"],
                 "model": run["model"], "input": case["input"], "shape": case["shape"],
                 "bytes": case["bytes"][FORMATS[0]], "bytes_lists": case["bytes"]["lists"],
                 "median_s": statistics.median(page), "min_s": min(page),
                 "p90_s": percentile(page, 90), "max_s": max(page),
                 "lists_median_s": statistics.median(times["lists"]),
                 "direct_median_s": statistics.median(times["direct"]), "repeats": len(page),
                 "browser_median_s": (statistics.median(times["browser"])
                                      if times.get("browser") else None)})
  return {"machine": common.machine(), "load_before": [round(v, 2) for v in load_before],
          "load_after": [round(v, 2) for v in os.getloadavg()], "warmup": warmup,
          "repeats": repeats, "rows": rows}


def page_times(port: int, cases: list[dict[str, Any]], warmup: int, repeats: int
               ) -> list[list[float]]:
  """Seconds from a click on Answer to the drawn heatmap, on the explorer's page in headless
  Chromium (Playwright, the system's browser), per case: after `warmup` clicks, `repeats`."""
  from playwright.sync_api import sync_playwright  # pylint: disable=g-import-not-at-top
  out = []
  with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"http://127.0.0.1:{port}/")
    page.wait_for_selector("body[data-ready]")
    for case in cases:
      page.select_option("#run-select-0", case["run"]["id"])
      value = case["body"]["input"]
      if isinstance(value, dict):
        page.fill("#input-a", value["a"])
        page.fill("#input-b", value["b"])
      else:
        page.fill("#input-text", value)
      for name, option in (case["body"].get("options") or {}).items():
        page.fill(f"#option-0-{name}", str(option))
      seconds_each = []
      for _ in range(warmup + repeats):
        before = page.get_attribute("body", "data-answered")
        start = time.perf_counter()
        page.click("#submit")
        page.wait_for_function("b => document.body.dataset.answered && "
                               "document.body.dataset.answered !== b", arg=before,
                               timeout=600_000)
        seconds_each.append(time.perf_counter() - start)
      errors = page.inner_text("#messages").strip()
      if errors:
        raise RuntimeError(f"the page showed an error for run {case['run']['id']}: {errors}")
      out.append(seconds_each[warmup:])
    browser.close()
  return out


def answer_shape(answer: dict[str, Any]) -> str:
  """The attention of an answer in a few words: each map's name and (L, H, Q, K)."""
  maps = answer.get("attention", [])
  return "; ".join(f"{m['name']} {m['layers']}x{m['heads']}x{len(m['query_tokens'])}x"
                   f"{len(m['key_tokens'])}" for m in maps)


def kilobytes(size: int | None) -> str:
  return "n/a" if size is None else f"{size / 1e3:,.0f} kB"


def seconds(value: float | None) -> str:
  return "n/a" if value is None else f"{value:.3f} s"


def markdown(results: dict[str, Any], command: str, note: str = "") -> str:
  """The 'explorer' block of docs/BENCHMARKS.md (`note`: paragraphs added below the table)."""
  machine = results["machine"]
  before = ", ".join(str(v) for v in results["load_before"])
  after = ", ".join(str(v) for v in results["load_after"])
  command_line = f"Command: `{command}`."
  in_browser = any(r.get("browser_median_s") is not None for r in results["rows"])
  setting = (
      f"Machine: {machine['cpu']} (`lscpu` model name), {machine['cores']} cores, CPU only (JAX "
      f"{machine['jax']}); {machine['date']}. Load average (1, 5, 15 min) {before} before and "
      f"{after} after the measurement (the server, the client and Chromium share the cores).")
  method = (
      "Each figure: POST /api/runs/{id}/answer to the explorer's server (uvicorn on 127.0.0.1) "
      "from a plain HTTP client, the response's JSON read back, with the weights as float32 "
      "bytes (`weights_format` float32, what the page asks for); beside it the median with "
      f"them as nested lists (the API's default). After {results['warmup']} warm-up calls of "
      f"each (the first compiles), {results['repeats']} calls per run and form, round-robin over "
      "the runs. In-process: the same answer from `service.Explorer.answer`, without HTTP. "
      + ("Chromium (`--browser`): on the page in headless Chromium, from the click on Answer to "
         "the heatmap drawn (the weights decoded, the average of heads, the canvas), the same "
         "warm-up and repeats. " if in_browser else "") + "Goal (issue 35): under 1 s.")
  lines = ["## The attention explorer: one answer with its attention", "", command_line, "",
           textwrap.fill(setting, 100), "", textwrap.fill(method, 100), ""]
  header = ["run", "input", "attention (layers x heads x Q x K)", "response (float32 / lists)",
            "median", "fastest / p90 / slowest", "median, lists", "in-process median"]
  rows = [[f"{r['experiment']} `{r['model']}` ({r['workdir']})", r["input"], r["shape"],
           f"{kilobytes(r['bytes'])} / {kilobytes(r.get('bytes_lists'))}",
           f"{r['median_s']:.3f} s", f"{r['min_s']:.3f} / {r['p90_s']:.3f} / {r['max_s']:.3f} s",
           seconds(r.get("lists_median_s")), f"{r['direct_median_s']:.3f} s"]
          for r in results["rows"]]
  if in_browser:
    header.append("Chromium: click to drawn, median")
    for row, r in zip(rows, results["rows"]):
      row.append(seconds(r.get("browser_median_s")))
  lines.append(report.table(header, rows, align="llll" + "r" * (len(header) - 4)))
  for paragraph in note.split("\n\n") if note else []:
    lines += ["", textwrap.fill(" ".join(paragraph.split()), 100, break_on_hyphens=False)]
  return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.explorer",
                                   description=__doc__.split("\n")[0])
  parser.add_argument("--workdir", action="append", required=True, metavar="RUN",
                      help="a trained run to serve (repeat for several)")
  parser.add_argument("--warmup", type=int, default=3, help="untimed calls per run first")
  parser.add_argument("--repeats", type=int, default=15, help="timed calls per run")
  parser.add_argument("--out", default="docs/BENCHMARKS.md",
                      help="markdown file whose 'explorer' block to write ('' to print only)")
  parser.add_argument("--browser", action="store_true",
                      help="also time the page in headless Chromium (needs playwright and "
                           f"{CHROMIUM}; EXPLORER_CHROMIUM names another)")
  parser.add_argument("--json", default=None, help="also write the results as JSON here")
  parser.add_argument("--from-json", default=None,
                      help="render the markdown from results saved by --json (no measuring)")
  parser.add_argument("--note", default="",
                      help="paragraphs (blank-line separated) added below the table")
  return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
  args = parse_args(argv)
  if args.warmup < 1 or args.repeats < 1:
    raise SystemExit("--warmup and --repeats must be >= 1")
  if args.from_json:
    with open(args.from_json, encoding="utf-8") as f:
      results = json.load(f)
  else:
    results = measure(args.workdir, args.warmup, args.repeats, args.browser)
  command = " ".join(["python -m benchmarks.explorer", *(f"--workdir {w}" for w in args.workdir),
                      *([f"--warmup {results['warmup']}"] if results["warmup"] != 3 else []),
                      *([f"--repeats {results['repeats']}"] if results["repeats"] != 15 else []),
                      *(["--browser"] if any(r.get("browser_median_s") is not None
                                             for r in results["rows"]) else [])])
  text = markdown(results, command, args.note)
  print(text)
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=1)
  if args.out:
    report.update_markdown(args.out, "explorer", text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
