"""Wall time of `lpxsim tour` on its built-in defaults, per section (run: python benchmarks/bench_tour.py).

Runs the tour into a temporary directory with a fresh process per repetition (so the compile caches start
cold, as for a user) and prints the median per section and in total. Results go in docs/benchmarks.md ("Tour").
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
LINE = re.compile(r"tour: (\w+) (\w+) in ([\d.,]+) s")


def one_run() -> tuple[float, dict[str, float], dict]:
    with tempfile.TemporaryDirectory(prefix="lpxsim-bench-tour-") as out:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "tour", "--out", out, "--json"],
                           capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"tour failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
        sections = {m[0]: float(m[2].replace(",", "")) for m in LINE.findall(r.stderr)}
        return wall, sections, json.loads(r.stdout)


def main() -> None:
    walls, per = [], {}
    for _ in range(RUNS):
        wall, sections, res = one_run()
        walls.append(wall)
        for k, v in sections.items():
            per.setdefault(k, []).append(v)
    print(f"tour wall time, median of {RUNS}: {statistics.median(walls):.1f} s (limit 180 s)")
    for k, v in per.items():
        print(f"  {k:12s} {statistics.median(v):7.1f} s")
    print("section status:", res["sections"])


if __name__ == "__main__":
    main()
