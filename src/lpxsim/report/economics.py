"""Tour section: cost and revenue at the article's operating points, priced from rows the tour already has.

No step model runs here: the sweep's rows (one deployment per system and context, at concurrency 1
-- the demo number -- and at its KV ceiling) and the modes section's rows (each heterogeneous fleet
under light and heavy closed-loop load) already carry context, concurrency, hardware, power, output
tok/s and per-user speed; the cost model (`lpxsim.plan.costs`, catalog/costs.yaml) prices them.

Input tokens are what the closed loop prefills: every request reads `context` tokens and writes `osl`,
so input tok/s = output tok/s x context / osl.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from lpxsim.catalog import get_system
from lpxsim.plan.costs import CostModel, cost_inputs, default_costs, hardware_economics
from lpxsim.report.html import Note, Section, Table
from lpxsim.report.tour_sections import SectionResult, TourConfig

# '72 vr-nvl72 + 256 lpx, 186 kW' (lpxsim.bench.fleets.fleet_hardware): chips per system of a fleet
_PART = re.compile(r"^(\d+) (\S+)$")

COLUMNS = ["source", "system / mode", "context", "concurrency", "hardware", "power_kw", "facility_kw",
           "tok_s_user", "tok_s_output", "usd_per_mtok_output", "usd_per_mtok_input", "price_usd_per_mtok_output",
           "revenue_usd_per_hour", "revenue_usd_per_hour_per_mw_facility", "tok_s_per_mw_facility",
           "margin_usd_per_hour", "capex_usd"]


def fleet_units(hardware: str) -> dict[str, float]:
    """Units (racks / nodes) per system from a fleet's hardware label ('72 vr-nvl72 + 256 lpx, 186 kW')."""
    chips_text = hardware.rsplit(",", 1)[0]
    units: dict[str, float] = {}
    for part in chips_text.split(" + "):
        m = _PART.match(part.strip())
        if m is None:
            raise ValueError(f"not a fleet hardware label: {hardware!r}")
        s = get_system(m.group(2))
        units[s.name] = units.get(s.name, 0.0) + int(m.group(1)) / s.chips_per_unit
    return units


def _priced(base: dict, power_kw: float, units: dict[str, float], out_tok_s: float, context: int, osl: int,
            tok_s_user: float, costs: CostModel | None) -> dict:
    e = hardware_economics(power_kw * 1e3, units, out_tok_s, out_tok_s * context / osl, tok_s_user, costs)
    return {**base, "power_kw": power_kw, "tok_s_user": tok_s_user, "tok_s_output": out_tok_s,
            **{k: e[k] for k in COLUMNS if k in e}}


def sweep_economics(sweep: pd.DataFrame, contexts: tuple[int, ...], osl: int,
                    costs: CostModel | None = None) -> list[dict]:
    """Per system and article context: the sweep's concurrency-1 row and its ceiling row, priced."""
    if sweep.empty:
        return []
    fit = sweep[sweep["fits"].astype(bool)]
    rows = []
    for (target, ctx), g in fit[fit["context"].isin(contexts)].groupby(["target", "context"], sort=True):
        picks = [("concurrency 1 (demo)", g[g["concurrency"] == 1]),
                 ("KV ceiling", g[g["at_ceiling"].astype(bool)])]
        for label, sel in picks:
            if sel.empty:
                continue
            r = sel.iloc[0]
            s = get_system(target)
            base = {"source": f"sweep: {label}", "system / mode": s.name, "context": int(ctx),
                    "concurrency": int(r["concurrency"]), "hardware": r["hardware"]}
            rows.append(_priced(base, float(r["power_kw"]), {s.name: float(r["chips"]) / s.chips_per_unit},
                                float(r["tok_s_total"]), int(ctx), osl, float(r["tok_s_user"]), costs))
    return rows


def modes_economics(modes: pd.DataFrame, osl: int, costs: CostModel | None = None) -> list[dict]:
    """Each mode row (fleet, context, closed-loop users), priced at its P50 per-user speed."""
    rows = []
    for r in modes.itertuples():
        if not (math.isfinite(r.fleet_tok_s) and math.isfinite(r.tok_s_user_p50)):
            continue
        base = {"source": f"modes: {r.load} load", "system / mode": r.mode, "context": int(r.context),
                "concurrency": int(r.users), "hardware": r.hardware}
        rows.append(_priced(base, float(r.power_kw), fleet_units(r.hardware), float(r.fleet_tok_s), int(r.context),
                            osl, float(r.tok_s_user_p50), costs))
    return rows


def economics_table(cfg: TourConfig, sweep: pd.DataFrame | None, modes: pd.DataFrame | None,
                    costs: CostModel | None = None) -> pd.DataFrame:
    """The tour's cost and revenue rows (sweep first, then modes); empty when neither section produced rows."""
    rows = []
    if sweep is not None:
        rows += sweep_economics(sweep, cfg.contexts, cfg.osl, costs)
    if modes is not None and not modes.empty:
        rows += modes_economics(modes, cfg.modes_osl, costs)
    return pd.DataFrame(rows, columns=COLUMNS)


def economics_section(cfg: TourConfig, results: dict[str, SectionResult],
                      costs: CostModel | None = None) -> SectionResult:
    """Cost and revenue for LPX, Rubin and the modes from the sweep's and modes section's rows."""
    sweep = results["sweep"].tables.get("sweep") if "sweep" in results else None
    modes = results["modes"].tables.get("modes") if "modes" in results else None
    df = economics_table(cfg, sweep, modes, costs)
    sec = Section(f"{cfg.model}: what a token costs and what it sells for",
                  "The article's operating points, priced: each system at concurrency 1 (the demo number) and at "
                  "its KV ceiling (the concurrency ceiling decides whether the rack pays for itself), and each "
                  "serving mode under light and heavy load. Every row states its context, concurrency, hardware "
                  "and power; per-user speed sets the price tier.")
    if df.empty:
        sec.add(Note("no sweep or modes rows to price (those sections did not run)", "warn"))
        return SectionResult(sec, {}, ["economics: no sweep or modes rows to price"], "unavailable")
    inputs = cost_inputs(costs)
    ladder = (costs or default_costs()).price_ladder
    sec.add(Note("Priced from the rows the sweep and modes sections computed (no extra simulation). Inputs "
                 "(catalog/costs.yaml, docs/assumptions.md 'Economics'): "
                 + ", ".join(f"{k} {v['value']:g} ({v['grade']})" for k, v in inputs.items())
                 + "; price ladder $/Mtok out by tok/s/user: "
                 + ", ".join(f">= {t.min_tok_s_user:g}: ${t.usd_per_mtok_output:g} ({t.grade})" for t in ladder)
                 + f". Input tok/s = output tok/s x context / OSL (sweep OSL {cfg.osl}, modes OSL {cfg.modes_osl}): "
                 "every closed-loop request prefills its whole context. Capex per unit: docs/assumptions.md; "
                 "no LPX or Rubin price is published, so $/Mtok and revenue are what the model does with its "
                 "assumptions, not measurements. `lpxsim estimate/modes/plan --costs FILE` reprices."))
    sec.add(Table(df, "cost and revenue per row: $/Mtok at the stated utilisation, revenue at the tier the "
                      "row's per-user speed reaches"))
    lines = [f"economics {r['system / mode']} @ {r['context']:,} ctx, concurrency {r['concurrency']} "
             f"({r['hardware']}): {r['tok_s_user']:,.0f} tok/s/user, "
             + (f"${r['usd_per_mtok_output']:,.2f}/Mtok out, " if r["usd_per_mtok_output"] is not None
                and r["usd_per_mtok_output"] == r["usd_per_mtok_output"] else "no capex, ")
             + f"revenue ${r['revenue_usd_per_hour_per_mw_facility']:,.0f}/h per facility MW"
             for r in df.to_dict("records")]
    return SectionResult(sec, {"economics": df}, lines)
