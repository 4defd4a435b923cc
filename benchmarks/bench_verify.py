"""Verifier speed: the structural, cost and completeness checks of one compiled Program (docs/benchmarks.md).

Compiles the case once without verification, then times `verify(program, graph, arch)` REPEAT times and
prints the median CPU (user + sys of this process) and wall seconds, per check group.

Cases: gemma / gpt-oss / deepseek (`compile_program` at 10K / 8K / 8K on 1 / 2 / 8 racks); gemma-decode,
gemma-prefill, gpt-oss-decode, gpt-oss-prefill: the step-model layouts (`LpxStepModel`, as a step compile
verifies them): decode batch 1 at 10K (Gemma) / 8K (gpt-oss on 2 racks), a 256-row prefill chunk at context
0 (Gemma) / 1024 (gpt-oss), the shapes of `benchmarks/program_digest.py`.

Usage: python benchmarks/bench_verify.py [case] [repeat]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

CASES = {
    "gemma": {"model": "gemma-4-31b", "racks": 1, "context": 10_000},
    "gpt-oss": {"model": "gpt-oss-120b", "racks": 2, "context": 8192},
    "deepseek": {"model": "deepseek-v3", "racks": 8, "context": 8192},
}
STEP = {  # model, racks, (kind, tokens or context, context)
    "gemma-decode": ("gemma-4-31b", None, ("decode", 10_000, 1)),
    "gemma-prefill": ("gemma-4-31b", None, ("prefill", 256, 0)),
    "gpt-oss-decode": ("gpt-oss-120b", 2, ("decode", 8192, 1)),
    "gpt-oss-prefill": ("gpt-oss-120b", 2, ("prefill", 256, 1024)),
}


def _compiled(name: str):  # noqa: ANN202
    """(program, graph, arch, layout text) of a case, compiled without verification."""
    from lpxsim.catalog import get_model, get_system
    from lpxsim.graph import Phase, lower
    from lpxsim.lpu import compile_program
    from lpxsim.lpu.arch import arch_for

    if name in STEP:
        from lpxsim.lpu import LpxStepModel
        from lpxsim.lpu.compiler import build_program

        model, racks, (kind, n, ctx) = STEP[name]
        m = LpxStepModel(model, racks=racks)
        ph = Phase.decode([n]) if kind == "decode" else Phase.prefill(n, ctx)
        graph = lower(m.model, ph, weights=m.weights, kv=m.kv, kv_layout=m.kv_layout, part=m.part)
        p, _ = build_program(graph, m.system, m.units, m.arch, m.layout, m.n_chips)
        return p, graph, m.arch, m.layout.describe()
    c = CASES[name]
    r = compile_program(c["model"], "lpx", racks=c["racks"], context=c["context"], run_verify=False)
    p = r.program
    ph = Phase(p.phase["kind"], tuple(p.phase["contexts"]), p.phase["new_tokens"])
    graph = lower(get_model(c["model"]), ph, weights=p.weights, kv=p.kv, kv_layout=p.kv_layout)
    return p, graph, arch_for(get_system("lpx")).with_sram(p.chip_sram_bytes), r.layout.describe()


def main() -> None:
    os.environ.setdefault("LPXSIM_CACHE", tempfile.mkdtemp())  # never the user's step cache
    from lpxsim.lpu import verify
    from lpxsim.lpu.gcpause import gc_paused
    from lpxsim.lpu.verify import (
        Columns,
        VerifyReport,
        _check_buffers,
        _check_dependencies,
        _check_regions,
        _check_transfers,  # noqa: PLC2701
        _check_units,
    )
    from lpxsim.lpu.verify_work import check_work

    name = sys.argv[1] if len(sys.argv) > 1 else "gemma"
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    p, graph, arch, layout = _compiled(name)
    cpu, wall, parts = [], [], {"columns": [], "structure": [], "work": []}

    @gc_paused  # as verify itself runs
    def by_part() -> None:
        t0 = time.process_time()
        col = Columns(p)
        prod = col.producers()
        t1 = time.process_time()
        rr = VerifyReport(ok=True)
        regions = _check_regions(p, rr)
        _check_dependencies(p, rr, col, prod)
        _check_units(p, rr, col)
        _check_transfers(p, rr, col)
        _check_buffers(p, rr, col, prod, regions)
        col.release(*col.STRUCTURAL)  # as verify does
        t2 = time.process_time()
        check_work(p, graph, arch, rr, col, (prod[0], None, None, None))
        t3 = time.process_time()
        parts["columns"].append(t1 - t0)
        parts["structure"].append(t2 - t1)
        parts["work"].append(t3 - t2)

    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        rep = verify(p, graph, arch)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        assert rep.ok, rep.errors[:3]
        by_part()
    print(json.dumps({
        "case": name, "layout": layout, "instructions": len(p.instructions),
        "transfers": len(p.transfers), "buffers": len(p.buffers), "repeat": repeat,
        "verify_cpu_s_median": round(statistics.median(cpu), 3), "verify_wall_s_median": round(statistics.median(wall), 3),
        "cpu_s_median_by_part": {k: round(statistics.median(v), 3) for k, v in parts.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
