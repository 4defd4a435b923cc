"""`lpxsim tour`: the main job on built-in defaults; writes a self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import typer

from lpxsim.cli.bench_cmd import parse_int_list
from lpxsim.cli.common import emit_json, err, out
from lpxsim.cli.validate import count_option, jobs_option, path_option, seed_option
from lpxsim.core import inputs
from lpxsim.core.errors import UserError

HEADLINE = (("system", "system", "{}"), ("context", "context", "{:,}"),
            ("tok/s/user @ concurrency 1 (AA median)", "tok/s/user @ c=1", "{:,.0f}"), ("diff", "vs published", "{}"),
            ("streams that fit one unit (capacity model)", "streams fit", "{:,}"),
            ("streams the replica runs (its ceiling: KV or batch cap)", "replica ceiling", "{:,}"),
            ("tok/s/user @ ceiling", "tok/s/user @ ceiling", "{:,.0f}"),
            ("aggregate tok/s @ ceiling", "aggregate tok/s", "{:,.0f}"), ("tok/s per MW @ ceiling", "tok/s/MW", "{:,.0f}"))


def print_summary(res) -> None:
    """The short summary: batch-1 next to the ceiling, the two session ceilings, the modes, the MoE contrast and
    anything missing."""
    from rich.table import Table

    t = Table(title="Batch-1 speed is not fleet capacity (per system and context)")
    cols = [c for c in HEADLINE if c[0] in res.headline.columns]
    for _, label, _ in cols:
        t.add_column(label, justify="right")
    for _, r in res.headline.iterrows():
        t.add_row(*("-" if r[k] is None or r[k] != r[k] else fmt.format(r[k]) for k, _, fmt in cols))
    t.caption = _hardware_caption(res.headline)
    out.print(t)
    for line in res.summary:
        if line.startswith(("sessions ", "mode ", "AA gpt", "MoE", "sweep:")) or "not available" in line or "failed" in line:
            out.print(line)
    out.print(f"report: {res.index_html} (charts, tables, assumptions); data: {res.results_parquet}")


def _hardware_caption(df) -> str:
    """Which hardware each speed column ran on: the AA deployment (c=1) and each context's sweep deployment."""
    parts = []
    for col, label in (("hardware (replica)", "c=1 (AA)"),
                       ("hardware @ ceiling (deployment for this context)", "@ ceiling")):
        if col in df:
            rows = df.drop_duplicates(["system", col]) if label.startswith("c=1") else df
            for _, r in rows.iterrows():
                if isinstance(r[col], str):
                    ctx = "" if label.startswith("c=1") else f" {r['context']:,}"
                    parts.append(f"{label}{ctx}: {r[col]}")
    return "hardware: " + "; ".join(parts) if parts else ""


TOUR_EXECUTORS = ("serial", "process", "thread")  # the sweep's executors a tour runs (no Dask scheduler option)


def register(app: typer.Typer) -> None:
    @app.command("tour")
    def tour_cmd(
        out_dir: Path = path_option(Path("lpxsim-report"), "--out", help="report directory"),
        model: str = typer.Option("gemma-4-31b", "--model", help="dense model"),
        moe_model: str = typer.Option("gpt-oss-120b", "--moe-model", help="MoE model for contrast"),
        systems: str = typer.Option("lpx,vr-nvl72", "--systems", help="comma-separated systems"),
        contexts: str = typer.Option("10000,100000", "--contexts",
                                     help="AA and capacity contexts [each 1..10M; 32K, 1M ok]"),
        requests: int = count_option(8, "--requests", help="AA sequential requests per context", hi=100_000),
        executor: str = typer.Option("serial", "--executor", help="sweep executor with --jobs 1: serial, process, thread"),
        jobs: int = jobs_option(2, "--jobs", help="processes: 2 runs AA and MoE in a worker beside the rest, 3+ the sweep's "
                                                        "contexts on the workers too (1: one process)"),
        seed: int = seed_option(0, help="seed of every random draw"),
        session: str = typer.Option("agentic", "--session", help="the sweep's and the modes' workload: agentic "
                                    "(default: agent sessions at each context, prefix cached, think time) or none "
                                    "(the no-cache loop: every request prefills its whole context)"),
        deployments: str = typer.Option(
            "picks", "--deployments", help="the sweep's deployments (as `lpxsim sweep --deployments`): picks "
            "(LPX: the rack and each smaller replica size that can reach the frontier), all, or rack (LPX: the "
            "rack only; fewer compiles)"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object (summary and paths)"),
    ) -> None:
        """Gemma 4 31B on LPX and Vera Rubin NVL72: capacity, AA benchmark, sweep, modes, MoE -> index.html."""
        from lpxsim.catalog import get_model, get_system
        from lpxsim.engine.query import session_for
        from lpxsim.report.tour import run_tour
        from lpxsim.report.tour_sections import TourConfig

        inputs.check_jobs(jobs, "jobs")
        session_for(session, 1, 1)  # an unknown name: one line, before any work
        from lpxsim.bench.sweep import DEPLOYMENTS

        if deployments not in DEPLOYMENTS:
            raise UserError("deployments", f"expected one of {', '.join(DEPLOYMENTS)}, got {deployments!r}")
        if executor not in TOUR_EXECUTORS:
            raise UserError("executor", f"expected one of {', '.join(TOUR_EXECUTORS)}, got {executor!r}")
        from lpxsim.catalog import model_names

        for option, name in (("model", model), ("moe-model", moe_model)):
            try:
                spec = get_model(name)
            except UserError as e:  # named as the option the user typed: --model or --moe-model
                raise UserError(option, e.message) from None
            if spec.name not in model_names():  # its sections compare with published catalog figures
                raise UserError(option, f"the tour takes a catalog model ({', '.join(model_names())}); for a "
                                        f"config.json use estimate, sweep or capacity")
        inputs.claim_output_dir(out_dir, "out")  # before any work
        names = tuple(get_system(s.strip()).name for s in systems.split(",") if s.strip())
        if not names:
            raise UserError("systems", f"expected at least one system, got {systems!r}")
        cfg = TourConfig(model=get_model(model).name, moe_model=get_model(moe_model).name, systems=names,
                         contexts=tuple(parse_int_list(contexts, "contexts")), requests=requests,
                         executor=executor, seed=seed, jobs=jobs, session=session,
                         deployments=deployments)
        from lpxsim.core import progress

        with progress.bar("tour") as tick:  # the current section: on the bar's line, or one line per stage piped
            def log(s: str) -> None:
                if progress.plain():  # piped: the stage line itself (with a heartbeat while it runs long)
                    tick.update(description=s)
                    return
                err.print(f"[dim]{s}[/dim]")
                tick.update(description=f"tour: {s[:60]}")

            res = run_tour(cfg, out_dir, log=log)
        if as_json:
            emit_json({"out": str(res.out), "index_html": str(res.index_html),
                       "results_parquet": str(res.results_parquet), "pngs": [str(p) for p in res.pngs],
                       "sections": res.statuses, "summary": res.summary})
        else:
            print_summary(res)
        if res.failed:
            raise typer.Exit(1)
