"""Whole-process time of a GPU `lpxsim estimate`, cold (empty step cache) and warm.

    python benchmarks/bench_gpu_estimate.py              # DeepSeek-R1 on B200, TP/EP layout search
    python benchmarks/bench_gpu_estimate.py --runs 5 -- --tp 8   # a fixed layout instead

Each run is a fresh `python -m lpxsim.cli.main estimate ...` process; CPU is the child's user + sys
(getrusage), the figure to read on a loaded machine. Cold runs get a new empty `$LPXSIM_CACHE`; the
warm run reuses the last cold run's cache. Prints the median of the runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

BASE = ["estimate", "deepseek-r1", "--system", "b200-hgx", "--isl", "1024", "--osl", "1024", "--json"]


def _run(args: list[str], cache: str) -> tuple[float, float]:
    """(CPU s, wall s) of one estimate process."""
    env = dict(os.environ, LPXSIM_CACHE=cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "lpxsim.cli.main", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="cold runs (median reported)")
    ap.add_argument("extra", nargs="*", help="more estimate options, after --")
    a = ap.parse_args(argv)
    args = BASE + a.extra
    cold = []
    with tempfile.TemporaryDirectory() as root:
        for i in range(a.runs):
            cache = os.path.join(root, f"c{i}")
            cold.append(_run(args, cache))
        warm = _run(args, cache)
    cpu = statistics.median(c for c, _ in cold)
    wall = statistics.median(w for _, w in cold)
    print(f"lpxsim {' '.join(args)}")
    print(f"cold: {cpu:.2f} s CPU, {wall:.2f} s wall (median of {a.runs}: "
          f"{', '.join(f'{c:.2f}' for c, _ in cold)} s CPU)")
    print(f"warm: {warm[0]:.2f} s CPU, {warm[1]:.2f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
