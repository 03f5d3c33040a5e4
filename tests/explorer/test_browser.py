"""The explorer's page in a real browser: headless Chromium (Debian's `chromium`) driven by
Playwright for Python, over `python -m experiments serve` on a tiny sentiment Transformer and a
tiny pooling run.

The test types a review, reads the answer, switches layer and head, and checks that what the page
draws is what the command line gives for the same input: the lines `predict sentiment --weights`
prints, the word weights it prints (the last layer's average of heads, averaged over the query
words, to its 4 decimals), and every layer's and head's weights of the model itself; the hover
text is Python's '{:.4f}' of the drawn weight; the PNG and JSON downloads hold that picture and
those weights. Then an empty input (an error shown on the page, which goes on answering), the
pooling run side by side with the first (its lines, and its one row of weights printed as the command line prints them, digit
for digit), the same weights sent as nested lists instead of the float32 bytes the page asks for,
and one computation on the zoo tab, checked against numpy; the page fetched nothing from anywhere
but the server. A screenshot of each tab is saved under test-artifacts/explorer/ (gitignored), or
$EXPLORER_ARTIFACTS.

Without the `playwright` package or a Chromium the test is skipped with the reason; with
EXPLORER_BROWSER_REQUIRED=1 (set by .ci/run) it fails instead. `playwright install` is never
needed: the test drives the system's Chromium (EXPLORER_CHROMIUM, default /usr/bin/chromium).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from experiments import cli
from experiments import runs
from experiments.console import ListConsole

CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REVIEW = "this great science fiction film is really awesome , but the ending is dull"
WAIT_MS = 120_000  # a first answer compiles the model on a loaded 2-core machine


def missing_browser() -> str | None:
  """Why the browser test cannot run here, or None when it can."""
  try:
    import playwright.sync_api  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return ("the `playwright` Python package is not installed (bash scripts/setup.sh installs "
            "it with the test extras)")
  if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
    return (f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium fonts-noto-cjk; "
            "or set EXPLORER_CHROMIUM)")
  return None


def require_browser() -> None:
  """Skips the test when the browser is missing, or fails it where it is required (CI)."""
  reason = missing_browser()
  if reason is None:
    return
  if os.environ.get("EXPLORER_BROWSER_REQUIRED") == "1":
    pytest.fail(f"EXPLORER_BROWSER_REQUIRED=1 but {reason}")
  pytest.skip(f"browser test skipped: {reason}")


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def start_server(workdirs: list[str], log_path: str) -> tuple[subprocess.Popen, str]:
  """`python -m experiments serve --workdir W ...` on a free local port; waits for
  /api/health. Returns the process and the base address."""
  port = free_port()
  log = open(log_path, "w", encoding="utf-8")  # pylint: disable=consider-using-with
  flags = [word for workdir in workdirs for word in ("--workdir", workdir)]
  process = subprocess.Popen(
      [sys.executable, "-m", "experiments", "serve", *flags, "--host", "127.0.0.1", "--port",
       str(port)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
  base = f"http://127.0.0.1:{port}"
  deadline = time.monotonic() + 180
  while time.monotonic() < deadline:
    if process.poll() is not None:
      log.close()
      with open(log_path, encoding="utf-8") as f:
        pytest.fail(f"`serve` exited with {process.returncode}:\n{f.read()}")
    try:
      with urllib.request.urlopen(f"{base}/api/health", timeout=2) as response:
        if json.load(response) == {"ok": True}:
          return process, base
    except OSError:
      time.sleep(0.25)
  process.kill()
  pytest.fail(f"`serve` did not answer /api/health within 180 s (log: {log_path})")


def artifacts_dir() -> str:
  path = os.environ.get("EXPLORER_ARTIFACTS") or os.path.join(REPO, "test-artifacts", "explorer")
  os.makedirs(path, exist_ok=True)
  return path


def command_line(workdir: str, text: str) -> list[str]:
  """The lines `python -m experiments predict sentiment --weights --workdir W TEXT` prints
  (in-process): what the explorer shows for a model with attention."""
  console = ListConsole()
  assert cli.main(["predict", "sentiment", "--weights", "--workdir", workdir, text],
                  console=console) == 0
  return list(console.lines)


def model_maps(workdir: str, text: str) -> dict[str, np.ndarray]:
  """The model's own attention for `text`: name -> (layers, H, n, n), loaded as `predict`
  loads the run."""
  run = runs.load_run(workdir, "best")
  prediction = run.task.predict(run.params, [text])[0]
  return {name: np.asarray(w) for name, w in
          run.task.attention_maps(run.params, prediction).items()}


def drawn(page, index: int = 0) -> dict:
  """What heatmap `index` draws: its matrix, tokens, layer, head and cell geometry."""
  canvas = page.locator(f"#heatmap-{index}")
  return {"weights": np.asarray(json.loads(canvas.get_attribute("data-weights"))),
          "queries": json.loads(canvas.get_attribute("data-query-tokens")),
          "keys": json.loads(canvas.get_attribute("data-key-tokens")),
          "layer": canvas.get_attribute("data-layer"), "head": canvas.get_attribute("data-head"),
          "cell": float(canvas.get_attribute("data-cell")),
          "x": float(canvas.get_attribute("data-origin-x")),
          "y": float(canvas.get_attribute("data-origin-y"))}


def answer(page, text: str) -> None:
  """Types `text`, presses Answer and waits for the page to finish the request."""
  before = page.get_attribute("body", "data-answered")
  page.fill("#input-text", text)
  page.click("#submit")
  page.wait_for_function(
      "before => document.body.dataset.answered && document.body.dataset.answered !== before",
      arg=before, timeout=WAIT_MS)


@pytest.mark.slow
def test_page_shows_the_command_lines_weights(request, tmp_path):
  require_browser()
  from playwright.sync_api import sync_playwright  # pylint: disable=g-import-not-at-top
  tiny = request.getfixturevalue("tiny_runs")
  workdir, pooling = tiny["sentiment_transformer"], tiny["sentiment_pooling"]
  expected_lines = command_line(workdir, REVIEW)
  words = [line.split()[0] for line in expected_lines[1:]]
  cli_weights = [line.split()[1] for line in expected_lines[1:]]  # '0.1234' strings
  maps = model_maps(workdir, REVIEW)
  layers, heads = maps["self_attention"].shape[:2]
  assert layers >= 2 and heads >= 2, "the tiny run must have layers and heads to switch"
  shots = artifacts_dir()
  server, base = start_server([workdir, pooling], str(tmp_path / "serve.log"))
  try:
    with sync_playwright() as playwright:
      browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
      page = browser.new_page(viewport={"width": 1280, "height": 800})
      page_errors: list[str] = []
      page.on("pageerror", lambda error: page_errors.append(str(error)))
      requested: list[str] = []
      page.on("request", lambda r: requested.append(r.url))
      page.goto(base + "/")
      page.wait_for_selector("body[data-ready]")
      assert page.locator("#run-select-0 option").count() == 2

      # The answer, as the command line prints it.
      answer(page, REVIEW)
      assert page.inner_text("#messages").strip() == ""
      assert page.inner_text("#cli-lines-0").split("\n") == expected_lines
      label, probability = expected_lines[0].split("\t")[:2]
      assert page.inner_text("[data-testid=verdict]").lower().startswith(label)
      assert probability in page.inner_text("[data-testid=verdict]")

      # The last layer's average of heads: its column means are the printed word weights.
      page.select_option("#map-select-0", label="self_attention (self)")
      page.select_option("#layer-select-0", str(layers - 1))
      page.select_option("#head-select-0", "mean")
      shown = drawn(page)
      assert shown["queries"] == words and shown["keys"] == words  # no padding drawn
      np.testing.assert_allclose(shown["weights"].sum(axis=1), 1.0, atol=1e-5)
      page_words = shown["weights"].mean(axis=0)
      for word, printed, value in zip(words, cli_weights, page_words):
        assert abs(value - float(printed)) <= 0.5e-4 + 1e-6, (word, printed, value)

      # Every layer and head: the drawn matrix is the model's, and hover names it exactly.
      for layer in range(layers):
        page.select_option("#layer-select-0", str(layer))
        for head in range(heads):
          page.select_option("#head-select-0", str(head))
          shown = drawn(page)
          assert (shown["layer"], shown["head"]) == (str(layer), str(head))
          np.testing.assert_array_equal(shown["weights"],
                                        maps["self_attention"][layer, head].astype(np.float64))
          q, k = len(words) - 1, 1
          page.locator("#heatmap-0").hover(position={
              "x": shown["x"] + (k + 0.5) * shown["cell"],
              "y": shown["y"] + (q + 0.5) * shown["cell"]})
          readout = page.inner_text("#readout-0")
          assert f'"{words[q]}"' in readout and f'"{words[k]}"' in readout
          assert f": {shown['weights'][q, k]:.4f} " in readout, readout
      page.screenshot(path=os.path.join(shots, "runs.png"), full_page=True)

      # The downloads: the picture as PNG, the shown weights (and the whole map) as JSON.
      with page.expect_download() as download:
        page.click("#download-png-0")
      with open(download.value.path(), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
      with page.expect_download() as download:
        page.click("#download-json-0")
      with open(download.value.path(), encoding="utf-8") as f:
        saved = json.load(f)
      assert saved["shown"]["layer"] == layers - 1 and saved["shown"]["head"] == heads - 1
      np.testing.assert_array_equal(saved["shown"]["weights"], shown["weights"])
      assert saved["input"] == REVIEW and saved["map"]["key_tokens"] == words

      # An empty input: a message on the page, and the page still answers afterwards.
      page.fill("#input-text", "   ")
      page.click("#submit")
      page.wait_for_selector("[data-testid=message]", timeout=WAIT_MS)
      assert "input" in page.inner_text("#messages").lower()
      answer(page, "a dull film")
      assert page.inner_text("#messages").strip() == ""
      assert page.inner_text("#cli-lines-0").split("\n") == command_line(workdir, "a dull film")

      # Side by side: the pooling run beside the Transformer; its one row is the printed weights.
      page.check("#compare-toggle")
      page.select_option("#run-select-1", "1")
      answer(page, REVIEW)
      pooled_lines = command_line(pooling, REVIEW)
      assert page.inner_text("#cli-lines-0").split("\n") == expected_lines
      assert page.inner_text("#cli-lines-1").split("\n") == pooled_lines
      row = drawn(page, 1)["weights"]
      assert row.shape == (1, len(words))
      assert [f"{w:.4f}" for w in row[0]] == [line.split()[1] for line in pooled_lines[1:]]
      page.screenshot(path=os.path.join(shots, "compare.png"), full_page=True)

      # The page asks for float32 bytes; weights sent as nested lists draw the same numbers.
      assert json.loads(page.evaluate("JSON.stringify(window.explorerState.panels[0].request)"))[
          "weights_format"] == "float32"
      recoded: list[str] = []
      page.route("**/api/runs/*/answer", lambda route: as_nested_lists(route, recoded))
      page.uncheck("#compare-toggle")
      answer(page, REVIEW)
      page.select_option("#layer-select-0", "0")
      page.select_option("#head-select-0", "1")
      np.testing.assert_array_equal(drawn(page)["weights"], maps["self_attention"][0, 1])
      assert recoded == ["self_attention"]
      page.unroute("**/api/runs/*/answer")

      check_zoo_tab(page, os.path.join(shots, "zoo.png"))
      assert not page_errors, page_errors
      elsewhere = [url for url in requested
                   if not url.startswith((base + "/", "data:", "blob:"))]
      assert not elsewhere, f"the page fetched from elsewhere: {elsewhere}"  # works offline
      browser.close()
  finally:
    server.terminate()
    server.wait(timeout=30)


def as_nested_lists(route, recoded: list[str]) -> None:
  """Answers a request with the server's answer, every map's weights that came as float32
  bytes ({"dtype": "float32", "shape": [L, H, Q, K], "base64": ...}, what the page asks for)
  re-sent as nested lists (the API's default form); their names are added to `recoded`."""
  response = route.fetch()
  body = response.json()
  for item in body.get("attention", []):
    weights = item["weights"]
    if isinstance(weights, dict):
      values = np.frombuffer(base64.b64decode(weights["base64"]), "<f4")
      item["weights"] = values.reshape(weights["shape"]).astype(np.float64).tolist()
      recoded.append(item["name"])
  route.fulfill(response=response, json=body)


def check_zoo_tab(page, screenshot: str) -> None:
  """The zoo tab: the dot score's masked softmax of typed matrices, against numpy."""
  queries = np.array([[1.0, 0.5, -1.0], [0.0, 2.0, 1.0]])
  keys = np.array([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0],
                   [2.0, 0.0, -1.0]])
  values = np.arange(10.0).reshape(5, 2)
  valid_len = 3
  page.click("#tab-zoo")
  page.select_option("#zoo-score", "dot")
  page.fill("#zoo-queries", "\n".join(" ".join(str(v) for v in row) for row in queries))
  page.fill("#zoo-keys", "\n".join(", ".join(str(v) for v in row) for row in keys))
  page.fill("#zoo-values", "\n".join(" ".join(str(v) for v in row) for row in values))
  page.fill("#zoo-valid-len", str(valid_len))
  page.click("#zoo-run")
  page.wait_for_selector("#zoo-heatmap[data-weights]", timeout=WAIT_MS)
  scores = queries @ keys.T  # (Q, K)
  exp = np.exp(scores[:, :valid_len] - scores[:, :valid_len].max(axis=1, keepdims=True))
  weights = np.zeros_like(scores)
  weights[:, :valid_len] = exp / exp.sum(axis=1, keepdims=True)
  shown = np.asarray(json.loads(page.get_attribute("#zoo-heatmap", "data-weights")))
  np.testing.assert_allclose(shown, weights, atol=1e-6)
  cells = page.locator("[data-testid=zoo-weights-table] td")
  assert cells.all_inner_texts() == [f"{w:.4f}" for w in weights.ravel()]
  outputs = page.locator("[data-testid=zoo-output-table] td")
  np.testing.assert_allclose([float(t) for t in outputs.all_inner_texts()],
                             (weights @ values).ravel(), atol=1e-4)
  page.screenshot(path=screenshot, full_page=True)
