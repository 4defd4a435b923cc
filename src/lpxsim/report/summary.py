"""The report's first screen: the planner's questions answered in a few sentences and one small table.

Every figure stands with its context, concurrency, output length (OSL), session shape, deployment (racks
and chips) and power. It reads rows the tour already has (the economics rows: the sweep's concurrency-1 and
KV-ceiling points, priced; the modes rows), never runs anything. Where a row carries an error band (a
`band` or `tok_s_user_band` value), the table shows it; otherwise it has no band column at all.
"""

from __future__ import annotations

import math

import pandas as pd

from lpxsim.engine.query import DEFAULT_OSL
from lpxsim.report.hardware_text import SHORT, hardware_words
from lpxsim.report.html import Note, Section, Table

BAND_KEYS = ("band", "tok_s_user_band")


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _band(r: pd.Series) -> str:
    for k in BAND_KEYS:
        v = r.get(k)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            return str(v)
    return ""


def session_shape(osl: int, session: str = "agentic") -> str:
    """The closed loop every sweep and mode row runs, in words: the agentic session (the default) or the
    no-cache loop (`--session none`)."""
    if session == "none":
        return (f"closed loop: each user sends a prompt of the stated context, reads {osl:,} output tokens, then "
                "sends the next prompt (no prefix reuse)")
    from lpxsim.engine.query import DEFAULT_NEW_TOKENS, DEFAULT_THINK_S

    return (f"closed loop of agent sessions: each user's turn at the stated context prefills {DEFAULT_NEW_TOKENS:,} "
            f"new tokens over its cached session, reads {osl:,} output tokens, then calls a tool for "
            f"{DEFAULT_THINK_S:g} s with its KV held")


def planner_rows(econ: pd.DataFrame, modes: pd.DataFrame | None, osl: int, modes_osl: int) -> pd.DataFrame:
    """One small table: per system and context, concurrency 1 and the KV ceiling; per context, the fastest
    serving mode under the heaviest load. Human headers; a band column only when a row has a band."""
    rows = []
    sweep = econ[econ["source"].astype(str).str.startswith("sweep")] if len(econ) else econ
    for _, r in sweep.iterrows():
        rows.append(_row(r, osl, str(r["source"])))
    if modes is not None and len(modes):
        for _ctx, g in modes.groupby("context", sort=True):
            heavy = g[g["users"] == g["users"].max()]
            best = heavy.loc[heavy["tok_s_user_p50"].astype(float).idxmax()]
            rows.append(_mode_row(best, modes_osl))
    df = pd.DataFrame(rows)
    if len(df) and "band" in df and (df["band"] == "").all():
        df = df.drop(columns="band")
    return df


def _row(r: pd.Series, osl: int, source: str) -> dict:
    out_tok_s, power_kw = _num(r.get("tok_s_output")), _num(r.get("power_kw"))
    return {"system": SHORT.get(str(r["system / mode"]), str(r["system / mode"])),
            "deployment": hardware_words(str(r["hardware"])).rsplit(", ", 1)[0],
            "context (tokens)": int(r["context"]), "OSL (tokens)": osl,
            "concurrent users": int(r["concurrency"]),
            "point": "KV ceiling" if "ceiling" in source else "one user",
            "tok/s per user": _num(r["tok_s_user"]), "band": _band(r),
            "output tok/s per MW (IT)": out_tok_s / power_kw * 1e3 if power_kw > 0 else math.nan,
            "$ per M output tokens": _num(r.get("usd_per_mtok_output")), "power (kW)": power_kw}


def _mode_row(r: pd.Series, osl: int) -> dict:
    return {"system": str(r["mode"]), "deployment": hardware_words(str(r["hardware"])).rsplit(", ", 1)[0],
            "context (tokens)": int(r["context"]), "OSL (tokens)": osl, "concurrent users": int(r["users"]),
            "point": "fastest mode, heaviest load", "tok/s per user": _num(r["tok_s_user_p50"]), "band": _band(r),
            "output tok/s per MW (IT)": _num(r.get("tok_s_per_mw")), "$ per M output tokens": math.nan,
            "power (kW)": _num(r.get("power_kw"))}


def _pick(df: pd.DataFrame, system: str, ctx: int, point: str) -> pd.Series | None:
    sel = df[(df["system"] == system) & (df["context (tokens)"] == ctx) & (df["point"] == point)]
    return None if sel.empty else sel.iloc[0]


def _context_sentence(df: pd.DataFrame, systems: list[str], ctx: int, osl: int) -> str | None:
    """One user's speed per system, then the KV ceiling's users, speed and whole cost per output token."""
    one = [r for r in (_pick(df, s, ctx, "one user") for s in systems) if r is not None]
    ceil = [r for r in (_pick(df, s, ctx, "KV ceiling") for s in systems) if r is not None]
    if not one and not ceil:
        return None
    parts = []
    if one:
        parts.append("one user gets " + " against ".join(
            f"{r['tok/s per user']:,.0f} tok/s on {r['deployment']} ({r['power (kW)']:,.0f} kW)" for r in one))
    if ceil:
        parts.append("at the KV ceiling " + ", ".join(
            f"{r['system']} serves {r['concurrent users']:,} users at {r['tok/s per user']:,.0f} tok/s each"
            + (f" for ${r['$ per M output tokens']:,.2f} per M output tokens"
               if not math.isnan(r["$ per M output tokens"]) else "") for r in ceil))
    return f"At {ctx:,} tokens of context (OSL {osl:,}): " + "; ".join(parts) + "."


def sentences(df: pd.DataFrame, systems: list[str], contexts: list[int], osl: int, utilisation: float) -> list[str]:
    """A few sentences: per context, one user's speed and the KV ceiling's users, speed and cost; then the
    fastest serving mode; then what the cost figure is."""
    out = [s for s in (_context_sentence(df, systems, ctx, osl) for ctx in contexts) if s]
    modes = df[df["point"] == "fastest mode, heaviest load"]
    if len(modes):
        out.append("Fastest serving mode under the heaviest load: " + "; ".join(
            f"{m['system']} at {m['context (tokens)']:,} tokens with {m['concurrent users']:,} users, "
            f"{m['tok/s per user']:,.0f} tok/s per user (P50, OSL {m['OSL (tokens)']:,}) on {m['deployment']}, "
            f"{m['power (kW)']:,.0f} kW" for _, m in modes.iterrows()) + ".")
    if df["$ per M output tokens"].notna().any():
        out.append(f"Cost per output token is the whole cost of the hardware (capex, opex, energy) over its output "
                   f"tokens at {utilisation:.0%} utilisation; the assumptions are in the economics section.")
    return out


CEILING_VIEW = ("system", "deployment", "context", "session", "sessions_held", "streams_decoding_mean", "weights_gb",
                "kv_per_session_gb", "reserve_gb", "free_gb")


def ceiling_rows(results: dict) -> pd.DataFrame:
    """The two ceilings (the ceilings section's rows), with the deployment in racks and chips."""
    res = results.get("ceilings")
    df = res.tables.get("session_ceilings", pd.DataFrame()) if res is not None else pd.DataFrame()
    if df.empty:
        return df
    return df.assign(system=[SHORT.get(str(s), str(s)) for s in df["system"]],
                     deployment=[hardware_words(str(h)) for h in df["hardware"]])


def ceiling_sentences(df: pd.DataFrame) -> list[str]:
    """Per context: sessions held and streams decoding on each system, with the session shape."""
    out = []
    for ctx, g in df.groupby("context", sort=True):
        parts = [f"{r.system} holds {r.sessions_held:,} sessions with {r.streams_decoding_mean:,.1f} decoding on "
                 f"average ({r.deployment})" for r in g.itertuples()]
        out.append(f"Agent sessions growing to {int(ctx):,} tokens ({g['session'].iloc[0]}): " + "; ".join(parts)
                   + ".")
    return out


def summary_section(cfg, results: dict) -> Section:
    """The first screen (see the module doc); `cfg` is the tour's TourConfig, `results` its SectionResults."""
    from lpxsim.plan.costs import default_costs

    econ_res = results.get("economics")
    econ = econ_res.tables.get("economics", pd.DataFrame()) if econ_res is not None else pd.DataFrame()
    modes_res = results.get("modes")
    modes = modes_res.tables.get("modes") if modes_res is not None else None
    sec = Section(f"At a glance: {cfg.model} on {' and '.join(SHORT.get(s, s) for s in cfg.systems)}",
                  f"Every figure: at the stated context and number of concurrent users, {session_shape(cfg.osl, cfg.session)}, "
                  "on the stated racks and power.")
    df = planner_rows(econ, modes, cfg.osl, cfg.modes_osl) if len(econ) or modes is not None else pd.DataFrame()
    if df.empty:
        sec.add(Note("no sweep or modes rows to summarise: see the sections below", "warn"))
        return sec
    systems = [SHORT.get(s, s) for s in cfg.systems]
    for line in sentences(df, systems, list(cfg.contexts), cfg.osl, default_costs().utilisation.value):
        sec.add(Note(line, "lead"))
    if cfg.osl != DEFAULT_OSL:
        sec.add(Note(f"This report uses OSL {cfg.osl:,} (modes: {cfg.modes_osl:,}); `lpxsim estimate` defaults to "
                     f"OSL {DEFAULT_OSL:,}: pass `--osl {cfg.osl}` to compare the same point.", "lead"))
    sec.add(Table(df, "the planner's table: per-user speed, capacity, energy and cost per output "
                  "token, each with its context, OSL, users, deployment and power ($: the whole cost over output "
                  "tokens, cost model in the economics section)", css="headline"))
    ceilings = ceiling_rows(results)
    if len(ceilings):
        for line in ceiling_sentences(ceilings):
            sec.add(Note(line, "lead"))
        sec.add(Table(ceilings, "two ceilings for agent sessions: sessions held (KV resident, those in think "
                                "time included) and streams decoding, with where each unit's memory goes (GB; KV "
                                "per session: the mean over its turns); how they are made: the session section",
                      css="headline", columns=CEILING_VIEW))
    return sec
