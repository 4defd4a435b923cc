"""Tour section: what a token costs at the article's operating points (and, where a price source applies,
what it sells for), priced from rows the tour already has.

No step model runs here: the sweep's rows (the system's own deployment at each context -- LPX: the rack,
not the smaller replica sizes the sweep also draws -- at concurrency 1, the demo number, and at its KV
ceiling) and the modes section's rows (each heterogeneous fleet
under light and heavy closed-loop load) already carry context, concurrency, hardware, power, output
tok/s and per-user speed; the cost model (`lpxsim.plan.costs`, catalog/costs.yaml) prices them.

Input tokens are what the closed loop prefills: every request reads `context` tokens and writes `osl`,
so input tok/s = output tok/s x context / osl. The headline is the whole cost over the output tokens;
revenue and margin appear only on rows a price source covers, labelled as the assumption they are.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from lpxsim.bench.sweep import rack_rows
from lpxsim.catalog import get_system
from lpxsim.plan.costs import CostModel, alloc_rule, cost_inputs, default_costs, hardware_economics
from lpxsim.report.html import Note, Section, Table
from lpxsim.report.tour_sections import SectionResult, TourConfig

# '72 vr-nvl72 + 256 lpx, 186 kW' (lpxsim.bench.fleets.fleet_hardware): chips per system of a fleet
_PART = re.compile(r"^(\d+) (\S+)$")

COLUMNS = ["source", "system / mode", "context", "osl", "concurrency", "hardware", "power_kw", "facility_kw",
           "tok_s_user", "tok_s_output", "cost_usd_per_hour", "usd_per_mtok_output", "usd_per_mtok_input",
           "alloc_usd_per_mtok_output", "alloc_usd_per_mtok_input", "price_usd_per_mtok_output", "price_source",
           "revenue_usd_per_hour", "revenue_usd_per_hour_per_mw_facility", "tok_s_per_mw_facility",
           "margin_usd_per_hour", "capex_usd"]
# What the page shows (the rest is in results.csv / results.parquet)
SHOWN = ("system / mode", "hardware", "context", "concurrency", "tok_s_user", "usd_per_mtok_output",
         "usd_per_mtok_input", "price_usd_per_mtok_output", "margin_usd_per_hour")
BAND_KEYS = ("band", "tok_s_user_band")  # an error band a row may carry (shown when present, never invented)


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
    return {**base, "osl": osl, "power_kw": power_kw, "tok_s_user": tok_s_user, "tok_s_output": out_tok_s,
            **{k: e[k] for k in COLUMNS if k in e}}


def _bands(r) -> dict:
    """The row's error band, if the result carries one (another part of the project adds it)."""
    get = r.get if hasattr(r, "get") else lambda k, d=None: getattr(r, k, d)
    return {k: get(k) for k in BAND_KEYS if get(k) is not None}


def sweep_economics(sweep: pd.DataFrame, contexts: tuple[int, ...], osl: int,
                    costs: CostModel | None = None) -> list[dict]:
    """Per system and article context: the sweep's concurrency-1 row and its ceiling row, priced."""
    if sweep.empty:
        return []
    sweep = rack_rows(sweep)  # the deployment for the context (LPX: the rack), not a smaller replica size
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
                    "concurrency": int(r["concurrency"]), "hardware": r["hardware"], **_bands(r)}
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
                "concurrency": int(r.users), "hardware": r.hardware, **_bands(r)}
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
    extra = [k for k in BAND_KEYS if any(k in r for r in rows)]
    return pd.DataFrame(rows, columns=COLUMNS + extra)


def economics_section(cfg: TourConfig, results: dict[str, SectionResult],
                      costs: CostModel | None = None) -> SectionResult:
    """Cost and revenue for LPX, Rubin and the modes from the sweep's and modes section's rows."""
    sweep = results["sweep"].tables.get("sweep") if "sweep" in results else None
    modes = results["modes"].tables.get("modes") if "modes" in results else None
    df = economics_table(cfg, sweep, modes, costs)
    c = costs or default_costs()
    sec = Section(f"{cfg.model}: what a token costs and what it sells for",
                  "The article's operating points, priced: each system at one user (the demo number) and at its KV "
                  "ceiling (the concurrency ceiling decides whether the rack pays for itself), and each serving "
                  "mode under light and heavy load. Every row states its context, users, hardware and power. The "
                  f"headline is the whole cost over the output tokens, at {c.utilisation.value:.0%} utilisation.")
    if df.empty:
        sec.add(Note("no sweep or modes rows to price (those sections did not run)", "warn"))
        return SectionResult(sec, {}, ["economics: no sweep or modes rows to price"], "unavailable")
    inputs = cost_inputs(costs)
    sec.add(Note("$ per M output tokens = the whole cost of the hardware per hour (capex over "
                 f"{c.amortisation_years.value:g} years, opex, facility energy) over the output tokens of that hour. "
                 "'Same cost, $ per M input tokens' is that one cost over the input tokens: two readings of one "
                 f"cost, not parts that add up. Input tok/s = output tok/s x context / OSL (sweep OSL {cfg.osl}, "
                 f"modes OSL {cfg.modes_osl}): every closed-loop request prefills its whole context. "
                 f"{alloc_rule(c)} (results.csv: alloc_usd_per_mtok_*). Inputs (catalog/costs.yaml, "
                 "docs/assumptions.md 'Economics'): "
                 + ", ".join(f"{k} {v['value']:g} ({v['grade']})" for k, v in inputs.items())
                 + ". No LPX or Rubin price is published: capex is an assumption."))
    sec.add(Note(_price_note(c), "warn"))
    sec.add(Table(df, "cost per output token per row; price and margin only where a price source applies "
                      "(an assumption, named above the table)", columns=SHOWN + tuple(k for k in BAND_KEYS
                                                                                          if k in df.columns)))
    lines = [f"economics {r['system / mode']} @ {r['context']:,} ctx, concurrency {r['concurrency']} "
             f"({r['hardware']}): {r['tok_s_user']:,.0f} tok/s/user, "
             + (f"${r['usd_per_mtok_output']:,.2f}/Mtok out (whole cost)" if _known(r["usd_per_mtok_output"])
                else "no capex")
             + (f", revenue ${r['revenue_usd_per_hour_per_mw_facility']:,.0f}/h per facility MW at the assumed price"
                if _known(r["revenue_usd_per_hour_per_mw_facility"]) else ", no price source")
             for r in df.to_dict("records")]
    return SectionResult(sec, {"economics": df}, lines)


def _known(v) -> bool:
    return v is not None and v == v


def _price_note(c: CostModel) -> str:
    """The price sources in force, named as assumptions; revenue and margin exist only under them."""
    if not c.price_ladder:
        return "No price source: no revenue or margin is shown (give one with --prices FILE)."
    tiers = "; ".join(f"${t.usd_per_mtok_output:g} per M output tokens"
                      + (f" and ${t.usd_per_mtok_input:g} per M input" if t.usd_per_mtok_input else "")
                      + (f" on hardware with {', '.join(t.systems)}" if t.systems else "")
                      + (f" at >= {t.min_tok_s_user:g} tok/s per user" if t.min_tok_s_user else "")
                      + f" ({t.source}, grade {t.grade})" for t in c.price_ladder)
    return ("Price and margin are assumptions, shown only where a price source applies: " + tiers
            + ". Other rows have no price and so no revenue.")
