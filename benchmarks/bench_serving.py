"""Speed and memory of the serving simulator (results go to docs/benchmarks.md, "Serving simulator").

1. Synthetic: a 16-worker aggregated fleet (16 x TP8 Vera Rubin replicas of Gemma 4 31B, priced
   by the test double of tests/analytic_double.py: the figure is the loop, not a cost model), Poisson arrivals, ISL uniform 1K-8K, OSL uniform 100-1K: simulated requests per second
   of wall time, at several request counts (peak Python memory per request shows linear growth).
2. Trace: the Mooncake conversation trace (12,031 requests) replayed on a 16-worker heterogeneous
   fleet (8 x TP8 Rubin + 8 LPX replicas of 128 LPUs (half a rack each)), KV-aware routing with prefix caching.

Run: .venv/bin/python benchmarks/bench_serving.py [--quick]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from lpxsim.serving import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from analytic_double import use_double  # noqa: E402  (the loop's speed, not a cost model's)

use_double(pytest.MonkeyPatch())

GEMMA = "gemma-4-31b"
AGG16 = {"name": "agg16", "pools": [{"name": "rubin", "system": "vr-nvl72", "model": GEMMA,
                                     "workers": 16, "gpus_per_worker": 8}]}
HET16 = {"name": "het16", "pools": [
    {"name": "rubin", "system": "vr-nvl72", "model": GEMMA, "workers": 8, "gpus_per_worker": 8},
    {"name": "lpx", "system": "lpx", "model": GEMMA, "workers": 8, "chips_per_worker": 128},
]}


def synthetic(n: int, rate: float) -> dict:
    return {"name": f"syn{n}", "kind": "synthetic", "num_requests": n, "arrival": {"process": "poisson", "rate": rate},
            "isl": {"kind": "uniform", "low": 1024, "high": 8192}, "osl": {"kind": "uniform", "low": 100, "high": 1000}}


def run(fleet: dict, workload: dict, measure_memory: bool) -> dict:
    if measure_memory:
        tracemalloc.start()
    t0 = time.perf_counter()
    res = simulate(fleet, workload, seed=1)
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] if measure_memory else 0
    if measure_memory:
        tracemalloc.stop()
    s = res.summary
    return {"requests": s["requests"], "wall_s": wall, "req_per_wall_s": s["requests"] / wall,
            "events": s["events"], "sim_s": s["makespan_s"], "peak_mem_MB": peak / 1e6,
            "mean_concurrency": s["mean_concurrency"], "prefix_hit_rate": s["prefix_hit_rate"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, one process")
    sizes = (5_000,) if args.quick else (10_000, 20_000, 40_000)
    rates = (160.0,) if args.quick else (160.0, 800.0)
    for rate in rates:
        for n in sizes:  # speed (no tracemalloc: it slows Python allocation several-fold)
            r = run(AGG16, synthetic(n, rate=rate), measure_memory=False)
            print(f"agg16 synthetic {rate:.0f} req/s n={n:>6}: {r['wall_s']:6.2f} s wall, {r['req_per_wall_s']:8,.0f} "
                  f"req/s of wall, {r['events']:,} events, {r['sim_s']:,.0f} s simulated, "
                  f"mean concurrency {r['mean_concurrency']:.0f}")
    for n in sizes:  # memory
        r = run(AGG16, synthetic(n, rate=160.0), measure_memory=True)
        print(f"agg16 synthetic n={n:>6}: peak traced memory {r['peak_mem_MB']:7.1f} MB "
              f"({r['peak_mem_MB'] * 1e3 / n:.2f} kB per request)")
    r = run(HET16, {"name": "mooncake", "kind": "trace", "trace": "mooncake-conversation"}, measure_memory=False)
    print(f"het16 mooncake-conversation: {r['requests']:,} requests in {r['wall_s']:.2f} s wall "
          f"({r['req_per_wall_s']:,.0f} req/s), prefix hit rate {r['prefix_hit_rate']:.2f}")


if __name__ == "__main__":
    main()
