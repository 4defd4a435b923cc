"""`lpxsim tour`: the main job on built-in defaults; writes a self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import typer

from lpxsim.cli.bench_cmd import parse_int_list
from lpxsim.cli.common import emit_json, err, out


def register(app: typer.Typer) -> None:
    @app.command("tour")
    def tour_cmd(
        out_dir: Path = typer.Option(Path("lpxsim-report"), "--out", help="report directory"),
        model: str = typer.Option("gemma-4-31b", "--model", help="dense model"),
        moe_model: str = typer.Option("gpt-oss-120b", "--moe-model", help="MoE model for contrast"),
        systems: str = typer.Option("lpx,vr-nvl72", "--systems", help="comma-separated systems"),
        contexts: str = typer.Option("10000,100000", "--contexts", help="AA and capacity contexts"),
        requests: int = typer.Option(8, "--requests", help="AA sequential requests per context"),
        executor: str = typer.Option("serial", "--executor", help="sweep executor: serial, process, thread"),
        seed: int = typer.Option(0, "--seed", help="seed of every random draw"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object (summary and paths)"),
    ) -> None:
        """Gemma 4 31B on LPX and Vera Rubin NVL72: capacity, AA benchmark, sweep, modes, MoE -> index.html."""
        from lpxsim.catalog import get_model, get_system
        from lpxsim.report.tour import run_tour
        from lpxsim.report.tour_sections import TourConfig

        names = tuple(get_system(s.strip()).name for s in systems.split(",") if s.strip())
        cfg = TourConfig(model=get_model(model).name, moe_model=get_model(moe_model).name, systems=names,
                         contexts=tuple(parse_int_list(contexts, "contexts")), requests=requests,
                         executor=executor, seed=seed)
        res = run_tour(cfg, out_dir, log=lambda s: err.print(f"[dim]{s}[/dim]"))
        if as_json:
            emit_json({"out": str(res.out), "index_html": str(res.index_html),
                       "results_parquet": str(res.results_parquet), "pngs": [str(p) for p in res.pngs],
                       "sections": res.statuses, "summary": res.summary})
        else:
            for line in res.summary:
                out.print(line)
            out.print(f"report: {res.index_html}")
        if res.failed:
            raise typer.Exit(1)
