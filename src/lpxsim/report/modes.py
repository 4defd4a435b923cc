"""Tour section: T9, the three heterogeneous serving modes (PD, AFD, external drafter) against Rubin alone
and LPX alone, on the detailed backends (`lpxsim.plan.modes`, the same code as `lpxsim modes`).

Every chart names the context, the concurrency (users), each fleet's hardware and its power.
"""

from __future__ import annotations

import pandas as pd

from lpxsim.engine.bands import band_cell
from lpxsim.report.html import Chart, Note, Section, Table
from lpxsim.report.tour_sections import SectionResult, TourConfig, shared_note

TOUR_MODES = ("rubin-alone", "lpx-alone", "rubin-lpx-pd", "rubin-lpx-afd", "rubin-lpx-drafter")
SHOWN = ("mode", "context", "load", "users", "tok_s_user_p50", "tok_s_user_band", "tok_s_user_p10", "ttft_p90_s",
         "tok_s_per_mw", "speed_vs_rubin", "speed_vs_lpx", "hardware")


def _chart(df: pd.DataFrame, model: str, context: int, load: str, users: int):
    from lpxsim.report.charts import bars_chart
    from lpxsim.report.hardware_text import hardware_words

    d = df.assign(label=[f"{m}<br>" + "<br>+ ".join(hardware_words(h).split(" + "))
                         for m, h in zip(df["mode"], df["hardware"], strict=True)])
    return bars_chart(d, "label", [("tok_s_user_p50", "tok/s per user, P50"), ("ttft_p90_s", "TTFT P90 (s)"),
                                   ("tok_s_per_mw", "output tok/s per MW")],
                      f"{model}: context {context:,} tokens, {users} concurrent users ({load}), closed loop "
                      "(whiskers: each mode's error band)", bands=BAND_OF)


# each charted figure's error band (`engine.bands`: tok/s per MW is tok/s per chip over a fixed power)
BAND_OF = {"tok_s_user_p50": "tok_s_user_band_pct", "ttft_p90_s": "ttft_band_pct",
           "tok_s_per_mw": "tok_s_per_chip_band_pct"}


def modes_section(cfg: TourConfig) -> SectionResult:
    from lpxsim.plan.modes import ModesQuery, compare_modes, ordered, users_of, workload_note

    q = ModesQuery(model=cfg.model, contexts=cfg.modes_contexts, loads=cfg.modes_loads, osl=cfg.modes_osl,
                   modes=TOUR_MODES, seed=cfg.seed, session=cfg.session)
    df = ordered(compare_modes(q))
    df = df.assign(tok_s_user_band=[band_cell(p) for p in df.get("tok_s_user_band_pct", [None] * len(df))])
    loads = ", ".join(f"{x} = {users_of(x)} users" for x in cfg.modes_loads)
    sec = Section(
        f"{cfg.model}: heterogeneous serving modes (T9)",
        f"Closed loop ({loads}): "
        + ("each user sends a prompt of the stated context, prefilled whole, reads " if cfg.session == "none" else
           "each user is an agent session that has reached the stated context (each turn prefills its new tokens "
           "over the cached rest, then a tool call with the KV held), reads ")
        + f"{cfg.modes_osl} output tokens, and sends the next; seed {cfg.seed}. Prefill/decode disaggregation (Rubin prefills, LPX decodes, "
        "KV crosses the link), attention/FFN disaggregation (Rubin attention + KV, a compiled FFN-only LPX program, "
        "activations cross twice per layer, ping-pong micro-batches) and an LPX-compiled drafter with Rubin "
        "verifying k+1 tokens, against Rubin alone and LPX alone. The same table comes from "
        f"`lpxsim modes {cfg.model} --contexts {','.join(str(c) for c in cfg.modes_contexts)} "
        f"--loads {','.join(cfg.modes_loads)} --osl {cfg.modes_osl} --session {cfg.session}`.")
    sec.add(Note("All pools run on the detailed backends: the GPU model and compiled, verified LPX programs (the "
                 "same cost models as every other section)."
                 + shared_note(cfg, "LPX alone and PD's LPX decode run on the sweep's deployment for that context")
                 + " Link bandwidths and latencies between racks are "
                 "assumptions (docs/assumptions.md). tok/s per MW normalises fleets of different power. "
                 + workload_note(cfg.session) + "."))
    for context in cfg.modes_contexts:
        for load in cfg.modes_loads:
            part = df[(df["context"] == context) & (df["load"] == load)]
            if not part.empty:
                sec.add(Chart(_chart(part, cfg.model, context, load, users_of(load))))
    sec.add(Table(df, "per mode, context and load: per-user speed (P50, P10), TTFT P90, tok/s per MW, and the "
                      "P50 speed relative to Rubin alone and LPX alone (the rest in results.csv)",
                  columns=SHOWN))
    lines = []
    for r in df.itertuples():
        lines.append(f"mode {r.mode} @ {r.context:,} ctx, {r.users} users ({r.hardware}): P50 "
                     f"{r.tok_s_user_p50:,.0f} tok/s/user ({r.speed_vs_rubin:.2f}x Rubin alone, "
                     f"{r.speed_vs_lpx:.2f}x LPX alone; band {r.tok_s_user_band}), TTFT P90 {r.ttft_p90_s:,.2f} s, "
                     f"{r.tok_s_per_mw:,.0f} tok/s/MW")
    return SectionResult(sec, {"modes": df}, lines)
