"""Load on `lpxsim serve`: N concurrent streaming clients on 127.0.0.1 for a bounded time.

Starts `lpxsim serve` as a subprocess (a one-replica Vera Rubin fleet unless --fleet is given) on a free
loopback port, runs `--clients` streaming chat clients in one asyncio process for `--seconds`, each
asking for `--max-tokens` tokens again and again, and reports: requests completed, errors (HTTP or a
wrong token count), tokens streamed, the server's event-loop lag P99 (from its /metrics histogram),
and the server's resident memory at a third of the run and at the end. Every connection goes to
127.0.0.1; the run is bounded in time (and each client in requests).

At the end it opens one more stream and sends SIGTERM while it is streaming: `sigterm_stop_s` is the time
from the signal to the process's exit.

Targets (issue 29 item 4): no errors, event-loop lag P99 <= 5 ms, memory bounded, stop within 2 s. Exit 1 if
one is missed.

Usage: python benchmarks/serve_load.py [--clients 256] [--seconds 60] [--time-scale 20] [--loop-trace T.json] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import yaml

FLEET = {"name": "one-rubin", "pools": [{"name": "rubin", "system": "vr-nvl72", "backend": "gpu",
                                         "model": "gemma-4-31b", "workers": 1, "gpus_per_worker": 8}]}
MAX_REQUESTS_PER_CLIENT = 10_000
RSS_GROWTH_LIMIT_BYTES = 64 << 20  # "bounded": the last two thirds of a run may not grow RSS by more


def start_server(fleet: Path, time_scale: float, loop_trace: Path | None = None) -> tuple[subprocess.Popen, str]:
    """The server on a free loopback port, once it reports ready; with `loop_trace`, started through
    serve_loop_trace.py, which writes its event loop's callback, iteration and GC-pause figures there."""
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    entry = ["-m", "lpxsim.cli.main"]
    if loop_trace is not None:
        env["LPXSIM_LOOP_TRACE"] = str(loop_trace)
        entry = [str(Path(__file__).with_name("serve_loop_trace.py"))]
    proc = subprocess.Popen([sys.executable, *entry, "serve", "--fleet", str(fleet), "--port", "0",
                             "--time-scale", str(time_scale), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    address = None
    for line in proc.stderr:
        m = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", line)
        if m:
            address = m.group(1)
        if "ready" in line or "failed" in line:
            break
    if address is None:
        proc.kill()
        raise SystemExit("the server printed no address")
    return proc, address


async def client(http: httpx.AsyncClient, i: int, deadline: float, max_tokens: int, stats: dict) -> None:
    for k in range(MAX_REQUESTS_PER_CLIENT):
        if time.monotonic() >= deadline:
            return
        body = {"model": "gemma-4-31b", "stream": True, "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": f"client {i} request {k}: " + "tell me more " * (i % 50)}]}
        try:
            async with http.stream("POST", "/v1/chat/completions", json=body) as r:
                if r.status_code != 200:
                    stats["errors"].append(f"HTTP {r.status_code}")
                    await r.aread()
                    continue
                tokens = 0
                done = False
                async for line in r.aiter_lines():
                    if line == "data: [DONE]":
                        done = True
                    elif line.startswith("data: {") and '"finish_reason": null' in line:
                        tokens += 1
            if not done or tokens != max_tokens:
                stats["errors"].append(f"stream ended after {tokens} of {max_tokens} tokens (done={done})")
            else:
                stats["completed"] += 1
                stats["tokens"] += tokens
        except httpx.HTTPError as e:
            stats["errors"].append(f"{type(e).__name__}: {e}")


def lag_p99_at_most(metrics: str, bound_s: float) -> tuple[bool, float, int]:
    """(P99 <= bound, share of samples <= bound, samples) from the lag histogram's cumulative buckets."""
    total = float(re.search(r"^lpxsim_event_loop_lag_seconds_count (\S+)", metrics, re.M).group(1))
    le = float(re.search(rf'^lpxsim_event_loop_lag_seconds_bucket{{le="{bound_s}"}} (\S+)', metrics, re.M).group(1))
    share = le / total if total else 1.0
    return share >= 0.99, share, int(total)


async def run_load(base: str, clients: int, seconds: float, max_tokens: int, server_pid: int) -> dict:
    stats: dict = {"completed": 0, "tokens": 0, "errors": []}
    proc = psutil.Process(server_pid)
    limits = httpx.Limits(max_connections=clients + 8, max_keepalive_connections=clients + 8)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=httpx.Timeout(60.0)) as http:
        before = (await http.get("/metrics")).text
        t0 = time.monotonic()
        deadline = t0 + seconds
        tasks = [asyncio.create_task(client(http, i, deadline, max_tokens, stats)) for i in range(clients)]
        await asyncio.sleep(seconds / 3)
        rss_third = proc.memory_info().rss
        await asyncio.gather(*tasks)
        wall = time.monotonic() - t0
        rss_end = proc.memory_info().rss
        after = (await http.get("/metrics")).text
    ok, share, samples = lag_p99_at_most(after, 0.005)
    running = float(re.search(r"^lpxsim_running_sequences (\S+)", after, re.M).group(1))
    in_flight = float(re.search(r"^lpxsim_requests_in_flight (\S+)", after, re.M).group(1))
    del before
    return {"clients": clients, "seconds": seconds, "wall_s": wall, "completed": stats["completed"],
            "tokens": stats["tokens"], "tokens_per_s": stats["tokens"] / wall, "errors": len(stats["errors"]),
            "first_errors": stats["errors"][:5], "lag_p99_le_5ms": ok, "lag_share_le_5ms": share,
            "lag_samples": samples, "rss_third_bytes": rss_third, "rss_end_bytes": rss_end,
            "rss_growth_bytes": rss_end - rss_third, "running_after": running, "in_flight_after": in_flight}


def stop_with_stream_open(proc: subprocess.Popen, base: str) -> float:
    """Seconds from SIGTERM to exit, sent while a stream is open."""
    body = {"model": "gemma-4-31b", "stream": True, "max_tokens": 100_000,
            "messages": [{"role": "user", "content": "keep going"}]}
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=30) as r:
        next(r.iter_lines())
        t0 = time.monotonic()
        proc.terminate()
        proc.wait(30)
        return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--time-scale", type=float, default=20.0)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--fleet", type=Path, default=None)
    ap.add_argument("--loop-trace", type=Path, default=None,
                    help="run the server under serve_loop_trace.py and write its loop figures (JSON) here")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fleet = a.fleet
        if fleet is None:
            fleet = Path(tmp) / "fleet.yaml"
            fleet.write_text(yaml.safe_dump(FLEET))
        proc, base = start_server(fleet, a.time_scale, a.loop_trace)
        cpu0 = psutil.Process(proc.pid).cpu_times()
        try:
            out = asyncio.run(run_load(base, a.clients, a.seconds, a.max_tokens, proc.pid))
            cpu1 = psutil.Process(proc.pid).cpu_times()
            out["server_cpu_s"] = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
            out["sigterm_stop_s"] = stop_with_stream_open(proc, base)
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
    out["time_scale"] = a.time_scale
    out["load_average_1m"] = os.getloadavg()[0]  # the machine's load at the end: lag on a busy host is the OS's
    out["bounded_memory"] = out["rss_growth_bytes"] <= RSS_GROWTH_LIMIT_BYTES
    met = out["errors"] == 0 and out["lag_p99_le_5ms"] and out["bounded_memory"] and out["sigterm_stop_s"] <= 2.0
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>20}: {v}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
