"""Where the memory of an LPX compile + verify goes, phase by phase (docs/benchmarks.md, issue 10).

Compiles a case (default DeepSeek-V3 on 8 racks at 8K, as `bench_compile.py deepseek`) and verifies it,
printing after each phase of the build (`emit_all`: lowering + scheduling; `place`; the instruction sort) and
each verify check: the Python allocations live after it and their peak during it (tracemalloc, reset per
phase), and the process's resident and peak resident memory (VmRSS, VmHWM). With `--rss` tracemalloc is off
(its own bookkeeping inflates RSS and CPU): the RSS columns are then the figures `bench_compile.py` gives.
With `--verify` tracemalloc starts after the build: the Python figures are verify's own allocations (live after
each check and peak during it, over the built program). With `--inline` (implies `--rss`) the case is compiled
and verified in one `compile_program` call, as `bench_compile.py` does: no second lowering of the graph for
verify (~30 MB on DeepSeek-V3), so its peak is `bench_compile.py`'s.

Usage: python benchmarks/bench_compile_memory.py [deepseek|gemma|gpt-oss] [--rss | --verify | --inline]
"""

from __future__ import annotations

import importlib
import sys
import time
import tracemalloc

CASES = {
    "gemma": {"model": "gemma-4-31b", "racks": 1, "context": 10_000},
    "gpt-oss": {"model": "gpt-oss-120b", "racks": 2, "context": 8192},
    "deepseek": {"model": "deepseek-v3", "racks": 8, "context": 8192},
}
BUILD = ("emit_all", "place", "_by_chip_and_cycle")
VERIFY = ("Columns", "_check_regions", "_check_dependencies", "_check_units", "_check_transfers", "_check_buffers")
WORK = ("_InsCodes", "_check_cost", "_check_graph", "_check_partials", "_check_token", "_check_weights")


def _rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB (Linux)."""
    with open("/proc/self/status") as f:
        d = dict(line.split(":", 1) for line in f)
    return int(d["VmRSS"].split()[0]) / 1e3, int(d["VmHWM"].split()[0]) / 1e3


def _wrap(mod, name: str, trace: bool) -> None:  # noqa: ANN001
    """Replace `mod.name` by a version that prints its memory figures when it returns."""
    fn = getattr(mod, name)

    def run(*a, **k):  # noqa: ANN002, ANN003, ANN202
        if trace:
            tracemalloc.reset_peak()
        c0 = time.process_time()
        out = fn(*a, **k)
        cpu = time.process_time() - c0
        rss, hwm = _rss_mb()
        py = ""
        if trace:
            cur, peak = tracemalloc.get_traced_memory()
            py = f"python live {cur / 1e6:6.1f} MB, peak {peak / 1e6:6.1f} MB; "
        print(f"{name:22s} {py}RSS {rss:6.0f} MB, peak RSS {hwm:6.0f} MB ({cpu:.2f} s CPU)", flush=True)
        return out

    setattr(mod, name, run)


def main(argv: list[str]) -> None:
    name = next((a for a in argv if not a.startswith("-")), "deepseek")
    inline = "--inline" in argv
    trace = "--rss" not in argv and not inline
    verify_only = "--verify" in argv  # tracemalloc from the end of the build: verify's own allocations
    from lpxsim.catalog import get_model, get_system
    from lpxsim.graph import Phase, lower
    from lpxsim.lpu import compile_program
    from lpxsim.lpu.arch import arch_for

    compiler = importlib.import_module("lpxsim.lpu.compiler")
    vmod = importlib.import_module("lpxsim.lpu.verify")
    work = importlib.import_module("lpxsim.lpu.verify_work")
    for f in () if verify_only else BUILD:
        _wrap(compiler, f, trace)
    for f in VERIFY:
        _wrap(vmod, f, trace)
    for f in WORK:
        _wrap(work, f, trace)
    c = CASES[name]
    if inline:
        r = compile_program(c["model"], "lpx", racks=c["racks"], context=c["context"])
        rss, hwm = _rss_mb()
        print(f"{'compiled and verified':22s} ok={r.report.ok}; RSS {rss:6.0f} MB, peak RSS {hwm:6.0f} MB")
        return
    if trace and not verify_only:
        tracemalloc.start()
    r = compile_program(c["model"], "lpx", racks=c["racks"], context=c["context"], run_verify=False)
    p = r.program
    ph = Phase(p.phase["kind"], tuple(p.phase["contexts"]), p.phase["new_tokens"])
    graph = lower(get_model(c["model"]), ph, weights=p.weights, kv=p.kv, kv_layout=p.kv_layout)
    arch = arch_for(get_system("lpx")).with_sram(p.chip_sram_bytes)
    print(f"{'built':22s} RSS {_rss_mb()[0]:6.0f} MB, peak RSS {_rss_mb()[1]:6.0f} MB", flush=True)
    if verify_only:
        tracemalloc.start()
    rep = vmod.verify(p, graph, arch)
    rss, hwm = _rss_mb()
    print(f"{'verified':22s} ok={rep.ok}; RSS {rss:6.0f} MB, peak RSS {hwm:6.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
