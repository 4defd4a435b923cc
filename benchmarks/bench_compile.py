"""Compile + verify speed and peak memory of the LPX compiler (figures go in docs/benchmarks.md).

Targets (issue 10 item 2): Gemma 4 31B on one 256-LPU rack, compile + verify <= 1 s CPU; DeepSeek-V3 on
8 racks <= 8 s CPU and <= 400 MB peak. Each run is a fresh subprocess, so peak RSS is its own; with
`--runs N` each case runs N times and a last line gives the medians (CPU = user + sys of the compile).

Step-model shapes (`step`): the CPU of one `LpxStepModel.compile` (compile + verify, as the step model
prices a shape on a cold cache) for Gemma 4 31B decode batch 1 at 10K and a 256-token prefill chunk, and
gpt-oss-120b on 512 LPUs (the tour's MoE deployment) decode batch 1 at 8K and a 256-token prefill chunk at
context 1024; the layout search the step model runs once at construction is not counted.

`step --only gpt-oss-prefill` runs one step case (with `--runs N`).

Each row also gives `build_cpu_s`: the CPU of program building alone (`build_program`, i.e. lowering, scheduling
and placement, plus the timing summary `summarize`), the compile less the layout search and `verify`.

Usage: python benchmarks/bench_compile.py [gemma|deepseek|gpt-oss|all|step] [--only CASE] [--runs N]
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time

STEP_CASES = {
    "gemma-decode": {"model": "gemma-4-31b", "racks": None, "phase": ("decode", 10_000)},
    "gemma-prefill": {"model": "gemma-4-31b", "racks": None, "phase": ("prefill", 256)},
    "gpt-oss-decode": {"model": "gpt-oss-120b", "racks": 2, "phase": ("decode", 8192)},
    "gpt-oss-prefill": {"model": "gpt-oss-120b", "racks": 2, "phase": ("prefill", 256, 1024)},
}
CASES = {
    "gemma": {"model": "gemma-4-31b", "racks": 1, "context": 10_000},
    "gpt-oss": {"model": "gpt-oss-120b", "racks": 2, "context": 8192},
    "deepseek": {"model": "deepseek-v3", "racks": 8, "context": 8192},
}


def _time_building(*modules) -> list[float]:  # noqa: ANN002
    """Wrap `build_program` and `summarize` where `modules` call them: the CPU seconds they take add up in the
    returned one-element list (program building, as opposed to the layout search and `verify`)."""
    acc = [0.0]

    def timed(fn):  # noqa: ANN001, ANN202
        def run(*a, **k):  # noqa: ANN002, ANN003, ANN202
            c0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                acc[0] += time.process_time() - c0
        return run

    for mod in modules:
        mod.build_program = timed(mod.build_program)
        mod.summarize = timed(mod.summarize)
    return acc


def run_case(name: str) -> dict:
    """Compile and verify one case in this process; wall and CPU time, peak RSS."""
    from lpxsim.lpu import compile_program
    from lpxsim.lpu import compiler as compiler_module

    building = _time_building(compiler_module)
    c = CASES[name]
    w0, c0 = time.perf_counter(), time.process_time()
    r = compile_program(c["model"], "lpx", racks=c["racks"], context=c["context"])
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {"case": name, **c, "layout": r.layout.describe(), "verified": r.report.ok,
            "instructions": len(r.program.instructions), "transfers": len(r.program.transfers),
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "compile_cpu_s": round(r.compile_cpu_s, 2),
            "build_cpu_s": round(building[0], 2), "peak_rss_gb": round(peak / 1e9, 2),
            "tok_s_user": round(r.timing.tok_s_user, 1)}


def run_step_case(name: str) -> dict:
    """One step-model compile (+ verify) in this process, after the model's layout is chosen."""
    import os
    import tempfile

    os.environ["LPXSIM_CACHE"] = tempfile.mkdtemp()  # cold: no cached layout or summary
    from lpxsim.graph import Phase
    from lpxsim.lpu import LpxStepModel
    from lpxsim.lpu import stepmodel as stepmodel_module

    c = STEP_CASES[name]
    m = LpxStepModel(c["model"], racks=c["racks"])
    building = _time_building(stepmodel_module)  # after the layout search: only this shape's compile counts
    kind, n, *ctx = c["phase"]
    ph = Phase.decode([n]) if kind == "decode" else Phase.prefill(n, *ctx)
    w0, c0 = time.perf_counter(), time.process_time()
    r = m.compile(ph)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"case": name, "layout": m.layout.describe(), "verified": r.report.ok,
            "instructions": len(r.program.instructions), "transfers": len(r.program.transfers),
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "build_cpu_s": round(building[0], 2),
            "peak_rss_gb": round(peak / 1e9, 2)}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--case"]:
        print(json.dumps(run_case(args[1])))
        return
    if args[:1] == ["--step-case"]:
        print(json.dumps(run_step_case(args[1])))
        return
    runs = 1
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1]
        del args[i:i + 2]
    which = args[0] if args else "gemma"
    names = list(STEP_CASES) if which == "step" else list(CASES) if which == "all" else [which]
    if only is not None:
        names = [only]
    flag = "--step-case" if which == "step" else "--case"
    for n in names:
        rows = []
        for _ in range(runs):
            out = subprocess.run([sys.executable, __file__, flag, n], capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]))
        if runs > 1:
            med = {k: statistics.median(r[k] for r in rows) for k in ("cpu_s", "build_cpu_s", "wall_s", "peak_rss_gb")}
            print(json.dumps({"case": n, "runs": runs, "median": med}))


if __name__ == "__main__":
    main()
