"""The tour's cost and revenue table: priced from the sweep's and modes' rows, with no simulation of its own."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from lpxsim.plan.costs import default_costs, economics, hardware_economics, load_costs
from lpxsim.report.economics import economics_section, economics_table, fleet_units
from lpxsim.report.tour_sections import SectionResult, TourConfig

CFG = TourConfig(contexts=(10_000, 100_000), osl=1000, modes_osl=250)


def _sweep() -> pd.DataFrame:
    rows = []
    for target, chips, kw in (("lpx", 256, 190.0), ("vr-nvl72", 72, 230.0)):
        for ctx in (10_000, 32_000, 100_000):
            for conc, ceil, user in ((1, False, 900.0), (8, False, 400.0), (32, True, 150.0), (64, False, math.nan)):
                rows.append({"target": target, "context": ctx, "concurrency": conc, "at_ceiling": ceil,
                             "fits": conc <= 32, "chips": chips, "power_kw": kw, "tok_s_user": user,
                             "tok_s_total": user * conc, "hardware": f"{target}: {chips} chips, {kw} kW"})
    return pd.DataFrame(rows)


def _modes() -> pd.DataFrame:
    return pd.DataFrame([
        {"mode": "rubin-alone", "context": 10_000, "load": "light", "users": 8, "tok_s_user_p50": 120.0,
         "fleet_tok_s": 900.0, "power_kw": 230.0, "hardware": "72 vr-nvl72, 230 kW"},
        {"mode": "rubin-lpx-pd", "context": 10_000, "load": "heavy", "users": 64, "tok_s_user_p50": 450.0,
         "fleet_tok_s": 20_000.0, "power_kw": 420.0, "hardware": "32 vr-nvl72 + 256 lpx, 420 kW"},
    ])


def test_fleet_units_reads_the_fleet_hardware_label():
    from lpxsim.bench.fleets import fleet_hardware

    res = SimpleNamespace(pools=pd.DataFrame({"system": ["vr-nvl72", "lpx", "lpx"], "chips": [32, 256, 64]}),
                          summary={"power_w": 420e3})
    label = fleet_hardware(res)  # the format the modes rows carry: the parser must follow it
    assert fleet_units(label) == {"vr-nvl72": pytest.approx(32 / 72), "lpx": pytest.approx(320 / 256)}
    with pytest.raises(ValueError):
        fleet_units("a fleet of things")


def test_sweep_rows_at_article_contexts_demo_and_ceiling_only():
    df = economics_table(CFG, _sweep(), None)
    assert set(df["context"]) == {10_000, 100_000}  # 32K is a sweep context, not an article one
    assert sorted(df["concurrency"].unique()) == [1, 32]  # the demo point and the KV ceiling
    assert len(df) == 2 * 2 * 2
    assert df[["context", "osl", "concurrency", "hardware", "power_kw", "tok_s_user",
               "usd_per_mtok_output"]].notna().all().all()
    # revenue only where a price source applies (the shipped one: LPX output tokens)
    assert df["revenue_usd_per_hour"].notna().tolist() == (df["system / mode"] == "lpx").tolist()
    r = df[(df["system / mode"] == "vr-nvl72") & (df["context"] == 100_000) & (df["concurrency"] == 32)].iloc[0]
    # the same cost as the cost model on one NVL72 rack, with input = output x context / OSL
    want = economics(230e3, 1.0, "vr-nvl72", 150.0 * 32, 150.0 * 32 * 100, 150.0)
    assert r["usd_per_mtok_output"] == pytest.approx(want["usd_per_mtok_output"])
    assert r["usd_per_mtok_input"] == pytest.approx(want["usd_per_mtok_input"])
    lpx = df[(df["system / mode"] == "lpx") & (df["context"] == 100_000) & (df["concurrency"] == 32)].iloc[0]
    want = economics(190e3, 1.0, "lpx", 150.0 * 32, 150.0 * 32 * 100, 150.0)
    assert lpx["revenue_usd_per_hour"] == pytest.approx(want["revenue_usd_per_hour"])
    assert "REG-LPX-45" in lpx["price_source"]
    assert r["facility_kw"] == pytest.approx(230 * default_costs().pue.value)


def test_mode_rows_sum_capex_over_the_fleets_systems():
    df = economics_table(CFG, None, _modes())
    pd_row = df[df["system / mode"] == "rubin-lpx-pd"].iloc[0]
    c = default_costs()
    assert pd_row["capex_usd"] == pytest.approx(32 / 72 * c.capex("vr-nvl72").value + c.capex("lpx").value)
    want = hardware_economics(420e3, {"vr-nvl72": 32 / 72, "lpx": 1.0}, 20_000.0, 20_000.0 * 10_000 / 250, 450.0)
    assert pd_row["usd_per_mtok_output"] == pytest.approx(want["usd_per_mtok_output"])
    assert pd_row["price_usd_per_mtok_output"] == c.price_for(["vr-nvl72", "lpx"], 450.0).usd_per_mtok_output
    assert math.isnan(df[df["system / mode"] == "rubin-alone"].iloc[0]["revenue_usd_per_hour"])
    assert pd_row["concurrency"] == 64 and pd_row["source"] == "modes: heavy load"


def test_a_mixed_fleet_without_a_capex_says_so():
    c = load_costs()
    c = c.model_copy(update={"capex_usd": {k: v for k, v in c.capex_usd.items() if k != "lpx"}})
    e = hardware_economics(100e3, {"vr-nvl72": 1.0, "lpx": 1.0}, 1000.0, 0.0, 100.0, c)
    assert e["usd_per_mtok_output"] is None and e["revenue_usd_per_hour"] > 0 and e["margin_usd_per_hour"] is None
    assert any("capex_usd.lpx" in n for n in e["cost_notes"])


def test_section_reprices_with_other_costs_and_says_when_there_is_nothing():
    from lpxsim.report.html import Section

    results = {"sweep": SectionResult(Section("s"), {"sweep": _sweep()}),
               "modes": SectionResult(Section("m"), {"modes": _modes()})}
    base = economics_section(CFG, results)
    dear = economics_section(CFG, results, load_costs(usd_per_kwh=0.5))
    a, b = base.tables["economics"], dear.tables["economics"]
    assert len(a) == 8 + 2 and (b["usd_per_mtok_output"] > a["usd_per_mtok_output"]).all()
    assert any("economics rubin-lpx-pd @ 10,000 ctx, concurrency 64" in s for s in base.summary)
    assert any("no price source" in s for s in base.summary)  # a Rubin row: no revenue claimed
    empty = economics_section(CFG, {})
    assert empty.status == "unavailable" and not empty.tables
