"""Bad requests to `lpxsim serve` get an OpenAI-style error object with a 4xx, never a 500 or a traceback."""

from __future__ import annotations

import httpx
import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from serve_harness import running_server
from serving_fixtures import fleet, pool

pytestmark = pytest.mark.usefixtures("serving_double")

MODEL = "gemma-4-31b"
CHAT = "/v1/chat/completions"
OK = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def server():
    with running_server(fleet(pool()), max_body_bytes=64 * 1024) as s:
        yield s[0]


def _error(r: httpx.Response, status: int, code: str | None = None, param: str | None = None) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert "Traceback" not in r.text and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    if param is not None:
        assert body["error"]["param"] == param
    return body["error"]


@pytest.mark.parametrize("raw", [b"{", b"not json", b"", b"\xff\xfe", b"[1, 2]", b'"text"', b"null"])
def test_malformed_bodies(server, raw):
    r = httpx.post(server + CHAT, content=raw, headers={"content-type": "application/json"})
    _error(r, 400)


@pytest.mark.parametrize("patch,param", [
    ({"bogus": 1}, "bogus"),
    ({"messages": [{"role": "user", "content": "x", "extra": 1}]}, "messages.0.extra"),
    ({"stream_options": {"include_usage": True, "what": 1}}, "stream_options.what"),
])
def test_unknown_fields(server, patch, param):
    _error(httpx.post(server + CHAT, json={**OK, **patch}), 400, "unknown_field", param)


@pytest.mark.parametrize("patch,param", [
    ({"max_tokens": "many"}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": -5}, "max_tokens"),
    ({"max_tokens": 1.5}, "max_tokens"),
    ({"max_completion_tokens": [3]}, "max_completion_tokens"),
    ({"stream": "yes please"}, "stream"),
    ({"messages": "hello"}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
    ({"temperature": float("nan")}, None),
    ({"n": 2}, "n"),
    ({"model": 7}, "model"),
    ({"max_tokens": 3, "max_completion_tokens": 4}, None),
])
def test_wrong_types_and_values(server, patch, param):
    if patch.get("temperature") is not None:  # NaN is not JSON: send it the way a careless client would
        r = httpx.post(server + CHAT, content=b'{"model": "gemma-4-31b", "messages": [{"role": "user", "content":'
                                              b' "x"}], "temperature": NaN}', headers={"content-type": "application/json"})
        _error(r, 400)
        return
    _error(httpx.post(server + CHAT, json={**OK, **patch}), 400, param=param)


def test_missing_fields(server):
    _error(httpx.post(server + CHAT, json={"model": MODEL}), 400, "missing_field", "messages")
    _error(httpx.post(server + "/v1/completions", json={"model": MODEL}), 400, "missing_field", "prompt")


def test_context_too_long_is_400(server):
    r = httpx.post(server + "/v1/completions", json={"model": MODEL, "prompt": [5] * 1000, "max_tokens": 400_000})
    _error(r, 400, "context_length_exceeded", "max_tokens")
    r = httpx.post(server + CHAT, json={**OK, "max_tokens": 10**9})
    _error(r, 400, "invalid_value", "max_tokens")


def test_body_too_large_is_413(server):
    r = httpx.post(server + CHAT, json={**OK, "messages": [{"role": "user", "content": "x" * 100_000}]})
    _error(r, 413, "body_too_large")

    def chunks():  # no Content-Length: the limit is counted as the body streams in
        yield b'{"model": "gemma-4-31b", "messages": [{"role": "user", "content": "'
        for _ in range(100):
            yield b"y" * 1024
        yield b'"}]}'

    r = httpx.post(server + CHAT, content=chunks(), headers={"content-type": "application/json"})
    _error(r, 413, "body_too_large")


def test_unknown_model_route_and_method(server):
    _error(httpx.post(server + CHAT, json={**OK, "model": "gpt-17"}), 404, "model_not_found", "model")
    _error(httpx.get(server + "/v1/nothing-here"), 404)
    _error(httpx.get(server + CHAT), 405)


def test_api_key():
    with running_server(fleet(pool()), api_key="s3cret") as (base, _):
        _error(httpx.post(base + CHAT, json=OK), 401, "invalid_api_key")
        _error(httpx.post(base + CHAT, json=OK, headers={"Authorization": "Bearer wrong"}), 401)
        ok = httpx.post(base + CHAT, json=OK, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2
        assert httpx.get(base + "/health").status_code == 200  # health and metrics stay open


def test_warming_until_the_fleet_is_priced(monkeypatch):
    """/health says "warming" (503) and completions get a 503 error object until warm-up has finished."""
    import threading
    import time

    import uvicorn

    from lpxsim.serve.server import ServeOptions, bind, build
    from lpxsim.serving.config import load_fleet
    from lpxsim.serving.online import OnlineSimulation

    release = threading.Event()
    real_warm = OnlineSimulation.warm
    monkeypatch.setattr(OnlineSimulation, "warm", lambda self, ctx: (release.wait(60), real_warm(self, ctx))[1])
    app, _ = build(load_fleet(fleet(pool())), ServeOptions(port=0))
    sock = bind("127.0.0.1", 0)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(500):  # until the server answers at all (bounded)
            try:
                r = httpx.get(base + "/health", timeout=30)
                break
            except httpx.TransportError:
                time.sleep(0.02)
        assert r.status_code == 503 and r.json() == {"status": "warming"}
        _error(httpx.post(base + CHAT, json=OK, timeout=30), 503, "warming")
        release.set()
        for _ in range(500):
            if httpx.get(base + "/health", timeout=30).status_code == 200:
                break
            time.sleep(0.02)
        assert httpx.post(base + CHAT, json=OK, timeout=30).status_code == 200
    finally:
        release.set()
        server.should_exit = True
        thread.join(10)
