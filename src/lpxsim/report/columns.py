"""Report columns for people: human headers with units, and the few columns a planner reads.

The data keep their machine names (results.csv / results.parquet hold every column); only the page
shows `human_header(name)` and, for a wide table, `planner_columns` (at most MAX_SHOWN, by priority).
"""

from __future__ import annotations

import re

import pandas as pd

MAX_SHOWN = 9  # columns of one table on the page; the rest are a download away

HEADERS = {
    "system": "system", "target": "system", "mode": "serving mode", "model": "model", "load": "load",
    "system / mode": "system / mode", "source": "row",
    "context": "context (tokens)", "osl": "output tokens (OSL)", "users": "concurrent users",
    "concurrency": "concurrent users", "hardware": "hardware", "chips": "chips",
    "tok_s_user": "tok/s per user", "tok_s_user_p50": "tok/s per user (P50)", "tok_s_user_p10": "tok/s per user (P10)",
    "ttft_s": "TTFT (s)", "ttft_p90_s": "TTFT P90 (s)", "ttft_median_s": "TTFT median (s)",
    "tok_s_total": "output tok/s (all users)", "tok_s_output": "output tok/s (all users)",
    "fleet_tok_s": "output tok/s (all users)", "tok_s_per_mw": "output tok/s per MW",
    "tok_s_per_mw_facility": "output tok/s per facility MW", "power_kw": "IT power (kW)",
    "facility_kw": "facility power (kW)", "capex_usd": "capex ($)",
    "usd_per_mtok_output": "$ per M output tokens", "usd_per_mtok_input": "same cost, $ per M input tokens",
    "alloc_usd_per_mtok_output": "allocation rule: $ per M output", "alloc_usd_per_mtok_input":
        "allocation rule: $ per M input", "price_usd_per_mtok_output": "price, $ per M output (assumption)",
    "revenue_usd_per_hour": "revenue ($/h, assumed price)", "margin_usd_per_hour": "margin ($/h, assumed price)",
    "revenue_usd_per_hour_per_mw_facility": "revenue ($/h per facility MW)",
    "total_gb": "memory (GB)", "weights_gb": "weights (GB)", "reserve_gb": "buffers and reserve (GB)",
    "kv_per_stream_gb": "KV per user (GB)", "kv_gb": "KV at the ceiling (GB)", "free_gb": "free (GB)",
    "max_streams": "users that fit", "chips_for_weights": "chips for the weights", "units_needed": "racks needed",
    "weights": "weights", "kv": "KV", "kv precision": "KV precision", "kv layout": "KV layout",
    "speed_median": "tok/s per user (median)", "speed_p5": "P5 (tok/s)", "speed_p25": "P25 (tok/s)",
    "speed_p75": "P75 (tok/s)", "speed_p95": "P95 (tok/s)", "published": "published (tok/s)",
    "published_id": "published source", "diff_pct": "vs published",
    "at_ceiling": "at the KV ceiling", "kv_ceiling": "KV ceiling (users)", "capacity_ceiling": "capacity model (users)",
    "on_frontier": "on the frontier", "speed_vs_rubin": "speed vs Rubin alone", "speed_vs_lpx": "speed vs LPX alone",
    "mw_vs_rubin": "tok/s per MW vs Rubin alone", "mw_vs_lpx": "tok/s per MW vs LPX alone",
    "band": "band", "tok_s_user_band": "band (tok/s per user)",
    "session": "session shape", "sessions_held": "sessions held (KV resident)",
    "sessions_held_spread": "pooled memory: sessions spread over their turns",
    "sessions_held_last_turn": "pooled memory: all at their last turn", "streams_decoding_mean":
        "streams decoding (mean)", "kv_per_session_gb": "KV per session (GB, mean over turns)",
    "kv_per_session_last_gb": "KV per session at its last turn (GB)", "turn_s": "one turn (s)",
    "think_s": "think time (s)", "policy": "retention policy", "prefix_hit_rate": "prefix hit rate",
    "evictions": "evictions", "reloads": "reloads", "sessions_resident_max": "most sessions resident",
    "ttft_later_p50_s": "TTFT, later turns, P50 (s)", "ttft_later_p90_s": "TTFT, later turns, P90 (s)",
    "turns_completed": "turns completed", "turns_incomplete": "turns never run",
}

# The order in which a planner looks for columns: identity and conditions first, then the answers.
PRIORITY = (
    "mode", "system / mode", "system", "target", "model", "hardware", "context", "osl", "load", "users",
    "concurrency", "tok_s_user_p50", "tok_s_user", "speed_median", "band", "tok_s_user_band", "ttft_p90_s", "ttft_s",
    "tok_s_total", "fleet_tok_s", "tok_s_output", "tok_s_per_mw", "tok_s_per_mw_facility", "power_kw",
    "usd_per_mtok_output", "usd_per_mtok_input", "price_usd_per_mtok_output", "margin_usd_per_hour",
    "max_streams", "weights_gb", "kv_per_stream_gb", "free_gb", "units_needed", "kv precision", "kv layout",
    "published", "diff_pct", "speed_vs_rubin", "speed_vs_lpx", "tok_s_user_p10", "speed_p5", "speed_p95",
    "kv_ceiling", "capacity_ceiling",
)

_UNITS = ((r"_gb$", " (GB)"), (r"_kw$", " (kW)"), (r"_w$", " (W)"), (r"_s$", " (s)"), (r"_pct$", " (%)"),
          (r"_usd$", " ($)"))
_WORDS = ((r"\btok_s\b", "tok/s"), (r"\bper_mw\b", "per MW"), (r"\bkv\b", "KV"), (r"\bttft\b", "TTFT"),
          (r"\bp(\d+)\b", r"P\1"), (r"\busd\b", "$"), (r"\bmtok\b", "M tokens"))


def human_header(name: str) -> str:
    """A column's header for people: a known name's words and unit, else the name with its unit suffix
    spelled out and underscores as spaces (names with spaces are already human)."""
    if name in HEADERS:
        return HEADERS[name]
    if " " in name or "_" not in name:
        return name
    text = name
    for pat, unit in _UNITS:
        if re.search(pat, text):
            text = re.sub(pat, "", text) + unit
            break
    for pat, words in _WORDS:
        text = re.sub(pat, words, text)
    return text.replace("_", " ")


def planner_columns(df: pd.DataFrame, keep_all: bool = False) -> list[str]:
    """The columns of `df` to show: all when they are few (or `keep_all`), else the MAX_SHOWN with the
    highest planner priority, in the frame's own order. A column every row leaves empty is never shown."""
    cols = [c for c in df.columns if not df[c].isna().all()] if len(df) else list(df.columns)
    if keep_all or len(cols) <= MAX_SHOWN:
        return cols
    rank = {c: i for i, c in enumerate(PRIORITY)}
    chosen = set(sorted(cols, key=lambda c: rank.get(c, len(rank)))[:MAX_SHOWN])
    return [c for c in cols if c in chosen]
