"""The cost model: provenance of every number, overrides, validation, and the economics arithmetic."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from lpxsim.catalog import system_names
from lpxsim.cli.main import app
from lpxsim.core.errors import UserError
from lpxsim.plan.costs import HOURS_PER_YEAR, default_costs, economics, load_costs


def test_every_number_has_provenance_and_every_catalog_system_a_capex():
    c = default_costs()
    for name in ("amortisation_years", "usd_per_kwh", "pue", "utilisation", "opex_fraction_per_year"):
        v = getattr(c, name)
        assert v.source.strip() and v.grade in "PSEU"
    for s in system_names():
        assert c.capex(s) is not None, s
    # the one shipped price source is sourced (never a U-graded ladder) and prices LPX output tokens only
    assert c.price_ladder and all(t.grade in "PS" and t.source in _source_keys() for t in c.price_ladder)
    assert [(t.systems, t.usd_per_mtok_output, t.usd_per_mtok_input) for t in c.price_ladder] == [(("lpx",), 45.0,
                                                                                                  None)]


def _source_keys() -> str:
    from pathlib import Path

    return (Path(__file__).parent.parent / "docs" / "sources.md").read_text()


def test_economics_arithmetic_by_hand():
    c = load_costs(usd_per_kwh=0.1, pue=1.5)
    d = economics(100e3, 2.0, "lpx", tok_s_output_total=1000.0, tok_s_input_total=4000.0, tok_s_user=500.0, costs=c)
    assert d["facility_kw"] == pytest.approx(150.0)
    assert d["energy_usd_per_hour"] == pytest.approx(15.0)
    capex = 2 * c.capex("lpx").value
    cap_h = capex / (c.amortisation_years.value * HOURS_PER_YEAR)
    opex_h = capex * c.opex_fraction_per_year.value / HOURS_PER_YEAR
    assert d["cost_usd_per_hour"] == pytest.approx(cap_h + opex_h + 15.0)
    r, u = c.input_price_ratio.value, c.utilisation.value
    # the headline: the whole cost over the output tokens; per input token: the same cost over the input tokens
    assert d["usd_per_mtok_output"] == pytest.approx(d["cost_usd_per_hour"] / (3600 * u * 1000) * 1e6)
    assert d["usd_per_mtok_input"] == pytest.approx(d["cost_usd_per_hour"] / (3600 * u * 4000) * 1e6)
    # the allocation rule, reported as such beside it
    eq = 3600 * u * (1000 + r * 4000)
    assert d["alloc_usd_per_mtok_output"] == pytest.approx(d["cost_usd_per_hour"] / eq * 1e6)
    assert d["alloc_usd_per_mtok_input"] == pytest.approx(r * d["alloc_usd_per_mtok_output"])
    assert "allocation rule" in d["alloc_rule"] and "not the headline" in d["alloc_rule"]
    assert d["usd_per_mtok_output"] > d["alloc_usd_per_mtok_output"]
    # revenue: the sourced LPX price on output tokens only (input tokens unpriced by that source)
    assert d["price_usd_per_mtok_output"] == 45.0 and "REG-LPX-45" in d["price_source"]
    assert d["price_source"].startswith("assumption")
    assert d["revenue_usd_per_hour"] == pytest.approx(3600 * u * 1000 * 45.0 / 1e6)
    assert d["margin_usd_per_hour"] == pytest.approx(d["revenue_usd_per_hour"] - d["cost_usd_per_hour"])
    assert d["tok_s_per_mw_facility"] == pytest.approx(1000 / 0.15)
    assert d["revenue_usd_per_hour_per_mw_facility"] == pytest.approx(d["revenue_usd_per_hour"] / 0.15)


def test_no_price_source_no_revenue():
    """A GPU rack has no sourced price: cost yes, revenue and margin none."""
    d = economics(199.8e3, 1, "vr-nvl72", 1000, 10_000, 50, default_costs())
    assert d["usd_per_mtok_output"] > 0
    assert d["revenue_usd_per_hour"] is None and d["margin_usd_per_hour"] is None and d["price_source"] is None


def test_user_price_file_replaces_the_shipped_source(tmp_path):
    f = tmp_path / "prices.yaml"
    f.write_text("price_ladder:\n  - {usd_per_mtok_output: 2.0, usd_per_mtok_input: 0.5}\n"
                 "  - {min_tok_s_user: 300, usd_per_mtok_output: 10.0}\n"
                 "  - {min_tok_s_user: 100, usd_per_mtok_output: 20.0, systems: [vera-rubin], source: quote, grade: P}\n")
    c = load_costs(prices=f)
    slow = economics(1e5, 1, "h200-hgx", 1000, 2000, 50, c)
    assert slow["price_usd_per_mtok_output"] == 2.0 and slow["price_source"] == "assumption: price user:prices.yaml (U)"
    assert slow["revenue_usd_per_hour"] == pytest.approx(3600 * c.utilisation.value * (1000 * 2.0 + 2000 * 0.5) / 1e6)
    assert economics(1e5, 1, "h200-hgx", 1000, 0, 500, c)["price_usd_per_mtok_output"] == 10.0  # the faster tier
    assert economics(1e5, 1, "vr-nvl72", 1000, 0, 150, c)["price_usd_per_mtok_output"] == 20.0  # its own tier
    assert economics(1e5, 1, "lpx", 1000, 0, 50, c)["price_usd_per_mtok_output"] == 2.0  # the shipped $45 is gone


@pytest.mark.parametrize("text", ["- 1\n", "price_ladder: 3\n", "price_ladder: []\npue: 1.2\n",
                                  "price_ladder:\n  - {usd_per_mtok_output: -1}\n",
                                  "price_ladder:\n  - {usd_per_mtok_output: 1, systems: [nope]}\n"])
def test_bad_price_file_is_one_line_error(tmp_path, text):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        load_costs(prices=f)
    assert "\n" not in str(e.value)


def test_overrides_file_and_flags(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("usd_per_kwh: 0.2\ncapex_usd:\n  lpx: 1.0e+6\n  vr-nvl72: {value: 5.0e+6}\n")
    c = load_costs(f, pue=1.4)
    assert c.usd_per_kwh.value == 0.2 and c.usd_per_kwh.source == "user:c.yaml"
    assert c.capex("lpx").value == 1e6 and c.capex("vera-rubin").value == 5e6
    assert c.capex("vr-nvl72").source == "user:c.yaml"
    assert c.pue.value == 1.4 and c.pue.source == "user:--pue"
    assert c.capex("gb200-nvl72").value == default_costs().capex("gb200-nvl72").value  # untouched


@pytest.mark.parametrize("kw", [{"pue": 0.5}, {"pue": math.nan}, {"usd_per_kwh": -1.0}, {"usd_per_kwh": math.inf},
                                {"usd_per_kwh": 80.0}])
def test_bad_flag_values_are_user_errors(kw):
    with pytest.raises(UserError):
        load_costs(**kw)


@pytest.mark.parametrize("text,field", [
    ("pue: [1, 2]\n", "costs.pue"),
    ("bogus: 1\n", "costs.bogus"),
    ("utilisation: 1.5\n", "costs"),
    ("price_ladder:\n  - {min_tok_s_user: 10, usd_per_mtok_output: 1}\n  - {min_tok_s_user: 5, usd_per_mtok_output: 2}\n",
     "costs"),
    ("pue: : :\n", "costs"),
    ("- 1\n- 2\n", "costs"),
    ("capex_usd:\n  not-a-rack: 1.0\n", "costs.capex_usd.not-a-rack"),
    ("capex_usd:\n  lpx: -5\n", "costs"),
])
def test_bad_file_is_one_line_error(tmp_path, text, field):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        load_costs(f)
    assert e.value.field.startswith(field) and "\n" not in str(e.value)


def test_missing_capex_leaves_cost_fields_empty_with_a_note(tmp_path):
    f = tmp_path / "c.yaml"
    raw = default_costs().model_dump()
    raw["capex_usd"].pop("lpx")
    import yaml

    f.write_text(yaml.safe_dump({"capex_usd": raw["capex_usd"]}))
    # a file cannot remove a key by merging: build the model directly instead
    from lpxsim.plan.costs import CostModel

    c = CostModel.model_validate(raw)
    d = economics(1e5, 1, "lpx", 1000, 0, 100, c)
    assert d["usd_per_mtok_output"] is None and "no capex" in d["cost_notes"][0]
    assert d["revenue_usd_per_hour"] > 0 and d["margin_usd_per_hour"] is None


def test_estimate_cli_reports_economics_and_rejects_bad_pue():
    r = CliRunner().invoke(app, ["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--gpus", "1", "--tp", "1",
                                 "--isl", "256", "--osl", "64", "--json", "--pue", "1.5", "--usd-per-kwh", "0.1"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for k in ("usd_per_mtok_output", "usd_per_mtok_input", "facility_kw", "tok_s_per_mw_facility"):
        assert d[k] is not None and d[k] > 0
    assert d["revenue_usd_per_hour"] is None  # no price source for an H200 node
    assert d["facility_kw"] == pytest.approx(d["power_w"] * 1.5 / 1e3)
    bad = CliRunner().invoke(app, ["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--pue", "0.9"])
    assert bad.exit_code == 2 and "pue" in bad.output and "1" in bad.output  # names the field and its range


def test_shipped_example_cost_file_loads():
    from pathlib import Path

    for f in sorted((Path(__file__).parent.parent / "examples" / "costs").glob("*.yaml")):
        c = load_costs(f)
        assert c.usd_per_kwh.source.startswith("user:") and c.capex("vr-nvl72").grade == "P"
        assert c.price_for("h200-hgx", 5_000).usd_per_mtok_output == 40.0


def test_estimate_cli_prices_only_from_a_price_source(tmp_path):
    """No price source for an H200 node: no revenue line; a user's price file: revenue, margin, its source."""
    base = ["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--gpus", "1", "--tp", "1", "--isl", "256",
            "--osl", "64"]
    text = CliRunner().invoke(app, base).output
    flat = " ".join(text.split())
    assert "/Mtok out (the whole cost" in flat and "revenue: no price source" in flat
    assert "allocation rule (an assumption, not the headline)" in flat
    f = tmp_path / "prices.yaml"
    f.write_text("price_ladder:\n  - {usd_per_mtok_output: 2.5, source: our price list, grade: P}\n")
    r = CliRunner().invoke(app, [*base, "--prices", str(f), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["price_usd_per_mtok_output"] == 2.5 and d["price_source"] == "assumption: price our price list (P)"
    assert d["margin_usd_per_hour"] == pytest.approx(d["revenue_usd_per_hour"] - d["cost_usd_per_hour"])
    bad = CliRunner().invoke(app, [*base, "--prices", str(tmp_path / "none.yaml")])
    assert bad.exit_code != 0 and isinstance(bad.exception, UserError) and bad.exception.field == "prices"
