"""`lpxsim simulate`: run the serving simulator on a fleet file and a workload file or a trace."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich.table import Table

from lpxsim.cli.common import _clean, emit_json, err, out
from lpxsim.cli.validate import path_option, real_option, seed_option
from lpxsim.core import inputs
from lpxsim.core.errors import UserError


def _apart(timeline: Path, out_dir: Path) -> None:
    """A UserError naming timeline when it is the --out folder or one of the files written there."""
    t = Path(timeline).resolve()
    d = Path(out_dir).resolve()
    if t == d or t in {(d / name).resolve() for name in SIMULATE_OUTPUTS}:
        raise UserError("timeline", f"{str(timeline)!r} is the --out folder or one of its files; give another path")


def _workload(workload: Path | None, trace: str | None, rate_scale: float):
    from lpxsim.serving.workload import WorkloadConfig, load_workload

    if (workload is None) == (trace is None):
        raise UserError("workload", "give exactly one of --workload FILE or --trace NAME|PATH")
    if not rate_scale > 0:
        raise UserError("rate-scale", f"expected a positive factor, got {rate_scale}")
    if trace is not None:
        from lpxsim.serving.traces import trace_path

        name = trace_path(trace).stem
        return WorkloadConfig(name=name, kind="trace", trace=trace, rate_scale=rate_scale)
    cfg = load_workload(workload)
    if rate_scale != 1.0:
        if cfg.kind == "trace":
            cfg = cfg.model_copy(update={"rate_scale": cfg.rate_scale * rate_scale})
        elif cfg.arrival.process == "closed":
            raise UserError("rate-scale", "a closed-loop workload has no arrival rate; change its concurrency")
        else:
            cfg = cfg.model_copy(update={"arrival": cfg.arrival.model_copy(update={"rate": cfg.arrival.rate * rate_scale})})
    return cfg


def _fleet(fleet: str, model: str):
    """A fleet file path, or a built-in mode name (`lpxsim.bench.fleets`) for `model`."""
    if inputs.is_file(fleet):
        return Path(fleet)
    from lpxsim.bench.fleets import MODES, builtin_fleet

    if fleet in MODES:
        return builtin_fleet(fleet, model)
    raise UserError("fleet", f"no such file {fleet!r} and not a built-in mode ({', '.join(MODES)})")


def _prepare(fleet_src) -> int:
    """Compile the LPX pools' step shapes before the run (`lpxsim.serving.prepare`), with a progress bar."""
    from lpxsim.core.progress import bar
    from lpxsim.serving.config import load_fleet
    from lpxsim.serving.prepare import prepare_shapes

    with bar("preparing LPX step shapes") as tick:
        return prepare_shapes(load_fleet(fleet_src), on_shape=lambda done, total: tick.update(note=f"{done:,}/{total:,}"))


SIMULATE_OUTPUTS = ("requests.parquet", "pools.parquet", "requests.csv", "summary.json")  # what --out holds


def write_outputs(result, out_dir: Path) -> list[str]:
    """requests.parquet (and the same as requests.csv), pools.parquet and summary.json, each written to a temp
    name then renamed (`lpxsim.core.outputs`: never over a device, a FIFO or a folder)."""
    from lpxsim.core.outputs import atomic_write_text, atomic_write_with, mark_output_dir

    mark_output_dir(out_dir)
    written = []
    for name, frame in (("requests.parquet", result.requests), ("pools.parquet", result.pools)):
        written.append(str(atomic_write_with(out_dir / name, lambda tmp, f=frame: f.to_parquet(tmp, index=False))))
    written.append(str(atomic_write_with(out_dir / "requests.csv",
                                         lambda tmp: result.requests.to_csv(tmp, index=False))))
    written.append(str(atomic_write_text(out_dir / "summary.json", json.dumps(_clean(result.summary), indent=2))))
    return written


def _ms(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 1e3:,.1f}"


def _print(s: dict, pools) -> None:
    t = Table(title=f"{s['fleet']} x {s['workload']}: {s['completed']:,} of {s['requests']:,} requests completed "
                    f"({s['rejected']:,} rejected) over {s['makespan_s']:,.1f} s simulated")
    for col in ("metric", "p50", "p90", "p99", "mean"):
        t.add_column(col, justify="right")
    for key, label in (("ttft_s", "TTFT ms"), ("tpot_s", "TPOT ms"), ("itl_s", "ITL ms"), ("e2e_s", "E2E ms")):
        d = s[key]
        t.add_row(label, _ms(d["p50"]), _ms(d["p90"]), _ms(d["p99"]), _ms(d["mean"]))
    u = s["tok_s_user"]
    t.add_row("tok/s/user", *(f"{u[k]:,.0f}" if math.isfinite(u[k]) else "-" for k in ("p50", "p90", "p99", "mean")))
    out.print(t)
    out.print(
        f"tok/s/user {u['p50']:,.0f} (median) at mean concurrency {s['mean_concurrency']:,.2g} and mean context "
        f"{s['mean_context']:,.0f} tokens; fleet {s['fleet_tok_s']:,.0f} output tok/s, "
        f"{s['power_w'] / 1e3:,.1f} kW, {s['tok_s_per_mw']:,.0f} tok/s per MW; goodput "
        f"{s['goodput_req_s']:,.2f} req/s under TTFT <= {s['slo']['ttft_s']} s, TPOT <= {s['slo']['tpot_s']} s"
    )
    tb = s.get("ttft_by_turn", {})
    if tb.get("later", {}).get("requests"):
        out.print(
            f"sessions: prefix hit rate {s['prefix_hit_rate']:.2f} ({s['reload_rate']:.2f} reloaded from a tier); "
            f"TTFT P50 first turns {_ms(tb['first']['p50'])} ms, later turns {_ms(tb['later']['p50'])} ms; "
            f"{s['sessions_resident_max']:,} sessions held at most; {s['evictions']:,} evictions, "
            f"{s['reloads']:,} reloads"
        )
    if s.get("by_context"):
        ct = Table(title="by prompt length")
        for col in ("context", "requests", "mean ISL", "tok/s/user P50", "TTFT P50 ms"):
            ct.add_column(col, justify="right")
        for label, d in s["by_context"].items():
            ct.add_row(label, f"{d['requests']:,}", f"{d['mean_isl']:,.0f}", f"{d['tok_s_user_p50']:,.0f}",
                       _ms(d["ttft_p50_s"]))
        out.print(ct)
    pt = Table(title="pools")
    for col in ("pool", "role", "hardware", "power kW", "utilisation", "KV mean", "KV peak", "prefix hits", "preempt"):
        pt.add_column(col)
    for r in pools.itertuples():
        pt.add_row(r.pool, r.role, f"{r.workers} x {r.step_model}", f"{r.power_w / 1e3:,.1f}",
                   f"{r.utilisation:.0%}" if math.isfinite(r.utilisation) else "-",
                   f"{r.kv_occupancy_mean:.1%}" if math.isfinite(r.kv_occupancy_mean) else "-",
                   f"{r.kv_occupancy_peak:.1%}" if math.isfinite(r.kv_occupancy_peak) else "-",
                   f"{r.prefix_hit_tokens:,}", f"{r.preemptions:,}")
    out.print(pt)


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate_cmd(
        fleet: str = typer.Option(..., "--fleet", help="fleet YAML (see examples/fleets/) or a built-in mode: "
                                  "rubin-alone, lpx-alone, rubin-lpx-pd, rubin-lpx-afd, rubin-lpx-drafter"),
        model: str = typer.Option("gemma-4-31b", "--model", help="model of a built-in fleet (ignored for files)"),
        workload: Path | None = path_option(None, "--workload", help="workload YAML (see examples/workloads/)"),
        trace: str | None = typer.Option(None, "--trace", help="trace name (azure-code, azure-conv, mooncake-conversation, "
                                         "mooncake-synthetic, tracelab-agent) or a file"),
        # 1/1000 stretches an hour's trace over 42 days; 1e-300 had spread it over 1e299 s of idle fleet
        rate_scale: float = real_option(1.0, "--rate-scale", help="multiply the arrival rate", lo=1e-3, hi=1e6),
        duration: float | None = real_option(None, "--duration", help="stop new arrivals after S simulated seconds",
                                             lo=0, hi=1e9, lo_open=True, metavar="S"),
        seed: int = seed_option(0),
        out_dir: Path | None = path_option(None, "--out", help="write requests.parquet (+ .csv), pools.parquet, summary.json"),
        timeline: Path | None = path_option(None, "--timeline", help="write the serving timeline as a Chrome "
                                             "trace (open in ui.perfetto.dev)"),
        prepare: bool = typer.Option(False, "--prepare", help="compile every step shape of the LPX pools first (once "
                                     "per machine: the step cache keeps them), so the run itself compiles nothing"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Simulate serving a workload on a fleet: TTFT/TPOT/ITL/E2E percentiles, goodput, tok/s per MW."""
        from lpxsim.serving import simulate

        if duration is not None and not duration > 0:
            raise UserError("duration", f"expected a positive number of seconds, got {duration}")
        if out_dir is not None:
            inputs.claim_output_dir(out_dir, "out")  # before the simulation, not after
            for name in SIMULATE_OUTPUTS:  # a folder (or device) of one of their names: refused now, not after
                inputs.check_output_file(out_dir / name, "out")
        if timeline is not None:
            inputs.check_output_file(timeline, "timeline", reads={"fleet": fleet, "workload": workload,
                                                                      "trace": trace})
            if out_dir is not None:  # the tables would be written, then the timeline refused over them
                _apart(timeline, out_dir)
        wcfg = _workload(workload, trace, rate_scale)
        fleet_src = _fleet(fleet, model)
        from lpxsim.core.progress import bar

        recorder = None
        if timeline is not None:
            from lpxsim.serving.timeline import TimelineRecorder

            recorder = TimelineRecorder()
        prepared = _prepare(fleet_src) if prepare else None
        with bar("simulating") as tick:  # silent under --json or when stderr is not a terminal
            result = simulate(fleet_src, wcfg, seed=seed, duration_s=duration,
                              on_progress=lambda t: tick.update(note=f"{t:,.0f} s simulated"), timeline=recorder)
        written = write_outputs(result, out_dir) if out_dir is not None else []
        if recorder is not None:
            from lpxsim.serving.timeline import write_timeline

            written.append(write_timeline(timeline, recorder, result.requests))
        if as_json:
            emit_json({"summary": result.summary, "pools": result.pools.to_dict(orient="records"), "written": written}
                      | ({"prepared_shapes": prepared} if prepared is not None else {}))
        else:
            _print(result.summary, result.pools)
            for w in written:
                err.print(f"wrote {w}")
