"""Compile + verify speed and peak memory of the LPX compiler (figures go in docs/benchmarks.md).

Targets (issue 3): Gemma 4 31B on one 256-LPU rack <= 10 s and <= 2 GB peak on one core;
DeepSeek-V3 across its racks <= 60 s. Each case runs in a fresh subprocess so peak RSS is its own.

Usage: python benchmarks/bench_compile.py [gemma|deepseek|gpt-oss|all]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

CASES = {
    "gemma": {"model": "gemma-4-31b", "racks": 1, "context": 10_000},
    "gpt-oss": {"model": "gpt-oss-120b", "racks": 2, "context": 8192},
    "deepseek": {"model": "deepseek-v3", "racks": 8, "context": 8192},
}


def run_case(name: str) -> dict:
    """Compile and verify one case in this process; wall and CPU time, peak RSS."""
    from lpxsim.lpu import compile_program

    c = CASES[name]
    w0, c0 = time.perf_counter(), time.process_time()
    r = compile_program(c["model"], "lpx", racks=c["racks"], context=c["context"])
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {"case": name, **c, "layout": r.layout.describe(), "verified": r.report.ok,
            "instructions": len(r.program.instructions), "transfers": len(r.program.transfers),
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "compile_cpu_s": round(r.compile_cpu_s, 2), "peak_rss_gb": round(peak / 1e9, 2),
            "tok_s_user": round(r.timing.tok_s_user, 1)}


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "gemma"
    if which == "--case":
        print(json.dumps(run_case(sys.argv[2])))
        return
    names = list(CASES) if which == "all" else [which]
    for n in names:
        out = subprocess.run([sys.executable, __file__, "--case", n], capture_output=True, text=True, check=True)
        print(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
