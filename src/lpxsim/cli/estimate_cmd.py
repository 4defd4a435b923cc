"""`lpxsim estimate`: the steady-state operating point of a model on an LPX or GPU system."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from lpxsim.cli.common import (
    PRICES_HELP,
    WEIGHTS_HELP,
    band_line,
    economics_line,
    emit_json,
    out,
    systems_help,
)
from lpxsim.cli.session_opts import new_tokens_option, session_option, think_option
from lpxsim.cli.validate import (
    check_accept_given_with_mtp,
    count_option,
    engine_release_option,
    framework_option,
    real_option,
    tokens_option,
)
from lpxsim.core import inputs
from lpxsim.core.errors import UserError
from lpxsim.engine.query import DEFAULT_OSL

if TYPE_CHECKING:
    from lpxsim.engine.answer import Answer
    from lpxsim.plan.costs import CostModel


def estimate_dict(a: Answer, costs: CostModel | None = None) -> dict:
    """JSON keys of an engine answer (with its economics); per-chip keys also under the GPU names InferenceX
    uses. Every per-user figure carries its labels: workload, load, deployment, power."""
    from lpxsim.plan.costs import estimate_economics

    d = a.as_dict()
    d["output_tok_s_per_gpu"] = d["output_tok_s_per_chip"]
    d["total_tok_s_per_gpu"] = d["total_tok_s_per_chip"]
    return {**d, **estimate_economics(a, a.deployment.system, costs)}


def _print(d: dict) -> None:
    from rich.table import Table  # only for people: --json never pays for it

    t = Table(title=f"{d['model']}: {d['label']}")
    for col in ("TTFT", "TPOT", "tok/s/user", "tok/s total", "tok/s/chip", "tok/s/MW"):
        t.add_column(col, justify="right")
    t.add_row(
        f"{d['ttft_s'] * 1e3:,.1f} ms", f"{d['tpot_s'] * 1e3:,.3f} ms", f"{d['tok_s_user']:,.0f}",
        f"{d['tok_s_total']:,.0f}", f"{d['output_tok_s_per_chip']:,.1f}", f"{d['tok_s_per_mw']:,.0f}",
    )
    out.print(t)
    if d["micro_batches"] > 1:
        out.print(f"{d['micro_batches']} micro-batches in flight")
    if d["session_kind"] == "agentic":
        out.print(f"sessions held (KV resident, {d['kv_resident_bytes'] / 1e9:,.1f} of "
                  f"{d['kv_capacity_bytes'] / 1e9:,.1f} GB): {d['sessions_held']:,}; streams decoding (mean): "
                  f"{d['streams_decoding']:,.1f}; first turn TTFT (whole {d['isl']:,} prefilled): "
                  f"{d['ttft_first_turn_s'] * 1e3:,.0f} ms")
    for note in d.get("notes", []):
        out.print(note)
    what = "sessions" if d["session_kind"] == "agentic" else "streams"
    if d["over_capacity"]:
        needs = f" {d['needs']}: {d['alternative']}" if d["alternative"] else f" {d['needs']}"
        out.print(f"over capacity: the deployment holds {d['kv_ceiling']:,} {what} of {d['context']:,} tokens; "
                  f"{d['streams_admitted']:,} run and the rest wait {d['ttft_wait_s']:,.2f} s for a slot (in "
                  f"TTFT).{needs}")
    else:  # a speed at this load is never printed without what the deployment holds
        out.print(f"capacity: the deployment holds up to {d['kv_ceiling']:,} {what} of {d['context']:,} tokens "
                  f"({d['concurrency']:,} at this load)")
    out.print(f"statistic: {d['statistic']}")
    if band_line(d):
        out.print(band_line(d))
    out.print(economics_line(d))


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    def estimate_cmd(
        model: str = typer.Argument(..., help="catalog name or path to a config.json"),
        system: str = typer.Option("lpx", "--system", help=systems_help()),
        isl: int = tokens_option(1024, "--isl", help="input tokens per request"),
        osl: int = tokens_option(DEFAULT_OSL, "--osl", help="output tokens per request"),
        concurrency: int = count_option(1, "--concurrency", help="concurrent users (closed loop; with --session "
                                        "agentic, sessions)"),
        session: str = session_option(),
        new_tokens: int | None = new_tokens_option(),
        think_s: float | None = think_option(),
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
        kv_parallel: bool = typer.Option(False, "--kv-parallel", help="KV-parallel attention: each rank holds "
                                         "part of every sequence's KV (GPU; a layout `plan point` may pick)"),
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
        framework: str = framework_option(),
        engine_release: str = engine_release_option(),
        usd_per_kwh: float | None = real_option(None, "--usd-per-kwh", help="energy price (cost model override)",
                                                lo=0, hi=2),
        pue: float | None = real_option(None, "--pue", help="facility PUE (cost model override)", lo=1, hi=3),
        costs_file: str | None = typer.Option(None, "--costs", help="cost-model YAML overriding catalog/costs.yaml"),
        prices_file: str | None = typer.Option(None, "--prices", help=PRICES_HELP),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Steady-state TTFT, TPOT and tok/s (per user, total, per chip, per MW) at ISL/OSL and concurrency."""
        from lpxsim.engine.answer import answer
        from lpxsim.engine.deployment import Precision, deployment_from_flags
        from lpxsim.engine.query import Load, Objective, Workload, session_for
        from lpxsim.plan.costs import load_costs

        costs = load_costs(costs_file, usd_per_kwh=usd_per_kwh, pue=pue, prices=prices_file)  # before costly work
        if goal not in ("latency", "throughput"):
            raise UserError("goal", f"expected latency or throughput, got {goal!r}")
        wl = Workload(isl, osl, session_for(session, isl, osl, new_tokens, think_s))
        dep = deployment_from_flags(system, racks=racks, chips=chips, gpus=gpus, tp=tp, ep=ep, pp=pp,
                                    dp_attention=dp_attention, kv_parallel=kv_parallel, layout=layout,
                                    framework=framework)
        check_accept_given_with_mtp(accept, mtp)
        if accept is None:
            accept = 0.0
            if mtp > 0:
                from lpxsim.catalog import get_model
                from lpxsim.specs.mtp import default_accept

                accept = default_accept(get_model(model))
        a = answer(model, dep, wl, Load(concurrency=concurrency), Objective(goal), system=system,
                   precision=Precision(weights, kv, kv_layout), framework=framework, spec_k=mtp, spec_accept=accept,
                   release=engine_release)
        d = estimate_dict(a, costs)
        d["weights"], d["kv"] = weights, kv
        from lpxsim.engine.deployment import place

        step = place(model, system, wl, dep, Precision(weights, kv, kv_layout), framework,
                     goal, engine_release).step
        sources = getattr(step, "cost_sources", None)
        if sources is not None:  # GPU: which source priced each op family
            d["framework"] = getattr(step, "framework", framework)
            # the engine release whose fitted host time the steps carry: an answer's is the latest
            d["engine_release"] = getattr(step, "engine_release", None)
            d["cost_sources"] = dict(sorted(sources.items()))
        if as_json:
            emit_json(d)
        else:
            _print(d)
