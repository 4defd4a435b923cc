"""Whole-process time of GPU `lpxsim estimate` commands, cold (empty step cache) and warm.

    python benchmarks/bench_gpu_estimate.py                 # the issue 10 commands, medians of 5
    python benchmarks/bench_gpu_estimate.py --runs 3 -- deepseek-r1 --system b200-hgx --tp 8   # one command

Each run is a fresh `python -m lpxsim.cli.main estimate ... --json` process; CPU is the child's
user + sys (getrusage), the figure to read on a loaded machine. Cold runs get a new empty
`$LPXSIM_CACHE`; the warm run reuses the last cold run's cache. The package's bytecode is compiled
first, as `pip install` does (with PYTHONDONTWRITEBYTECODE set, every process would otherwise compile
lpxsim from source, ~0.1 s); `--no-compile` skips that. Prints the median and range of the runs.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = [
    # issue 10 item 3: the TP/EP layout search, and a fixed layout
    ["llama-3.1-70b", "--system", "h200-hgx", "--isl", "10000", "--osl", "1000"],
    ["deepseek-r1", "--system", "h200-hgx", "--tp", "8", "--concurrency", "16"],
    # the tour's GPU system (Vera Rubin, projected from a measured sibling), layout searched
    ["gemma-4-31b", "--system", "vr-nvl72", "--isl", "10000", "--osl", "1000"],
    ["deepseek-r1", "--system", "b200-hgx", "--isl", "1024", "--osl", "1024"],
]


def _run(args: list[str], cache: str) -> tuple[float, float]:
    """(CPU s, wall s) of one estimate process."""
    env = dict(os.environ, LPXSIM_CACHE=cache)
    env.pop("LPXSIM_NO_CACHE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "estimate", *args, "--json"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def _measure(args: list[str], runs: int) -> str:
    cold = []
    with tempfile.TemporaryDirectory() as root:
        for i in range(runs):
            cache = os.path.join(root, f"c{i}")
            cold.append(_run(args, cache))
        warm = _run(args, cache)
    cpu = sorted(c for c, _ in cold)
    wall = statistics.median(w for _, w in cold)
    return (f"lpxsim estimate {' '.join(args)} --json\n"
            f"  cold: {statistics.median(cpu):.2f} s CPU ({cpu[0]:.2f}-{cpu[-1]:.2f}), {wall:.2f} s wall, median of {runs}\n"
            f"  warm: {warm[0]:.2f} s CPU, {warm[1]:.2f} s wall")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="cold runs per command (median reported)")
    ap.add_argument("--no-compile", action="store_true", help="do not compile lpxsim's bytecode first")
    ap.add_argument("command", nargs="*", help="one estimate command (model and options), after --")
    a = ap.parse_args(argv)
    if not a.no_compile:
        import lpxsim

        compileall.compile_dir(Path(lpxsim.__file__).parent, quiet=1)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for args in ([a.command] if a.command else COMMANDS):
        print(_measure(args, a.runs), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
