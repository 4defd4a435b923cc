"""`lpxsim estimate`: the steady-state operating point of a model on an LPX or GPU system."""

from __future__ import annotations

import typer
from rich.table import Table

from lpxsim.cli.common import economics_line, emit_json, out
from lpxsim.plan.costs import CostModel, estimate_economics
from lpxsim.plan.estimate import Estimate


def estimate_dict(e: Estimate, model: str, weights: str, kv: str, costs: CostModel | None = None,
                  system: str | None = None) -> dict:
    """JSON keys of an estimate (with its economics); per-chip keys also under the GPU names InferenceX uses."""
    return {
        "model": model,
        "system": e.system,
        "chips": e.chips,
        "power_w": e.power_w,
        "weights": weights,
        "kv": kv,
        "isl": e.isl,
        "osl": e.osl,
        "context": e.isl + e.osl,
        "concurrency": e.concurrency,
        "ttft_s": e.ttft_s,
        "tpot_s": e.tpot_s,
        "e2e_s": e.e2e_s,
        "tok_s_user": e.tok_s_user,
        "tok_s_total": e.tok_s_total,
        "total_tok_s": e.total_tok_s,
        "output_tok_s_per_chip": e.output_tok_s_per_chip,
        "total_tok_s_per_chip": e.total_tok_s_per_chip,
        "output_tok_s_per_gpu": e.output_tok_s_per_chip,
        "total_tok_s_per_gpu": e.total_tok_s_per_chip,
        "tok_s_per_mw": e.tok_s_per_mw,
        "micro_batches": e.micro_batches,
        "spec_k": e.spec_k,
        "spec_accept": e.spec_accept,
        "tokens_per_round": e.tokens_per_round,
        **estimate_economics(e, system or e.system, costs),
    }


def _print(d: dict) -> None:
    t = Table(
        title=f"{d['model']} on {d['system']} ({d['chips']} chips, {d['power_w'] / 1e3:,.0f} kW): "
        f"ISL {d['isl']:,} / OSL {d['osl']:,} at concurrency {d['concurrency']}"
    )
    for col in ("TTFT", "TPOT", "tok/s/user", "tok/s total", "tok/s/chip", "tok/s/MW"):
        t.add_column(col, justify="right")
    t.add_row(
        f"{d['ttft_s'] * 1e3:,.1f} ms", f"{d['tpot_s'] * 1e3:,.3f} ms", f"{d['tok_s_user']:,.0f}",
        f"{d['tok_s_total']:,.0f}", f"{d['output_tok_s_per_chip']:,.1f}", f"{d['tok_s_per_mw']:,.0f}",
    )
    out.print(t)
    if d["micro_batches"] > 1:
        out.print(f"{d['micro_batches']} micro-batches in flight")
    out.print(economics_line(d))


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    def estimate_cmd(
        model: str = typer.Argument(..., help="catalog name or path to a config.json"),
        system: str = typer.Option("lpx", "--system", help="lpx, groq-v1, vr-nvl72, gb200-nvl72, h200-hgx, ..."),
        isl: int = typer.Option(1024, "--isl", help="input tokens per request"),
        osl: int = typer.Option(1024, "--osl", help="output tokens per request"),
        concurrency: int = typer.Option(1, "--concurrency", help="concurrent users (closed loop)"),
        racks: float | None = typer.Option(None, "--racks", help="LPU systems: racks"),
        chips: int | None = typer.Option(None, "--chips", help="LPU systems: chips"),
        gpus: int | None = typer.Option(None, "--gpus", help="GPU systems: GPUs in the replica"),
        tp: int | None = typer.Option(None, "--tp", help="tensor parallel degree (GPU); omitted: searched"),
        ep: int = typer.Option(1, "--ep", help="expert parallel degree (GPU)"),
        pp: int = typer.Option(1, "--pp", help="pipeline parallel degree (GPU)"),
        dp_attention: bool = typer.Option(False, "--dp-attention", help="attention data-parallel (GPU)"),
        goal: str = typer.Option("latency", "--goal", help="layout search goal: latency or throughput"),
        layout: str | None = typer.Option(None, "--layout", help="force an LPX layout (see lpxsim compile)"),
        weights: str = typer.Option("fp8", "--weights", help="bf16, fp8, int8, fp4, mxfp4"),
        kv: str = typer.Option("bf16", "--kv", help="KV precision"),
        kv_layout: str = typer.Option("separate", "--kv-layout", help="separate or k-once"),
        mtp: int = typer.Option(0, "--mtp", help="speculative draft length k (MTP)"),
        accept: float = typer.Option(0.0, "--accept", help="per-token draft acceptance rate"),
        usd_per_kwh: float | None = typer.Option(None, "--usd-per-kwh", help="energy price (cost model override)"),
        pue: float | None = typer.Option(None, "--pue", help="facility PUE (cost model override)"),
        costs_file: str | None = typer.Option(None, "--costs", help="cost-model YAML overriding catalog/costs.yaml"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Steady-state TTFT, TPOT and tok/s (per user, total, per chip, per MW) at ISL/OSL and concurrency."""
        from lpxsim.backends import Layout, make_step_model
        from lpxsim.plan.costs import load_costs
        from lpxsim.plan.estimate import steady_state

        costs = load_costs(costs_file, usd_per_kwh=usd_per_kwh, pue=pue)  # before any costly work
        lay = Layout(racks=racks, chips=chips, gpus=gpus, tp=tp, ep=ep, pp=pp, dp_attention=dp_attention,
                     goal=goal, lpx_layout=layout, isl=isl, osl=osl, concurrency=concurrency)
        step = make_step_model(model, system, lay, weights=weights, kv=kv, kv_layout=kv_layout)
        e = steady_state(step, isl=isl, osl=osl, concurrency=concurrency, spec_k=mtp, spec_accept=accept)
        d = estimate_dict(e, model, weights, kv, costs, system=system)
        if as_json:
            emit_json(d)
        else:
            _print(d)
