"""`lpxsim serve` over HTTP on 127.0.0.1: the official `openai` client streams from it, usage and limits follow
the OpenAI API, served token gaps match the simulated TPOT, and conversations hit the prefix cache."""

from __future__ import annotations

import time

import httpx
import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.serving import simulate
from serve_harness import running_server, wait_until
from serving_fixtures import fleet, pool

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.usefixtures("serving_double")

MODEL = "gemma-4-31b"
FLEET = fleet(pool(workers=2))


@pytest.fixture(scope="module")
def server():
    with running_server(FLEET, time_scale=1.0) as s:
        yield s


def _client(base: str):
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30)


def test_openai_client_streams_chat(server):
    base, _ = server
    stream = _client(base).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Tell me about LPX."}], max_tokens=12, stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    content = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) == 12  # one chunk per token, exactly max_tokens of them
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == ["length"]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage.completion_tokens == 12
    assert usage.prompt_tokens > 5 and usage.total_tokens == usage.prompt_tokens + 12


def test_openai_client_plain_answers(server):
    base, _ = server
    c = _client(base)
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_completion_tokens=7)
    assert r.usage.completion_tokens == 7 and r.choices[0].finish_reason == "length"
    assert r.choices[0].message.content == " the of and to in a is"
    t = c.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=5)
    assert t.usage.completion_tokens == 5 and t.usage.prompt_tokens == 4 and t.choices[0].text == " the of and to in"
    s = list(c.completions.create(model=MODEL, prompt=[1, 2, 3], max_tokens=4, stream=True))
    assert "".join(x.choices[0].text for x in s if x.choices) == " the of and to"
    assert [m.id for m in c.models.list().data] == [MODEL]


def test_agent_request_fields_are_accepted(server):
    base, _ = server
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {}}}}]
    r = _client(base).chat.completions.create(
        model=MODEL, max_tokens=3, tools=tools, tool_choice="auto", temperature=0.2, top_p=0.9, seed=1,
        response_format={"type": "text"}, messages=[
            {"role": "system", "content": "agent"}, {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                    "function": {"name": "search", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"}])
    assert r.usage.completion_tokens == 3 and r.choices[0].message.content == " the of and"


def test_stop_sequence_ends_early(server):
    base, _ = server
    r = _client(base).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                              max_tokens=50, stop=[" to"])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == " the of and"
    assert r.usage.completion_tokens == 4  # the token that completed the stop string was generated


def test_conversation_resending_history_hits_prefix_cache(server):
    base, _ = server
    c = _client(base)
    history = [{"role": "system", "content": "You are terse. " * 200},
               {"role": "user", "content": "First question, long enough to fill units. " * 30}]
    a = c.chat.completions.create(model=MODEL, messages=history, max_tokens=100)
    assert a.usage.prompt_tokens_details.cached_tokens == 0
    history += [{"role": "assistant", "content": a.choices[0].message.content},
                {"role": "user", "content": "And the second?"}]
    b = c.chat.completions.create(model=MODEL, messages=history, max_tokens=10)
    cached = b.usage.prompt_tokens_details.cached_tokens
    # the earlier prompt and reply are resident: all their complete 64-token units hit
    assert cached >= (a.usage.prompt_tokens + 100) // 64 * 64 - 64
    assert cached < b.usage.prompt_tokens
    gauges = dict(line.split(" ") for line in httpx.get(f"{base}/metrics").text.splitlines()
                  if line.startswith(("lpxsim_sessions_resident ", "lpxsim_kv_occupancy_ratio ")))
    assert float(gauges["lpxsim_sessions_resident"]) >= 1 and float(gauges["lpxsim_kv_occupancy_ratio"]) > 0


def test_metrics_and_health(server):
    base, _ = server
    assert httpx.get(f"{base}/health").json()["status"] == "ok"
    _client(base).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=3,
                                          stream=True).close()
    text = httpx.get(f"{base}/metrics").text
    for name in ("lpxsim_requests_total", "lpxsim_prompt_tokens_total", "lpxsim_generation_tokens_total",
                 "lpxsim_time_to_first_token_seconds_bucket", "lpxsim_inter_token_latency_seconds_bucket",
                 "lpxsim_queue_depth", "lpxsim_kv_occupancy_ratio", "lpxsim_sessions_resident",
                 "lpxsim_event_loop_lag_seconds_bucket"):
        assert name in text
    assert 'lpxsim_requests_total{endpoint="chat",outcome="completed"}' in text


def test_served_itl_matches_simulated_tpot():
    """At time scale 20 a token gap is tens of milliseconds of wall time, which the clock resolves."""
    scale, osl = 20.0, 30
    body = {"model": MODEL, "prompt": "word " * 500, "max_tokens": osl, "stream": True,
            "stream_options": {"include_usage": True}}
    with running_server(FLEET, time_scale=scale) as (base, _), \
            httpx.stream("POST", f"{base}/v1/completions", timeout=60, json=body) as r:
        times, isl = [], None
        for line in r.iter_lines():
            if line.startswith("data: {") and '"text": "' in line and '"finish_reason": null' in line:
                times.append(time.monotonic())
            elif '"usage"' in line:
                isl = httpx.Response(200, content=line[6:]).json()["usage"]["prompt_tokens"]
    assert len(times) == osl
    served_itl = (times[-1] - times[0]) / (osl - 1) / scale
    work = {"name": "one", "kind": "synthetic", "num_requests": 1, "arrival": {"process": "poisson", "rate": 1},
            "isl": isl, "osl": osl}
    sim_tpot = float(simulate(FLEET, work).requests["tpot_s"].iloc[0])
    assert served_itl == pytest.approx(sim_tpot, rel=0.05)


def test_disconnect_mid_stream_frees_the_request():
    with running_server(FLEET, time_scale=50.0) as (base, state):
        online = state.bridge.online
        baseline = [w.kv.used - w.kv.evictable for w in online.workers]
        for _ in range(3):
            with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=30,
                              json={"model": MODEL, "messages": [{"role": "user", "content": "go " * 3000}],
                                    "max_tokens": 2000, "stream": True}) as r:
                got = 0
                for line in r.iter_lines():
                    got += line.startswith("data: {")
                    if got >= 3:
                        break  # the client leaves mid-stream
        assert wait_until(lambda: not state.bridge.streams and not online.live and not online._pending_abort, 20)
        assert [r.status for r in online.finished] == ["aborted"] * 3
        for w, base_bytes in zip(online.workers, baseline, strict=True):
            assert w.n_dec == 0 and not w.prefilling and not w.waiting and not w.finish_heap
            assert w.kv.used - w.kv.evictable == pytest.approx(base_bytes, abs=1.0)  # nothing still referenced
        assert online.sim.in_system == 0
        text = httpx.get(f"{base}/metrics").text
        assert 'lpxsim_requests_total{endpoint="chat",outcome="disconnected"} 3.0' in text
        assert "lpxsim_requests_in_flight 0.0" in text


def test_client_leaving_before_its_answer_frees_the_request():
    """A client that leaves while its request waits for a first token (streaming) or for its whole answer (not
    streaming) is noticed by the disconnect it sends, without polling: the request leaves the fleet."""
    with running_server(FLEET, time_scale=2000.0) as (base, state):  # a first token seconds away
        online = state.bridge.online
        for stream in (True, False):
            body = {"model": MODEL, "messages": [{"role": "user", "content": "go " * 3000}], "max_tokens": 2000,
                    "stream": stream}
            with pytest.raises(httpx.ReadTimeout):  # the client gives up before anything comes back
                httpx.post(f"{base}/v1/chat/completions", json=body, timeout=httpx.Timeout(10.0, read=0.3))
        assert wait_until(lambda: not state.bridge.streams and not online.live and not online._pending_abort, 20)
        assert sorted(r.status for r in online.finished) == ["aborted", "aborted"]
        assert online.sim.in_system == 0
        text = httpx.get(f"{base}/metrics").text
        assert 'lpxsim_requests_total{endpoint="chat",outcome="disconnected"} 2.0' in text
