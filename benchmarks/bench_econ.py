"""Speed of the issue-14 paths: the wafer-scale step model, a priced estimate, the fleet MILP with spares,
the tour's economics table, and (with --moe-cold) the tour's MoE line at 100K on a cold step cache.

Usage: python benchmarks/bench_econ.py [--moe-cold]
(prints one JSON line per case; CPU and wall seconds, medians of 5; --moe-cold runs once, minutes)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time


def _time(fn, repeat: int = 5) -> dict:
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return {"wall_s": round(statistics.median(walls), 4), "cpu_s": round(statistics.median(cpus), 4)}


def wse_estimate() -> None:
    """Llama 3.1 70B on four CS-3: build the step model and a priced steady-state point."""
    from lpxsim.plan.costs import estimate_economics
    from lpxsim.plan.estimate import steady_state
    from lpxsim.wse import WseStepModel

    step = WseStepModel("llama-3.1-70b", "cs-3", wafers=4, weights="bf16")
    e = steady_state(step, isl=1000, osl=500, concurrency=16)
    estimate_economics(e, "cs-3")


def fleet_milp() -> None:
    """A 3-class x 4-system fleet with N+1 spares and a power ceiling, on hand-made operating points."""
    from lpxsim.plan.fleet import FleetLimits, RequestClass, SystemChoice, solve_fleet
    from lpxsim.plan.operating_point import OperatingPoint

    systems = ["lpx", "vr-nvl72", "gb200-nvl72", "helios"]
    classes = [RequestClass(f"c{i}", "m", 10_000, 1_000, 100.0 * (i + 1), requests_per_s=50.0 * (i + 1))
               for i in range(3)]
    pts = {}
    for i, rc in enumerate(classes):
        for j, s in enumerate(systems):
            rps = 3.0 + 2 * j + i
            pts[(rc.name, s)] = OperatingPoint(
                model="m", system=s, isl=10_000, osl=1_000, target_tok_s_user=rc.tok_s_user, weights="fp8",
                kv="bf16", backend="bench", feasible=True, layout="x", replica_chips=72, replica_units=0.5 + 0.5 * j,
                replica_power_w=1.0, concurrency=8, tok_s_user=rc.tok_s_user, tok_s_total=rps * 1000,
                requests_per_s=rps, best_tok_s_user=1e4)
    plan = solve_fleet(classes, [SystemChoice(s, redundancy=1) for s in systems], pts, FleetLimits(max_facility_w=20e6))
    assert plan.feasible


def tour_economics() -> None:
    """The tour's cost and revenue table from tour-sized sweep (2 systems x 3 contexts x 8 concurrencies)
    and modes (5 modes x 2 contexts x 2 loads) frames: what the section adds to a tour."""
    import pandas as pd

    from lpxsim.report.economics import economics_table
    from lpxsim.report.tour_sections import TourConfig

    sweep = pd.DataFrame([{"target": t, "context": c, "concurrency": n, "at_ceiling": n == 0, "fits": True,
                           "chips": chips, "power_kw": 200.0, "tok_s_user": 1000.0 / (1 + n), "tok_s_total": 900.0,
                           "hardware": f"{t}: {chips} chips"}
                          for t, chips in (("lpx", 256), ("vr-nvl72", 72)) for c in (10_000, 32_000, 100_000)
                          for n in (0, 1, 2, 4, 8, 16, 32, 64)])
    modes = pd.DataFrame([{"mode": m, "context": c, "load": ld, "users": u, "tok_s_user_p50": 300.0,
                           "fleet_tok_s": 5000.0, "power_kw": 420.0, "hardware": "32 vr-nvl72 + 256 lpx, 420 kW"}
                          for m in ("a", "b", "c", "d", "e") for c in (10_000, 100_000)
                          for ld, u in (("light", 8), ("heavy", 64))])
    economics_table(TourConfig(), sweep, modes)


def moe_cold() -> None:
    """The tour's MoE section on LPX, cold: the AA run it already does, then the 100K line on top."""
    from lpxsim.core import cache

    os.environ["LPXSIM_CACHE"] = tempfile.mkdtemp(prefix="lpxsim-bench-")
    cache.reset()  # the process-wide cache reads $LPXSIM_CACHE at first use
    from lpxsim.bench.aa import AASetup, run_aa
    from lpxsim.bench.backends import step_model
    from lpxsim.report.tour_sections import TourConfig, moe_long_context_rows

    cfg = TourConfig()
    w0, c0 = time.perf_counter(), time.process_time()
    run_aa(cfg.moe_model, "lpx", AASetup(contexts=(min(cfg.contexts),), requests=cfg.requests, seed=cfg.seed))
    aa = {"wall_s": round(time.perf_counter() - w0, 1), "cpu_s": round(time.process_time() - c0, 1)}
    before = step_model(cfg.moe_model, "lpx").compiles
    w0, c0 = time.perf_counter(), time.process_time()
    res = moe_long_context_rows(cfg)
    line = {"wall_s": round(time.perf_counter() - w0, 1), "cpu_s": round(time.process_time() - c0, 1),
            "compiles": step_model(cfg.moe_model, "lpx").compiles - before}
    print(json.dumps({"case": "tour_moe_aa_10k_cold", **aa}))
    print(json.dumps({"case": "tour_moe_100k_line_after_aa", **line, "summary": res.summary}))


def main() -> None:
    cases = (("wse_estimate_70b_4_wafers", wse_estimate), ("fleet_milp_3x4_n_plus_1", fleet_milp),
             ("tour_economics_table", tour_economics))
    for name, fn in cases:
        fn()  # warm imports
        print(json.dumps({"case": name, **_time(fn)}))
    if "--moe-cold" in sys.argv[1:]:
        moe_cold()


if __name__ == "__main__":
    main()
