"""CPU and wall time of `lpxsim tour` on its built-in defaults, cold and warm, with its LPX compiles
(issue 10 item 6; run: python benchmarks/bench_tour.py [--runs N] [--jobs J] [--warm] [--log FILE]).

Each run is a fresh process on an empty step cache ($LPXSIM_CACHE in a temporary directory), as for a user
on a fresh install; `--warm` runs the tour again on the same cache. CPU is user + sys of the tour and its
worker processes (`resource.RUSAGE_CHILDREN`). Every `LpxStepModel._build` (one compiled, verified program)
is counted, in the worker processes too (they are forked from the tour process, where the counter is
installed), and `--log FILE` writes one line per compile: process, model, part, layout, phase kind, batch,
context, new tokens, CPU seconds. Prints the medians and the wall time per section (the tour logs each
section's time to stderr). Results go in docs/benchmarks.md ("Tour compiles shared").
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

LINE = re.compile(r"tour: (\w+) (\w+) in ([\d.,]+) s")
# Runs the CLI with every compile logged to stderr as "BUILD <pid> <repr of the shape>".
WRAPPER = r"""
import os, sys, time
from lpxsim.lpu import stepmodel
build = stepmodel.LpxStepModel._build
def counted(self, lay, phase, *args, **kwargs):
    c0 = time.process_time()
    r = build(self, lay, phase, *args, **kwargs)
    print("BUILD", os.getpid(), repr((self.model.name, self.part, lay.describe(), phase.kind, len(phase.contexts),
          max(phase.contexts, default=0), phase.new_tokens, round(time.process_time() - c0, 2))),
          file=sys.stderr, flush=True)
    return r
stepmodel.LpxStepModel._build = counted
from lpxsim.cli.main import run
sys.argv = ["lpxsim", *sys.argv[1:]]
run()
"""


def one_run(cache: str, jobs: int | None) -> dict:
    """Wall, CPU (user + sys, children included), compiles and per-section wall of one tour."""
    with tempfile.TemporaryDirectory(prefix="lpxsim-bench-tour-") as out:
        args = ["tour", "--out", out, "--json"] + (["--jobs", str(jobs)] if jobs else [])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, check=False,
                           env={**os.environ, "LPXSIM_CACHE": cache})
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            sys.exit(f"tour failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
        builds = [line.split(" ", 2)[1:] for line in r.stderr.splitlines() if line.startswith("BUILD ")]
        return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                "compiles": builds, "sections": {m[0]: float(m[2].replace(",", "")) for m in LINE.findall(r.stderr)},
                "summary": json.loads(r.stdout)["summary"]}


def report(tag: str, runs: list[dict]) -> None:
    med = statistics.median
    print(f"{tag}: median of {len(runs)}: {med(r['cpu'] for r in runs):.1f} CPU-s (user + sys), "
          f"{med(r['wall'] for r in runs):.1f} s wall, {med(len(r['compiles']) for r in runs):.0f} compiles "
          f"({med(sum(ast.literal_eval(b[1])[-1] for b in r['compiles']) for r in runs):.1f} CPU-s in them)")
    for k in runs[0]["sections"]:
        print(f"  {k:12s} {med(r['sections'].get(k, 0.0) for r in runs):7.1f} s wall")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=None, help="the tour's --jobs (default: its own default)")
    ap.add_argument("--warm", action="store_true", help="run the tour again on each run's warm cache")
    ap.add_argument("--log", default=None, help="write every compile of the first cold run here")
    args = ap.parse_args()
    cold, warm = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="lpxsim-bench-cache-") as cache:
            cold.append(one_run(cache, args.jobs))
            if args.warm:
                warm.append(one_run(cache, args.jobs))
                if warm[-1]["summary"] != cold[-1]["summary"]:
                    sys.exit("the warm tour's summary differs from the cold one's")
    if args.log:
        with open(args.log, "w") as f:
            f.writelines(" ".join(b) + "\n" for b in cold[0]["compiles"])
    report("cold", cold)
    if warm:
        report("warm", warm)


if __name__ == "__main__":
    main()
