"""The server's bounds (experiments/explorer/server.py) against a real uvicorn server.

A stalled client (headers and half a body) is dropped with 408 within the body deadline while
/api/health goes on answering at once; a client that disconnects before its body arrived is one
log line, never a traceback; beyond --max-connections new requests get 503. The app serves no
runs (the zoo page only), so nothing is trained.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
import time

import uvicorn

from experiments.explorer import app as app_lib
from experiments.explorer import server

DEADLINE_S = 0.8


class _Records(logging.Handler):
  def __init__(self):
    super().__init__(logging.DEBUG)
    self.records: list[logging.LogRecord] = []

  def emit(self, record: logging.LogRecord) -> None:
    self.records.append(record)


@contextlib.contextmanager
def _serving(max_connections: int = server.MAX_CONNECTIONS):
  """A uvicorn server over the app (no runs) on a free port of 127.0.0.1, in a thread; yields
  (port, the records of its error log)."""
  sock = socket.socket()
  sock.bind(("127.0.0.1", 0))
  config = server.server_config(app_lib.create_app(None), "127.0.0.1", sock.getsockname()[1],
                                body_timeout_s=DEADLINE_S, max_connections=max_connections)
  uvicorn_server = uvicorn.Server(config)
  thread = threading.Thread(target=uvicorn_server.run, kwargs={"sockets": [sock]}, daemon=True)
  thread.start()
  started = time.monotonic()
  while not uvicorn_server.started:
    assert time.monotonic() - started < 20, "the server did not start"
    time.sleep(0.01)
  records = _Records()  # uvicorn set its loggers up while starting; listen to its error log
  logging.getLogger("uvicorn.error").addHandler(records)
  try:
    yield sock.getsockname()[1], records.records
  finally:
    logging.getLogger("uvicorn.error").removeHandler(records)
    uvicorn_server.should_exit = True
    thread.join(10)
    sock.close()


def _stall(port: int, body: bytes = b'{"score": "dot", "que') -> socket.socket:
  """A connection that sent a POST's headers (announcing 200 bytes) and only `body`."""
  client = socket.create_connection(("127.0.0.1", port))
  client.sendall(b"POST /api/zoo HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
                 b"content-type: application/json\r\n"
                 b"content-length: 200\r\n\r\n" + body)
  return client


def _get(port: int, path: str = "/api/health") -> tuple[int, bytes, float]:
  """(status, body, seconds) of one GET on a new connection."""
  start = time.monotonic()
  connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
  connection.request("GET", path)
  response = connection.getresponse()
  body = response.read()
  connection.close()
  return response.status, body, time.monotonic() - start


def _read_all(client: socket.socket, timeout: float) -> bytes:
  """What the server sends until it closes the connection (or `timeout` passes)."""
  client.settimeout(timeout)
  data = b""
  with contextlib.suppress(socket.timeout):
    while chunk := client.recv(4096):
      data += chunk
  return data


def test_stalled_clients_are_dropped_with_408_and_health_answers_meanwhile():
  with _serving() as (port, records):
    started = time.monotonic()
    stalled = [_stall(port) for _ in range(5)]
    latencies = []
    while time.monotonic() - started < DEADLINE_S * 0.75:  # all five are still held
      status, body, seconds = _get(port)
      assert (status, json.loads(body)) == (200, {"ok": True})
      latencies.append(seconds)
    answers = [_read_all(client, DEADLINE_S + 3) for client in stalled]
    dropped_after = time.monotonic() - started
    for client in stalled:
      client.close()
    assert len(latencies) >= 3 and max(latencies) < 0.1, latencies
    for answer in answers:  # the whole answer, then the server closed the connection
      head, _, body = answer.partition(b"\r\n\r\n")
      assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower()
      assert json.loads(body) == {"error": f"the request body did not arrive within "
                                           f"{DEADLINE_S:g} s of its headers; send it whole "
                                           "and promptly"}
    assert DEADLINE_S <= dropped_after < DEADLINE_S + 2.5
    messages = [r.getMessage() for r in records]
    assert len(messages) == 5 and all(
        m.startswith("dropped POST /api/zoo from 127.0.0.1:") and
        m.endswith(f": its body did not arrive within {DEADLINE_S:g} s (408)") for m in messages)
    assert _get(port)[0] == 200


def test_disconnects_before_the_body_are_one_line_each_and_no_traceback():
  with _serving() as (port, records):
    for _ in range(3):
      _stall(port).close()
    started = time.monotonic()
    while len(records) < 3 and time.monotonic() - started < 5:
      time.sleep(0.02)
    time.sleep(0.1)  # anything logged after the three lines would be a traceback
    assert [r.getMessage().split(": ")[0] for r in records] == [
        "client disconnected before its request body arrived"] * 3
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in records)
    # A body that arrives in pieces within the deadline reaches the app whole.
    client = _stall(port, b"[1, 2]" + b" " * 100)
    time.sleep(0.2)
    client.sendall(b" " * 94)
    head, _, body = _read_all(client, 5).partition(b"\r\n\r\n")
    client.close()
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body) == {"error": "the body must be a JSON object, got a JSON list"}


def test_requests_beyond_the_connection_limit_get_503():
  with _serving(max_connections=3) as (port, _):
    stalled = [_stall(port) for _ in range(2)]
    time.sleep(0.1)
    status, body, _ = _get(port)  # the third connection: uvicorn's own answer
    assert (status, body) == (503, b"Service Unavailable")
    for client in stalled:
      assert _read_all(client, DEADLINE_S + 3).startswith(b"HTTP/1.1 408 ")
      client.close()
    assert _get(port)[0] == 200
