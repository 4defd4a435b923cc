"""`lpxsim tour`: the main job on built-in defaults, written as one self-contained HTML report.

Gemma 4 31B on one LPX rack and one Vera Rubin NVL72: the capacity breakdown
and concurrency ceiling, the Artificial Analysis benchmark beside the published
figures, the context x concurrency sweep, the heterogeneous serving modes, and a
MoE model for contrast. Writes OUT/index.html, the PNGs and OUT/results.parquet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd

from lpxsim.bench.store import atomic_write_parquet, atomic_write_text
from lpxsim.bench.sweep import rack_rows
from lpxsim.report.html import Note, Section, Table, write_report
from lpxsim.report.tour_sections import (
    SectionResult,
    TourConfig,
    aa_section,
    assumptions_section,
    capacity_section,
    fmt_pct,
    guarded,
    moe_section,
    sweep_section,
)


@dataclass
class TourResult:
    out: Path
    index_html: Path
    results_parquet: Path
    pngs: list[Path]
    summary: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)
    headline: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def failed(self) -> bool:
        return any(s == "error" for s in self.statuses.values())


# Sections that run in worker processes when cfg.jobs > 1: LPX compiles dominate them and they share no
# deployment with the other sections (AA: the default deployment; MoE: another model). The sweep and the
# modes share theirs (one per context), so they stay in this process, one after the other, where the modes
# reuse every step the sweep compiled (a worker would pay the imports again for no shared compile).
REMOTE = ("aa", "moe")
# The session sections run after the sweep and the modes: their LPX deployments are the sweep's (same context
# and OSL), so they reuse its compiles.
ORDER = ("capacity", "aa", "sweep", "ceilings", "modes", "occupancy", "moe", "assumptions")


def section(name: str, cfg: TourConfig, out: Path, pool=None) -> SectionResult:
    """Run one named section (guarded: a missing backend or a failure becomes a note)."""
    from lpxsim.report.modes import modes_section
    from lpxsim.report.sessions import ceilings_section, occupancy_section

    fns: dict[str, Callable[[], SectionResult]] = {
        "capacity": lambda: capacity_section(cfg),
        "aa": lambda: aa_section(cfg),
        "sweep": lambda: sweep_section(cfg, out, pool),
        "ceilings": lambda: ceilings_section(cfg),
        "modes": lambda: modes_section(cfg),
        "occupancy": lambda: occupancy_section(cfg),
        "moe": lambda: moe_section(cfg),
        "assumptions": lambda: assumptions_section(cfg),
    }
    return guarded(name, fns[name])


def _timed(name: str, cfg: TourConfig, out: Path) -> tuple[SectionResult, float]:
    t0 = time.perf_counter()
    res = section(name, cfg, out)
    return res, time.perf_counter() - t0


def run_sections(cfg: TourConfig, out: Path, log: Callable[[str], None]) -> dict[str, SectionResult]:
    """Every section, in report order. With cfg.jobs > 1 the AA and MoE sections run on a pool of
    cfg.jobs - 1 worker processes while the others run here (with cfg.jobs > 2 the sweep's (system,
    context) groups go to the pool too); results do not depend on where they ran (each deployment is
    built from its arguments alone, and compiled steps meet in the step cache)."""
    results: dict[str, SectionResult] = {}
    count = f"/{len(ORDER) + 1}"  # the sections and the economics after them (progress: the stage and its count)
    if cfg.jobs <= 1:
        for i, name in enumerate(ORDER, 1):
            log(f"tour {i}{count}: {name} ...")
            results[name], dt = _timed(name, cfg, out)
            log(f"tour: {name} {results[name].status} in {dt:,.1f} s")  # stderr only
        return {k: results[k] for k in ORDER}
    from lpxsim.bench.workers import process_pool

    with process_pool(cfg.jobs - 1) as pool:  # workers die with the tour, even on SIGKILL
        remote = {name: pool.submit(_timed, name, cfg, out) for name in REMOTE}
        for i, name in enumerate(ORDER, 1):
            if name in REMOTE:
                continue
            log(f"tour {i}{count}: {name} ...")
            t0 = time.perf_counter()
            results[name] = section(name, cfg, out, pool if cfg.jobs > 2 else None)
            log(f"tour: {name} {results[name].status} in {time.perf_counter() - t0:,.1f} s")
        for name, fut in remote.items():
            try:
                results[name], dt = fut.result()
            except Exception as e:  # the worker died (e.g. killed for memory): reported as a failed section
                results[name], dt = guarded(name, partial(_reraise, e)), 0.0
            log(f"tour: {name} {results[name].status} in {dt:,.1f} s (worker process)")
    return {k: results[k] for k in ORDER}


def _add_economics(cfg: TourConfig, results: dict[str, SectionResult],
                   log: Callable[[str], None]) -> dict[str, SectionResult]:
    """The cost and revenue section, priced from the sweep's and modes' rows, placed after the modes."""
    from lpxsim.report.economics import economics_section

    t0 = time.perf_counter()
    econ = guarded("economics", lambda: economics_section(cfg, results))
    log(f"tour: economics {econ.status} in {time.perf_counter() - t0:,.1f} s")
    out: dict[str, SectionResult] = {}
    for name, r in results.items():
        out[name] = r
        if name == "modes":
            out["economics"] = econ
    out.setdefault("economics", econ)
    return out


def _reraise(e: BaseException) -> SectionResult:
    raise e


def run_tour(cfg: TourConfig | None = None, out: str | Path = "lpxsim-report",
             log: Callable[[str], None] = lambda s: None) -> TourResult:
    """Run every section, write the report, and return the summary."""
    cfg = cfg or TourConfig()
    from lpxsim.core.outputs import mark_output_dir

    out = mark_output_dir(out)
    results = run_sections(cfg, out, log)
    _add_dense_vs_moe(cfg, results)
    results = _add_economics(cfg, results, log)
    sections = [r.section for r in results.values()]
    summary = [line for r in results.values() for line in r.summary]
    from lpxsim.report.summary import summary_section as first_screen

    intro = [first_screen(cfg, results), summary_section(cfg, results)]
    index = write_report(out / "index.html", "lpxsim tour: NVIDIA Groq 3 LPX and Vera Rubin NVL72",
                         f"{cfg.model} (dense) and {cfg.moe_model} (MoE) on {', '.join(cfg.systems)}; "
                         f"contexts {', '.join(f'{c:,}' for c in cfg.contexts)} tokens", [*intro, *sections],
                         downloads=("results.csv", "results.parquet"))
    parquet = out / "results.parquet"
    data = combine({k: v for r in results.values() for k, v in r.tables.items()})
    atomic_write_parquet(parquet, data)
    atomic_write_text(out / "results.csv", data.to_csv(index=False))  # the full data, beside the HTML
    return TourResult(out, index, parquet, sorted(out.glob("*.png")), summary,
                      {k: r.status for k, r in results.items()}, headline(cfg, results))


def combine(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One long table: every section's rows with a `table` column; mixed-type columns become text."""
    frames = [df.assign(table=name) for name, df in tables.items() if len(df)]
    if not frames:
        return pd.DataFrame({"table": pd.Series(dtype=str)})
    df = pd.concat(frames, ignore_index=True, sort=False)
    for col in df.columns:
        if df[col].dtype == object:
            kinds = {type(v) for v in df[col].dropna()}
            if len(kinds) > 1 or (kinds and not kinds <= {str}):
                df[col] = df[col].map(lambda v: None if v is None or v != v else str(v))
    cols = ["table"] + [c for c in df.columns if c != "table"]
    return df[cols]


def headline(cfg: TourConfig, results: dict[str, SectionResult]) -> pd.DataFrame:
    """Batch-1 speed next to the concurrency ceiling, per system and context: the article's point in one table."""
    aa = results["aa"].tables.get(f"aa_{cfg.model}", pd.DataFrame())
    cap = results["capacity"].tables.get("capacity", pd.DataFrame())
    sw = rack_rows(results["sweep"].tables.get("sweep", pd.DataFrame()))
    rows = []
    for s in cfg.systems:
        for ctx in cfg.contexts:
            row: dict = {"system": s, "context": ctx}
            a = aa[(aa["system"] == s) & (aa["context"] == ctx)] if len(aa) else aa
            if len(a):
                r = a.iloc[0]
                row |= {"hardware (replica)": r["hardware"],
                        "tok/s/user @ concurrency 1 (AA median)": r["speed_median"],
                        "published": r["published"], "diff": fmt_pct(r["diff_pct"])}
            c = cap[(cap["system"] == s) & (cap["context"] == ctx)] if len(cap) else cap
            if len(c):
                row["streams that fit one unit (capacity model)"] = int(c.iloc[0]["max_streams"])
            w = sw[(sw["target"] == s) & (sw["context"] == ctx) & sw["at_ceiling"] & sw["fits"]] if len(sw) else sw
            if len(w):
                r = w.iloc[0]
                row |= {"hardware @ ceiling (deployment for this context)": r["hardware"],
                        "streams the replica runs (its ceiling: KV or batch cap)": int(r["concurrency"]),
                        "tok/s/user @ ceiling": r["tok_s_user"], "aggregate tok/s @ ceiling": r["tok_s_total"],
                        "tok/s per MW @ ceiling": r["tok_s_per_mw"]}
            rows.append(row)
    df = pd.DataFrame(rows)
    first = [c for c in ("system", "hardware (replica)", "context") if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def summary_section(cfg: TourConfig, results: dict[str, SectionResult]) -> Section:
    """Headline table plus a note for every section that is missing or failed."""
    sec = Section("Batch-1 speed is not fleet capacity",
                  f"{cfg.model} at concurrency 1 (Artificial Analysis method) next to the most streams that fit and "
                  "what each of them gets there. Per-user speed is always shown with its context, concurrency "
                  "and hardware.")
    head = headline(cfg, results)
    # the published figure's diff is in the AA section (its column would push the table past 1,280 px)
    sec.add(Table(head, css="headline", columns=tuple(c for c in head.columns if c != "diff")))
    sec.add(Note("'Streams that fit one unit' is the memory capacity model (plan.capacity) for a whole rack / NVL72 "
                 "at the input context. 'Streams the replica runs' is the sweep's ceiling row: the most streams the "
                 "deployment laid out for that context (one unit, context + OSL tokens, sized for the largest power "
                 "of two of streams the capacity model allows that its layout search holds) runs, from its KV "
                 "capacity and largest batch; the speeds @ ceiling "
                 "are that deployment at that concurrency. The LPX figure is lower where the compiled layout keeps "
                 "weights, activations and buffers on each chip and so leaves less room for KV than the capacity "
                 "model assumes. The concurrency-1 column is the AA benchmark on the backend's default deployment."))
    for name, r in results.items():
        if r.status != "ok":
            for line in r.summary or [f"{name}: {r.status}"]:
                sec.add(Note(line, "error" if r.status == "error" else "warn"))
    return sec


def dense_vs_moe(cfg: TourConfig, results: dict[str, SectionResult]) -> pd.DataFrame:
    """Per model and system: batch-1 AA speed at the smallest context and streams that fit at each context."""
    rows = []
    for model, cap_key, aa_res, aa_key in ((cfg.model, "capacity", "aa", f"aa_{cfg.model}"),
                                           (cfg.moe_model, "moe_capacity", "moe", f"aa_{cfg.moe_model}")):
        cap = results["capacity" if cap_key == "capacity" else "moe"].tables.get(cap_key, pd.DataFrame())
        aa = results[aa_res].tables.get(aa_key, pd.DataFrame())
        for s in cfg.systems:
            row: dict = {"model": model, "system": s}
            a = aa[(aa["system"] == s) & (aa["context"] == min(cfg.contexts))] if len(aa) else aa
            if len(a):
                row |= {"hardware (replica)": a.iloc[0]["hardware"],
                        f"tok/s/user @ {min(cfg.contexts):,}, concurrency 1": a.iloc[0]["speed_median"]}
            c = cap[cap["system"] == s] if len(cap) else cap
            for r in c.itertuples():
                row[f"streams that fit one unit @ {r.context:,}"] = r.max_streams
                row["weights GB"] = r.weights_gb
            rows.append(row)
    return pd.DataFrame(rows)


def _add_dense_vs_moe(cfg: TourConfig, results: dict[str, SectionResult]) -> None:
    moe = results.get("moe")
    if moe is None or moe.status != "ok":
        return
    df = dense_vs_moe(cfg, results)
    moe.section.blocks.insert(0, Table(df, f"{cfg.model} (dense) vs {cfg.moe_model} (MoE) on the same systems"))
    moe.tables["dense_vs_moe"] = df
