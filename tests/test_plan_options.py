"""plan fleet chooses among every option per demand class inside its MILP: each system with and without MTP,
and the Rubin + LPX modes (PD, AFD, drafter) as pool types occupying racks of both systems, each judged
against the per-user speed and the TTFT P99 target. The MILP tests use hand-made pool types; the
end-to-end ones run the modes' fleets on the test double of tests/analytic_double.py (mechanics only)."""

from __future__ import annotations

import math

import pytest

from analytic_double import double_factory, use_double
from lpxsim.plan.fleet import (
    PoolType,
    RequestClass,
    SystemChoice,
    parse_demand,
    point_pool_type,
    size_fleet,
    solve_fleet,
)
from lpxsim.plan.operating_point import OperatingPoint
from lpxsim.plan.options import MIXED_MODES, OPTION_USERS, mode_pool_type

RUBIN, LPX = "vr-nvl72", "lpx"  # catalog rack power: 199.8 kW and 97 kW


def _op(system: str, units: float, conc: int, ttft: float = 0.5) -> OperatingPoint:
    return OperatingPoint(
        model="m", system=system, isl=10_000, osl=1_000, target_tok_s_user=100.0, weights="fp8", kv="bf16",
        backend="test", feasible=True, layout=f"{system} replica", replica_chips=int(units * 72), replica_units=units,
        replica_power_w=1.0, concurrency=conc, tok_s_user=150.0, tok_s_total=conc * 150.0, requests_per_s=conc / 7.0,
        best_tok_s_user=500.0, ttft_s=ttft)


def _mode(rc: RequestClass, cap: float, units: dict[str, float], ttft: float = 0.3) -> PoolType:
    return PoolType(rc.name, "rubin-lpx-pd", "test", cap, units, {k: int(v * 72) for k, v in units.items()}, "m",
                    200.0, 1_000.0, 1.0, 8, "pd", 1.0, ttft)


def test_a_mode_spanning_two_systems_wins_when_it_needs_less_power() -> None:
    rc = RequestClass("c", "m", 10_000, 1_000, 100.0, concurrent_sessions=64)
    points = {(rc.name, RUBIN): _op(RUBIN, 1.0, 8), (rc.name, LPX): _op(LPX, 1.0, 8)}
    plain = [point_pool_type(rc, points[(rc.name, s)]) for s in (RUBIN, LPX)]
    systems = [SystemChoice(RUBIN), SystemChoice(LPX)]
    alone = solve_fleet([rc], systems, points, pool_types=plain)
    assert alone.feasible and {a.option for a in alone.assignments} == {LPX}  # 8 LPX racks: 776 kW
    mode = _mode(rc, 16.0, {RUBIN: 0.5, LPX: 1.0})  # 4 replicas: 2 Rubin + 4 LPX racks = 787.6 kW: loses
    assert {a.option for a in solve_fleet([rc], systems, points, pool_types=plain + [mode]).assignments} == {LPX}
    mode = _mode(rc, 32.0, {RUBIN: 0.5, LPX: 1.0})  # 2 replicas: 1 Rubin + 2 LPX racks = 393.8 kW: wins
    plan = solve_fleet([rc], systems, points, pool_types=plain + [mode])
    assert plan.feasible and {a.option for a in plan.assignments} == {"rubin-lpx-pd"}
    assert {b.system: b.units for b in plan.bom} == {RUBIN: 1, LPX: 2}
    assert sum(a.served for a in plan.assignments) == pytest.approx(64.0)  # split over its two systems
    (row,) = [r for r in plan.options[0]["options"] if r["option"] == "rubin-lpx-pd"]
    assert row["replicas"] == 2 and plan.options[0]["chosen"] == ["rubin-lpx-pd"]


def test_a_mode_needs_both_systems_among_the_candidates() -> None:
    rc = RequestClass("c", "m", 10_000, 1_000, 100.0, concurrent_sessions=64)
    points = {(rc.name, LPX): _op(LPX, 1.0, 8)}
    types = [point_pool_type(rc, points[(rc.name, LPX)]), _mode(rc, 64.0, {RUBIN: 0.5, LPX: 1.0})]
    plan = solve_fleet([rc], [SystemChoice(LPX)], points, pool_types=types)
    assert plan.feasible and {a.option for a in plan.assignments} == {LPX}


def test_the_ttft_target_rules_pool_types_out() -> None:
    rc = RequestClass("c", "m", 10_000, 1_000, 100.0, concurrent_sessions=16, ttft_p99_s=1.0)
    slow = point_pool_type(rc, _op(RUBIN, 1.0, 8, ttft=2.0))
    assert slow.capacity == 0 and "TTFT" in slow.reason
    assert point_pool_type(rc, _op(RUBIN, 1.0, 8, ttft=0.5)).capacity == 8
    points = {(rc.name, RUBIN): _op(RUBIN, 1.0, 8, ttft=2.0)}
    plan = solve_fleet([rc], [SystemChoice(RUBIN)], points)
    assert not plan.feasible and "TTFT of 1 s" in plan.reasons[0]


def _rc(**kw) -> RequestClass:
    base = dict(name="c", model="gemma-4-31b", isl=4000, osl=64, tok_s_user=50.0, concurrent_sessions=8.0)
    return RequestClass(**{**base, **kw})


@pytest.mark.parametrize("mode", MIXED_MODES)
def test_a_simulated_mode_is_a_pool_type_on_both_systems(monkeypatch, mode) -> None:
    use_double(monkeypatch)
    t = mode_pool_type(_rc(), mode)
    assert set(t.units) == {RUBIN, LPX} and all(u > 0 for u in t.units.values())
    assert t.concurrency == OPTION_USERS and t.power_w > 0 and math.isfinite(t.ttft_s)
    assert t.feasible == (t.tok_s_user >= 50.0) and (t.capacity == OPTION_USERS) == t.feasible
    tight = mode_pool_type(_rc(ttft_p99_s=1e-6), mode)
    assert tight.capacity == 0 and "TTFT P99" in tight.reason


def test_size_fleet_offers_every_option_per_class(monkeypatch) -> None:
    use_double(monkeypatch)
    spec = parse_demand({"classes": [{"name": "c", "model": "gemma-4-31b", "isl": 4000, "osl": 64,
                                      "tok_s_user": 50, "concurrent_sessions": 40, "mtp": 2, "accept": 0.7}],
                         "systems": [{"name": RUBIN}, {"name": LPX}], "options": True})
    plan = size_fleet(spec, factory=double_factory)
    (c,) = plan.options
    assert {r["option"] for r in c["options"]} == {RUBIN, RUBIN + "+mtp", LPX, LPX + "+mtp", *MIXED_MODES}
    assert plan.feasible
    assert set(c["chosen"]) == {a.option for a in plan.assignments}
    served = sum(a.served for a in plan.assignments)
    assert served >= 40 - 1e-9
    for r in c["options"]:
        assert r["feasible"] == (r["tok_s_user"] >= 50.0 and not r["reason"])
