"""Tour section: the three heterogeneous serving modes (PD, AFD, external drafter) on an agentic workload.

Every mode and the two single-system baselines serve the same seeded agentic
workload in the serving simulator; per-user speed is reported with the mean
context and concurrency it held at and the fleet's hardware and power.
"""

from __future__ import annotations

import pandas as pd

from lpxsim.report.html import Chart, Note, Section, Table
from lpxsim.report.tour_sections import SectionResult, TourConfig

TOUR_MODES = ("rubin-alone", "lpx-alone", "rubin-lpx-pd", "rubin-lpx-afd", "rubin-lpx-drafter")


def modes_section(cfg: TourConfig) -> SectionResult:
    from lpxsim.bench.fleets import agentic_workload, builtin_fleet, mode_row, simulate_fleet
    from lpxsim.report.charts import bars_chart

    wl = agentic_workload(cfg.agentic_sessions, cfg.agentic_turns, cfg.agentic_rate)
    rows = [mode_row(m, simulate_fleet(builtin_fleet(m, cfg.model), wl, seed=cfg.seed)) for m in TOUR_MODES]
    df = pd.DataFrame(rows)
    sec = Section(
        f"{cfg.model}: heterogeneous serving modes on an agentic workload",
        f"{cfg.agentic_sessions} agentic coding sessions of {cfg.agentic_turns} turns (each turn: previous context "
        f"+ 3-5K tool tokens, 200-600 output tokens, 2 s think time), Poisson session arrivals at "
        f"{cfg.agentic_rate:g}/s, seed {cfg.seed}. Prefill/decode disaggregation (Rubin prefills, LPX decodes), "
        "attention/FFN disaggregation (Rubin attention + KV, LPX FFN) and LPX-drafts/Rubin-verifies speculative "
        "decoding, against Rubin alone and LPX alone.")
    sec.add(Note("The modes run in the serving simulator on its analytic roofline backend (the one that times "
                 "attention and FFN separately, which AFD needs), so they are compared on one cost model; link "
                 "bandwidths and latencies between racks are assumptions (docs/assumptions.md, Serving simulator)."))
    sec.add(Chart(bars_chart(df, "mode", [("tok_s_user_p50", "tok/s per user (P50)"),
                                          ("ttft_p90_s", "TTFT P90 (s)"),
                                          ("tok_s_per_mw", "output tok/s per MW")],
                             "Serving modes at the same offered load")))
    sec.add(Table(df, "per mode: per-user speed at the mean context and concurrency it held, with its hardware"))
    base = df.set_index("mode").loc["rubin-alone"]
    lines = []
    for r in df.itertuples():
        rel = r.tok_s_user_p50 / base["tok_s_user_p50"] if base["tok_s_user_p50"] > 0 else float("nan")
        lines.append(f"mode {r.mode} ({r.hardware}): P50 {r.tok_s_user_p50:,.0f} tok/s/user "
                     f"({rel:.1f}x Rubin alone) at mean context {r.mean_context:,.0f}, mean concurrency "
                     f"{r.mean_concurrency:.1f}; {r.tok_s_per_mw:,.0f} tok/s/MW")
    return SectionResult(sec, {"modes": df}, lines)
