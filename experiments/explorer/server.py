"""The explorer's HTTP server and its bounds: what a slow, stalled or vanished client may cost.

uvicorn provides most of them (`server_config`):
  limit_concurrency   --max-connections (default MAX_CONNECTIONS): beyond that many open
                      connections or running requests, uvicorn answers every new request with 503
                      until some end;
  timeout_keep_alive  KEEP_ALIVE_S: an idle kept-alive connection is closed after it;
  h11's limit         H11_MAX_HEADER_BYTES: request headers larger than this are refused (431).
What neither uvicorn nor Starlette provides is a deadline on the request body: a client that sends
its headers and then half a body (or nothing) holds its connection and a request for ever.
`BodyDeadline` (ASGI middleware, outermost) reads every request's body before the app sees it,
within --body-timeout seconds (default BODY_TIMEOUT_S) of the headers: a body that has not
arrived by then is answered with 408 (JSON error, `connection: close`) and the connection is
closed; a client that disconnects before its body arrived is logged as one line (uvicorn's error
logger), never as a traceback, and the app is not called. The body is read into memory only up
to app.MAX_BODY_BYTES (a larger one is answered 413 as the app answers it). Reading the body
first costs nothing the app would not spend: every endpoint reads its whole (bounded) body.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable

BODY_TIMEOUT_S = 10.0  # the most seconds a request's body may take to arrive after its headers
MAX_CONNECTIONS = 200  # uvicorn's limit_concurrency: more connections or requests get 503
KEEP_ALIVE_S = 5  # uvicorn's timeout_keep_alive: an idle kept-alive connection is closed after it
H11_MAX_HEADER_BYTES = 16 * 1024  # h11's max_incomplete_event_size: larger headers get 431

LOG = logging.getLogger("uvicorn.error")

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def _client(scope: Message) -> str:
  client = scope.get("client")
  return f"{client[0]}:{client[1]}" if client else "a client"


async def _send_error(send: Send, status: int, message: str) -> None:
  """Sends {"error": message} with `status` and closes the connection after it."""
  body = json.dumps({"error": message}).encode("utf-8")
  await send({"type": "http.response.start", "status": status,
              "headers": [(b"content-type", b"application/json"),
                          (b"content-length", str(len(body)).encode("ascii")),
                          (b"connection", b"close")]})
  await send({"type": "http.response.body", "body": body})


class BodyDeadline:
  """ASGI middleware: every HTTP request's body read within `timeout_s` of its headers (408
  after it), a disconnect before the body logged as one line, then the app called with the body.

  Args:
    app: the ASGI app.
    timeout_s: the body's deadline in seconds.
    max_bytes: the most bytes of a body read into memory (a larger body: 413, or the app's own
      413 when Content-Length announces it).
  """

  def __init__(self, app, timeout_s: float = BODY_TIMEOUT_S, max_bytes: int = 1 << 20):
    self.app, self.timeout_s, self.max_bytes = app, timeout_s, max_bytes

  async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
      await self.app(scope, receive, send)
      return
    declared = dict(scope.get("headers") or ()).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > self.max_bytes:
      await self.app(scope, receive, send)  # the app refuses it (413) before reading it
      return
    request = f"{scope.get('method', '')} {scope.get('path', '')} from {_client(scope)}"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + self.timeout_s
    chunks, size = [], 0
    while True:
      try:
        message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
      except asyncio.TimeoutError:
        LOG.warning("dropped %s: its body did not arrive within %g s (408)", request,
                    self.timeout_s)
        await _send_error(send, 408, f"the request body did not arrive within "
                          f"{self.timeout_s:g} s of its headers; send it whole and promptly")
        return
      if message["type"] == "http.disconnect":
        LOG.warning("client disconnected before its request body arrived: %s", request)
        return
      chunk = message.get("body", b"")
      size += len(chunk)
      if size > self.max_bytes:
        await _send_error(send, 413, f"the body is over the limit of {self.max_bytes:,} bytes")
        return
      chunks.append(chunk)
      if not message.get("more_body", False):
        break
    body, delivered = b"".join(chunks), False

    async def replay() -> Message:
      nonlocal delivered
      if not delivered:
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}
      return await receive()  # after the body: only the disconnect is left to hear

    await self.app(scope, replay, send)


def server_config(app, host: str, port: int, body_timeout_s: float = BODY_TIMEOUT_S,
                  max_connections: int = MAX_CONNECTIONS, max_body_bytes: int = 1 << 20,
                  log_level: str = "warning"):
  """The uvicorn.Config that serves `app` with every bound above (BodyDeadline outermost)."""
  import uvicorn  # pylint: disable=g-import-not-at-top  (only `serve` needs it)
  return uvicorn.Config(BodyDeadline(app, body_timeout_s, max_body_bytes), host=host, port=port,
                        log_level=log_level, http="h11", limit_concurrency=max_connections,
                        timeout_keep_alive=KEEP_ALIVE_S,
                        h11_max_incomplete_event_size=H11_MAX_HEADER_BYTES)
