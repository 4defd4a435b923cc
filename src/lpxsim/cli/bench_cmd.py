"""`lpxsim bench aa`: Artificial Analysis' output-speed methodology, simulated, beside the published figures."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer
from rich.table import Table

from lpxsim.bench.tokens import RATIO_RANGE
from lpxsim.cli.common import KV_HELP, WEIGHTS_HELP, band_line, emit_json, err, out, systems_help
from lpxsim.cli.validate import (
    count_option,
    framework_option,
    path_option,
    real_option,
    seed_option,
    tokens_option,
)
from lpxsim.core import inputs
from lpxsim.core.errors import UserError


def parse_int_list(text: str, field: str, lo: int = 1, hi: int = inputs.TOKENS_MAX) -> list[int]:
    """'10000,100K,1m' -> [10000, 100000, 1000000], each in [lo, hi]; a user error names `field` otherwise."""
    return inputs.parse_count_list(text, field, lo, hi)


def _check_target(system: str, weights: str, kv: str, framework: str) -> None:
    """What `run_aa` reads from the command line, checked before any output: a fleet YAML's fields, or the
    precisions and engine of a system's deployment."""
    from lpxsim.bench.fleets import MODES, is_fleet

    if is_fleet(system):
        if system not in MODES:
            from lpxsim.serving.config import load_fleet

            load_fleet(system)
        return
    from lpxsim.catalog import get_system
    from lpxsim.gpu.engine import framework_name
    from lpxsim.specs.precision import get_precision

    get_precision(weights, "weights")
    get_precision(kv, "kv")
    if not get_system(system).is_lpu:
        framework_name(framework)


def aa_json(points, setup, per_request_path: str | None) -> dict:
    """The one JSON object of `lpxsim bench aa`."""
    first = points[0]
    method = asdict(setup)
    method["conversion"] = {"o200k_per_native": setup.conversion.o200k_per_native,
                            "source": setup.conversion.source}
    return {
        "benchmark": "artificial-analysis-output-speed",
        "model": first.model, "system": first.system, "hardware": first.hardware, "concurrency": 1,
        "tokenizer": "o200k_base", "method": method,
        "points": [p.row() for p in points],
        "per_request_parquet": per_request_path,
    }


def print_aa(points, setup) -> None:
    """Readable table: speed percentiles with context, concurrency and hardware, beside published figures."""
    first = points[0]
    t = Table(title=f"Artificial Analysis output speed (o200k tok/s per user), {first.model}, concurrency 1, "
                    f"{setup.requests} sequential requests")
    for col in ("context", "conc.", "median", "P5", "P95", "TTFT", "published", "diff", "holds"):
        t.add_column(col, justify="right", no_wrap=True)
    for p in points:
        s = p.output_speed
        pub = f"{p.published.value:,.0f} {p.published.id}" if p.published else "-"
        diff = f"{p.diff_pct:+.1f}%" if p.diff_pct is not None else "-"
        t.add_row(f"{p.context:,}", "1", *(f"{s[k]:,.0f}" for k in ("median", "p5", "p95")),
                  f"{p.ttft_s['median'] * 1e3:,.0f}ms", pub, diff,
                  "-" if p.capacity_streams is None else f"{p.capacity_streams:,}")
    out.print(t)
    out.print(f"hardware: {first.hardware}; holds: the streams of that context it serves at once (one user's "
              f"speed is not its capacity: `lpxsim sweep` gives the speed at every load); P25/P75 and "
              f"per-request rows: --json / --per-request")
    for p in points:  # each median's band, from the path that priced it (the same an estimate carries)
        if band_line(p.row()):
            out.print(f"{p.context:,} tokens, median {band_line(p.row())}")
    out.print(f"tokens: o200k = native x {setup.conversion.o200k_per_native:g} ({setup.conversion.source})")


def register(app: typer.Typer) -> None:
    bench_app = typer.Typer(help="Benchmarks with a published methodology.", no_args_is_help=True)
    app.add_typer(bench_app, name="bench")

    @bench_app.command("aa")
    def aa_cmd(
        model: str = typer.Argument(..., help="catalog model name (lpxsim models)"),
        system: str = typer.Option("lpx", "--system", help=systems_help(", or a mode / fleet YAML")),
        contexts: str = typer.Option("10000,100000", "--contexts",
                                     help="input contexts, o200k tokens [each 1..10M; 32K, 1M ok]"),
        requests: int = count_option(16, "--requests", help="sequential requests per context", hi=100_000),
        seed: int = seed_option(0, help="seed of the answer-length draw"),
        output_median: int = tokens_option(500, "--output-median", help="median answer length, o200k tokens",
                                           hi=1_000_000),
        token_ratio: float = real_option(1.0, "--token-ratio", help="o200k tokens per native token",
                                         lo=RATIO_RANGE[0], hi=RATIO_RANGE[1]),
        prompt_file: Path | None = path_option(None, "--prompt-file",
                                                 help="a prompt text: its o200k length is the context"),
        weights: str = typer.Option("fp8", "--weights", help=WEIGHTS_HELP),
        kv: str = typer.Option("bf16", "--kv", help=KV_HELP),
        framework: str = framework_option(),
        per_request: Path | None = path_option(None, "--per-request", help="write per-request rows (parquet)"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Median (P5-P95) output speed at concurrency 1, with TTFT, beside published figures (AA method)."""
        from lpxsim.bench.aa import AASetup, run_aa
        from lpxsim.bench.fleets import is_fleet
        from lpxsim.bench.store import atomic_write_parquet
        from lpxsim.bench.tokens import TokenConversion, count_file
        from lpxsim.catalog import get_model, get_system, model_names

        model = get_model(model).name  # unknown names: one-line error before any work
        if model not in model_names():  # the AA tables and published figures are per catalog model
            raise UserError("model", f"bench aa takes a catalog model ({', '.join(model_names())}), not a config file")
        system = system if is_fleet(system) else get_system(system).name
        if per_request:
            inputs.check_output_file(per_request, "per-request", reads={"prompt": prompt_file})
        if prompt_file:
            inputs.read_text(prompt_file, "prompt-file", inputs.TRACE_FILE_MAX_BYTES)  # decodes, or one line
        ctxs = [count_file(prompt_file)] if prompt_file else parse_int_list(contexts, "contexts")
        setup = AASetup(contexts=tuple(ctxs), requests=requests, seed=seed,
                        output_median=output_median, output_min=min(64, max(1, output_median)),
                        output_max=max(4096, output_median),
                        conversion=TokenConversion(token_ratio))
        _check_target(system, weights, kv, framework)  # a bad value: its one error line alone, before the method's
        err.print(f"[dim]AA method: {requests} sequential requests x {len(ctxs)} contexts on {system}[/dim]")
        points, rows = run_aa(model, system, setup, weights=weights, kv=kv, framework=framework)
        if per_request:
            atomic_write_parquet(per_request, rows, "per-request")
        if as_json:
            emit_json(aa_json(points, setup, str(per_request) if per_request else None))
        else:
            print_aa(points, setup)
