"""plan fleet buys whole racks: a replica keeps to whole racks unless the demand allows it to straddle two, the
plan says which, and no feasible fleet is its own exit code (3) with the closest feasible target or fleet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analytic_double import double_factory
from lpxsim.cli.main import app
from lpxsim.plan.fleet import (
    RequestClass,
    SystemChoice,
    parse_demand,
    rack_share,
    round_target_below,
    size_fleet,
    solve_fleet,
)
from lpxsim.plan.operating_point import OperatingPoint

runner = CliRunner()


def _op(system: str, chips: int, per_unit: int, rps: float) -> OperatingPoint:
    return OperatingPoint(
        model="m", system=system, isl=10_000, osl=1_000, target_tok_s_user=400.0, weights="fp8", kv="bf16",
        backend="test", feasible=True, layout=f"{chips} chips", replica_chips=chips, replica_units=chips / per_unit,
        replica_power_w=1.0, concurrency=8, tok_s_user=400.0, tok_s_total=rps * 1_000, requests_per_s=rps,
        best_tok_s_user=500.0)


def test_rack_share_keeps_replicas_to_whole_racks():
    assert rack_share(160 / 256) == 1.0  # one 160-chip replica per 256-chip rack (96 chips idle)
    assert rack_share(0.5) == 0.5 and rack_share(36 / 72) == 0.5  # two per rack
    assert rack_share(96 / 256) == 0.5  # 2 of 96 chips fit a rack, not 2.67
    assert rack_share(1.88) == 2.0 and rack_share(1.0) == 1.0
    assert rack_share(160 / 256, allow_straddle=True) == pytest.approx(0.625)


def test_lpx_replicas_of_160_chips_take_a_rack_each_unless_they_may_straddle():
    rc = RequestClass("chat", "m", 10_000, 1_000, 400.0, requests_per_s=100.0)
    pts = {("chat", "lpx"): _op("lpx", 160, 256, 10.0)}  # 10 replicas serve 100 req/s
    whole = solve_fleet([rc], [SystemChoice("lpx")], pts)
    assert [(b.units, b.used_units) for b in whole.bom] == [(10, 10.0)]
    assert not whole.allow_straddle and "keep to whole racks" in whole.straddle_note()
    assert "10 replica(s) of 160 chips in 10 rack(s)" in whole.straddle_note()
    straddle = solve_fleet([rc], [SystemChoice("lpx")], pts, allow_straddle=True)
    assert [b.units for b in straddle.bom] == [7]  # ceil(10 x 0.625): replicas span racks
    assert straddle.as_dict()["allow_straddle"] and "may straddle" in straddle.as_dict()["straddle"]


def test_nvl72_replicas_pack_whole_racks():
    rc = RequestClass("chat", "m", 10_000, 1_000, 400.0, requests_per_s=30.0)
    half = solve_fleet([rc], [SystemChoice("vr-nvl72")], {("chat", "vr-nvl72"): _op("vr-nvl72", 36, 72, 10.0)})
    assert [b.units for b in half.bom] == [2]  # 3 replicas of half a rack: 2 racks
    big = solve_fleet([rc], [SystemChoice("vr-nvl72")], {("chat", "vr-nvl72"): _op("vr-nvl72", 108, 72, 10.0)})
    assert [b.units for b in big.bom] == [6]  # 3 replicas of 1.5 racks each keep to 2 whole racks


def test_round_target_below():
    assert round_target_below(396.2) == 390 and round_target_below(1_234) == 1_200
    assert round_target_below(390.0) == 380 and round_target_below(57.3) == 57


DEMAND = {"classes": [{"name": "fast", "model": "llama-3.1-8b", "isl": 8000, "osl": 500, "tok_s_user": 1e6,
                       "requests_per_s": 2.0}],
          "systems": [{"name": "h200-hgx"}, {"name": "vr-nvl72"}]}


def test_an_unreachable_target_offers_the_closest_feasible_one():
    plan = size_fleet(parse_demand(DEMAND), factory=double_factory)
    assert not plan.feasible and plan.closest is not None and plan.closest["kind"] == "target"
    best = plan.closest["best"]["fast"]
    target = plan.closest["targets"]["fast"]
    assert target < best["tok_s_user"] and target == round_target_below(best["tok_s_user"])
    assert f"{best['option']} reaches" in plan.closest["line"] and f"{target:,.0f} tok/s/user" in plan.closest["line"]
    # the closest fleet is a real one: sized at that target, it is feasible with the racks offered
    again = size_fleet(parse_demand({**DEMAND, "classes": [{**DEMAND["classes"][0], "tok_s_user": target}]}),
                       factory=double_factory)
    assert again.feasible and {b.system: b.units for b in again.bom} == plan.closest["racks_by_system"]


def test_ceilings_that_forbid_every_fleet_offer_the_fleet_without_them():
    cls = [{**DEMAND["classes"][0], "tok_s_user": 50, "requests_per_s": 4000.0}]
    plan = size_fleet(parse_demand({**DEMAND, "classes": cls, "max_total_racks": 1}), factory=double_factory)
    assert not plan.feasible and plan.closest["kind"] == "limits"
    free = size_fleet(parse_demand({**DEMAND, "classes": cls}), factory=double_factory)
    assert free.feasible and plan.closest["total_racks"] == sum(b.units for b in free.bom) > 1
    assert "without the rack and power ceilings the demand needs" in plan.closest["line"]


def test_no_feasible_fleet_exits_3_with_the_closest(tmp_path: Path, monkeypatch):
    import yaml

    import lpxsim.engine.search as search

    # the CLI's replicas on the analytic double (the project factory's compiles cost minutes here)
    monkeypatch.setattr(search, "engine_factory", lambda isl, osl: double_factory)
    p = tmp_path / "demand.yaml"
    p.write_text(yaml.safe_dump(DEMAND))
    r = runner.invoke(app, ["plan", "fleet", "--demand", str(p), "--json"])
    assert r.exit_code == 3, r.output
    d = json.loads(r.stdout)
    assert not d["feasible"] and d["closest"]["kind"] == "target"
    r = runner.invoke(app, ["plan", "fleet", "--demand", str(p)])
    assert r.exit_code == 3 and "closest feasible:" in r.stdout
    ok = {**DEMAND, "classes": [{**DEMAND["classes"][0], "tok_s_user": 50}]}
    p.write_text(yaml.safe_dump(ok))
    r = runner.invoke(app, ["plan", "fleet", "--demand", str(p), "--json", "--allow-straddle"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["allow_straddle"] is True
