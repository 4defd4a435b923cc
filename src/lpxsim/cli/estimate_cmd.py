"""`lpxsim estimate`: the steady-state operating point of a model on an LPX or GPU system."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from lpxsim.cli.common import PRICES_HELP, WEIGHTS_HELP, economics_line, emit_json, out, systems_help
from lpxsim.cli.validate import count_option, real_option, tokens_option
from lpxsim.core import inputs

if TYPE_CHECKING:
    from lpxsim.plan.costs import CostModel
    from lpxsim.plan.estimate import Estimate


def estimate_dict(e: Estimate, model: str, weights: str, kv: str, costs: CostModel | None = None,
                  system: str | None = None) -> dict:
    """JSON keys of an estimate (with its economics); per-chip keys also under the GPU names InferenceX uses."""
    from lpxsim.plan.costs import estimate_economics

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
    from rich.table import Table  # only for people: --json never pays for it

    # A step model's name may already read "MODEL on SYSTEM (layout)": say the model once.
    where = d["system"] if d["system"].startswith(f"{d['model']} on ") else f"{d['model']} on {d['system']}"
    t = Table(
        title=f"{where} ({d['chips']} chips, {d['power_w'] / 1e3:,.0f} kW): "
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
        system: str = typer.Option("lpx", "--system", help=systems_help()),
        isl: int = tokens_option(1024, "--isl", help="input tokens per request"),
        osl: int = tokens_option(1024, "--osl", help="output tokens per request"),
        concurrency: int = count_option(1, "--concurrency", help="concurrent users (closed loop)"),
        racks: float | None = real_option(None, "--racks", help="LPU systems: racks", lo=0, hi=inputs.RACKS_MAX,
                                          lo_open=True),
        chips: int | None = count_option(None, "--chips", help="LPU systems: chips", hi=inputs.CHIPS_MAX,
                                         human=False),
        gpus: int | None = count_option(None, "--gpus", help="GPU systems: GPUs in the replica", hi=inputs.CHIPS_MAX,
                                         human=False),
        tp: int | None = count_option(None, "--tp", help="tensor parallel degree (GPU); omitted: searched",
                                      hi=inputs.PARALLEL_MAX, human=False),
        ep: int = count_option(1, "--ep", help="expert parallel degree (GPU)", hi=inputs.PARALLEL_MAX, human=False),
        pp: int = count_option(1, "--pp", help="pipeline parallel degree (GPU)", hi=inputs.LAYERS_MAX, human=False),
        dp_attention: bool = typer.Option(False, "--dp-attention", help="attention data-parallel (GPU)"),
        goal: str = typer.Option("latency", "--goal", help="layout search goal: latency or throughput"),
        layout: str | None = typer.Option(None, "--layout", help="force an LPX layout (see lpxsim compile)"),
        weights: str = typer.Option("fp8", "--weights", help=WEIGHTS_HELP),
        kv: str = typer.Option("bf16", "--kv", help="KV precision"),
        kv_layout: str = typer.Option("separate", "--kv-layout", help="separate or k-once"),
        mtp: int = count_option(0, "--mtp", help="speculative draft length k (MTP)", lo=0, hi=inputs.MTP_MAX,
                                human=False),
        accept: float | None = real_option(None, "--accept", help="per-token draft acceptance rate "
                                           "(default with --mtp: the model's published MTP acceptance)", lo=0, hi=1,
                                           hi_open=True),
        framework: str = typer.Option("sglang", "--framework", help="GPU serving engine: sglang, trtllm or vllm"),
        usd_per_kwh: float | None = real_option(None, "--usd-per-kwh", help="energy price (cost model override)",
                                                lo=0, hi=2),
        pue: float | None = real_option(None, "--pue", help="facility PUE (cost model override)", lo=1, hi=3),
        costs_file: str | None = typer.Option(None, "--costs", help="cost-model YAML overriding catalog/costs.yaml"),
        prices_file: str | None = typer.Option(None, "--prices", help=PRICES_HELP),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Steady-state TTFT, TPOT and tok/s (per user, total, per chip, per MW) at ISL/OSL and concurrency."""
        from lpxsim.backends.factory import Layout, make_step_model
        from lpxsim.catalog import get_system
        from lpxsim.plan.costs import load_costs
        from lpxsim.plan.estimate import steady_state

        costs = load_costs(costs_file, usd_per_kwh=usd_per_kwh, pue=pue, prices=prices_file)  # before costly work
        # LPX: compile at this workload's own contexts (decode exactly at ISL + OSL/2, prefill from two
        # points) rather than the generic buckets around them: 4 compiles instead of 6 on a cold cache.
        lay = Layout(racks=racks, chips=chips, gpus=gpus, tp=tp, ep=ep, pp=pp, dp_attention=dp_attention,
                     goal=goal, lpx_layout=layout, isl=isl, osl=osl, concurrency=concurrency,
                     framework=framework, workload_grid=get_system(system).is_lpu)
        step = make_step_model(model, system, lay, weights=weights, kv=kv, kv_layout=kv_layout)
        if accept is None:
            accept = 0.0
            if mtp > 0:
                from lpxsim.catalog import get_model
                from lpxsim.specs.mtp import default_accept

                accept = default_accept(get_model(model))
        e = steady_state(step, isl=isl, osl=osl, concurrency=concurrency, spec_k=mtp, spec_accept=accept)
        from lpxsim.catalog import get_model

        # a config path reads as its model's name
        d = estimate_dict(e, get_model(model).name, weights, kv, costs, system=system)
        sources = getattr(step, "cost_sources", None)
        if sources is not None:  # GPU: which source priced each op family
            d["framework"] = getattr(step, "framework", framework)
            d["cost_sources"] = dict(sorted(sources.items()))
        if as_json:
            emit_json(d)
        else:
            _print(d)
