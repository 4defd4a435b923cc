"""`lpxsim sweep`: tok/s per user vs aggregate tok/s and tok/s per MW over context x concurrency."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from lpxsim.cli.bench_cmd import parse_int_list
from lpxsim.cli.common import KV_HELP, WEIGHTS_HELP, emit_json, err, keep_identifiers, out
from lpxsim.cli.session_opts import session_option
from lpxsim.cli.validate import count_option, framework_option, path_option, tokens_option
from lpxsim.core import inputs
from lpxsim.engine.query import DEFAULT_OSL

TABLE_COLS = ("target", "context", "concurrency", "hardware", "tok_s_user", "tok_s_total", "tok_s_per_mw",
              "ttft_s", "on_frontier")


def print_sweep(df) -> None:
    """Readable table: every row with its context, concurrency and hardware."""
    from lpxsim.engine.bands import band_cell

    what = ("agentic sessions: concurrency = sessions held" if "session_kind" in df and
            (df["session_kind"] == "agentic").any() else "no prefix reuse")
    t = Table(title=f"Sweep: tok/s per user vs aggregate ({what}; every row at its context, concurrency, hardware)")
    for col in ("system/mode", "context", "conc.", "hardware", "tok/s/user", "band", "tok/s total", "tok/s/MW",
                "TTFT", "frontier"):
        t.add_column(col, justify="right")
    for _, r in df.iterrows():
        if not bool(r.get("fits", True)):
            ceil = r.get("kv_ceiling")
            why = r.get("error") if isinstance(r.get("error"), str) else (
                f"over KV ceiling ({int(ceil)})" if ceil == ceil and ceil is not None else "does not fit")
            t.add_row(str(r["target"]), f"{int(r['context']):,}", f"{int(r['concurrency'])}", str(r.get("hardware", "")),
                      why, "", "", "", "", "")
            continue
        ceiling = " (ceiling)" if bool(r.get("at_ceiling", False)) else ""  # KV or the batch cap, whichever binds
        t.add_row(str(r["target"]), f"{int(r['context']):,}", f"{int(r['concurrency'])}{ceiling}",
                  str(r["hardware"]), f"{r['tok_s_user']:,.0f}", band_cell(r.get("tok_s_user_band_pct")), f"{r['tok_s_total']:,.0f}",
                  f"{r['tok_s_per_mw']:,.0f}", f"{r['ttft_s'] * 1e3:,.0f} ms", _frontier(r))
    out.print(keep_identifiers(t))
    if "band" in df:  # each system's band, named with its cost path (the same an estimate prints)
        for target, band in df.dropna(subset=["band"]).groupby("target", sort=False)["band"].first().items():
            g = df[df["target"] == target]
            out.print(f"- {target}: tok/s/user error band {band}; TTFT {_pct(g, 'ttft_band_pct')}; tok/s and "
                      f"tok/s/MW {_pct(g, 'tok_s_per_chip_band_pct')}")


def _pct(g, col: str) -> str:
    """'±46%' of a band column of a system's rows, or 'no validation on this path' where it has none."""
    from lpxsim.engine.bands import band_cell

    v = g[col].dropna() if col in g else g.iloc[0:0]
    return band_cell(v.iloc[0]) if len(v) else "no validation on this path"


def _frontier(r) -> str:
    """Which Pareto sets (over every deployment of the system at the context) the row is on."""
    on = [name for name, col in (("tok/s", "on_frontier"), ("tok/s/MW", "on_frontier_mw")) if bool(r.get(col, False))]
    return ", ".join(on)


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    def sweep_cmd(
        model: str = typer.Argument(..., help="catalog name or path to a config.json"),
        systems: str = typer.Option("lpx,vr-nvl72", "--systems", help="comma-separated systems"),
        contexts: str = typer.Option("10000,100000", "--contexts",
                                     help="input contexts (tokens) [each 1..10M; 32K, 1M ok]"),
        concurrency: str = typer.Option("1,2,4,8,16,32,64", "--concurrency",
                                        help="concurrent users (agentic: sessions) [each 1..10M; 1K ok]"),
        session: str = session_option(),
        osl: int = tokens_option(DEFAULT_OSL, "--osl", help="output tokens per request"),
        weights: str = typer.Option("fp8", "--weights", help=WEIGHTS_HELP),
        kv: str = typer.Option("bf16", "--kv", help=KV_HELP),
        framework: str = framework_option(),
        ceiling: bool = typer.Option(True, "--ceiling/--no-ceiling", help="add a point at each deployment's ceiling (its KV or its batch cap, whichever binds)"),
        deployments: str = typer.Option(
            "picks", "--deployments", help="picks: GPUs' latency and throughput layouts; LPX's rack layout and each "
            "smaller replica size of the layout search tiled over the rack, priced where it can reach the frontier; "
            "all: every LPX size priced (compiles more); rack: LPX's rack layout only"),
        executor: str = typer.Option("process", "--executor", help="process, thread, serial or dask"),
        workers: int | None = count_option(None, "--workers", help="local workers (default: CPU count)",
                                           hi=inputs.jobs_max(), human=False),
        scheduler: str | None = typer.Option(None, "--scheduler", help="Dask scheduler address (tcp://...)"),
        out_dir: Path = path_option(Path("lpxsim-sweep"), "--out", help="results directory (resumable)"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Per system: tok/s per user vs aggregate and per MW up to the KV ceiling; frontier PNG; resumable."""
        from lpxsim.bench.sweep import grid, run_sweep
        from lpxsim.catalog import get_model, get_system
        from lpxsim.report.plots import frontier_png
        from lpxsim.specs.precision import get_precision

        m = get_model(model)
        # the workers resolve the model again: a config.json is passed on by its path, a catalog model by its name
        name = str(Path(model).resolve()) if Path(model).is_file() else m.name
        get_precision(weights, "weights")  # a bad precision is one line before any work, not a row error per point
        get_precision(kv, "kv")
        if scheduler is not None and executor != "dask":  # it would not be used: refused, not ignored
            from lpxsim.core.errors import UserError

            raise UserError("scheduler", f"--scheduler is the address of --executor dask, not {executor!r}")
        inputs.claim_output_dir(out_dir, "out")  # before any work
        from lpxsim.bench.fleets import is_fleet

        targets = [s.strip() for s in systems.split(",") if s.strip()]
        if not targets:
            from lpxsim.core.errors import UserError

            raise UserError("systems", f"expected at least one system, got {systems!r}")
        targets = [t if is_fleet(t) else get_system(t).name for t in targets]  # unknown names: one-line error
        points = grid(name, targets, parse_int_list(contexts, "contexts"), parse_int_list(concurrency, "concurrency", 1, inputs.CONCURRENCY_MAX),
                      osl=osl, weights=weights, kv=kv, ceiling=ceiling, framework=framework, session=session,
                      deployments=deployments)
        df = run_sweep(points, out_dir, executor=executor, workers=workers, scheduler=scheduler,
                       progress=True, screen=deployments == "picks")
        png = frontier_png(df, out_dir / "frontier.png")
        err.print(f"[dim]{len(df)} points in {out_dir}/sweep.parquet, frontier in {png}[/dim]")
        if as_json:
            emit_json({"model": m.name, "systems": targets, "osl": osl, "session": session, "results": str(out_dir / "sweep.parquet"),
                       "frontier_png": str(png), "screened": df.attrs.get("screened", []),
                       "rows": df.to_dict(orient="records")})
        else:
            print_sweep(df)
            for line in df.attrs.get("screened", []):
                err.print(f"[dim]not priced (cannot reach the frontier): {line}[/dim]")
