"""Speed of the issue-14 paths: the wafer-scale step model, a priced estimate, and the fleet MILP with spares.

Usage: python benchmarks/bench_econ.py   (prints one JSON line per case; CPU and wall seconds, medians of 5)
"""

from __future__ import annotations

import json
import statistics
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


def main() -> None:
    for name, fn in (("wse_estimate_70b_4_wafers", wse_estimate), ("fleet_milp_3x4_n_plus_1", fleet_milp)):
        fn()  # warm imports
        print(json.dumps({"case": name, **_time(fn)}))


if __name__ == "__main__":
    main()
