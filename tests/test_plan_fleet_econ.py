"""Fleet planning on a real floor: N+k spares per pool, rack and power ceilings, a priced BOM."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lpxsim.catalog import get_system
from lpxsim.cli.main import app
from lpxsim.core.errors import UserError
from lpxsim.plan.costs import default_costs, load_costs
from lpxsim.plan.fleet import FleetLimits, RequestClass, SystemChoice, parse_demand, solve_fleet
from lpxsim.plan.operating_point import OperatingPoint

A, B = "gb200-nvl72", "vr-nvl72"


def _op(system: str, units: float, rps: float, tok_s_user: float = 400.0) -> OperatingPoint:
    return OperatingPoint(
        model="m", system=system, isl=10_000, osl=1_000, target_tok_s_user=400.0, weights="fp8", kv="bf16",
        backend="test", feasible=True, layout=f"{system} replica", replica_chips=int(units * 72),
        replica_units=units, replica_power_w=1.0, concurrency=8, tok_s_user=tok_s_user, tok_s_total=rps * 1_000,
        requests_per_s=rps, best_tok_s_user=500.0,
    )


RC = RequestClass("chat", "m", 10_000, 1_000, 400.0, requests_per_s=25.0)


def test_n_plus_k_adds_whole_replicas_of_spares_per_pool() -> None:
    pts = {("chat", A): _op(A, 1.0, 10.0)}
    base = solve_fleet([RC], [SystemChoice(A)], pts)
    n1 = solve_fleet([RC], [SystemChoice(A, redundancy=1)], pts)
    n2 = solve_fleet([RC], [SystemChoice(A, redundancy=2)], pts)
    assert [b.units for b in base.bom] == [3] and base.bom[0].spare_units == 0
    assert [(b.units, b.spare_units) for b in n1.bom] == [(4, 1)]
    assert [(b.units, b.spare_units) for b in n2.bom] == [(5, 2)]
    assert n1.total_power_w == pytest.approx(4 * float(get_system(A).power_w))
    # serving with one replica lost still covers the demand: 3 serving racks x 10 req/s >= 25
    assert (n1.bom[0].units - n1.bom[0].spare_units) * 10.0 >= RC.demand
    # spares raise the cost per token of the same delivered tokens
    assert n1.totals["usd_per_mtok_output"] > base.totals["usd_per_mtok_output"]


def test_spares_of_a_two_rack_replica_are_two_racks() -> None:
    pts = {("chat", A): _op(A, 2.0, 20.0)}
    plan = solve_fleet([RC], [SystemChoice(A, redundancy=1)], pts)
    (b,) = plan.bom
    assert b.spare_units == 2 and b.units == 4 + 2  # 2 replicas x 2 racks serve 40 >= 25, + 1 spare replica


def test_spares_can_change_which_system_is_cheapest() -> None:
    # A: many small replicas (spare = 1 rack); B: one big 4-rack replica (spare = 4 racks)
    pts = {("chat", A): _op(A, 1.0, 10.0), ("chat", B): _op(B, 4.0, 100.0)}
    no_spare = solve_fleet([RC], [SystemChoice(A), SystemChoice(B)], pts)
    spare = solve_fleet([RC], [SystemChoice(A, redundancy=1), SystemChoice(B, redundancy=1)], pts)
    assert [b.system for b in no_spare.bom] == [A]  # 3 x 120 kW < 4 x 199.8 kW
    assert [b.system for b in spare.bom] == [A] and spare.bom[0].units == 4
    pts_b = {("chat", A): _op(A, 1.0, 4.0), ("chat", B): _op(B, 4.0, 100.0)}
    # without spares A needs 7 racks (840 kW) vs B 4 (799 kW); with N+1, A 8 (960 kW) vs B 8 (1,598 kW)
    assert [b.system for b in solve_fleet([RC], [SystemChoice(A), SystemChoice(B)], pts_b).bom] == [B]
    flipped = solve_fleet([RC], [SystemChoice(A, redundancy=1), SystemChoice(B, redundancy=1)], pts_b)
    assert [b.system for b in flipped.bom] == [A]


def test_rack_and_power_ceilings_bind_or_make_the_fleet_infeasible() -> None:
    pts = {("chat", A): _op(A, 1.0, 10.0), ("chat", B): _op(B, 1.0, 40.0)}
    systems = [SystemChoice(A), SystemChoice(B)]
    free = solve_fleet([RC], systems, pts)
    assert [(b.system, b.units) for b in free.bom] == [(B, 1)]
    fac_b = float(get_system(B).power_w) * default_costs().pue.value
    at = solve_fleet([RC], systems, pts, FleetLimits(max_facility_w=fac_b * 1.001))
    assert at.feasible and at.totals["facility_kw"] * 1e3 <= fac_b * 1.001
    assert not solve_fleet([RC], systems, pts, FleetLimits(max_facility_w=fac_b * 0.99)).feasible
    # a ceiling binds a cost objective: the cheaper-per-rack system needs more power than allowed
    fac_a = 3 * float(get_system(A).power_w) * default_costs().pue.value
    costed = [SystemChoice(A, cost_per_unit=1.0), SystemChoice(B, cost_per_unit=10.0)]
    assert [b.system for b in solve_fleet([RC], costed, pts).bom] == [A]
    bound = solve_fleet([RC], costed, pts, FleetLimits(max_facility_w=fac_a * 0.99))
    assert bound.feasible and [b.system for b in bound.bom] == [B]
    tight = solve_fleet([RC], [SystemChoice(A)], {("chat", A): pts[("chat", A)]}, FleetLimits(max_total_units=2))
    assert not tight.feasible and "max_total_racks" in tight.reasons[0]
    ok = solve_fleet([RC], [SystemChoice(A, redundancy=1)], {("chat", A): pts[("chat", A)]},
                     FleetLimits(max_total_units=4))
    assert ok.feasible and ok.bom[0].units == 4
    assert not solve_fleet([RC], [SystemChoice(A, redundancy=1)], {("chat", A): pts[("chat", A)]},
                           FleetLimits(max_total_units=3)).feasible


def test_bom_is_priced_with_the_cost_model() -> None:
    pts = {("chat", A): _op(A, 1.0, 10.0)}
    c = load_costs(usd_per_kwh=0.1, pue=1.5)
    plan = solve_fleet([RC], [SystemChoice(A, redundancy=1)], pts, costs=c)
    (b,) = plan.bom
    e = b.economics
    assert e["capex_usd"] == pytest.approx(4 * c.capex(A).value)
    assert e["facility_kw"] == pytest.approx(4 * float(get_system(A).power_w) * 1.5 / 1e3)
    t = plan.totals
    assert t["capex_usd"] == pytest.approx(e["capex_usd"]) and t["racks_by_system"] == {A: 4}
    assert t["spare_units"] == 1
    # the headline: the whole cost over the delivered 25 req/s x 1,000 output tokens; the allocation rule beside it
    out, tin = 25_000.0, 25.0 * 10_000
    u, r = c.utilisation.value, c.input_price_ratio.value
    assert t["usd_per_mtok_output"] == pytest.approx(t["cost_usd_per_hour"] / (3600 * u * out) * 1e6)
    assert t["usd_per_mtok_input"] == pytest.approx(t["cost_usd_per_hour"] / (3600 * u * tin) * 1e6)
    assert t["alloc_usd_per_mtok_output"] == pytest.approx(t["cost_usd_per_hour"] / (3600 * u * (out + r * tin)) * 1e6)
    # no price source covers a GB200 rack: no revenue, no margin
    assert t["revenue_usd_per_hour"] is None and t["margin_usd_per_hour"] is None
    # a user's price list: revenue on the delivered output tokens at the tier the 400 tok/s/user reaches
    from lpxsim.plan.costs import PriceTier

    priced = c.model_copy(update={"price_ladder": [
        PriceTier(usd_per_mtok_output=3.0, source="list", grade="P"),
        PriceTier(min_tok_s_user=300.0, usd_per_mtok_output=12.0, source="list", grade="P")]})
    t = solve_fleet([RC], [SystemChoice(A, redundancy=1)], pts, costs=priced).totals
    assert t["revenue_usd_per_hour"] == pytest.approx(3600 * u * out * 12.0 / 1e6)
    assert t["margin_usd_per_hour"] == pytest.approx(t["revenue_usd_per_hour"] - t["cost_usd_per_hour"])


def test_tco_objective_uses_cost_of_ownership() -> None:
    pts = {("chat", A): _op(A, 1.0, 10.0), ("chat", "lpx"): _op("lpx", 1.0, 10.0)}
    c = load_costs()
    plan = solve_fleet([RC], [SystemChoice(A), SystemChoice("lpx")], pts, costs=c, objective="tco")
    assert plan.objective == "tco"
    cheaper = min((A, "lpx"), key=lambda s: c.capex(s).value)  # same energy order of magnitude; capex dominates
    assert [b.system for b in plan.bom] == [cheaper]
    with pytest.raises(UserError):
        solve_fleet([RC], [SystemChoice(A)], {("chat", A): pts[("chat", A)]}, objective="bogus")


def test_demand_file_fields_are_validated() -> None:
    base = {"classes": [{"name": "c", "model": "gemma-4-31b", "isl": 100, "osl": 10, "tok_s_user": 50,
                         "requests_per_s": 1}]}
    d = parse_demand({**base, "redundancy": 1, "max_total_racks": 10, "max_facility_kw": 500,
                      "systems": [{"name": "lpx", "redundancy": 2}, {"name": "vr-nvl72"}]})
    assert [c.redundancy for c in d.system_choices()] == [2, 1]
    assert d.limits() == FleetLimits(10, 500e3)
    for bad in ({"redundancy": -1}, {"max_facility_kw": 0}, {"objective": "cheap"}, {"max_total_racks": -2}):
        with pytest.raises(UserError):
            parse_demand({**base, **bad})


def test_plan_fleet_cli_redundancy_and_bom(tmp_path) -> None:
    f = tmp_path / "d.yaml"
    f.write_text("classes:\n  - {name: c, model: llama-3.1-8b, isl: 2000, osl: 200, tok_s_user: 100, "
                 "requests_per_s: 5}\nsystems:\n  - {name: h200-hgx}\n")
    r = CliRunner().invoke(app, ["plan", "fleet", "--demand", str(f), "--redundancy", "1",
                                 "--pue", "1.3", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    (b,) = d["bom"]
    assert b["spare_units"] == 1 and d["spare_units"] == 1
    assert d["facility_kw"] == pytest.approx(b["power_w"] * 1.3 / 1e3)
    for k in ("capex_usd", "usd_per_mtok_output", "usd_per_mtok_input", "tok_s_per_mw_facility"):
        assert d[k] is not None and d[k] > 0
    assert d["revenue_usd_per_hour"] is None  # no price source for an H200 node
    bad = CliRunner().invoke(app, ["plan", "fleet", "--demand", str(f), "--redundancy", "-1"])
    assert isinstance(bad.exception, UserError) and bad.exception.field == "redundancy"


def test_plan_t8_rows_carry_economics_on_catalog_systems() -> None:
    r = CliRunner().invoke(app, ["plan", "t8", "--json", "--pue", "1.25", "--target-tok-s-user", "50"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["systems"]
    priced = [v for v in rows.values() if v.get("facility_kw") is not None]
    assert priced
    for v in priced:
        assert v["facility_kw"] == pytest.approx(v["replica_power_w"] * 1.25 / 1e3)
        assert v["usd_per_mtok_output"] > 0
        # revenue only where a price source applies: the shipped one prices LPX output tokens, not GPU racks
        assert (v["revenue_usd_per_hour"] is not None) == (v["system"] == "lpx")
