"""Fleet MILP on hand-made operating points: cheapest feasible fleet, integer racks, clear infeasibility."""

from __future__ import annotations

import pytest

from lpxsim.core.errors import UserError
from lpxsim.plan.fleet import RequestClass, SystemChoice, solve_fleet
from lpxsim.plan.operating_point import OperatingPoint


def _op(system: str, units: float, rps: float, conc: int = 8, feasible: bool = True, best: float = 500.0,
        tok_s_user: float = 400.0) -> OperatingPoint:
    """A replica occupying `units` racks that completes `rps` requests/s at the SLO with `conc` users."""
    return OperatingPoint(
        model="m", system=system, isl=10_000, osl=1_000, target_tok_s_user=400.0, weights="fp8", kv="bf16",
        backend="test", feasible=feasible, layout=f"{system} replica", replica_chips=int(units * 72),
        replica_units=units, replica_power_w=1.0, concurrency=conc if feasible else 0,
        tok_s_user=tok_s_user if feasible else 0.0, tok_s_total=rps * 1_000 if feasible else 0.0,
        requests_per_s=rps if feasible else 0.0, best_tok_s_user=best,
        reason="" if feasible else f"{best:.0f} tok/s/user at concurrency 1 is below the 400 target",
    )


# gb200-nvl72 racks are 120 kW, vr-nvl72 199.8 kW, lpx 97 kW in the catalog (power objective uses these)
A, B = "gb200-nvl72", "vr-nvl72"


def test_picks_the_lower_power_system_when_both_meet_the_slo() -> None:
    rc = RequestClass("chat", "m", 10_000, 1_000, 400.0, requests_per_s=25.0)
    pts = {("chat", A): _op(A, 1.0, 10.0), ("chat", B): _op(B, 1.0, 10.0)}
    plan = solve_fleet([rc], [SystemChoice(A), SystemChoice(B)], pts)
    assert plan.feasible and plan.objective == "power"
    assert [(b.system, b.units) for b in plan.bom] == [(A, 3)]  # 25 req/s / 10 per rack -> 3 whole racks
    assert plan.total_power_w == pytest.approx(3 * 120e3)
    (a,) = plan.assignments
    assert a.replicas == 3 and a.served == pytest.approx(30.0) and a.context == 10_000
    assert a.tok_s_user == 400.0 and a.concurrency_per_replica == 8  # per-user speed with its concurrency


def test_a_faster_system_wins_when_it_needs_fewer_watts() -> None:
    rc = RequestClass("chat", "m", 10_000, 1_000, 400.0, requests_per_s=40.0)
    # B serves 4x the requests per rack at 1.67x the power: 2 x 199.8 kW < 4 x 120 kW
    pts = {("chat", A): _op(A, 1.0, 10.0), ("chat", B): _op(B, 1.0, 40.0)}
    plan = solve_fleet([rc], [SystemChoice(A), SystemChoice(B)], pts)
    assert [(b.system, b.units) for b in plan.bom] == [(B, 1)]


def test_cost_weights_override_power() -> None:
    rc = RequestClass("chat", "m", 10_000, 1_000, 400.0, requests_per_s=25.0)
    pts = {("chat", A): _op(A, 1.0, 10.0), ("chat", B): _op(B, 1.0, 10.0)}
    plan = solve_fleet([rc], [SystemChoice(A, cost_per_unit=5.0), SystemChoice(B, cost_per_unit=2.0)], pts)
    assert plan.objective == "cost" and [(b.system, b.units) for b in plan.bom] == [(B, 3)]
    assert plan.total_cost == pytest.approx(6.0)
    with pytest.raises(UserError, match="cost_per_rack"):
        solve_fleet([rc], [SystemChoice(A, cost_per_unit=5.0), SystemChoice(B)], pts)


def test_each_class_goes_where_it_can_meet_its_slo() -> None:
    fast = RequestClass("fast", "m", 100_000, 1_000, 1_000.0, concurrent_sessions=20)
    bulk = RequestClass("bulk", "m", 8_000, 1_000, 50.0, requests_per_s=15.0)
    pts = {
        ("fast", A): _op(A, 1.0, 0.0, feasible=False, best=300.0),
        ("fast", "lpx"): _op("lpx", 0.5, 2.0, conc=4),
        ("bulk", A): _op(A, 1.0, 10.0),
        ("bulk", "lpx"): _op("lpx", 0.5, 1.0),
    }
    plan = solve_fleet([fast, bulk], [SystemChoice(A), SystemChoice("lpx")], pts)
    assert plan.feasible
    by = {(a.request_class, a.system): a for a in plan.assignments}
    assert by[("fast", "lpx")].replicas == 5  # 20 sessions / 4 per replica
    # bulk: 2 GB200 racks (240 kW) beat 15 half-rack LPX replicas (8 racks, 776 kW)
    assert by[("bulk", A)].replicas == 2 and ("bulk", "lpx") not in by
    lpx = next(b for b in plan.bom if b.system == "lpx")
    assert lpx.units == 3 and lpx.used_units == pytest.approx(2.5)  # half-rack replicas packed into whole racks


def test_a_class_no_system_can_serve_is_reported_with_the_best_speed() -> None:
    rc = RequestClass("agent", "m", 400_000, 1_000, 400.0, requests_per_s=1.0)
    pts = {("agent", A): _op(A, 1.0, 0.0, feasible=False, best=89.0),
           ("agent", B): _op(B, 1.0, 0.0, feasible=False, best=125.0)}
    plan = solve_fleet([rc], [SystemChoice(A), SystemChoice(B)], pts)
    assert not plan.feasible and not plan.bom
    (why,) = plan.reasons
    assert "'agent'" in why and "400,000" in why and "89" in why and "125" in why


def test_a_rack_cap_that_cannot_cover_the_demand_is_infeasible() -> None:
    rc = RequestClass("chat", "m", 10_000, 1_000, 400.0, requests_per_s=100.0)
    pts = {("chat", A): _op(A, 1.0, 10.0)}
    plan = solve_fleet([rc], [SystemChoice(A, max_units=5)], pts)
    assert not plan.feasible and "max_racks" in plan.reasons[0]
    plan = solve_fleet([rc], [SystemChoice(A, max_units=10)], pts)
    assert plan.feasible and plan.bom[0].units == 10


def test_served_output_counts_only_the_demand() -> None:
    rc = RequestClass("chat", "m", 10_000, 1_000, 400.0, requests_per_s=25.0)
    plan = solve_fleet([rc], [SystemChoice(A)], {("chat", A): _op(A, 1.0, 10.0)})
    assert plan.output_tok_s == pytest.approx(25.0 * 1_000)  # 25 req/s x 1,000 output tokens
    assert plan.tok_s_per_mw == pytest.approx(25_000 / 0.36)
    (b,) = plan.bom
    assert b.output_tok_s == pytest.approx(25_000) and b.tok_s_per_mw == pytest.approx(plan.tok_s_per_mw)
    (a,) = plan.assignments
    assert a.output_tok_s == pytest.approx(30_000) and a.delivered_output_tok_s == pytest.approx(25_000)


def _brute_force_power(classes, systems, pts, max_racks: int = 4) -> float:
    """Least power over every rack count 0..max_racks per system, replicas assigned greedily per class."""
    import itertools

    from lpxsim.catalog import get_system
    from lpxsim.plan.fleet import replica_capacity

    best = float("inf")
    for racks in itertools.product(range(max_racks + 1), repeat=len(systems)):
        power = sum(n * float(get_system(s.name).power_w) for n, s in zip(racks, systems, strict=True))
        if power >= best:
            continue
        # feasibility: integer replicas y[c][s] with sum_c y*units <= racks_s and sum_s y*cap >= demand_c
        options = []
        for rc in classes:
            per_sys = []
            for s in systems:
                op = pts[(rc.name, s.name)]
                cap = replica_capacity(rc, op)
                per_sys.append((cap, op.replica_units))
            options.append(per_sys)
        ranges = [range(0, 9) for _ in range(len(classes) * len(systems))]
        for y in itertools.product(*ranges):
            ok = True
            for j in range(len(systems)):
                used = sum(y[i * len(systems) + j] * options[i][j][1] for i in range(len(classes)))
                ok &= used <= racks[j] + 1e-9
            for i, rc in enumerate(classes):
                ok &= sum(y[i * len(systems) + j] * options[i][j][0] for j in range(len(systems))) >= rc.demand - 1e-9
            if ok:
                best = power
                break
    return best


@pytest.mark.parametrize("seed", range(6))
def test_milp_matches_brute_force_on_small_fleets(seed: int) -> None:
    import random

    rnd = random.Random(seed)
    classes = [RequestClass("c0", "m", 8_000, 1_000, 100.0, requests_per_s=rnd.choice([3.0, 7.0, 12.0])),
               RequestClass("c1", "m", 8_000, 1_000, 100.0, concurrent_sessions=rnd.choice([4, 9, 15]))]
    systems = [SystemChoice(A), SystemChoice("lpx")]
    pts = {}
    for rc in classes:
        for s in systems:
            units = rnd.choice([0.5, 1.0])
            pts[(rc.name, s.name)] = _op(s.name, units, rps=rnd.choice([2.0, 4.0, 6.0]), conc=rnd.choice([3, 5, 8]))
    plan = solve_fleet(classes, systems, pts)
    expect = _brute_force_power(classes, systems, pts)
    if expect == float("inf"):
        assert not plan.feasible
    else:
        assert plan.feasible and plan.total_power_w == pytest.approx(expect)
