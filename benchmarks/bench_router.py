"""CPU per request of the serving loop with the KV-aware router, from 16 to 1,024 workers (issue 10).

A fleet of W aggregated Vera Rubin TP8 replicas of Gemma 4 31B (the test double of
tests/analytic_double.py prices the steps, so the figure is the loop and the router, not a cost
model) replays the Mooncake conversation trace (12,031 requests,
512-token prefix units) with its arrival rate scaled by W / 16, so every worker sees the same load at
every W. Reported: CPU seconds (time.process_time) per request, for the board router and, with
--loop, for the reference loop over every worker (the router before issue 10).

Run: python benchmarks/bench_router.py [--workers 16 1024] [--requests 3000] [--loop]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import pytest

from lpxsim.serving import simulate
from lpxsim.serving.router import Router

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from analytic_double import use_double  # noqa: E402  (the loop's speed, not a cost model's)

use_double(pytest.MonkeyPatch())

GEMMA = "gemma-4-31b"
TRACE_RATE = 12_031 / 3_600.0  # Mooncake conversation: requests per second of trace time (about)


def run(workers: int, requests: int) -> tuple[float, float, int]:
    fleet = {"name": f"agg{workers}", "pools": [{"name": "rubin", "system": "vr-nvl72",
                                                 "model": GEMMA, "workers": workers, "gpus_per_worker": 8}]}
    wl = {"name": "mooncake", "kind": "trace", "trace": "mooncake-conversation", "rate_scale": workers / 16}
    t0, c0 = time.perf_counter(), time.process_time()
    window = None if requests <= 0 else requests / TRACE_RATE / (workers / 16)  # arrivals in this window
    res = simulate(fleet, wl, seed=1, duration_s=window)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return cpu, wall, int(res.summary["requests"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, nargs="+", default=[16, 64, 256, 1024])
    ap.add_argument("--requests", type=int, default=3000, help="requests replayed per point (0: the whole trace)")
    ap.add_argument("--loop", action="store_true", help="also time the reference loop router")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, one process")
    modes = [("board", None)] + ([("loop", lambda self, workers: None)] if args.loop else [])
    for name, patch in modes:
        saved = Router._slots
        if patch is not None:
            Router._slots = patch  # type: ignore[method-assign]
        try:
            base = None
            for w in args.workers:
                cpu, wall, n = run(w, args.requests)
                per = cpu / n * 1e3
                base = base or per
                print(f"{name:5s} W={w:5d}: {n:,} requests, {cpu:6.2f} s CPU, {wall:6.2f} s wall, "
                      f"{per:.3f} ms CPU per request ({per / base:.2f}x W={args.workers[0]})", flush=True)
        finally:
            Router._slots = saved  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
