"""The OpenAI-compatible HTTP face of a fleet: /v1/models, /v1/chat/completions, /v1/completions,
/health and /metrics, on FastAPI (Starlette) with server-sent events for streaming.

A request is counted (prompt tokens), checked against the model's context, placed in its conversation
(`tokens.SessionIndex`) and submitted to the simulation at the simulated "now"; its tokens are sent as
the simulation produces them. Streaming answers wait for the first token before sending headers, so a
request the fleet refuses still gets an error object, not a broken stream.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from lpxsim.serve import errors
from lpxsim.serve.bridge import Bridge, Stream
from lpxsim.serve.errors import ApiError
from lpxsim.serve.metrics import ServeMetrics
from lpxsim.serve.schemas import ChatRequest, CompletionRequest
from lpxsim.serve.tokens import (
    SessionIndex,
    encode,
    filler_token,
    render_chat,
    reply_tokens,
    stop_cut,
    visible_text,
)

_TOKENIZE_INLINE_CHARS = 20_000  # longer prompts are tokenized in a thread so the loop keeps serving


@dataclass
class ServeState:
    """What the handlers share: the served models, limits, the bridge (None while warming) and metrics."""

    models: dict[str, int]  # served model name -> its context length (tokens)
    time_scale: float
    metrics: ServeMetrics
    sessions: SessionIndex
    default_max_tokens: int = 256
    unit_tokens: int = 64
    bridge: Bridge | None = None
    warm_error: str | None = None
    closing: bool = False
    created: int = field(default_factory=lambda: int(time.time()))

    def close(self) -> None:
        """The server is stopping: every open answer ends now (called from a signal handler)."""
        self.closing = True
        bridge = self.bridge
        if bridge is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        for s in list(bridge.streams.values()):
            if loop is not None:
                loop.call_soon(s.event.set)
            else:
                s.event.set()


@dataclass
class _Job:
    """One admitted request: its stream and what its answer needs."""

    endpoint: str
    model: str
    stream: Stream
    isl: int
    osl: int
    cut: int | None
    stops: list[str]
    prompt_tokens: list[int]
    placement: object
    include_usage: bool
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:24])
    released: bool = False


class _SseResponse(StreamingResponse):
    """A streamed answer that releases its request however the response ends, even if the client left before
    the body iterator ever started (an unstarted generator never runs its `finally`)."""

    def __init__(self, content, on_close, **kw) -> None:
        super().__init__(content, **kw)
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


def create_app(state: ServeState) -> FastAPI:
    """The ASGI app serving `state`."""
    app = FastAPI(title="lpxsim serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serve = state
    errors.install(app)

    @app.get("/health")
    async def health() -> JSONResponse:
        if state.warm_error is not None:
            return JSONResponse({"status": "failed", "error": state.warm_error}, status_code=503)
        if state.bridge is None:
            return JSONResponse({"status": "warming"}, status_code=503)
        return JSONResponse({"status": "ok", "simulated_time_s": state.bridge.sim_now()})

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "created": state.created, "owned_by": "lpxsim", "max_model_len": ctx}
            for m, ctx in state.models.items()]})

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest, request: Request) -> Response:
        text = render_chat([{"role": m.role, "content": m.text()} for m in body.messages])
        tokens = await _tokenize(text)
        return await _answer(state, request, "chat", body, tokens, "messages")

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request) -> Response:
        p = body.prompt
        if isinstance(p, list) and (not p or isinstance(p[0], int)):
            tokens = list(p)
        else:
            tokens = await _tokenize(p if isinstance(p, str) else p[0])
        return await _answer(state, request, "completions", body, tokens, "prompt")

    return app


async def _tokenize(text: str) -> list[int]:
    if len(text) <= _TOKENIZE_INLINE_CHARS:
        return encode(text)
    return await asyncio.to_thread(encode, text)


def _admit(state: ServeState, endpoint: str, body, tokens: list[int], prompt_field: str) -> _Job:
    """Check the request against the served model and its context, place it, submit it to the simulation."""
    bridge = state.bridge
    if bridge is None:
        raise ApiError(503, state.warm_error or "the virtual rack is warming up (compiling); retry shortly",
                       code="warming", type_="service_unavailable")
    context = state.models.get(body.model)
    if context is None:
        raise ApiError(404, f"model {body.model!r} is not served here (served: {', '.join(state.models)})",
                       param="model", code="model_not_found")
    isl = max(1, len(tokens))
    limit = body.limit()
    max_tokens = limit if limit is not None else min(state.default_max_tokens, max(1, context - isl))
    if isl + max_tokens > context:
        raise ApiError(400, f"this model's context is {context} tokens; the prompt has {isl} and max_tokens is "
                            f"{max_tokens}", param=prompt_field if isl >= context else "max_tokens",
                       code="context_length_exceeded")
    stops = body.stops()
    cut = stop_cut(max_tokens, stops)
    osl = cut if cut is not None else max_tokens
    placement = state.sessions.place(tokens)
    stream = bridge.submit(isl, osl, hash_block_tokens=state.unit_tokens,
                           session_hash_base=placement.session_hash_base, session=placement.session)
    state.metrics.prompt_tokens.inc(isl)
    usage = body.stream_options is not None and body.stream_options.include_usage
    return _Job(endpoint, body.model, stream, isl, osl, cut, stops, tokens, placement, usage)


async def _answer(state: ServeState, request: Request, endpoint: str, body, tokens: list[int],
                  prompt_field: str) -> Response:
    job = _admit(state, endpoint, body, tokens, prompt_field)
    m = state.metrics
    m.in_flight.inc()
    handed_over = False
    try:
        first = await _wait(state, job.stream, request, lambda s: s.available > 0 or s.final)
        if first is None:
            return _gone(state, endpoint)
        if job.stream.available == 0 and not job.stream.completed:
            m.requests.labels(endpoint, "rejected").inc()
            reason = job.stream.req.reason or job.stream.req.status
            return errors.error_response(400, f"the fleet refused the request: {reason}", code="rejected")
        if body.stream:
            handed_over = True
            return _SseResponse(_sse(state, job), lambda: _release(state, job), media_type="text/event-stream",
                                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        done = await _wait(state, job.stream, request, lambda s: s.final)
        if done is None:
            return _gone(state, endpoint)
        _observe_done(state, job)
        return JSONResponse(_full_body(state, job))
    finally:
        if not handed_over:
            _release(state, job)


def _gone(state: ServeState, endpoint: str) -> Response:
    """The answer for a client that left (nobody reads it) or a server that is stopping."""
    if state.closing:
        state.metrics.requests.labels(endpoint, "shutdown").inc()
        return errors.error_response(503, "the server is stopping", "service_unavailable", code="shutdown")
    state.metrics.requests.labels(endpoint, "disconnected").inc()
    return Response(status_code=499)


async def _wait(state: ServeState, s: Stream, request: Request, ready) -> Stream | None:
    """Wait until `ready(s)`; None if the client went away (or the server is stopping) first.

    The client's leaving is noticed by a task waiting on the connection's next ASGI message (a disconnect),
    not by polling: requests that arrived together would otherwise wake together at every poll, tens of
    handlers in one event-loop iteration, however many there are waiting in the fleet's queue."""
    if ready(s):
        return s
    left = False

    async def watch() -> None:
        nonlocal left
        while (await request.receive())["type"] != "http.disconnect":
            pass
        left = True
        s.event.set()

    watcher = asyncio.get_running_loop().create_task(watch())
    try:
        while not ready(s):
            if state.closing or left:
                return None
            s.event.clear()
            await s.event.wait()
        return s
    finally:
        watcher.cancel()


def _release(state: ServeState, job: _Job) -> None:
    """Once per request, however its answer ended: the request leaves the bridge and the in-flight count."""
    if job.released:
        return
    job.released = True
    state.metrics.in_flight.dec()
    _finish(state, job)


def _finish(state: ServeState, job: _Job) -> None:
    """Give the request back to the bridge and record its conversation (prompt + the reply it produced)."""
    if state.bridge is not None:
        state.bridge.close(job.stream)
    if job.stream.completed:
        state.sessions.record(job.placement, job.prompt_tokens + reply_tokens(job.osl, job.cut, job.stops))


def _observe_done(state: ServeState, job: _Job) -> None:
    s = job.stream
    m = state.metrics
    scale = state.time_scale
    r = s.req
    m.requests.labels(job.endpoint, "completed").inc()
    m.generation_tokens.inc(job.osl)
    m.cached_tokens.inc(r.cached_tokens)
    m.e2e.observe((time.monotonic() - s.arrived_wall) / scale)


def _usage(job: _Job) -> dict:
    return {"prompt_tokens": job.isl, "completion_tokens": job.osl, "total_tokens": job.isl + job.osl,
            "prompt_tokens_details": {"cached_tokens": int(job.stream.req.cached_tokens)}}


def _finish_reason(job: _Job) -> str:
    return "stop" if job.cut is not None else "length"


def _full_body(state: ServeState, job: _Job) -> dict:
    text, _ = visible_text(job.osl, job.cut, job.stops)
    reason = _finish_reason(job)
    if job.endpoint == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                  "finish_reason": reason}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        obj = "text_completion"
    return {"id": f"{'chatcmpl' if job.endpoint == 'chat' else 'cmpl'}-{job.id}", "object": obj,
            "created": int(time.time()), "model": job.model, "choices": [choice], "usage": _usage(job)}


class _Chunks:
    """SSE lines of one streamed answer (a template per token: the hot path of a streaming server)."""

    def __init__(self, job: _Job) -> None:
        self.job = job
        chat = job.endpoint == "chat"
        head = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{job.id}",
                "object": "chat.completion.chunk" if chat else "text_completion", "created": int(time.time()),
                "model": job.model}
        self._prefix = "data: " + json.dumps(head)[:-1] + ', "choices": [{"index": 0, '
        self.chat = chat
        self._sent_chars = 0
        self._pos = 0  # characters of the whole filler up to the last token sent
        # only a reply cut by a stop string needs its visible text (short: the cut comes within ~60 tokens);
        # otherwise token i's text is filler word i (a reply of max_tokens words is never built here)
        self._visible = visible_text(job.osl, job.cut, job.stops)[0] if job.cut is not None else None

    def token(self, i: int) -> bytes:
        """The chunk of output token i, called in order (its text is what of it is visible: a stop string
        is withheld)."""
        word = filler_token(i)
        if self._visible is None:
            piece = word
        else:
            self._pos += len(word)
            end = min(self._pos, len(self._visible))
            piece = self._visible[self._sent_chars:end]
            self._sent_chars = max(self._sent_chars, end)
        text = json.dumps(piece)
        if self.chat:
            delta = '{"role": "assistant", "content": ' + text + "}" if i == 0 else '{"content": ' + text + "}"
            return (self._prefix + '"delta": ' + delta + ', "logprobs": null, "finish_reason": null}]}\n\n').encode()
        return (self._prefix + '"text": ' + text + ', "logprobs": null, "finish_reason": null}]}\n\n').encode()

    def last(self, reason: str) -> bytes:
        if self.chat:
            return (self._prefix + '"delta": {}, "logprobs": null, "finish_reason": "' + reason + '"}]}\n\n').encode()
        return (self._prefix + '"text": "", "logprobs": null, "finish_reason": "' + reason + '"}]}\n\n').encode()

    def usage(self) -> bytes:
        head = self._prefix[: -len('"choices": [{"index": 0, ')]
        return (head + '"choices": [], "usage": ' + json.dumps(_usage(self.job)) + "}\n\n").encode()


async def _sse(state: ServeState, job: _Job) -> AsyncIterator[bytes]:
    """The streamed answer: one chunk per token as the simulation produces it, then the finish (and usage)."""
    s = job.stream
    m = state.metrics
    scale = state.time_scale
    chunks = _Chunks(job)
    sent = 0
    last_wall = 0.0
    try:
        while True:
            n = s.available
            while sent < n:
                now = time.monotonic()
                if sent == 0:
                    m.ttft.observe((now - s.arrived_wall) / scale)
                else:
                    m.itl.observe((now - last_wall) / scale)
                last_wall = now
                yield chunks.token(sent)
                sent += 1
            if s.final and sent >= s.available or state.closing:
                break
            s.event.clear()
            if s.available == sent and not s.final:
                await s.event.wait()
        if state.closing and not s.completed:
            yield ("data: " + json.dumps(errors.error_body("the server is stopping", "service_unavailable",
                                                            code="shutdown")) + "\n\n").encode()
        if s.completed:
            _observe_done(state, job)
            yield chunks.last(_finish_reason(job))
            if job.include_usage:
                yield chunks.usage()
        else:
            m.requests.labels(job.endpoint, s.req.status).inc()
        yield b"data: [DONE]\n\n"
    except (asyncio.CancelledError, GeneratorExit):
        m.requests.labels(job.endpoint, "disconnected").inc()
        raise
    finally:
        _release(state, job)
