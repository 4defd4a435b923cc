"""The sections of `lpxsim tour`. Each returns a SectionResult: a report section, its tables, summary lines.

Sections call the real APIs (plan.capacity, bench.aa, bench.sweep, serving).
A section whose backend is missing from this build says so in the report and
the summary; it never shows invented numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lpxsim.bench.backends import BackendUnavailable
from lpxsim.core.errors import UserError
from lpxsim.report.html import Chart, Note, Section, Table


@dataclass(frozen=True)
class TourConfig:
    """The tour's built-in defaults (each a CLI option)."""

    model: str = "gemma-4-31b"
    moe_model: str = "gpt-oss-120b"
    systems: tuple[str, ...] = ("lpx", "vr-nvl72")
    contexts: tuple[int, ...] = (10_000, 100_000)
    # None: the AA contexts. The sweep, the modes and AA ask about the same contexts, and the sweep and the
    # modes about the same output length, so each context is one LPX deployment whose compiles all of them
    # share through the step cache (docs/benchmarks.md, "Tour compiles shared").
    sweep_contexts: tuple[int, ...] | None = None
    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    requests: int = 8
    osl: int = 256  # output tokens per request of the sweep and (unless modes_osl says otherwise) the modes
    weights: str = "fp8"
    kv: str = "bf16"
    executor: str = "serial"
    workers: int | None = None
    jobs: int = 1  # processes: 2 runs the AA and MoE sections in one worker beside the rest; > 2 the sweep too
    seed: int = 0
    # T9 serving modes (closed loop): contexts, loads (light / heavy / a user count), output tokens (None: the
    # sweep's contexts and osl)
    modes_contexts: tuple[int, ...] | None = None
    modes_loads: tuple[str, ...] = ("light", "heavy")
    modes_osl: int | None = None
    # The workload of the sweep and the modes (`engine.query.session_for`): "agentic", the default session at
    # each context, or "none", the no-cache loop
    session: str = "agentic"
    # The sweep's deployments (`bench.sweep.DEPLOYMENTS`): "picks" draws LPX on the rack and on each smaller
    # replica size that can reach the frontier (the Pareto set over layouts); "rack" only the rack
    deployments: str = "picks"

    def __post_init__(self) -> None:
        # Resolve the shared defaults once, so every reader sees plain values.
        if self.sweep_contexts is None:
            object.__setattr__(self, "sweep_contexts", tuple(self.contexts))
        if self.modes_contexts is None:
            object.__setattr__(self, "modes_contexts", tuple(self.sweep_contexts))
        if self.modes_osl is None:
            object.__setattr__(self, "modes_osl", self.osl)


@dataclass
class SectionResult:
    section: Section
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | unavailable | error


def guarded(title: str, fn: Callable[[], SectionResult]) -> SectionResult:
    """Run a section; a missing backend or a user-level limit becomes an honest note, not a crash."""
    try:
        return fn()
    except BackendUnavailable as e:
        return SectionResult(Section(title).add(Note(e.message, "warn")), summary=[f"{title}: {e.message}"],
                             status="unavailable")
    except ImportError as e:
        msg = f"not available in this build: {e}"
        return SectionResult(Section(title).add(Note(msg, "warn")), summary=[f"{title}: {msg}"], status="unavailable")
    except UserError as e:
        return SectionResult(Section(title).add(Note(str(e), "warn")), summary=[f"{title}: {e}"], status="unavailable")
    except Exception as e:  # a bug: shown in the report and the summary, and the tour exits non-zero
        msg = f"failed: {type(e).__name__}: {e}"
        return SectionResult(Section(title).add(Note(msg, "error")), summary=[f"{title}: {msg}"], status="error")


def capacity_table(model: str, systems, contexts, weights: str, kv: str, osl: int = 0) -> pd.DataFrame:
    """Memory breakdown and concurrency ceiling per system and input context (plan.capacity): a stream holds its
    input and its `osl` output tokens, as the sweep's and the engine's ceilings count it."""
    from lpxsim.plan.capacity import capacity

    rows = []
    for s in systems:
        for ctx in contexts:
            r = capacity(model, s, ctx + osl, weights=weights, kv=kv)
            b = r.breakdown
            rows.append({
                "model": r.model, "system": r.system, "hardware": f"{r.chips} x {r.chip}, {r.power_w / 1e3:,.0f} kW",
                "context": ctx, "tokens_per_stream": ctx + osl, "weights": weights, "kv": f"{kv} {r.kv_layout}",
                "total_gb": b.total_bytes / 1e9, "weights_gb": b.weights_bytes / 1e9,
                "reserve_gb": b.reserve_bytes / 1e9, "kv_per_stream_gb": r.kv_bytes_per_stream / 1e9,
                "kv_gb": b.kv_bytes / 1e9, "free_gb": b.free_bytes / 1e9, "max_streams": r.max_streams,
                "chips_for_weights": r.chips_for_weights, "units_needed": r.units_needed,
            })
    return pd.DataFrame(rows)


def kv_alternatives(model: str, system: str, context: int, weights: str) -> pd.DataFrame:
    from lpxsim.plan.capacity import capacity

    r = capacity(model, system, context, weights=weights)
    return pd.DataFrame([{"system": system, "context": context, "kv precision": a.kv, "kv layout": a.kv_layout,
                          "kv_per_stream_gb": a.kv_bytes_per_stream / 1e9, "max_streams": a.max_streams}
                         for a in r.alternatives])


def capacity_section(cfg: TourConfig) -> SectionResult:
    from lpxsim.report.charts import capacity_chart

    df = capacity_table(cfg.model, cfg.systems, cfg.contexts, cfg.weights, cfg.kv, cfg.osl)
    alt = kv_alternatives(cfg.model, cfg.systems[0], max(cfg.contexts), cfg.weights)
    sec = Section(f"{cfg.model}: memory and the concurrency ceiling",
                  "How many streams fit next to the weights at each context: the number that decides fleet "
                  "capacity, which batch-1 speed does not tell.")
    sec.add(Chart(capacity_chart(df))).add(Table(df, "memory breakdown per unit (GB)"))
    sec.add(Table(alt, f"KV precision and layout vs streams on {cfg.systems[0]} at {max(cfg.contexts):,} tokens"))
    lines = [f"ceiling {r.system} @ {r.context:,} tokens (+{cfg.osl} out): {r.max_streams} streams, pooled memory "
             f"({r.hardware})"
             for r in df.itertuples()]
    return SectionResult(sec, {"capacity": df, "kv_alternatives": alt}, lines)


def aa_section(cfg: TourConfig, model: str | None = None, contexts=None, title: str | None = None) -> SectionResult:
    from lpxsim.bench.aa import AASetup
    from lpxsim.report.charts import aa_chart

    model = model or cfg.model
    setup = AASetup(contexts=tuple(contexts or cfg.contexts), requests=cfg.requests, seed=cfg.seed)
    sec = Section(title or f"{model}: Artificial Analysis method (concurrency 1)",
                  f"{setup.requests} sequential requests per context; output speed = o200k tokens after the first "
                  f"chunk / time from first chunk to last; median and P5-P95; answer lengths drawn (seed "
                  f"{setup.seed}) around {setup.output_median} tokens; o200k = native x "
                  f"{setup.conversion.o200k_per_native:g} (assumed). Published figures are for comparison only.")
    rows, lines = [], []
    for s in cfg.systems:
        res = guarded(s, lambda s=s: _aa_rows(model, s, setup, cfg))
        if res.status != "ok":
            sec.add(Note(f"{s}: {res.summary[0]}", "warn"))
            lines += res.summary
            continue
        rows.append(res.tables["aa"])
        lines += res.summary
    if rows:
        df = pd.concat(rows, ignore_index=True)
        sec.add(Chart(aa_chart(df))).add(Table(_aa_view(df), "output speed, o200k tok/s"))
        return SectionResult(sec, {f"aa_{model}": df}, lines)
    return SectionResult(sec, {}, lines, "unavailable")


def _aa_rows(model, system, setup, cfg) -> SectionResult:
    from lpxsim.bench.aa import run_aa

    points, _ = run_aa(model, system, setup, weights=cfg.weights, kv=cfg.kv)
    df = pd.DataFrame([p.row() for p in points])
    lines = []
    for p in points:
        cmp = f" vs published {p.published.value:,.0f} ({p.published.id}, {p.diff_pct:+.1f} %)" if p.published else ""
        lines.append(f"AA {p.model} on {p.hardware} @ {p.context:,} tokens, concurrency 1: "
                     f"median {p.output_speed['median']:,.0f} tok/s{cmp}")
    return SectionResult(Section(system), {"aa": df}, lines)


def _aa_view(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["system", "hardware", "context", "concurrency", "speed_median", "band", "speed_p5", "speed_p25",
            "speed_p75", "speed_p95", "ttft_median_s", "published", "published_id", "diff_pct"]
    view = df[[c for c in cols if c in df.columns]].copy()
    if "diff_pct" in view:
        view["diff_pct"] = [fmt_pct(v) for v in view["diff_pct"]]
    return view


def fmt_pct(v) -> str:
    """'+1.2 %' for a signed percentage, '-' when there is none."""
    return "-" if v is None or v != v else f"{v:+.1f} %"


def tour_point(p: dict) -> dict:
    """A sweep point for the tour: a missing backend becomes a row that says so (the section drops it and
    notes the system), so the sweep runs on what is available."""
    from lpxsim.bench.sweep import evaluate_point

    try:
        return evaluate_point(p)
    except BackendUnavailable as e:
        return {**p, "fits": False, "unavailable": e.message}


def sweep_section(cfg: TourConfig, out: Path, pool=None) -> SectionResult:
    """The context x concurrency sweep; `pool` (an executor) runs its (system, context) groups in parallel."""
    from lpxsim.bench.sweep import grid, run_sweep
    from lpxsim.report.charts import frontier_chart, speed_band_chart
    from lpxsim.report.plots import frontier_png

    pts = grid(cfg.model, cfg.systems, cfg.sweep_contexts, cfg.concurrency, osl=cfg.osl, weights=cfg.weights,
               kv=cfg.kv, session=cfg.session, deployments=cfg.deployments)
    df = run_sweep(pts, out / "sweep", executor=pool or cfg.executor, workers=cfg.workers, evaluate=tour_point,
                   progress=True, screen=cfg.deployments == "picks")
    screened = df.attrs.get("screened", [])  # LPX replica sizes the screen did not price (`bench.screen`)
    missing: list[str] = []
    if "unavailable" in df:
        gone = df[df["unavailable"].notna()]
        missing = [f"sweep: {m}" for m in dict.fromkeys(gone["unavailable"])]
        df = df[df["unavailable"].isna()].drop(columns="unavailable").reset_index(drop=True)
    if df.empty:
        raise BackendUnavailable("systems", "; ".join(missing) or "no sweep point ran")
    drawn = by_deployment(df)
    png = frontier_png(drawn, out / "frontier.png")
    png_mw = frontier_png(drawn, out / "frontier_per_mw.png", y="tok_s_per_mw", y_label="output tok/s per MW")
    sec = Section(f"{cfg.model}: context x concurrency sweep",
                  f"Steady state (closed loop, OSL {cfg.osl}, {_workload_words(cfg)}) from concurrency 1 up to "
                  "each system's KV ceiling. "
                  "Per-user speed falls as the batch grows while aggregate throughput rises: the frontier is the "
                  "menu a planner chooses from.")
    for m in missing:
        sec.add(Note(m, "warn"))
    sec.add(Note("Every row is the operating-point engine's answer (lpxsim.engine, docs/engine.md), the same "
                 "`lpxsim estimate` gives for that system, context, concurrency and OSL on that deployment. Each "
                 "deployment serves every concurrency of its context on the fewest whole racks / NVL72 domains that "
                 "hold the model, laid out once for context + OSL tokens. GPUs: the layout search's latency pick "
                 "and its throughput pick. LPX: the whole rack laid out as one replica, and one replica of each "
                 "smaller size of the layout search (the fewest nodes that place the model up to the rack) tiled "
                 "over the rack, its idle chips powered; the row's hardware names the chips, replicas x chips and "
                 "layout. The frontier (filled points, on_frontier) is the Pareto set over every deployment of a "
                 "system at a context. kv_ceiling is the most streams a deployment runs (its KV capacity and "
                 "largest batch: the ceiling row); capacity_ceiling is the memory capacity model's figure for one "
                 "unit."
                 + shared_note(cfg, "the rack is also the deployment of the serving modes' LPX-alone and PD-decode "
                                    "pools (same context and OSL)")))
    if screened:
        sec.add(Note("LPX replica sizes not priced, because no point of theirs can reach the frontier (an upper "
                     "bound on per-user speed from one compiled decode step, and on aggregate from the sessions "
                     "their KV holds, beaten by a point of the rack: bench/screen.py): " + "; ".join(screened)))
    sec.add(Note("tok/s/user is the mean over requests of 1 / TPOT (AIPerf's per-user output throughput), TTFT the "
                 "mean with queueing. A closed loop of identical requests staggers (nobody waits for the prefill "
                 "server and every other user's prefill lands in each user's decode); where that arrival pattern, "
                 "not the hardware, decides the answer, the engine answers with the serving simulator on the same "
                 "replica (the row's solver says which)."))
    if cfg.session != "none":
        sec.add(Note("Each user is an agent session (the row's `session` states its shape): a turn prefills only its "
                     "new tokens over the cached context, and between turns the session thinks (a tool call) with "
                     "its KV held. Concurrency counts sessions held; fewer stream at once (`streams_decoding`), and "
                     "the ceiling row is the most sessions whose KV the deployment holds. `lpxsim sweep --session "
                     "none` gives the no-cache loop, in which every request prefills its whole context."))
    elif max(cfg.sweep_contexts, default=0) >= 100_000:
        sec.add(Note("Why per-user speed collapses at 100K tokens and high concurrency: the sweep is a closed loop "
                     "in which every finished user sends a fresh request, so every user re-prefills its whole "
                     "100K-token context each turn (no prefix reuse); prefill then takes most of each step and "
                     "TTFT grows with the queue."))
    sec.add(Chart(frontier_chart(drawn))).add(Chart(frontier_chart(drawn, "tok_s_per_mw", "output tok/s per MW")))
    sec.add(Chart(speed_band_chart(drawn)))  # the error band of every answer (issue 28 item 8)
    fit = df[df["fits"].astype(bool)]
    view = fit[[c for c in ("target", "goal", "context", "osl", "concurrency", "tok_s_user", "band", "ttft_s",
                            "tok_s_total", "tok_s_per_mw", "hardware", "session", "streams_decoding",
                            "at_ceiling", "kv_ceiling",
                            "capacity_ceiling", "on_frontier")
                if c in df.columns]]
    sec.add(Table(view, "sweep results (every row at its context, concurrency and hardware)"))
    if len(fit) < len(df):
        sec.add(Note(f"{len(df) - len(fit)} requested points do not fit (above the replica's KV ceiling, kv_ceiling: "
                     "the most streams the backend's replica holds at that context, or a replica size no layout "
                     "places) and are omitted here; they are in results.parquet with fits = false and the reason."))
    lines = []
    for (t, ctx), g in fit.groupby(["target", "context"]):
        best = g.loc[g["tok_s_total"].idxmax()]
        lines.append(f"sweep {t} @ {ctx:,} (OSL {cfg.osl}, {_workload_words(cfg)}): peak {best['tok_s_total']:,.0f} tok/s "
                     f"total at concurrency {int(best['concurrency'])} ({best['tok_s_user']:,.0f} tok/s/user; "
                     f"{best['hardware']})")
    lines += frontier_lines(fit)
    return SectionResult(sec, {"sweep": df}, missing + lines + [f"frontier PNGs: {png.name}, {png_mw.name}"])


def frontier_lines(fit: pd.DataFrame) -> list[str]:
    """Per system and context swept on more than one deployment: the deployments its frontier holds."""
    if "on_frontier" not in fit:
        return []
    out = []
    for (t, ctx), g in fit.groupby(["target", "context"]):
        on = g[g["on_frontier"].astype(bool)]
        deps = list(dict.fromkeys(on["hardware"]))
        if g["hardware"].nunique() > 1:
            out.append(f"sweep {t} @ {ctx:,}: the frontier holds {len(deps)} of {g['hardware'].nunique()} "
                       f"deployments: {'; '.join(deps)}")
    return out


def _workload_words(cfg: TourConfig) -> str:
    """'agentic sessions, 2,000 new tokens/turn, 3 s think' or 'no prefix reuse': the sweep's workload, named."""
    from lpxsim.engine.query import DEFAULT_NEW_TOKENS, DEFAULT_THINK_S

    if cfg.session == "none":
        return "no prefix reuse"
    return f"agentic sessions, {DEFAULT_NEW_TOKENS:,} new tokens/turn, {DEFAULT_THINK_S:g} s think"


def by_deployment(df: pd.DataFrame) -> pd.DataFrame:
    """The sweep with each GPU layout as a curve of its own ('vr-nvl72 (latency layout)'): a system swept on
    two deployments has two rows per concurrency, one per layout."""
    if "goal" not in df.columns:
        return df
    # a missing goal reads NaN under pandas' string dtype (`where(..., None)` keeps it NaN): test for a string
    label = [f"{t} ({g} layout)" if isinstance(g, str) and g else t for t, g in zip(df["target"], df["goal"], strict=True)]
    return df.assign(target=label)


def shared_contexts(cfg: TourConfig) -> tuple[int, ...]:
    """The contexts at which the sweep's LPX deployment is also the modes' LPX-alone / PD-decode one (same
    context and OSL: the same Layout, so one set of compiles)."""
    if cfg.modes_osl != cfg.osl:
        return ()
    return tuple(c for c in cfg.sweep_contexts if c in cfg.modes_contexts)


def shared_note(cfg: TourConfig, what: str) -> str:
    """' On LPX at 10,000, 100,000 tokens <what>.' where the sweep and the modes share the deployment, else ''."""
    both = shared_contexts(cfg)
    return f" On LPX at {', '.join(f'{c:,}' for c in both)} tokens {what}." if both else ""


def moe_section(cfg: TourConfig) -> SectionResult:
    """The MoE model beside the dense one: capacity and AA at the tour's contexts."""
    from lpxsim.report.charts import capacity_chart

    df = capacity_table(cfg.moe_model, cfg.systems, cfg.contexts, cfg.weights, cfg.kv, cfg.osl)
    sec = Section(f"Dense 31B is not your MoE production model: {cfg.moe_model}",
                  "The same hardware and contexts with a mixture-of-experts model: all experts' weights must be "
                  "resident, so the memory left for KV, and with it the concurrency ceiling, differs.")
    sec.add(Chart(capacity_chart(df))).add(Table(df, f"{cfg.moe_model}: memory breakdown per unit (GB)"))
    aa = aa_section(cfg, cfg.moe_model, (min(cfg.contexts),), f"{cfg.moe_model}: AA method")
    sec.blocks += aa.section.blocks
    lines = [f"MoE ceiling {r.system} @ {r.context:,} (+{cfg.osl} out): {r.max_streams:,} streams, pooled memory "
             f"({r.hardware})"
             for r in df.itertuples()]
    tables = {"moe_capacity": df, **aa.tables}
    long = guarded("moe long context", lambda: moe_long_context_rows(cfg)) if "lpx" in cfg.systems else None
    if long is not None:
        sec.blocks += long.section.blocks
        tables |= long.tables
        lines += long.summary
    return SectionResult(sec, tables, lines + aa.summary, "ok" if aa.status == "ok" else aa.status)


def moe_long_context_rows(cfg: TourConfig) -> SectionResult:
    """The MoE model on LPX at the tour's longest context: racks and streams (plan.capacity) and tok/s per
    user at concurrency 1 on the engine's default deployment for this workload (the one `estimate` answers on).

    tok/s per user is the steady state's (and AA's) decode-only speed, 1 / TPOT, with TPOT the mean
    batch-1 decode step over the answer (contexts `ctx` .. `ctx + osl`; the backend is linear between its
    compiled contexts, so the two ends give the mean). That costs the deployment one decode compile at
    the context bucket below `ctx`; a 100K prefill (TTFT) would cost several and is not run here."""
    from lpxsim.catalog import get_system
    from lpxsim.engine.answer import kv_ceiling
    from lpxsim.engine.deployment import Precision, place
    from lpxsim.engine.query import Workload
    from lpxsim.plan.capacity import capacity
    from lpxsim.step.protocol import DecodeBatch

    ctx, osl = max(cfg.contexts), cfg.osl
    need = capacity(cfg.moe_model, "lpx", ctx + osl, weights=cfg.weights, kv=cfg.kv)
    racks = max(1, need.units_needed)
    cap = capacity(cfg.moe_model, "lpx", ctx + osl, weights=cfg.weights, kv=cfg.kv, racks=float(racks))
    # the engine's default deployment for this workload: the one `estimate` answers on
    placed = place(cfg.moe_model, "lpx", Workload(ctx, osl), None, Precision(cfg.weights, cfg.kv))
    step, dep = placed.step, placed.deployment
    runs = kv_ceiling(step, ctx + osl) * dep.replicas
    row: dict = {"model": cfg.moe_model, "system": "lpx", "context": ctx, "osl": osl,
                 "racks_for_weights_and_one_stream": racks, "streams_that_fit (capacity model)": cap.max_streams,
                 "deployment": dep.label(), "deployment_racks": dep.powered_chips / get_system("lpx").chips_per_unit,
                 "streams_the_deployment_runs": runs, "concurrency": 1,
                 "tok_s_user": math.nan, "tpot_s": math.nan, "power_kw": dep.power_w / 1e3}
    if runs >= 1:
        tpot = (step.decode_step(DecodeBatch((ctx,))).latency_s
                + step.decode_step(DecodeBatch((ctx + osl - 1,))).latency_s) / 2
        row |= {"tok_s_user": 1.0 / tpot, "tpot_s": tpot}
    df = pd.DataFrame([row])
    sec = Section("moe long context")
    sec.add(Table(df, f"{cfg.moe_model} on LPX at {ctx:,} tokens (+ {osl:,} out): racks, streams and tok/s per "
                      "user at concurrency 1, decode only as AA measures it (compiled LPX backend, the engine's "
                      "deployment for this workload; TTFT of a 100K prefill: docs/validation.md, 'MoE at 100K "
                      "context')"))
    speed = (f"{row['tok_s_user']:,.0f} tok/s/user at concurrency 1 (decode)" if runs >= 1
             else "no stream of this length fits the deployment")
    line = (f"MoE {cfg.moe_model} on LPX @ {ctx:,} tokens: {racks} rack(s) hold the weights and "
            f"{cap.max_streams:,} streams (capacity model); the engine's deployment ({row['deployment_racks']:.2f} racks) "
            f"runs {runs} streams; {speed} on {row['deployment']}")
    return SectionResult(sec, {"moe_long_context": df}, [line])


def assumptions_section(cfg: TourConfig) -> SectionResult:
    """Every assumed (U) or derived (E) hardware number with its source, plus the benchmark's own assumptions."""
    from lpxsim.bench.published import PUBLISHED
    from lpxsim.catalog import get_system

    rows = [{"system": s, **r._asdict()} for s in cfg.systems for r in get_system(s).provenance_rows()
            if r.grade in ("U", "E")]
    bench = pd.DataFrame([
        {"parameter": "o200k tokens per native token", "value": "1.0", "source":
         "assumption:aa-token-ratio: no public Gemma-4 vs o200k ratio; --token-ratio to change"},
        {"parameter": "AA answer length", "value": "log-normal, median 500, sigma 0.5, [64, 4096] tokens", "source":
         "assumption:aa-answer-length: AA normalises E2E to 500 output tokens; per-request lengths unpublished"},
        {"parameter": "streamed chunk", "value": "1 token", "source": "assumption:aa-chunk: servers stream each token"},
        {"parameter": "prefill chunk", "value": "8192 tokens", "source": "vLLM default max_num_batched_tokens"},
    ])
    pub = pd.DataFrame([{"id": p.id, "model": p.model, "system": p.system, "metric": p.metric, "context": p.context,
                         "value": p.value, "source": p.source, "role": p.role} for p in PUBLISHED])
    sec = Section("Assumptions and sources",
                  "Grades: P primary, S third party, E derived, U assumed. Only E and U rows are listed; "
                  "`lpxsim system NAME` prints every number with its source.")
    sec.add(Table(pd.DataFrame(rows), "hardware numbers that are derived or assumed"))
    sec.add(Table(bench, "benchmark method assumptions (docs/assumptions.md, 'Benchmarks and reports')"))
    sec.add(Table(pub, "published figures: used only for comparison, never as inputs"))
    return SectionResult(sec, {"assumptions": pd.DataFrame(rows)}, [])
