"""Running the endpoint: uvicorn on a socket bound before start-up, warm-up in a thread, clean stop.

The server binds 127.0.0.1 unless told otherwise. It answers /health with "warming" while the fleet's
step models are built and priced in a daemon thread, then starts the bridge. SIGINT and SIGTERM stop it
within about a second (open streams are cut after a short grace period); the timeline, if asked for,
is written on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from starlette.exceptions import HTTPException as StarletteHTTPException

from lpxsim.serve.pacing import Turnstile
from lpxsim.serving.config import ENTRY_ROLES, FleetConfig

GRACE_S = 0.5  # open streams get this long after a signal before they are cut
ARRIVALS_PER_ITERATION = 4  # new requests handled per event-loop iteration (~0.1-0.5 ms of CPU each)


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    time_scale: float = 1.0
    seed: int = 0
    api_key: str | None = None
    max_body_bytes: int = 16 << 20
    default_max_tokens: int = 256
    unit_tokens: int = 64
    warm_context: int = 32_768
    timeline: Path | None = None
    # GC settings for serving once warm-up is done (`settle_gc`); process-wide, so only the CLI's own process
    # asks for them (a server started inside another program, e.g. the tests, leaves that program's GC alone)
    settle_gc: bool = False


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def served_models(fleet: FleetConfig) -> dict[str, int]:
    """Model name -> context length, for the models of the fleet's entry pools."""
    from lpxsim.serving.backends import pool_model

    out: dict[str, int] = {}
    for p in fleet.pools:
        if p.role in ENTRY_ROLES and p.model not in out:
            out[p.model] = int(pool_model(p).max_context)
    return out


class _BodyTooLarge(StarletteHTTPException):
    """Raised while the body streams in; an HTTPException, so the app answers it as a 413 error object."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes")


class Guard:
    """ASGI middleware: bounded request bodies (413), with an API key bearer auth on /v1 (401), and new POST
    requests paced through `arrivals` (a burst of them is handled a few per event-loop iteration)."""

    def __init__(self, app, max_body_bytes: int, api_key: str | None, arrivals: Turnstile | None = None) -> None:
        self.app = app
        self.max = max_body_bytes
        self.key = f"Bearer {api_key}".encode() if api_key else None
        self.arrivals = arrivals

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from lpxsim.serve.errors import error_response

        headers = dict(scope.get("headers") or [])
        if self.key is not None and scope["path"].startswith("/v1") \
                and not hmac.compare_digest(headers.get(b"authorization", b""), self.key):
                return await error_response(401, "missing or wrong API key (Authorization: Bearer KEY)",
                                            type_="authentication_error", code="invalid_api_key")(scope, receive, send)
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max):
            return await self._too_large(scope, receive, send)
        if self.arrivals is not None and scope["method"] == "POST":
            await self.arrivals.turn()
        seen = 0

        async def bounded():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max:
                    raise _BodyTooLarge(self.max)
            return msg

        try:
            await self.app(scope, bounded, send)
        except _BodyTooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope, receive, send) -> None:
        from lpxsim.serve.errors import error_response

        await error_response(413, f"request body over {self.max} bytes", code="body_too_large")(scope, receive, send)


def build(fleet: FleetConfig, opts: ServeOptions):
    """The ASGI app (with its guard) and its state; the fleet is warmed by `lifespan`."""
    from lpxsim.serve.app import ServeState, create_app
    from lpxsim.serve.metrics import ServeMetrics
    from lpxsim.serve.tokens import SessionIndex

    state = ServeState(models=served_models(fleet), time_scale=opts.time_scale,
                       metrics=ServeMetrics(opts.time_scale), sessions=SessionIndex(opts.unit_tokens),
                       default_max_tokens=opts.default_max_tokens, unit_tokens=opts.unit_tokens)
    app = create_app(state)
    app.router.lifespan_context = _lifespan(fleet, opts, state)
    return Guard(app, opts.max_body_bytes, opts.api_key, Turnstile(ARRIVALS_PER_ITERATION)), state


def _warm(fleet: FleetConfig, opts: ServeOptions, loop: asyncio.AbstractEventLoop, ready) -> None:
    """Build the online simulation and price its shapes (in a daemon thread), then hand it to the loop."""
    from lpxsim.core.errors import UserError
    from lpxsim.serving.online import OnlineSimulation

    try:
        from lpxsim.serve.tokens import encode

        encode("warm")  # builds the o200k_base encoding (about a second) before the first request needs it
        # a long history of finished requests only for a timeline: otherwise the most recent ones (every kept
        # request is a long-lived object that each full garbage collection walks)
        online = OnlineSimulation(fleet, seed=opts.seed, keep_finished=100_000 if opts.timeline else RECENT_KEPT)
        online.warm(opts.warm_context)
    except UserError as e:
        loop.call_soon_threadsafe(ready, None, str(e))
        return
    except Exception as e:  # a backend failure: reported on /health, the server stays up to say so
        loop.call_soon_threadsafe(ready, None, f"{type(e).__name__}: {e}")
        return
    loop.call_soon_threadsafe(ready, online, None)


def _lifespan(fleet: FleetConfig, opts: ServeOptions, state):
    from lpxsim.serve.bridge import Bridge, watch_loop_lag

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        loop = asyncio.get_running_loop()
        recorder = None

        def ready(online, error) -> None:
            nonlocal recorder
            if online is None:
                state.warm_error = error
                print(f"lpxsim serve: warm-up failed: {error}", file=sys.stderr, flush=True)
                return
            if opts.timeline is not None:
                from lpxsim.serving.timeline import TimelineRecorder

                recorder = TimelineRecorder().attach(online.sim)
            bridge = Bridge(online, opts.time_scale)
            state.metrics.bind(queue_depth=online.queue_depth, running_sequences=online.running,
                               kv_occupancy_ratio=online.kv_occupancy,
                               sessions_resident=lambda: _sessions_resident(state, online),
                               simulated_time_seconds=bridge.sim_now)
            if opts.settle_gc:
                settle_gc()
            bridge.start()
            state.bridge = bridge
            print("lpxsim serve: ready", file=sys.stderr, flush=True)

        threading.Thread(target=_warm, args=(fleet, opts, loop, ready), name="lpxsim-warm", daemon=True).start()
        lag = loop.create_task(watch_loop_lag(state.metrics.loop_lag.observe))
        try:
            yield
        finally:
            lag.cancel()
            if state.bridge is not None:
                await state.bridge.stop()
                if recorder is not None:
                    _write_timeline(opts.timeline, recorder, state.bridge.online)

    return lifespan


RECENT_KEPT = 1024  # finished requests remembered without --timeline
SERVE_GC_THRESHOLDS = (700, 2, 100)  # gen0 allocations, gen0 passes per gen1, gen1 passes per gen2 (see settle_gc)


def settle_gc() -> None:
    """Garbage-collector settings for serving, applied once warm-up is done (before the first request).

    A collection holds the event loop for as long as it walks its generations. Warm-up leaves a few
    hundred thousand long-lived objects (catalog, step models, priced shapes): one full collection, then
    `gc.freeze()` moves the survivors where no collection walks them again. Serving then collects young
    objects in small passes: the CLI's gen0 threshold of 10,000 (`cli.main._quick_gc`, tuned for short
    batch runs) made 2-8 ms gen0 pauses and ~40 ms gen1 pauses under load (benchmarks/serve_loop_trace.py;
    docs/benchmarks.md "`lpxsim serve` with real clients")."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVE_GC_THRESHOLDS)


RESIDENT_CHECKED = 4096  # a scrape looks at this many most recent conversations (bounded work on the loop)


def _sessions_resident(state, online) -> float:
    """Conversations (of the most recent RESIDENT_CHECKED) whose first prefix unit is resident on a worker."""
    from lpxsim.serve.tokens import SESSION_STRIDE

    stores = [w.kv for w in online.workers]
    recent = state.sessions.sessions(RESIDENT_CHECKED)
    return float(sum(any(kv.holds((sid + 1) * SESSION_STRIDE) for kv in stores) for sid in recent))


def _write_timeline(path: Path, recorder, online) -> None:
    from lpxsim.serving.metrics import request_frame
    from lpxsim.serving.timeline import write_timeline

    recorder.flush(online.sim, online.now_s)

    class _Done:  # request_frame reads `.requests`
        requests = online.history()

    written = write_timeline(path, recorder, request_frame(_Done))
    print(f"lpxsim serve: wrote {written}", file=sys.stderr, flush=True)


def check_host(host: str) -> None:
    """UserError naming `host` unless it resolves to an address (checked before anything is printed or loaded)."""
    from lpxsim.core.errors import UserError

    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise UserError("host", f"cannot resolve {host!r}: {getattr(e, 'strerror', None) or e}") from None


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free port)."""
    import errno

    from lpxsim.core.errors import UserError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only then (a token chunk after the headers
    # would otherwise wait for the client's delayed ACK, ~40 ms); set on the listener too, which Linux inherits
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        field = "host" if e.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) else "port"  # not this machine's
        raise UserError(field, f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server that ends open streams at once on a signal and exits 0 (no re-raised signal)."""

        on_exit = None

        def handle_exit(self, sig, frame) -> None:
            if self.on_exit is not None:
                self.on_exit()
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            old = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)

    return Server


def run(fleet: FleetConfig, opts: ServeOptions, on_listening=None) -> dict:
    """Serve until SIGINT/SIGTERM; returns a summary (address, requests answered)."""
    import uvicorn

    app, state = build(fleet, opts)
    sock = bind(opts.host, opts.port)
    host, port = sock.getsockname()[:2]
    address = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    if on_listening is not None:
        on_listening(address)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=GRACE_S, timeout_keep_alive=30, backlog=2048)
    server = _server_class()(config)
    server.on_exit = state.close
    server.run(sockets=[sock])
    served = {}
    for metric in state.metrics.requests.collect():
        for s in metric.samples:
            if s.name.endswith("_total"):
                served[f"{s.labels['endpoint']}:{s.labels['outcome']}"] = int(s.value)
    return {"address": address, "models": state.models, "time_scale": opts.time_scale, "requests": served,
            "timeline": str(opts.timeline) if opts.timeline else None}
