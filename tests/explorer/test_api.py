"""The explorer's HTTP API with FastAPI's TestClient: every endpoint, every experiment's tiny run
answering exactly as the command line prints, the attention maps, and a table of malformed
requests, each answered with a 4xx JSON error naming the problem while the server goes on."""

from __future__ import annotations

import base64
import json
import math
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():  # starlette's note on httpx's successor
  warnings.simplefilter("ignore")
  from fastapi.testclient import TestClient

from conftest import TINY_RUNS
from experiments import cli as engine_cli
from experiments.explorer import app as app_lib
from experiments.explorer import service
from experiments.explorer import zoo_page

JSON = "application/json"
IDS = {name: str(number) for number, name in enumerate(TINY_RUNS)}
LIMITS = service.Limits(max_chars=300)


@pytest.fixture(scope="module")
def explorer(tiny_runs):
  return service.Explorer([tiny_runs[name] for name in TINY_RUNS], LIMITS)


@pytest.fixture(scope="module")
def client(explorer):
  with TestClient(app_lib.create_app(explorer), raise_server_exceptions=False) as test_client:
    yield test_client


def _healthy(client) -> None:
  response = client.get("/api/health")
  assert response.status_code == 200 and response.json() == {"ok": True}


# ---- the endpoints -----------------------------------------------------------------------------


def test_health_runs_and_the_page(client, tiny_runs):
  _healthy(client)
  listed = client.get("/api/runs").json()["runs"]
  assert [r["id"] for r in listed] == list(IDS.values())
  by_name = dict(zip(TINY_RUNS, listed))
  for name, run in by_name.items():
    experiment, model, _ = TINY_RUNS[name]
    assert run["workdir"] == tiny_runs[name] and run["step"] == 1
    assert (run["experiment"], run["model"]) == (experiment, model)
    assert run["input"] == ("pair" if experiment == "matching" else "text")
  assert by_name["sentiment_pooling"]["options"] == {}
  assert by_name["matching_esim"]["options"]["threshold"] == {
      "type": "float", "default": 0.5, "min": 0.0, "max": 1.0,
      "help": "label 1 where p(same) >= this"}
  translation = by_name["translation_transformer"]["options"]
  assert set(translation) == {"beam_size", "num_results", "length_penalty", "tsv"}
  assert translation["beam_size"]["default"] == 3  # the run's own data.beam_size
  assert translation["beam_size"]["max"] == LIMITS.max_beam
  couplet = by_name["couplet_lstm"]["options"]
  assert {"force_punct", "no_copy", "keep_pattern", "free"} <= set(couplet)
  assert couplet["force_punct"] == {"type": "bool", "default": False,
                                    "help": "the upper line's punctuation at the same positions"}
  page = client.get("/")
  assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
  if (app_lib.os.path.isfile(app_lib.os.path.join(app_lib.STATIC_DIR, "index.html"))):
    with open(app_lib.os.path.join(app_lib.STATIC_DIR, "index.html"), encoding="utf-8") as f:
      assert page.text == f.read()


def test_a_placeholder_page_until_the_page_is_there(tmp_path):
  with TestClient(app_lib.create_app(None, static_dir=str(tmp_path))) as bare:
    page = bare.get("/")
    assert page.status_code == 200 and "/api/runs" in page.text
    assert bare.get("/api/runs").json() == {"runs": []}
    missing = bare.post("/api/runs/0/answer", json={"input": "x"})
    assert missing.status_code == 404 and "serves no runs" in missing.json()["error"]
    (tmp_path / "index.html").write_text("<p>the page</p>", encoding="utf-8")
    (tmp_path / "page.js").write_text("let x = 1;", encoding="utf-8")
    assert bare.get("/").text == "<p>the page</p>"
    assert bare.get("/static/page.js").text == "let x = 1;"


def test_fastapis_validation_errors_take_the_one_shape(tmp_path):
  app = app_lib.create_app(None, static_dir=str(tmp_path))

  @app.get("/api/typed/{number}")
  def typed(number: int) -> dict[str, int]:
    return {"number": number}

  with TestClient(app) as bare:
    assert bare.get("/api/typed/3").json() == {"number": 3}
    response = bare.get("/api/typed/three")
    assert response.status_code == 422 and list(response.json()) == ["error"]
    assert response.json()["error"].startswith("path.number: ")


def _cli_lines(capsys, argv: list[str]) -> list[str]:
  """What `python -m experiments <argv>` prints on standard output, run in-process."""
  capsys.readouterr()
  assert engine_cli.main(argv) == 0
  return capsys.readouterr().out.split("\n")[:-1]


def _check_maps(maps: list[dict]) -> None:
  """Every map's shape fits its tokens, rows are distributions, no padding shows."""
  assert maps
  for m in maps:
    weights = np.asarray(m["weights"])
    q, k = len(m["query_tokens"]), len(m["key_tokens"])
    assert weights.shape == (m["layers"], m["heads"], q, k), m["name"]
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5, err_msg=m["name"])
    assert "<pad>" not in m["query_tokens"] + m["key_tokens"]
    assert m["kind"] in ("pooling", "self", "cross")


LONG_REVIEW = " ".join(["a fine film with dull bits ."] * 6)  # 42 words: cut to max_len 24

CASES = [
    # (run, input, options, the command line's flags)
    # (a sentiment run answers with the word weights `predict sentiment --weights` prints)
    ("sentiment_transformer", "a fine film , really", {}, ["--weights"]),
    ("sentiment_pooling", "this movie was great fun", {}, ["--weights"]),
    ("sentiment_pooling", LONG_REVIEW, None, ["--weights"]),
    ("translation_transformer", "I won!", {}, []),
    ("translation_transformer", "Go now.", {"beam_size": 1}, ["--beam-size", "1"]),
    ("translation_transformer", "I won!", {"beam_size": 3, "num_results": 2, "tsv": True,
                                           "length_penalty": 1.0},
     ["--beam-size", "3", "--num-results", "2", "--tsv", "--length-penalty", "1.0"]),
    ("couplet_lstm", "晚风摇树树还挺", {}, []),
    ("couplet_lstm", "春风，秋月", {"num_results": 2, "force_punct": True, "no_copy": True,
                                "keep_pattern": True},
     ["--num-results", "2", "--force-punct", "--no-copy", "--keep-pattern"]),
    ("couplet_lstm", "风风雨雨 年年", {"free": True, "beam_size": 2, "length_penalty": 0.5},
     ["--free", "--beam-size", "2", "--length-penalty", "0.5"]),
    ("couplet_lstm", "一二三四五六七八九十", {}, []),  # cut to max_len - 1 with a note
    ("matching_esim", {"a": "花呗怎么还款", "b": "怎么还花呗"}, {}, []),
    ("matching_esim", {"a": "借呗能提额吗", "b": "花呗"}, {"threshold": 0.25},
     ["--threshold", "0.25"]),
    ("matching_transformer", {"a": "花呗怎么还款", "b": "怎么还花呗"}, {"threshold": 0.9},
     ["--threshold", "0.9"]),
]


@pytest.mark.parametrize("name, value, options, flags", CASES)
def test_answers_equal_the_command_line(client, tiny_runs, capsys, name, value, options, flags):
  experiment = TINY_RUNS[name][0]
  body = {"input": value} if options is None else {"input": value, "options": options}
  response = client.post(f"/api/runs/{IDS[name]}/answer", json=body)
  assert response.status_code == 200, response.text
  result = response.json()
  assert result["run"] == IDS[name] and result["experiment"] == experiment
  inputs = [value["a"], value["b"]] if isinstance(value, dict) else [value]
  expected = _cli_lines(capsys, ["predict", experiment, *inputs, "--workdir", tiny_runs[name],
                                 *flags])
  output = result["output"]
  assert output["lines"] == expected
  _check_maps(result["attention"])
  names = [m["name"] for m in result["attention"]]
  if experiment == "sentiment":
    label, probability, _ = expected[0].split("\t")
    assert output["label"] == label and f"{output['probability']:.4f}" == probability
    assert len(output["words"]) == len(output["weights"]) == len(expected) - 1
    assert [f"{w:.4f}" for w in output["weights"]] == [line.split()[1] for line in expected[1:]]
    if value is LONG_REVIEW:
      assert len(output["words"]) == 24
      assert "has 42 words; this run reads the first 24" in output["notes"][0]
    assert names == (["self_attention"] if "transformer" in name else ["pooling"])
    if "transformer" in name:
      assert result["attention"][0]["layers"] == 2 and result["attention"][0]["heads"] == 2
    else:
      pooling = result["attention"][0]
      assert pooling["key_tokens"] == output["words"]
      np.testing.assert_allclose(pooling["weights"][0][0][0], output["weights"], atol=1e-6)
  elif experiment == "translation":
    assert names == ["encoder_self_attention", "decoder_self_attention", "cross_attention"]
    assert len(output["translations"]) == (options or {}).get("num_results", 1)
    if "--tsv" in flags:
      assert [line.split("\t")[:2] for line in expected] == [
          [t["text"], f"{t['score']:.4f}"] for t in output["translations"]]
    else:
      assert expected == [output["translations"][0]["text"]]
    cross = result["attention"][2]
    assert cross["key_tokens"] == output["source_tokens"]
    assert cross["query_tokens"] == output["tokens"]
  elif experiment == "couplet":
    assert names == ["cross_attention"]
    cross = result["attention"][0]
    assert cross["layers"] == cross["heads"] == 1  # the LSTM's one attention, a row per step
    assert cross["key_tokens"] == output["chars"] + ["</s>"]
    results = [r["text"] for r in output["results"]]
    if options.get("num_results", 1) == 1:
      assert expected == results
    else:
      assert [line.split("\t")[1] for line in expected] == results
    if len(value) > 9:
      assert any("data.max_len - 1" in note for note in output["notes"])
  else:
    probability = f"{output['probability']:.4f}"
    assert expected == [f"{output['label']}\t{probability}"]
    assert output["label"] == int(output["probability"] >= (options or {}).get("threshold", 0.5))
    if "esim" in name:
      assert names == ["a_to_b", "b_to_a"]
      assert result["attention"][0]["query_tokens"] == output["tokens"]["a"]
    else:
      packed = ["[CLS]", *output["tokens"]["a"], "[SEP]", *output["tokens"]["b"], "[SEP]"]
      assert names == ["self_attention"] and result["attention"][0]["key_tokens"] == packed
      assert result["attention"][0]["layers"] == 2


def test_float32_weights_are_the_lists_exactly(client):
  path = f"/api/runs/{IDS['translation_transformer']}/answer"
  lists = client.post(path, json={"input": "I won!"}).json()
  packed = client.post(path, json={"input": "I won!", "weights_format": "float32"}).json()
  assert packed["output"] == lists["output"]
  for plain, compact in zip(lists["attention"], packed["attention"]):
    weights = compact.pop("weights")
    assert compact == {k: v for k, v in plain.items() if k != "weights"}
    assert weights["dtype"] == "float32"
    decoded = np.frombuffer(base64.b64decode(weights["base64"]), "<f4").reshape(weights["shape"])
    np.testing.assert_array_equal(decoded, np.asarray(plain["weights"], np.float32))


def test_zoo_endpoint_is_zoo_page(client):
  body = {"score": "dot", "queries": [[1, 0]], "keys": [[1, 0], [0, 1], [1, 1]],
          "values": [[1], [2], [3]], "valid_len": 2, "seed": 0}
  response = client.post("/api/zoo", json=body)
  assert response.status_code == 200
  out = response.json()
  assert out == zoo_page.compute(**body)
  w = math.e / (math.e + 1)
  assert out["scores"] == [[1.0, 0.0, 1.0]] and out["weights"][0][2] == 0.0
  assert out["weights"][0][0] == pytest.approx(w, rel=1e-6)
  assert out["output"][0][0] == pytest.approx(w + 2 * (1 - w), rel=1e-6)
  body.pop("valid_len"), body.pop("seed")  # every key, seed 0
  assert client.post("/api/zoo", json=body).json() == zoo_page.compute(**body)


def test_an_unexpected_failure_is_a_json_500_and_the_server_goes_on(client, explorer,
                                                                     monkeypatch):
  def broken(*args):
    raise RuntimeError("boom")
  monkeypatch.setattr(explorer, "answer", broken)
  response = client.post(f"/api/runs/{IDS['sentiment_pooling']}/answer", json={"input": "x"})
  assert response.status_code == 500
  assert response.json() == {"error": "internal error (RuntimeError): boom"}
  _healthy(client)


# ---- malformed requests: a table of bad bodies x endpoints ---------------------------------------


def _raw(content: bytes, content_type: str | None = JSON) -> dict:
  return {"content": content, "headers": {} if content_type is None else
          {"content-type": content_type}}


HUGE = "<1e400>"  # stands for the JSON number 1e400, which Python reads as inf


def _json(body) -> dict:
  """A request with `body` as JSON, HUGE written as the number 1e400 (httpx refuses inf)."""
  return _raw(json.dumps(body).replace(f'"{HUGE}"', "1e400").encode())


# Bodies no POST endpoint accepts: (name, request, status, what the message says).
ANY_POST = [
    ("not JSON", _raw(b"{"), 400, "not valid JSON"),
    ("trailing data", _raw(b'{"input": "x"} x'), 400, "not valid JSON: Extra data"),
    ("single quotes", _raw(b"{'input': 'x'}"), 400, "not valid JSON"),
    ("empty body", _raw(b""), 400, "the body is empty"),
    ("blank body", _raw(b"  \n"), 400, "the body is empty"),
    ("invalid UTF-8", _raw(b'{"input": "\xff\xfe"}'), 400, "not valid UTF-8 (byte 11)"),
    ("binary", _raw(bytes(range(256))), 400, "not valid UTF-8"),
    ("NUL bytes", _raw(b"\x00\x01\x02"), 400, "not valid JSON"),
    ("a list", _raw(b"[]"), 400, "must be a JSON object, got a JSON list"),
    ("a string", _raw(b'"x"'), 400, "must be a JSON object, got a JSON str"),
    ("a number", _raw(b"3"), 400, "must be a JSON object, got a JSON int"),
    ("null", _raw(b"null"), 400, "must be a JSON object, got a JSON NoneType"),
    ("NaN", _raw(b'{"input": NaN}'), 400, "holds NaN, which is not a JSON number"),
    ("Infinity", _raw(b'{"input": Infinity}'), 400, "holds Infinity"),
    ("-Infinity", _raw(b'{"input": -Infinity}'), 400, "holds -Infinity"),
    ("nested too deeply", _raw(b"[" * 100_000), 400, "nested too deeply"),
    ("text/plain", _raw(b'{"input": "x"}', "text/plain"), 400,
     "content type must be application/json, got 'text/plain'"),
    ("form", _raw(b"input=x", "application/x-www-form-urlencoded"), 400, "content type must"),
    ("no content type", _raw(b'{"input": "x"}', None), 400, "content type must be"),
    ("too large", _raw(b" " * (app_lib.MAX_BODY_BYTES + 1)), 413, "the limit is 1,048,576"),
    ("unknown field", {"json": {"bogus": 1}}, 422,
     "unknown field 'bogus'"),
]

TEXT_INPUTS = [
    ("no input", {"json": {"options": {}}}, 422, "input is missing"),
    ("null input", {"json": {"input": None}}, 422, "input must be a string, got null"),
    ("number input", {"json": {"input": 5}}, 422, "input must be a string, got an integer"),
    ("bool input", {"json": {"input": True}}, 422, "input must be a string, got a boolean"),
    ("list input", {"json": {"input": ["a", "b"]}}, 422, "input must be a string, got a list"),
    ("pair input", {"json": {"input": {"a": "x", "b": "y"}}}, 422,
     "input must be a string, got an object"),
    ("empty input", {"json": {"input": ""}}, 422, "input is empty"),
    ("blank input", {"json": {"input": " \t\n "}}, 422, "input is empty"),
    ("too long input", {"json": {"input": "word " * 61}}, 413,
     "input has 305 characters; the limit is 300"),
    ("NUL in input", {"json": {"input": "a\x00b"}}, 422, "control character U+0000"),
    ("bell in input", {"json": {"input": "a\x07b"}}, 422, "control character U+0007"),
    ("escape in input", {"json": {"input": "\x1b[31mred"}}, 422, "control character U+001B"),
    ("DEL in input", {"json": {"input": "a\x7f"}}, 422, "control character U+007F"),
    ("lone surrogate", _raw(b'{"input": "a\\ud800b"}'), 422, "unpaired surrogate (U+D800)"),
    ("options a list", {"json": {"input": "x", "options": [1]}}, 422,
     "options must be an object"),
    ("options a string", {"json": {"input": "x", "options": "beam=3"}}, 422,
     "options must be an object"),
    ("unknown option", {"json": {"input": "x", "options": {"temperature": 1}}}, 422,
     "unknown option 'temperature'"),
    ("unknown weights format", {"json": {"input": "x", "weights_format": "xml"}}, 422,
     "weights_format must be one of lists, float32, got a string 'xml'"),
    ("weights format a number", {"json": {"input": "x", "weights_format": 32}}, 422,
     "weights_format must be one of lists, float32, got an integer"),
]

DECODING_OPTIONS = [
    ("beam a string", {"beam_size": "3"}, "options.beam_size must be an integer, got a string"),
    ("beam a float", {"beam_size": 2.5}, "options.beam_size must be an integer"),
    ("beam a bool", {"beam_size": True}, "options.beam_size must be an integer, got a boolean"),
    ("beam 0", {"beam_size": 0}, "options.beam_size must lie in [1, 16], got 0"),
    ("beam 17", {"beam_size": 17}, "options.beam_size must lie in [1, 16], got 17"),
    ("results 0", {"num_results": 0}, "options.num_results must lie in [1, 16]"),
    ("results 1000", {"num_results": 1000}, "options.num_results must lie in [1, 16]"),
    ("penalty a string", {"length_penalty": "0.6"}, "options.length_penalty must be a number"),
    ("penalty negative", {"length_penalty": -1}, "options.length_penalty must lie in [0.0, 10.0]"),
    ("penalty huge", {"length_penalty": HUGE}, "options.length_penalty must be a finite number"),
]

TRANSLATION_OPTIONS = [  # the translate command's own rules, with its messages
    ("penalty with greedy", {"beam_size": 1, "length_penalty": 0.5},
     "length_penalty applies to beam search only"),
    ("tsv a number", {"tsv": 1}, "options.tsv must be true or false"),
    ("tsv a string", {"tsv": "yes"}, "options.tsv must be true or false"),
    ("results without tsv", {"num_results": 2}, "num_results above 1 needs tsv"),
    ("results above the beam", {"num_results": 3, "beam_size": 2, "tsv": True},
     "num_results 3 needs a beam of at least 3, got beam_size 2"),
]

COUPLET_OPTIONS = [
    ("force_punct a number", {"force_punct": 1}, "options.force_punct must be true or false"),
    ("no_copy a string", {"no_copy": "true"}, "options.no_copy must be true or false"),
    ("keep_pattern a list", {"keep_pattern": [True]}, "options.keep_pattern must be true or"),
    ("free an object", {"free": {}}, "options.free must be true or false"),
]

PAIR_INPUTS = [
    ("text for a pair", {"json": {"input": "花呗"}}, 422, "input must be an object {\"a\": text"),
    ("empty pair", {"json": {"input": {}}}, 422, "input.a is missing"),
    ("half a pair", {"json": {"input": {"a": "花呗"}}}, 422, "input.b is missing"),
    ("a third side", {"json": {"input": {"a": "x", "b": "y", "c": "z"}}}, 422,
     "input has unknown field 'c'"),
    ("a number side", {"json": {"input": {"a": 1, "b": "y"}}}, 422,
     "input.a must be a string, got an integer"),
    ("an empty side", {"json": {"input": {"a": "花呗", "b": ""}}}, 422, "input.b is empty"),
    ("a tab in a side", {"json": {"input": {"a": "花\t呗", "b": "y"}}}, 422,
     "input.a holds the control character U+0009"),
    ("a newline in a side", {"json": {"input": {"a": "花呗", "b": "借\n呗"}}}, 422,
     "input.b holds the control character U+000A"),
    ("a long side", {"json": {"input": {"a": "花" * 301, "b": "y"}}}, 413,
     "input.a has 301 characters; the limit is 300"),
    ("threshold above 1", {"json": {"input": {"a": "x", "b": "y"}, "options": {"threshold": 1.5}}},
     422, "options.threshold must lie in [0.0, 1.0], got 1.5"),
    ("threshold a string", {"json": {"input": {"a": "x", "b": "y"},
                                     "options": {"threshold": "0.5"}}}, 422,
     "options.threshold must be a number"),
    ("threshold a bool", {"json": {"input": {"a": "x", "b": "y"},
                                   "options": {"threshold": False}}}, 422,
     "options.threshold must be a number, got a boolean"),
    ("beam for a pair", {"json": {"input": {"a": "x", "b": "y"}, "options": {"beam_size": 3}}},
     422, "unknown option 'beam_size'; this run's options: threshold"),
]

ZOO_BODIES = [
    ("no score", {"queries": [[1]], "keys": [[1]], "values": [[1]]}, "missing field: score"),
    ("nothing", {}, "missing fields: score, queries, keys, values"),
    ("unknown score", {"score": "cosine"}, "score must be one of"),
    ("score a number", {"score": 1}, "score must be one of"),
    ("queries a string", {"queries": "1 0"}, "queries must be a non-empty list"),
    ("no queries", {"queries": []}, "queries must be a non-empty list"),
    ("ragged queries", {"queries": [[1, 0], [1]]}, "queries[1] has 1 numbers, queries[0] has 2"),
    ("a string number", {"keys": [[1, "0"], [0, 1]]}, "keys[0][1] must be a number, got str"),
    ("a null number", {"values": [[None], [2]]}, "values[0][0] must be a number, got NoneType"),
    ("a huge number", {"queries": [[HUGE, 0]]}, "queries[0][0] must be a finite number"),
    ("widths differ", {"keys": [[1, 0, 0], [0, 1, 0]]}, "needs queries and keys of one width"),
    ("values rows", {"values": [[1]]}, "values has 1 rows but keys has 2"),
    ("too many rows", {"keys": [[1, 0]] * 65, "values": [[1]] * 65},
     "keys has 65 rows; at most 64"),
    ("valid_len too big", {"valid_len": 3}, "valid_len must lie in [0, 2], got 3"),
    ("valid_len negative", {"valid_len": -1}, "valid_len must lie in [0, 2]"),
    ("valid_len a float", {"valid_len": 1.0}, "valid_len must be an integer, got float"),
    ("valid_len per query", {"valid_len": [1, 1]}, "valid_len has 2 lengths; give one per query"),
    ("seed a string", {"seed": "1"}, "seed must be an integer, got str"),
    ("seed too big", {"seed": 2**31}, "seed must lie in [0, 2147483647]"),
]


def _table() -> list[tuple[str, str, dict, int, str]]:
  """(case id, path, request, status, message fragment) for every malformed request."""
  answer = "/api/runs/{id}/answer"
  text_runs = ("sentiment_pooling", "translation_transformer", "couplet_lstm")
  posts = {name: answer.format(id=IDS[name]) for name in (*text_runs, "matching_esim")}
  posts["zoo"] = "/api/zoo"
  table = []
  for endpoint, path in posts.items():
    for case, request, status, message in ANY_POST:
      table.append((f"{endpoint}: {case}", path, request, status, message))
  for name in text_runs:
    for case, request, status, message in TEXT_INPUTS:
      table.append((f"{name}: {case}", posts[name], request, status, message))
  for name, extra in (("translation_transformer", TRANSLATION_OPTIONS),
                      ("couplet_lstm", COUPLET_OPTIONS)):
    for case, options, message in DECODING_OPTIONS + extra:
      table.append((f"{name}: {case}", posts[name],
                    _json({"input": "I won!", "options": options}), 422, message))
  for case, request, status, message in PAIR_INPUTS:
    table.append((f"matching_esim: {case}", posts["matching_esim"], request, status, message))
  zoo_base = {"score": "dot", "queries": [[1, 0]], "keys": [[1, 0], [0, 1]],
              "values": [[1], [2]], "valid_len": 1, "seed": 0}
  for case, change, message in ZOO_BODIES:
    body = change if case in ("no score", "nothing") else {**zoo_base, **change}
    table.append((f"zoo: {case}", "/api/zoo", _json(body), 422, message))
  for run_id in ("9", "x", "-1", "0x1", "%20"):
    table.append((f"unknown run {run_id}", answer.format(id=run_id), {"json": {"input": "x"}},
                  404, "unknown run id"))
  return table


TABLE = _table()
OTHER_METHODS = [
    ("GET", "/api/nothing", 404, "no such path: GET /api/nothing"),
    ("GET", "/static/nothing.js", 404, "no such path: GET /static/nothing.js"),
    ("POST", "/api/health", 405, "method POST is not allowed on /api/health"),
    ("GET", "/api/zoo", 405, "method GET is not allowed on /api/zoo"),
    ("GET", f"/api/runs/{IDS['sentiment_pooling']}/answer", 405, "method GET is not allowed"),
    ("PUT", "/api/runs", 405, "method PUT is not allowed on /api/runs"),
    ("DELETE", "/api/zoo", 405, "method DELETE is not allowed"),
    ("POST", "/", 405, "method POST is not allowed on /"),
]


def test_the_table_holds_over_a_hundred_malformed_requests():
  assert len(TABLE) + len(OTHER_METHODS) >= 100


@pytest.mark.parametrize("case, path, request_kwargs, status, message", TABLE,
                         ids=[row[0] for row in TABLE])
def test_malformed_requests_get_a_json_error_naming_the_problem(client, case, path,
                                                                request_kwargs, status, message):
  response = client.post(path, **request_kwargs)
  assert response.status_code == status, (case, response.text)
  body = response.json()
  assert list(body) == ["error"] and message.lower() in body["error"].lower(), (case, body)
  _healthy(client)


@pytest.mark.parametrize("method, path, status, message", OTHER_METHODS)
def test_wrong_methods_and_paths_get_a_json_error(client, method, path, status, message):
  response = client.request(method, path)
  assert response.status_code == status
  assert message.lower() in response.json()["error"].lower()
  _healthy(client)


def test_the_server_still_answers_after_the_table(client):
  response = client.post(f"/api/runs/{IDS['sentiment_pooling']}/answer",
                         content=json.dumps({"input": "a fine film"}).encode(),
                         headers={"content-type": "application/json; charset=utf-8"})
  assert response.status_code == 200 and response.json()["output"]["lines"]
