"""An `lpxsim serve` app running in a thread of the test process, on 127.0.0.1 and a free port."""

from __future__ import annotations

import contextlib
import threading
import time

import httpx

from lpxsim.serve.server import ServeOptions, bind, build
from lpxsim.serving.config import load_fleet


@contextlib.contextmanager
def running_server(fleet: dict, **opts):
    """Yield (base_url, state) of a warmed-up server; stopped on exit."""
    import uvicorn

    options = ServeOptions(host="127.0.0.1", port=0, **opts)
    app, state = build(load_fleet(fleet), options)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                           timeout_graceful_shutdown=0.5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError("server did not become ready in 60 s")
        yield base, state
    finally:
        server.should_exit = True
        thread.join(10)


def wait_until(cond, timeout_s: float = 10.0) -> bool:
    """Poll `cond()` until true or the timeout (a bound on a wait, not a timed assertion)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()
