"""Measures the figures of docs/RELIABILITY.md's bounded-inputs section (run by hand, not a test).

    .venv/bin/python tests/reliability/bounded_probe.py inputs [--gigabyte] [--pipe-seconds 60]
    .venv/bin/python tests/reliability/bounded_probe.py server [--stalled 100]

`inputs`: `predict sentiment --input-file /dev/zero` (exit status, seconds, peak memory); a
million-line pipe through the reading path every predict command uses (console.InputLines and
console.input_batches, in a child process: its peak memory); with --gigabyte a 1 GB file of
100-byte lines through the same path; `predict sentiment` answering a pipe for --pipe-seconds
(lines answered, memory sampled as it goes). `server`: `serve` over the legacy sentiment run in
a child process, then 300 answers 8 at a time, the malformed bodies of tests/explorer/test_api.py
and path-traversal tries, --stalled clients that send headers and half a body (when each is
dropped, /api/health's latency meanwhile) and as many that disconnect, and the tracebacks in the
server's log. Memory is the peak resident set size of the child process (psutil, sampled every
20 ms, or /usr/bin/time -v).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
SENTIMENT = os.path.join(ROOT, "tests", "fixtures", "legacy_runs", "sentiment-transformer")
PYTHON = sys.executable
READING_PATH = """
import argparse, sys
from experiments import console
args = argparse.Namespace(inputs=console.InputLines(console.open_lines(sys.argv[1])))
lines = batches = 0
for batch in console.input_batches(args):
  lines += len(batch.inputs)
  batches += 1
print(lines, batches)
"""


def _env() -> dict[str, str]:
  return {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu"}


def _watch(process: subprocess.Popen, samples: list[tuple[float, int]] | None = None) -> int:
  """Peak resident bytes of `process` until it ends (sampled every 20 ms)."""
  peak, started = 0, time.monotonic()
  handle = psutil.Process(process.pid)
  while process.poll() is None:
    try:
      rss = handle.memory_info().rss
    except psutil.NoSuchProcess:
      break
    peak = max(peak, rss)
    if samples is not None:
      samples.append((time.monotonic() - started, rss))
    time.sleep(0.02)
  return peak


def _run(argv: list[str], stdin=subprocess.DEVNULL) -> dict:
  started = time.monotonic()
  process = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=_env(), cwd=ROOT)
  peak = _watch(process)
  out, err = process.communicate()
  return {"status": process.returncode, "seconds": round(time.monotonic() - started, 2),
          "peak_mb": round(peak / 2**20), "stdout": out.decode()[-200:],
          "stderr": err.decode().strip().splitlines()[-1:]}


def inputs(args: argparse.Namespace) -> dict:
  result = {"dev_zero": _run([PYTHON, "-m", "experiments", "predict", "sentiment",
                              "--input-file", "/dev/zero", "--workdir", SENTIMENT]),
            "imports_only": _run([PYTHON, "-m", "experiments", "list"])}
  yes = subprocess.Popen(["yes", "a really good film, one of the best this year"],
                         stdout=subprocess.PIPE)
  head = subprocess.Popen(["head", "-n", "1000000"], stdin=yes.stdout, stdout=subprocess.PIPE)
  result["million_line_pipe"] = _run([PYTHON, "-c", READING_PATH, "-"], stdin=head.stdout)
  yes.kill()
  if args.gigabyte:
    with tempfile.TemporaryDirectory() as folder:
      path = os.path.join(folder, "lines.txt")
      line = b"a short review of a film that was good, with a few words more to make it long.."
      line = line[:99] + b"\n"
      with open(path, "wb") as f:
        block = line * 100_000
        for _ in range(10**9 // len(block)):
          f.write(block)
      result["gigabyte_file"] = {"bytes": os.path.getsize(path),
                                 **_run([PYTHON, "-c", READING_PATH, path])}
  # predict sentiment answering an endless pipe for a while: memory as it goes.
  process = subprocess.Popen([PYTHON, "-m", "experiments", "predict", "sentiment", "--workdir",
                              SENTIMENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=_env(), cwd=ROOT)
  answered = []

  def count():
    answered.append(0)
    for raw in process.stdout:
      if not raw.startswith(b" "):
        answered[0] += 1

  def feed():
    try:
      while True:
        process.stdin.write(b"a really good film, one of the best this year\n" * 64)
    except (BrokenPipeError, ValueError):
      pass

  threading.Thread(target=count, daemon=True).start()
  threading.Thread(target=feed, daemon=True).start()
  samples, started = [], time.monotonic()
  handle = psutil.Process(process.pid)
  while time.monotonic() - started < args.pipe_seconds:
    samples.append((round(time.monotonic() - started), answered[0] if answered else 0,
                    round(handle.memory_info().rss / 2**20)))
    time.sleep(args.pipe_seconds / 12)
  process.kill()
  process.wait()
  result["predict_endless_pipe"] = {"seconds_lines_rss_mb": samples}
  return result


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _request(port: int, method: str, path: str, body: bytes | None = None,
             headers: dict | None = None) -> tuple[int, bytes, float]:
  started = time.monotonic()
  connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
  connection.request(method, path, body=body, headers=headers or {})
  response = connection.getresponse()
  data = response.read()
  connection.close()
  return response.status, data, time.monotonic() - started


def _raw(port: int, request: bytes) -> bytes:
  with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
    client.sendall(request)
    data = b""
    while chunk := client.recv(65536):
      data += chunk
  return data


TRAVERSALS = ["/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py",
              "/static/%2e%2e%2fapp.py", "/static/..%5capp.py", "/static/%252e%252e/app.py",
              "/static/../../cli.py", "/static/%2e%2e/%2e%2e/cli.py", "/static//etc/passwd",
              "/static/%2fetc%2fpasswd", "/static/....//app.py", "/static/.%2e/app.py",
              "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/static/./../service.py",
              "/static/..;/app.py", "/static/%c0%ae%c0%ae/app.py", "/static/..%00/app.py",
              "/static/index.html/../../app.py", "/api/../static/../app.py",
              "/static/\\..\\app.py", "/static/%5c..%5capp.py", "/static/.../app.py",
              "/static/..%252f..%252fcli.py", "/static/~/.bashrc", "/static/%00",
              "/static/../__init__.py", "/static/..%2f..%2f..%2fetc%2fpasswd"]


def server(args: argparse.Namespace) -> dict:
  sys.path.insert(0, os.path.join(ROOT, "tests", "explorer"))
  import test_api  # pylint: disable=g-import-not-at-top  (its table of malformed bodies)
  port = _free_port()
  log = tempfile.NamedTemporaryFile(suffix=".log", delete=False)  # pylint: disable=R1732
  process = subprocess.Popen([PYTHON, "-m", "experiments", "serve", "--workdir", SENTIMENT,
                              "--port", str(port)], stdout=log, stderr=log, env=_env(),
                             cwd=ROOT)
  result = {}
  try:
    started = time.monotonic()
    while True:
      try:
        _request(port, "GET", "/api/health")
        break
      except OSError:
        assert time.monotonic() - started < 300 and process.poll() is None, "no server"
        time.sleep(0.2)
    body = json.dumps({"input": "a really good film, one of the best this year"}).encode()
    headers = {"content-type": "application/json"}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
      started = time.monotonic()
      answers = list(pool.map(lambda _: _request(port, "POST", "/api/runs/0/answer", body,
                                                 headers), range(300)))
      seconds = time.monotonic() - started
    latencies = sorted(a[2] for a in answers)
    result["load"] = {"requests": 300, "concurrency": 8,
                      "errors": sum(a[0] != 200 for a in answers),
                      "median_ms": round(1000 * statistics.median(latencies)),
                      "p95_ms": round(1000 * latencies[int(0.95 * len(latencies))]),
                      "seconds": round(seconds, 1)}
    refused = statuses = 0
    for path in ("/api/zoo", "/api/runs/0/answer"):
      for _, request, status, _ in test_api.ANY_POST:
        if "json" in request:
          got, data, _ = _request(port, "POST", path, json.dumps(request["json"]).encode(),
                                  headers)
        else:
          got, data, _ = _request(port, "POST", path, request["content"], request["headers"])
        statuses += got == status
        refused += 400 <= got < 500 and list(json.loads(data)) == ["error"]
    result["malformed"] = {"requests": 2 * len(test_api.ANY_POST), "json_4xx": refused,
                           "expected_status": statuses}
    traversal = []
    for path in TRAVERSALS:
      data = _raw(port, f"GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".encode())
      head, _, content = data.partition(b"\r\n\r\n")
      traversal.append((head.split(b" ")[1].decode() if head else "closed",
                        b"create_app" in content or b"root:" in content))
    result["traversal"] = {"tries": len(traversal),
                           "statuses": sorted({s for s, _ in traversal}),
                           "leaked": sum(leak for _, leak in traversal)}
    # Stalled clients: headers and half a body; when is each dropped; health meanwhile.
    half = (b"POST /api/runs/0/answer HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
            b"\r\ncontent-length: 100\r\n\r\n" + b'{"input": "a good')
    started = time.monotonic()
    stalled = []
    for _ in range(args.stalled):
      client = socket.create_connection(("127.0.0.1", port))
      client.sendall(half)
      stalled.append(client)
    dropped: list[float | None] = [None] * len(stalled)

    def wait(i):
      stalled[i].settimeout(30)
      data = b""
      try:
        while chunk := stalled[i].recv(4096):
          data += chunk
      except OSError:
        pass
      dropped[i] = (time.monotonic() - started, data[:12])

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(stalled))]
    for thread in threads:
      thread.start()
    health = []
    while any(d is None for d in dropped) and time.monotonic() - started < 40:
      health.append(_request(port, "GET", "/api/health")[2])
      time.sleep(0.1)
    for thread in threads:
      thread.join()
    result["stalled"] = {
        "clients": len(stalled), "answered_408": sum(d[1] == b"HTTP/1.1 408" for d in dropped),
        "first_dropped_s": round(min(d[0] for d in dropped), 2),
        "last_dropped_s": round(max(d[0] for d in dropped), 2),
        "health_requests": len(health), "health_median_ms": round(1000 * statistics.median(health)),
        "health_max_ms": round(1000 * max(health))}
    for client in stalled:
      client.close()
    for _ in range(args.stalled):
      client = socket.create_connection(("127.0.0.1", port))
      client.sendall(half)
      client.close()
    time.sleep(2)
  finally:
    process.terminate()
    process.wait(30)
  with open(log.name, encoding="utf-8") as f:
    lines = f.read().splitlines()
  os.unlink(log.name)
  result["log"] = {"lines": len(lines), "tracebacks": sum("Traceback" in l for l in lines),
                   "disconnect_lines": sum("client disconnected before" in l for l in lines),
                   "dropped_lines": sum(l.startswith("WARNING:  dropped") for l in lines)}
  return result


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("what", choices=("inputs", "server"))
  parser.add_argument("--gigabyte", action="store_true")
  parser.add_argument("--pipe-seconds", type=float, default=60)
  parser.add_argument("--stalled", type=int, default=100)
  args = parser.parse_args()
  result = inputs(args) if args.what == "inputs" else server(args)
  print(json.dumps(result, indent=1))


if __name__ == "__main__":
  main()
