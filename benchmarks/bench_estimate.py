"""Whole-process time of `lpxsim estimate` on a cold and on a warm step cache (issue 10 item 3).

Each run is a fresh `python -m lpxsim.cli.main estimate ...` process; CPU is the child's user + sys
(`resource.getrusage(RUSAGE_CHILDREN)`), the steadier figure on a shared machine; wall is an upper bound.
A cold run gets an empty $LPXSIM_CACHE; the warm runs reuse the cache the first cold run filled.
`--src DIR` runs another tree's `src`; `--vs DIR` also times a second tree, its warm runs alternating with
the first's under the same load (an A/B against an older commit: `git archive OLD src | tar -x -C /tmp/old`).
Both trees' bytecode is compiled first, as `pip install` does (this machine sets PYTHONDONTWRITEBYTECODE, so
an uncompiled tree would pay the compiler on every run). Medians and the load average are printed.

`--tty` runs each process at a pseudo-terminal, as a user at a terminal does (colours, the progress bar).

Run: python benchmarks/bench_estimate.py [--cold N] [--warm N] [--src DIR] [--vs DIR] [--tty] [-- estimate args...]
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import pty
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["gemma-4-31b", "--system", "lpx", "--isl", "10000", "--osl", "1000", "--json"]


TTY = False  # --tty: the child's stdout and stderr are a pseudo-terminal (what a user at a terminal runs)


def _drain(fd: int) -> None:
    """Read a pseudo-terminal until its other end closes (so the child never blocks on a full buffer)."""
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass


def once(args: list[str], cache: str, src: str) -> tuple[float, float, int]:
    """(CPU s, wall s, peak RSS KB) of one `lpxsim estimate` process."""
    env = {**os.environ, "LPXSIM_CACHE": cache, "PYTHONPATH": src}
    env.pop("LPXSIM_NO_CACHE", None)
    cmd = [sys.executable, "-m", "lpxsim.cli.main", "estimate", *args]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    if TTY:
        master, slave = pty.openpty()
        reader = threading.Thread(target=_drain, args=(master,))
        reader.start()
        try:
            subprocess.run(cmd, env=env, check=True, stdout=slave, stderr=slave)
        finally:
            os.close(slave)
            reader.join()
            os.close(master)
    else:
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - w0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu, wall, r1.ru_maxrss


def _report(name: str, runs: list[tuple[float, float, int]]) -> None:
    cpu = statistics.median(r[0] for r in runs)
    wall = statistics.median(r[1] for r in runs)
    print(f"{name}: median of {len(runs)}: {cpu:.3f} s CPU, {wall:.3f} s wall "
          f"(CPU runs: {', '.join(f'{r[0]:.2f}' for r in runs)}; "
          f"wall runs: {', '.join(f'{r[1]:.2f}' for r in runs)})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", type=int, default=1, help="cold runs (each on an empty cache)")
    ap.add_argument("--warm", type=int, default=5, help="warm runs (on the first cold run's cache)")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the tree's src folder to run")
    ap.add_argument("--vs", default=None, help="a second tree's src folder, timed alternately (warm only)")
    ap.add_argument("--tty", action="store_true", help="run each process at a pseudo-terminal (rich's colours, "
                    "the progress bar) instead of piped")
    ap.add_argument("args", nargs="*", default=DEFAULT, help="estimate's arguments")
    a = ap.parse_args()
    global TTY
    TTY = a.tty
    trees = [a.src] + ([a.vs] if a.vs else [])
    for src in trees:
        compileall.compile_dir(src, quiet=1)
    cold = []
    with tempfile.TemporaryDirectory() as warm_cache, tempfile.TemporaryDirectory() as vs_cache:
        for i in range(max(1, a.cold)):
            with tempfile.TemporaryDirectory() as fresh:
                cold.append(once(a.args, warm_cache if i == 0 else fresh, a.src))
        if a.vs:
            once(a.args, vs_cache, a.vs)  # fills the second tree's cache (not reported)
        warm: dict[str, list[tuple[float, float, int]]] = {src: [] for src in trees}
        for _ in range(a.warm):
            for src in trees:
                warm[src].append(once(a.args, warm_cache if src == a.src else vs_cache, src))
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.cold:
        _report("cold", cold[: a.cold])
    for src in trees:
        if warm[src]:
            _report(f"warm {src}" if a.vs else "warm", warm[src])


if __name__ == "__main__":
    main()
