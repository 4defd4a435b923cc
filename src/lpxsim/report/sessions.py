"""Agent sessions in the tour: the two ceilings per system and context, and KV retention over time on one rack.

* `ceilings_section`: sessions held (KV resident, thinking sessions included) and streams decoding for an
  agent session growing to each tour context, on each system's default deployment, with the memory
  breakdown (`plan.session_capacity.engine_session_ceilings`: one answer, shown as it comes).
* `occupancy_section`: one small agentic workload on one LPX rack (the sweep's deployment at the longest
  context), simulated once per retention policy (hold, evict_idle, lru): resident sessions and KV occupancy
  over simulated time, and evictions and the prefix hit rate per policy.
"""

from __future__ import annotations

import pandas as pd

from lpxsim.engine.query import DEFAULT_NEW_TOKENS, DEFAULT_THINK_S
from lpxsim.report.html import Chart, Note, Section, Table
from lpxsim.report.tour_sections import SectionResult, TourConfig

GB = 1e9
POLICIES = ("hold", "evict_idle", "lru")  # serving.config.RetentionConfig; "auto" is hold on a pool without a tier
CEILING_COLUMNS = ("system", "hardware", "context", "session", "sessions_held", "sessions_held_spread",
                   "sessions_held_last_turn",
                   "streams_decoding_mean", "weights_gb", "kv_per_session_gb", "reserve_gb", "free_gb")


def ceilings_table(cfg: TourConfig) -> pd.DataFrame:
    """One row per system and context: both ceilings of the agent session that grows to that context, the
    deployment and the memory breakdown (GB)."""
    from lpxsim.plan.session_capacity import agent_shape, engine_session_ceilings

    rows = []
    for s in cfg.systems:
        for ctx in cfg.contexts:
            c = engine_session_ceilings(cfg.model, s, agent_shape(ctx, cfg.osl), cfg.osl, cfg.weights, cfg.kv)
            b = c.breakdown
            rows.append({
                "model": c.model, "system": s, "hardware": _hardware(c.turn_source, s, c.chips),
                "chips": c.chips, "context": ctx, "session": c.shape_label(), "osl": c.osl,
                "sessions_held": c.sessions_held, "sessions_held_spread": c.sessions_held_spread,
                "sessions_held_last_turn": c.sessions_held_last_turn,
                "streams_decoding_mean": c.streams_decoding_mean, "streams_decoding": c.streams_decoding,
                "turn_s": c.turn_s, "think_s": c.think_s, "streams_no_reuse": c.streams_no_reuse,
                "total_gb": b.total_bytes / GB, "weights_gb": b.weights_bytes / GB,
                "kv_per_session_gb": c.kv_bytes_per_session_mean / GB,
                "kv_per_session_last_gb": c.kv_bytes_per_session_max / GB, "reserve_gb": b.reserve_bytes / GB,
                "kv_gb": b.kv_bytes / GB, "free_gb": b.free_bytes / GB, "turn_source": c.turn_source,
            })
    return pd.DataFrame(rows)


def _hardware(turn_source: str, system: str, chips: int) -> str:
    """The deployment's label from the engine's turn-time source ('... on <deployment> at ...')."""
    if " on " in turn_source:
        return turn_source.split(" on ", 1)[1].rsplit(" at ", 1)[0]
    return f"{chips} x {system}"


def ceilings_section(cfg: TourConfig) -> SectionResult:
    df = ceilings_table(cfg)
    sec = Section(f"{cfg.model}: agent sessions held and streams decoding",
                  "An agent session keeps its KV between turns, through its tool calls and think time, so a "
                  "deployment's concurrency ceiling is two numbers: the sessions whose KV it holds, and of those "
                  "the streams decoding at any moment.")
    sec.add(Table(df, "the two ceilings per system and context (GB per unit; KV per session: the mean over its "
                      "turns; sessions held as the engine admits them)", columns=CEILING_COLUMNS))
    sec.add(Note(ceilings_note(df)))
    lines = [f"sessions {r.system} @ {r.context:,}: {r.sessions_held:,} held, {r.streams_decoding_mean:,.1f} "
             f"decoding ({r.session}; {r.hardware})" for r in df.itertuples()]
    return SectionResult(sec, {"session_ceilings": df}, lines)


def ceilings_note(df: pd.DataFrame) -> str:
    """How the two numbers are made, in words (the shape, the turn time, the capacity model)."""
    think = df["think_s"].iloc[0] if len(df) else 0.0
    return ("Sessions held: what the engine admits on the deployment shown, the figure estimate, plan and the "
            "sweep run against: each held session counted at its last turn, with room kept free for the held "
            "sessions' growth (the simulator's default retention), on the layout's own KV capacity. Beside it, "
            "pooled memory (after the weights and the reserve): sessions spread over their turns, each holding "
            "its average KV (a steady population has sessions of every age), and all at their last turn, equal "
            "to the streams of the capacity model at that context. Streams decoding: sessions held x turn / (turn + think), the mean number in a "
            f"turn rather than in their {think:g} s of tool or think time; a turn's time is the engine's answer "
            "(later turns prefill only their new tokens) at the cap, on the deployment shown, at the load it "
            "implies (lpxsim.plan.session_capacity; `lpxsim capacity MODEL --session --context N` answers the "
            "same). "
            f"The session shape is the engine's default session ({DEFAULT_NEW_TOKENS:,} new tokens a turn, "
            f"{DEFAULT_THINK_S:g} s think, the last turn at the cap), an assumption (docs/assumptions.md, "
            "'default-session').")


def occupancy_workload(cap: int, osl: int) -> dict:
    """A small agentic workload whose late turns reach `cap`: 10 sessions of 16 turns, a first turn of 8 % of
    the cap and 5-7 % new tokens a turn, 2 s think, Poisson arrivals at 0.5 sessions/s (agentic-100k.yaml's
    shape, scaled to a few CPU seconds)."""
    return {"name": f"agentic-10x16-{cap // 1000}k", "kind": "agentic", "num_requests": 10,
            "arrival": {"process": "poisson", "rate": 0.5},
            "session": {"turns": 16, "first_isl": max(1, cap * 8 // 100),
                        "new_tokens": {"kind": "uniform", "low": max(1, cap * 5 // 100), "high": max(1, cap * 7 // 100)},
                        "think_s": 2.0, "context_cap": cap},
            "osl": osl}


def retention_runs(cfg: TourConfig) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The workload on one LPX rack (the sweep's deployment at the longest context) under each policy:
    (per-policy summary rows, the timelines in long form, the fleet's hardware)."""
    from lpxsim.engine.fleets import builtin_fleet, fleet_hardware, simulate_fleet

    cap = max(cfg.sweep_contexts)
    fleet = builtin_fleet("lpx-alone", cfg.model, context=cap + cfg.osl, users=1, osl=cfg.osl)
    for p in fleet["pools"]:
        p |= {"weights": cfg.weights, "kv": cfg.kv}
    wl = occupancy_workload(cap, cfg.osl)
    rows, series, hw = [], [], ""
    for policy in POLICIES:
        res = simulate_fleet({**fleet, "retention": {"policy": policy}}, wl, seed=cfg.seed)
        s, pool = res.summary, res.pools.iloc[0]
        hw = fleet_hardware(res)
        later = s.get("ttft_by_turn", {}).get("later", {})
        rows.append({"policy": policy, "hardware": hw, "context": cap, "osl": cfg.osl, "workload": wl["name"],
                     "prefix_hit_rate": s["prefix_hit_rate"], "evictions": s["evictions"], "reloads": s["reloads"],
                     "sessions_resident_max": s["sessions_resident_max"],
                     "ttft_later_p50_s": later.get("p50"), "ttft_later_p90_s": later.get("p90"),
                     "tok_s_user_p50": s["tok_s_user"].get("p50"), "turns_completed": s["completed"],
                     "turns_incomplete": s.get("incomplete", 0), "rejected": s["rejected"], "kv_occupancy_peak": pool["kv_occupancy_peak"],
                     "kv_occupancy_mean": pool["kv_occupancy_mean"]})
        series.append(pd.DataFrame({"policy": policy, "t_s": pool["timeline_t_s"],
                                    "kv_occupancy": pool["kv_occupancy_timeline"],
                                    "sessions_resident": pool["sessions_resident_timeline"],
                                    "running": pool["running_timeline"]}))
    return pd.DataFrame(rows), pd.concat(series, ignore_index=True), hw


def occupancy_section(cfg: TourConfig) -> SectionResult:
    from lpxsim.report.charts import occupancy_chart

    table, timeline, hw = retention_runs(cfg)
    wl = occupancy_workload(max(cfg.sweep_contexts), cfg.osl)
    sess = wl["session"]
    sec = Section(f"{cfg.model}: agent sessions on one LPX rack, KV retention over time",
                  f"{wl['num_requests']} agent sessions of {sess['turns']} turns (first turn "
                  f"{sess['first_isl']:,} tokens, {sess['new_tokens']['low']:,}-{sess['new_tokens']['high']:,} new "
                  f"tokens and {cfg.osl:,} output tokens a turn, {sess['think_s']:g} s think, context capped at "
                  f"{sess['context_cap']:,}) on {hw}, simulated once per retention policy. Late turns need more "
                  "KV than the rack's SRAM holds for every session, so the policy decides who stays resident.")
    sec.add(Chart(occupancy_chart(timeline, hw)))
    sec.add(Table(table, "per retention policy: the share of input tokens served from the prefix cache, "
                         "evictions, the most sessions resident, and later turns' TTFT",
                  columns=("policy", "prefix_hit_rate", "evictions", "reloads", "sessions_resident_max",
                           "ttft_later_p50_s", "ttft_later_p90_s", "tok_s_user_p50", "turns_completed", "turns_incomplete")))
    sec.add(Note("hold: resident sessions keep their KV and a session with nothing resident waits for room; "
                 "evict_idle: the longest-idle session is evicted whole; lru: block LRU over the prefix units. "
                 "Without an offload tier an evicted session's next turn prefills its whole context again "
                 "(reloads 0). Policies and the default: docs/serving.md, 'Retention'."))
    stuck = table[table["turns_incomplete"] > 0]
    for r in stuck.itertuples():
        sec.add(Note(f"{r.policy}: {r.turns_incomplete} turns never ran (the run ended with them waiting for room "
                     "under this policy)", "warn"))
    lines = [f"retention {r.policy} on {r.hardware}: prefix hit rate {r.prefix_hit_rate:.2f}, {r.evictions:,} "
             f"evictions, at most {r.sessions_resident_max} sessions resident" for r in table.itertuples()]
    return SectionResult(sec, {"retention": table, "occupancy_timeline": timeline}, lines)
