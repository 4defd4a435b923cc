"""Cold CPU cost of the layout search: `lpxsim plan point` and `lpxsim sweep` on an empty step cache (issue 26).

Each run is a fresh `python -m lpxsim.cli.main ...` process with its own empty $LPXSIM_CACHE; CPU is the
child's user + sys (`resource.getrusage(RUSAGE_CHILDREN)`), the steadier figure on a shared machine; wall is
printed beside it. `--src DIR` runs another tree's `src` (an A/B against an older commit:
`git archive OLD src | tar -x -C /tmp/old`, then `--src /tmp/old/src`). Medians of the runs are printed.

Run: python benchmarks/bench_search.py [--runs N] [--src DIR] [--what point|sweep|sweep-all]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "point": ["plan", "point", "gemma-4-31b", "--system", "lpx", "--context", "10000", "--target-tok-s-user", "200",
              "--json"],
    "sweep": ["sweep", "gemma-4-31b", "--systems", "lpx,vr-nvl72", "--contexts", "10000", "--concurrency", "1,8,32",
              "--executor", "serial", "--json"],
}
COMMANDS["sweep-all"] = [*COMMANDS["sweep"][:-1], "--deployments", "all", "--json"]


def run_once(src: Path, args: list[str]) -> tuple[float, float]:
    """(CPU s, wall s) of one cold process."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": str(src), "LPXSIM_CACHE": cache}
        if args[0] == "sweep":
            args = [*args, "--out", str(Path(out) / "sweep")]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "lpxsim.cli.main", *args], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--what", choices=sorted(COMMANDS), default="point")
    a = ap.parse_args()
    cpu, wall = [], []
    for i in range(a.runs):
        c, w = run_once(a.src, COMMANDS[a.what])
        cpu.append(c)
        wall.append(w)
        print(f"run {i + 1}: {c:.1f} CPU-s, {w:.1f} s wall (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"{a.what} ({a.src}): median {statistics.median(cpu):.1f} CPU-s, {statistics.median(wall):.1f} s wall "
          f"over {a.runs} cold runs")


if __name__ == "__main__":
    main()
