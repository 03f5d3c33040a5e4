"""The explorer's web app (FastAPI): the page, and a JSON API over Explorer and the zoo page.

HTTP API (JSON in, JSON out). Every error is {"error": "<message naming what was wrong>"} with a
4xx status: 400 a malformed body (not JSON, invalid UTF-8, NaN/Infinity, not an object), a wrong
content type (POST bodies must be application/json); 404 an unknown run id or path; 405 a wrong
method; 413 a body or an input over the limits; 422 a field of the wrong type, an unknown field
or option, a value out of range, an empty input, control characters, zoo shapes that do not fit.
Served by `serve` (server.py), a body that does not arrive within --body-timeout is answered 408
and a request beyond --max-connections 503 (uvicorn's plain-text answer).

  GET  /                        the page: static/index.html
  GET  /static/<file>           the page's files (experiments/explorer/static/)
  GET  /api/health              {"ok": true}
  GET  /api/runs                {"runs": [{"id": "0", "workdir": str, "experiment": str,
                                  "model": str, "step": int, "input": "text" | "pair",
                                  "options": {name: {"type": "bool" | "int" | "float" | "choice",
                                    "default": ..., "min": ..., "max": ..., "choices": [...],
                                    "help": str}}}]}
                                (min/max for int and float, choices for choice options only)
  POST /api/runs/{id}/answer    body {"input": str | {"a": str, "b": str}, "options": {...},
                                      "weights_format": "lists" | "float32"}
                                (options: names from /api/runs; left out or null = the default;
                                weights_format: left out = "lists")
                                -> {"run": id, "experiment": str,
                                    "output": {"lines": [str], "notes": [str], ...},
                                    "attention": [{"name": str, "kind": "pooling" | "self" |
                                      "cross", "layers": L, "heads": H, "query_tokens": [Q],
                                      "key_tokens": [K], "weights": (L, H, Q, K) floats}]}
                                (with "weights_format": "float32", each "weights" is
                                {"dtype": "float32", "shape": [L, H, Q, K], "base64":
                                little-endian float32 bytes, C order}: the same values, about a
                                quarter of the JSON, no float formatting)
  POST /api/zoo                 body {"score": str, "queries": [[..]] (Q, D),
                                  "keys": [[..]] (K, Dk), "values": [[..]] (K, Dv),
                                  "valid_len": int | [int] * Q | null, "seed": int}
                                -> {"scores": (Q, K), "weights": (Q, K), "output": (Q, Dv)}

`output.lines` are exactly the lines `python -m experiments predict <experiment> INPUT [flags]`
prints on standard output (`notes`: its standard error; sentiment's flags include --weights where
the model has attention: its lines hold each word's weight). The other output fields, by
experiment:
  sentiment    label ("negative" | "positive"), probability (of that label), words [n],
               unknown [n] bools, weights [n] (one per word, summing to 1)
  translation  translations [{"text", "score"}] (best first; num_results of them), source_tokens,
               tokens (the best output's, then "<eos>" if it ended), unknown_source, beam_size,
               length_penalty (as decoded)
  couplet      upper, chars, results [{"text", "score"}] (best first), unknown
  matching     label (0 | 1), probability (of label 1), threshold, tokens {"a", "b"},
               unknown {"a", "b"}
Options by experiment: translation beam_size, num_results, length_penalty, tsv; couplet
beam_size, num_results, length_penalty, free, force_punct, no_copy, keep_pattern; matching
threshold; sentiment none. The command's own rules hold (length_penalty not with beam_size 1;
num_results above 1 needs tsv in translation), with the command's message.
Attention by model: pooling models 'pooling' (Q = 1, query "[pool]"); self-attention models
'self_attention' (every layer and head); the seq2seq models 'cross_attention' (recurrent: one
layer and head, one row per decoding step; Transformer: every layer and head, with
'encoder_self_attention' and 'decoder_self_attention' (causal) besides); matching 'a_to_b' and
'b_to_a' (decomposable, ESIM), 'a_pooling' and 'b_pooling' (siamese), 'self_attention' over
[CLS] a [SEP] b [SEP] (Transformer). Rows sum to 1 over the real tokens; padding never appears.

The app answers one model call at a time (Explorer's lock; the handlers run in a worker thread),
bounds every body (Limits, MAX_BODY_BYTES) and turns every failure into the JSON error above
(an unexpected one into a 500 with its message): the server goes on serving. Nothing is fetched
from the internet: the page is served from static/.
"""

from __future__ import annotations

import json
import os
from typing import Any

from fastapi import FastAPI
from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from fastapi.responses import HTMLResponse
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from experiments.explorer import service
from experiments.explorer import zoo_page

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
MAX_BODY_BYTES = 1 << 20  # 1 MiB: far above any text within the limits, or a 64 x 64 zoo page
ANSWER_FIELDS = ("input", "options", "weights_format")
ZOO_FIELDS = ("score", "queries", "keys", "values", "valid_len", "seed")

PLACEHOLDER = """<!doctype html><html><head><meta charset="utf-8"><title>attention explorer</title>
</head><body><h1>attention explorer</h1><p>The page (experiments/explorer/static/index.html) is
not installed; the JSON API is at <a href="/api/runs">/api/runs</a>.</p></body></html>"""


class BodyError(Exception):
  """A request body that cannot be read as a JSON object (status 400, or 413 when too large)."""

  def __init__(self, message: str, status: int = 400):
    super().__init__(message)
    self.status = status


def error(status: int, message: str) -> JSONResponse:
  """The one shape of every error: {"error": message}."""
  return JSONResponse({"error": message}, status_code=status)


def _reject_constant(name: str) -> Any:
  raise BodyError(f"the body holds {name}, which is not a JSON number: use finite numbers")


async def read_object(request: Request, fields: tuple[str, ...]) -> dict[str, Any]:
  """The request's JSON body: an object with only `fields`, read within MAX_BODY_BYTES.

  Raises:
    BodyError: wrong content type, too large, invalid UTF-8, not JSON, NaN/Infinity, not an
      object; service.InputError: an unknown field.
  """
  kind = request.headers.get("content-type", "")
  if kind.split(";")[0].strip().lower() != "application/json":
    raise BodyError(f"content type must be application/json, got {kind or 'none'!r}")
  declared = request.headers.get("content-length")
  if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
    raise BodyError(f"the body has {int(declared):,} bytes; the limit is {MAX_BODY_BYTES:,}", 413)
  body = b""
  async for chunk in request.stream():
    body += chunk
    if len(body) > MAX_BODY_BYTES:
      raise BodyError(f"the body is over the limit of {MAX_BODY_BYTES:,} bytes", 413)
  try:
    text = body.decode("utf-8")
  except UnicodeDecodeError as e:
    raise BodyError(f"the body is not valid UTF-8 (byte {e.start}): send UTF-8 JSON") from None
  if not text.strip():
    raise BodyError("the body is empty: send a JSON object")
  try:
    value = json.loads(text, parse_constant=_reject_constant)
  except json.JSONDecodeError as e:
    raise BodyError(f"the body is not valid JSON: {e.msg} at line {e.lineno}, column "
                    f"{e.colno}") from None
  except RecursionError:
    raise BodyError("the body is not valid JSON: nested too deeply") from None
  if not isinstance(value, dict):
    raise BodyError(f"the body must be a JSON object, got a JSON {type(value).__name__}")
  unknown = sorted(set(value) - set(fields))
  if unknown:
    raise service.InputError(f"unknown field{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}; the fields are "
                             f"{', '.join(fields)}")
  return value


def create_app(explorer: service.Explorer | None = None, static_dir: str = STATIC_DIR) -> FastAPI:
  """The app over `explorer`'s runs (None: no runs, the zoo page only) and the page in
  `static_dir`."""
  app = FastAPI(title="attention explorer", docs_url=None, redoc_url=None, openapi_url=None)

  @app.exception_handler(StarletteHTTPException)
  async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 404:
      return error(404, f"no such path: {request.method} {request.url.path}")
    if exc.status_code == 405:
      return error(405, f"method {request.method} is not allowed on {request.url.path}")
    return error(exc.status_code, str(exc.detail))

  @app.exception_handler(RequestValidationError)
  async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
                for e in exc.errors()]
    return error(422, "; ".join(problems) or "invalid request")

  @app.exception_handler(BodyError)
  async def body_error(request: Request, exc: BodyError) -> JSONResponse:
    return error(exc.status, str(exc))

  @app.exception_handler(service.ExplorerError)
  async def explorer_error(request: Request, exc: service.ExplorerError) -> JSONResponse:
    if isinstance(exc, service.UnknownRunError):
      return error(404, str(exc))
    return error(413 if isinstance(exc, service.TooLargeError) else 422, str(exc))

  @app.exception_handler(zoo_page.ZooInputError)
  async def zoo_error(request: Request, exc: zoo_page.ZooInputError) -> JSONResponse:
    return error(422, str(exc))

  @app.exception_handler(Exception)
  async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    return error(500, f"internal error ({type(exc).__name__}): {exc}")

  @app.get("/", response_model=None)
  def page() -> FileResponse | HTMLResponse:
    index = os.path.join(static_dir, "index.html")
    if os.path.isfile(index):
      return FileResponse(index, media_type="text/html")
    return HTMLResponse(PLACEHOLDER)

  @app.get("/api/health")
  def health() -> dict[str, bool]:
    return {"ok": True}

  @app.get("/api/runs")
  def list_runs() -> dict[str, Any]:
    return {"runs": [] if explorer is None else explorer.describe()}

  @app.post("/api/runs/{run_id}/answer")
  async def answer(run_id: str, request: Request) -> JSONResponse:
    if explorer is None:
      raise service.UnknownRunError(f"unknown run id {run_id!r}: this server serves no runs")
    explorer.served(run_id)  # an unknown id is a 404 before the body is read
    body = await read_object(request, ANSWER_FIELDS)
    if "input" not in body:
      raise service.InputError("input is missing: the body is {\"input\": ..., \"options\": "
                               "{...}}")
    result = await run_in_threadpool(explorer.answer, run_id, body["input"], body.get("options"),
                                     body.get("weights_format", "lists"))
    return JSONResponse(result)

  @app.post("/api/zoo")
  async def zoo(request: Request) -> JSONResponse:
    body = await read_object(request, ZOO_FIELDS)
    missing = [name for name in ("score", "queries", "keys", "values") if name not in body]
    if missing:
      raise zoo_page.ZooInputError(f"missing field{'s' if len(missing) > 1 else ''}: "
                                   f"{', '.join(missing)}")
    result = await run_in_threadpool(
        zoo_page.compute, body["score"], body["queries"], body["keys"], body["values"],
        body.get("valid_len"), body.get("seed", 0))
    return JSONResponse(result)

  app.mount("/static", StaticFiles(directory=static_dir, check_dir=False), name="static")
  return app
