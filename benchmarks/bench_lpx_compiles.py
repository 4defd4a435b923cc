"""How many LPX programs a command compiles on a cold step cache, and its CPU time (issue 10 item 2).

Each case runs in this process with an empty $LPXSIM_CACHE; every `LpxStepModel._build` (one lowered,
scheduled and placed program) is counted. Cases:
  estimate  lpxsim estimate gemma-4-31b --system lpx --isl 10000 --osl 1000
  fleet     lpxsim simulate --fleet examples/fleets/lpx-compiled.yaml --trace mooncake-conversation
            (--duration S limits the trace's arrivals, default 120 simulated seconds)
  modes     lpxsim modes gemma-4-31b --contexts C --loads light,heavy (--contexts, default 10000)
  moe       the tour's MoE section (gpt-oss-120b: capacity, AA at 10K, the 100K decode row)

Run: python benchmarks/bench_lpx_compiles.py [estimate|fleet|modes|moe ...] [--duration S] [--contexts C]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def counting_compiles():
    """Count `LpxStepModel._build` calls (one per compiled step) and their CPU seconds (user + sys) while the
    block runs: yields {"n": compiles, "cpu_s": seconds}."""
    from lpxsim.lpu import stepmodel

    count = {"n": 0, "cpu_s": 0.0}
    build = stepmodel.LpxStepModel._build

    def counted(self, lay, phase, *args, **kwargs):
        c0 = time.process_time()
        try:
            return build(self, lay, phase, *args, **kwargs)
        finally:
            count["n"] += 1
            count["cpu_s"] += time.process_time() - c0

    stepmodel.LpxStepModel._build = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        stepmodel.LpxStepModel._build = build  # type: ignore[method-assign]


def run(argv: list[str]) -> tuple[int, float, float, int]:
    """(compiles, CPU s, wall s, exit code) of one CLI command on a fresh step cache."""
    import sys

    from lpxsim.cli.main import run as cli

    c0, w0 = time.process_time(), time.perf_counter()
    code = 0
    sys.argv = ["lpxsim", *argv]
    with counting_compiles() as count:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                cli()
        except SystemExit as e:
            code = int(e.code or 0)
    return count["n"], time.process_time() - c0, time.perf_counter() - w0, code


def run_moe() -> tuple[int, float, float, int]:
    """(compiles, CPU s, wall s, 0) of the tour's MoE section in this process."""
    from lpxsim.report.tour_sections import TourConfig, moe_section

    c0, w0 = time.process_time(), time.perf_counter()
    with counting_compiles() as count:
        moe_section(TourConfig())
    return count["n"], time.process_time() - c0, time.perf_counter() - w0, 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=["estimate"])
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--contexts", default="10000")
    args = ap.parse_args()
    for case in args.cases:
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
            os.environ["LPXSIM_CACHE"] = cache
            if case == "moe":
                n, cpu, wall, code = run_moe()
                print(f"{case:9s} compiles {n:4d}  {cpu:7.1f} s CPU {wall:7.1f} s wall  exit {code}", flush=True)
                continue
            if case == "estimate":
                argv = ["estimate", "gemma-4-31b", "--system", "lpx", "--isl", "10000", "--osl", "1000", "--json"]
            elif case == "modes":
                argv = ["modes", "gemma-4-31b", "--contexts", args.contexts, "--loads", "light,heavy", "--json"]
            else:
                argv = ["simulate", "--fleet", str(ROOT / "examples/fleets/lpx-compiled.yaml"), "--trace",
                        "mooncake-conversation", "--duration", str(args.duration), "--out", out, "--json"]
            n, cpu, wall, code = run(argv)
            print(f"{case:9s} compiles {n:4d}  {cpu:7.1f} s CPU {wall:7.1f} s wall  exit {code}", flush=True)


if __name__ == "__main__":
    main()
