"""Verifier speed: the structural, cost and completeness checks of one compiled Program (docs/benchmarks.md).

Compiles the case once without verification, then times `verify(program, graph, arch)` REPEAT times and
prints the median CPU (user + sys of this process) and wall seconds, per check group.

Usage: python benchmarks/bench_verify.py [gemma|gpt-oss|deepseek] [repeat]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

CASES = {
    "gemma": {"model": "gemma-4-31b", "racks": 1, "context": 10_000},
    "gpt-oss": {"model": "gpt-oss-120b", "racks": 2, "context": 8192},
    "deepseek": {"model": "deepseek-v3", "racks": 8, "context": 8192},
}


def main() -> None:
    from lpxsim.graph import Phase, lower
    from lpxsim.lpu import compile_program, verify
    from lpxsim.lpu.arch import arch_for
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
    c = CASES[name]
    r = compile_program(c["model"], "lpx", racks=c["racks"], context=c["context"], run_verify=False)
    p = r.program
    ph = Phase(p.phase["kind"], tuple(p.phase["contexts"]), p.phase["new_tokens"])
    from lpxsim.catalog import get_model, get_system

    graph = lower(get_model(c["model"]), ph, weights=p.weights, kv=p.kv, kv_layout=p.kv_layout)
    arch = arch_for(get_system("lpx")).with_sram(p.chip_sram_bytes)
    cpu, wall, parts = [], [], {"columns": [], "structure": [], "work": []}
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        rep = verify(p, graph, arch)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        assert rep.ok, rep.errors[:3]
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
        t2 = time.process_time()
        check_work(p, graph, arch, rr, col, prod)
        t3 = time.process_time()
        parts["columns"].append(t1 - t0)
        parts["structure"].append(t2 - t1)
        parts["work"].append(t3 - t2)
    print(json.dumps({
        "case": name, "layout": r.layout.describe(), "instructions": len(p.instructions),
        "transfers": len(p.transfers), "buffers": len(p.buffers), "repeat": repeat,
        "verify_cpu_s_median": round(statistics.median(cpu), 3), "verify_wall_s_median": round(statistics.median(wall), 3),
        "cpu_s_median_by_part": {k: round(statistics.median(v), 3) for k, v in parts.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
