"""`lpxsim plan`: operating point at a per-user target, fleet sizing (MILP BOM), and the T8 comparison."""

from __future__ import annotations

import contextlib

import typer
from rich.table import Table

from lpxsim.cli.common import (
    KV_HELP,
    PRICES_HELP,
    WEIGHTS_HELP,
    band_line,
    economics_line,
    emit_json,
    keep_identifiers,
    out,
    systems_help,
)
from lpxsim.cli.session_opts import new_tokens_option, session_option, think_option
from lpxsim.cli.validate import (
    check_accept_given_with_mtp,
    count_option,
    framework_option,
    real_option,
    tokens_option,
)
from lpxsim.core import inputs
from lpxsim.core.errors import UserError
from lpxsim.engine.query import DEFAULT_OSL

plan_app = typer.Typer(
    help="Plan: the best operating point at a tok/s/user target, fleet sizing, the T8 tok/s/MW comparison.",
    no_args_is_help=True,
)

USD_PER_KWH_HELP = "energy price in $/kWh (overrides the cost model)"
NO_FEASIBLE_FLEET_EXIT = 3  # `plan fleet` found no fleet that serves the demand (docs/cli.md, "Exit codes")
PUE_HELP = "facility PUE (overrides the cost model)"
COSTS_HELP = "cost-model YAML overriding catalog/costs.yaml (see docs/assumptions.md, Economics)"
BACKEND_HELP = "auto or project: the detailed backends (compiled LPX, GPU model), the only cost models"


def _check_backend(backend: str) -> None:
    """--backend before any costly work: auto/project, or one line (the removed analytic model named)."""
    from lpxsim.plan.operating_point import check_backend

    check_backend(backend)


def answer_bands(system: str, weights: str, framework: str, tok_s_user: float, ttft_s: float | None,
                 layout: str = "", tok_s_per_chip: float | None = None, spec: bool = False) -> dict:
    """The error band of a plan's answer on `system` laid out as `layout`, in the keys an engine Answer carries
    (`engine.bands.figure_bands`, as `Answer.bands`): cost_path, band, and per metric its +- % and the interval it
    puts around the figure; a metric the path has no validation of is listed in `unvalidated`. `spec`: it drafts."""
    from lpxsim.engine.bands import figure_bands, path_for

    return figure_bands(system, path_for(system, weights, framework), layout,
                        {"tok_s_user": tok_s_user, "ttft": ttft_s, "tok_s_per_chip": tok_s_per_chip}, spec)


def fleet_capacity_band(assignments: list[dict], weights: str) -> dict:
    """The band of a fleet's capacity (output tok/s per chip of its replicas, so the racks, power and cost the demand
    needs): the widest of its systems' throughput bands (`engine.bands.mixed_bands`); {} without assignments."""
    from lpxsim.engine.bands import mixed_bands, path_for

    if not assignments:
        return {}
    chips = sum(a["chips"] for a in assignments)
    b = mixed_bands([(a["system"], path_for(a["system"], weights)) for a in assignments],
                    {"tok_s_per_chip": sum(a["output_tok_s"] for a in assignments) / max(1, chips)})
    pct = b.get("tok_s_per_chip_band_pct")
    return {"capacity_band_pct": pct, "capacity_cost_path": b["cost_path"]}


def _point_table(d: dict) -> Table:
    t = Table(title=(
        f"{d['model']} on {d['system']}: >= {d['target_tok_s_user']:,.0f} tok/s/user at context {d['isl']:,} "
        f"(OSL {d['osl']:,}, {d['weights']} weights, {d['kv']} KV, backend {d['backend']}; {d['session']})"
    ))
    for col in ("#", "chips", "1 user: tok/s/user", "TTFT", "tok/s/user", "context", "concurrency", "KV max",
                "tok/s", "kW", "tok/s/MW"):
        t.add_column(col, justify="right")
    for i, c in enumerate(d["candidates"], 1):
        ok, one = c["feasible"], c["batch1_tok_s_user"] > 0
        t.add_row(
            str(i), f"{c['chips']:,}", f"{c['batch1_tok_s_user']:,.0f}" if one else "-",
            f"{c['batch1_ttft_s'] * 1e3:,.1f} ms" if one else "-",
            f"{c['tok_s_user']:,.0f}" if ok else "-", f"{d['isl']:,}",
            f"{c['concurrency']:,}" if ok else "-", f"{c['kv_max_concurrency']:,}",
            f"{c['tok_s_total']:,.0f}" if ok else "-", f"{c['power_w'] / 1e3:,.1f}" if ok else "-",
            f"{c['tok_s_per_mw']:,.0f}" if ok else "-",
        )
    return t


def _print_point(d: dict) -> None:
    if d["candidates"]:
        out.print(_point_table(d))
        for i, c in enumerate(d["candidates"], 1):
            out.print(f"{i}: {c['layout']}" + ("" if c["feasible"] else f" -- {c['reason']}"))
    if d["pareto"]:
        out.print("Pareto set (no other layout and load is faster per user and more tok/s/MW): " + "; ".join(
            f"{p['tok_s_user']:,.0f} tok/s/user x {p['concurrency']:,} users, {p['tok_s_per_mw']:,.0f} tok/s/MW "
            f"({p['chips']:,} chips, {p['replica_layout']})" for p in d["pareto"])
            + (f" (each priced on the {d['cost_path']} path; the error band below is the best answer's)"
               if d.get("cost_path") else ""))
    if d["feasible"]:
        out.print(
            f"best: {d['tok_s_user']:,.0f} tok/s/user at {d['isl']:,} context and concurrency {d['concurrency']:,}"
            f"{' sessions' if d.get('think_s') else ''}; "
            f"{d['tok_s_total']:,.0f} output tok/s per replica ({d['replica_units']:g} {d['unit_name']}(s), "
            f"{d['replica_power_w'] / 1e3:,.1f} kW), {d['tok_s_per_mw']:,.0f} tok/s/MW; {d['layout']}; "
            f"ranked by {d['objective']}"
        )
        out.print(economics_line(d))
        if band_line(d):
            out.print(band_line(d))
    else:
        out.print(f"cannot reach {d['target_tok_s_user']:,.0f} tok/s/user at {d['isl']:,} context: {d['reason']}")
    for note in d.get("notes", ()):
        out.print(f"note: {note}")


def _print_fleet(d: dict) -> None:
    if not d["feasible"]:
        out.print("[bold red]no feasible fleet[/]")
        for r in d["reasons"]:
            out.print(f"- {r}")
        c = d.get("closest")
        out.print(f"closest feasible: {c['line']}" if c else "closest feasible: none found")
        return
    bom = Table(title=f"Fleet BOM (minimising {d['objective']})")
    for col in ("system", "racks", "spares", "chips", "IT kW", "facility kW", "capex $M", "racks used", "tok/s",
                "tok/s/MW", "$/Mtok out", "revenue $/h"):
        bom.add_column(col, justify="left" if col == "system" else "right")
    for b in d["bom"]:
        e = b["economics"]
        bom.add_row(b["system"], f"{b['units']:,}", f"{b['spare_units']:,}", f"{b['chips']:,}",
                    f"{b['power_w'] / 1e3:,.1f}", f"{e['facility_kw']:,.1f}", _money(e["capex_usd"], 1e6),
                    f"{b['used_units']:,.2f}", f"{b['output_tok_s']:,.0f}", f"{b['tok_s_per_mw']:,.0f}",
                    _money(e["usd_per_mtok_output"]), _money(e["revenue_usd_per_hour"]))
    bom.add_row("total", f"{sum(d['racks_by_system'].values()):,}", f"{d['spare_units']:,}", "",
                f"{d['total_power_w'] / 1e3:,.1f}", f"{d['facility_kw']:,.1f}", _money(d["capex_usd"], 1e6), "",
                f"{d['output_tok_s']:,.0f}", f"{d['tok_s_per_mw']:,.0f}", _money(d["usd_per_mtok_output"]),
                _money(d["revenue_usd_per_hour"]), style="bold")
    out.print(keep_identifiers(bom))
    out.print("- $/Mtok out: the whole cost over the output tokens delivered; revenue only where a price source "
              "applies (an assumption: the shipped LPX price, or --prices FILE), '-' elsewhere")
    for b in d["bom"]:
        out.print(f"- {b['system']} rack power: {b['power_source']}")
    t = Table(title="Assignment: per-user speed with its context and concurrency")
    for col in ("class", "system", "option", "replicas", "racks", "tok/s/user", "context", "conc./replica",
                "served/demand"):
        t.add_column(col, justify="left" if col in ("class", "system", "option") else "right")
    for a in d["assignments"]:
        t.add_row(a["request_class"], a["system"], a["option"], f"{a['replicas']:,}", f"{a['units']:,.2f}",
                  f"{a['tok_s_user']:,.0f}", f"{a['context']:,}", f"{a['concurrency_per_replica']:,}",
                  f"{a['served']:,.1f}/{a['demand']:,.1f} {a['demand_unit']}")
    out.print(keep_identifiers(t, 3))
    for a in d["assignments"]:
        out.print(f"- {a['request_class']} ({a['model']}, OSL {a['osl']:,}) on {a['system']}: {a['layout']}")
        if a.get("workload"):
            held = a["concurrency_per_replica"]
            decoding = a.get("streams_decoding_per_replica", held)
            out.print(f"  workload: {a['workload']}" + (
                f"; per replica {held:,} sessions held, {decoding:,.1f} streams decoding" if decoding < held else ""))
        if band_line(a):
            out.print(f"  {band_line(a)}")
    out.print(f"total {d['total_power_w'] / 1e3:,.1f} kW; {d['output_tok_s']:,.0f} output tok/s for the demand; "
              f"{d['tok_s_per_mw']:,.0f} tok/s/MW")
    if d.get("capacity_band_pct") is not None:
        out.print(f"capacity error band: ±{d['capacity_band_pct']:.0f}% per rack ({d['capacity_cost_path']}; the widest "
                  "of its systems' throughput bands): the racks, power and cost the demand needs scale with it")
    elif d.get("capacity_cost_path"):
        out.print(f"capacity error band: none (no throughput validation on the {d['capacity_cost_path']} path)")
    out.print(f"racks: {d['straddle']}")
    for c in d.get("options", []):  # every pool type per class, and the ones the MILP chose
        ttft = "" if c["target_ttft_p99_s"] is None else f", TTFT <= {c['target_ttft_p99_s']:g} s"
        out.print(f"options for {c['class']} ({c['model']}, {c['context']:,} context, target "
                  f"{c['target_tok_s_user']:,.0f} tok/s/user{ttft}): chosen {', '.join(c['chosen']) or 'none'}")
        for r in c["options"]:
            got = (f"{r['tok_s_user']:,.0f} tok/s/user, TTFT {r['ttft_s']:,.2f} s, {r['tok_s_per_mw']:,.0f} tok/s/MW, "
                   f"{r['hardware']} ({r['method']})" if r["tok_s_user"] > 0 else r["method"])
            pick = f"; {r['replicas']:,} replica(s) in the fleet" if r["replicas"] else ""
            out.print(f"  {r['option']}: {got}{pick}" + ("" if r["feasible"] else f" (not feasible: {r['reason']})"))


def _emit_target(emit: str | None):
    """--emit DIR, checked before any work: a path that exists as anything but a directory is refused."""
    if emit is None:
        return None
    from lpxsim.plan.fleet_emit import check_emit_dir

    return check_emit_dir(emit)


def _money(v: float | None, scale: float = 1.0) -> str:
    return "-" if v is None else f"{v / scale:,.2f}"


def _frontier_table(d: dict) -> Table:
    labels = list(d["frontier"][0]["systems"])
    t = Table(title=f"tok/s/MW at lower per-user targets, {d['context']:,}-token context (- = cannot reach)")
    t.add_column("tok/s/user >=", justify="right")
    for label in labels:
        t.add_column(label, justify="right")
    for f in d["frontier"]:
        cells = []
        for label in labels:
            v = f["systems"][label]
            cells.append("-" if v["tok_s_per_mw"] is None else f"{v['tok_s_per_mw']:,.0f} @{v['concurrency']}")
        t.add_row(f"{f['target_tok_s_user']:,.0f}", *cells)
    return t


def _print_t8(d: dict) -> None:
    t = Table(title=(
        f"T8: {d['model']} ({d['total_params'] / 1e12:.2f} T params), {d['context']:,}-token context, OSL {d['osl']:,}, "
        f"target {d['target_tok_s_user']:,.0f} tok/s/user; vendor claim {d['claim']['ratio_vs_gb200']:g}x (comparison only)"
    ))
    for col in ("system", "racks", "kW", "tok/s/user", "context", "concurrency", "tok/s/MW", "vs GB200"):
        t.add_column(col, justify="left" if col == "system" else "right")
    for label, r in d["systems"].items():
        ok = r["feasible"]
        ratio = r["ratio_vs_gb200"]
        t.add_row(
            label, f"{r['replica_units']:g}" if ok else "-",
            f"{r['replica_power_w'] / 1e3:,.0f}" if ok else "-",
            f"{r['tok_s_user']:,.0f}" if ok else (
                f"max {r['best_tok_s_user']:,.0f}" if r["best_tok_s_user"] > 0 else "does not fit"),
            f"{r['context']:,}",
            f"{r['concurrency']:,}" if ok else "-", f"{r['tok_s_per_mw']:,.0f}" if ok else "-",
            f"{ratio:.2f}x" if ratio is not None else "-",
        )
    out.print(keep_identifiers(t))
    if d["frontier"]:
        out.print(_frontier_table(d))
    for label, r in d["systems"].items():  # a short system's best speed: its load, its layout and what it holds
        if not r["feasible"] and r.get("reason"):
            out.print(f"- {label}: {r['reason']}")
    for label, r in d["systems"].items():  # its speeds' band (and tok/s/MW's, the frontier's too): its own path's
        if band_line(r):
            out.print(f"- {label} {band_line(r)}")
    for label, r in d["systems"].items():
        out.print(f"- {label} rack power: {r['rack_power_w'] / 1e3:,.1f} kW, {r['power_source']} ({r['power_grade']})")
        if r.get("facility_kw") is not None:
            out.print(f"  {label} " + economics_line(r).replace("\n", "\n  "))
    for n in d["notes"]:
        out.print(f"- {n}")


def register(app: typer.Typer) -> None:
    app.add_typer(plan_app, name="plan")


@plan_app.command("point")
def point_cmd(
    model: str = typer.Argument(..., help="catalog name, config.json path, or synthetic-moe-2t"),
    system: str = typer.Option("lpx", "--system", help=systems_help()),
    context: int = tokens_option(..., "--context", help="input tokens per request (ISL)"),
    osl: int = tokens_option(DEFAULT_OSL, "--osl", help="output tokens per request"),
    target: float = real_option(..., "--target-tok-s-user", help="per-user output tok/s every user must get",
                                lo=0, hi=1e6, lo_open=True),
    weights: str = typer.Option("fp8", "--weights", help=WEIGHTS_HELP),
    kv: str = typer.Option("bf16", "--kv", help=KV_HELP),
    kv_layout: str = typer.Option("separate", "--kv-layout", help="separate or k-once"),
    session: str = session_option(),
    new_tokens: int | None = new_tokens_option(),
    think_s: float | None = think_option(),
    mtp: int = count_option(0, "--mtp", help="speculative draft length k (MTP); 0: off", lo=0, hi=inputs.MTP_MAX,
                            human=False),
    accept: float = real_option(0.0, "--accept", help="per-token draft acceptance rate", lo=0, hi=1,
                                hi_open=True),
    backend: str = typer.Option("auto", "--backend", help=BACKEND_HELP),
    usd_per_kwh: float | None = real_option(None, "--usd-per-kwh", help=USD_PER_KWH_HELP, lo=0, hi=2),
    pue: float | None = real_option(None, "--pue", help=PUE_HELP, lo=1, hi=3),
    costs_file: str | None = typer.Option(None, "--costs", help=COSTS_HELP),
    prices_file: str | None = typer.Option(None, "--prices", help=PRICES_HELP),
    framework: str = framework_option(),
    objective: str = typer.Option(
        "efficiency", "--objective", help="what ranks the layouts: efficiency (most tok/s/MW with every user at "
        "the target), latency (shortest request at one user, TTFT + (OSL - 1) x TPOT), throughput (most tok/s per "
        "chip at the target)"),
    emit: str | None = typer.Option(None, "--emit", help="write the replica as a fleet YAML (with a workload at "
                                    "its concurrency and a README) into this directory"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """The replica layout and concurrency that best serve --objective with every user at >= the target.

    The objective defaults to the most tok/s/MW; the Pareto set of the layouts tried is printed beside it.

    Default workload: an agentic session at the context (concurrency counts sessions, each holding its KV
    through its tool time); --session none: the no-cache loop."""
    from lpxsim.engine.query import session_for
    from lpxsim.plan.costs import load_costs, point_economics
    from lpxsim.plan.operating_point import operating_point

    _check_backend(backend)
    check_accept_given_with_mtp(accept, mtp)
    shape = session_for(session, context, osl, new_tokens, think_s)
    target_dir = _emit_target(emit)
    costs = load_costs(costs_file, usd_per_kwh=usd_per_kwh, pue=pue, prices=prices_file)
    op = operating_point(model, system, context, osl, target, weights=weights, kv=kv, kv_layout=kv_layout,
                         backend=backend, spec_k=mtp, spec_accept=accept, framework=framework, session=shape,
                         objective=objective)
    d = {**op.as_dict(), **point_economics(op, costs)}
    if op.feasible:
        d |= answer_bands(op.system, op.weights, framework, op.tok_s_user, op.ttft_s, op.layout,
                          op.tok_s_total / max(1, op.replica_chips), spec=mtp > 0)
    if target_dir is not None and op.feasible:
        from lpxsim.plan.fleet_emit import emit_operating_point

        d["emitted"] = emit_operating_point(op, target_dir, kv_layout, session=shape)
    emit_json(d) if as_json else _print_point(d)
    if target_dir is not None and op.feasible and not as_json:
        out.print(f"wrote {', '.join(d['emitted']['files'])} in {target_dir}")


@plan_app.command("fleet")
def fleet_cmd(
    demand: str = typer.Option(..., "--demand", help="demand YAML (see examples/plans/)"),
    systems: str | None = typer.Option(None, "--systems", help="comma-separated candidates (default: the file's)"),
    backend: str = typer.Option("auto", "--backend", help=BACKEND_HELP),
    redundancy: int | None = typer.Option(None, "--redundancy", help="N+k: spare replicas per pool (default: file's)"),
    max_racks: int | None = typer.Option(None, "--max-racks", help="ceiling on racks/nodes of all systems, spares in"),
    max_facility_kw: float | None = typer.Option(None, "--max-facility-kw", help="ceiling on facility power (IT x PUE)"),
    objective: str | None = typer.Option(None, "--objective", help="auto (power, or cost_per_rack), power, or tco"),
    usd_per_kwh: float | None = real_option(None, "--usd-per-kwh", help=USD_PER_KWH_HELP, lo=0, hi=2),
    pue: float | None = real_option(None, "--pue", help=PUE_HELP, lo=1, hi=3),
    costs_file: str | None = typer.Option(None, "--costs", help=COSTS_HELP),
    prices_file: str | None = typer.Option(None, "--prices", help=PRICES_HELP),
    allow_straddle: bool = typer.Option(
        False, "--allow-straddle",
        help="let one replica span two racks (default: the demand file's allow_straddle, else whole racks)"),
    emit: str | None = typer.Option(None, "--emit", help="write the fleet YAML the plan describes, a README and "
                                    "(GPU pools) a Dynamo-style starting point into this directory"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Whole racks of each system that serve every class at its SLO at least power, cost or TCO (a MILP).

    Racks come with N+k spares, under rack and power ceilings; the MILP is solved by HiGHS and the BOM priced with
    the cost model. A replica keeps to whole racks unless --allow-straddle. Exit 3 when no fleet is feasible (with
    the closest feasible target or fleet), 2 for bad input, 0 otherwise."""
    from lpxsim.plan.costs import load_costs
    from lpxsim.plan.fleet import load_demand, parse_demand, size_fleet

    _check_backend(backend)
    costs = load_costs(costs_file, usd_per_kwh=usd_per_kwh, pue=pue, prices=prices_file)
    spec = load_demand(demand)
    flags = {"redundancy": redundancy, "max_total_racks": max_racks, "max_facility_kw": max_facility_kw,
             "objective": objective, "allow_straddle": True if allow_straddle else None}
    if any(v is not None for v in flags.values()):  # flags override the file, validated as the file is
        try:
            spec = parse_demand({**spec.model_dump(), **{k: v for k, v in flags.items() if v is not None}})
        except UserError as e:  # a flag's bad value is named as the flag the user typed
            option = {"max_total_racks": "max_racks"}.get(e.field, e.field)
            raise UserError(option, e.message) from None
    names = None
    if systems is not None:
        names = [s.strip() for s in systems.split(",") if s.strip()]
        if not names:
            raise UserError("systems", "expected a comma-separated list of system names")
    target = _emit_target(emit)
    plan = size_fleet(spec, systems=names, backend=backend, costs=costs)
    d = plan.as_dict()
    for a in d["assignments"]:  # each assignment's speed and throughput carry its system's error band
        a |= answer_bands(a["system"], spec.weights, "sglang", a["tok_s_user"], None, a.get("layout", ""),
                          a["output_tok_s"] / max(1, a["chips"]), spec=a.get("option", "").endswith("+mtp"))
    d |= fleet_capacity_band(d["assignments"], spec.weights)
    if target is not None and plan.feasible:
        from lpxsim.plan.fleet_emit import emit_fleet_plan

        d["emitted"] = emit_fleet_plan(plan, spec, target)
    emit_json(d) if as_json else _print_fleet(d)
    if target is not None and plan.feasible and not as_json:
        out.print(f"wrote {', '.join(d['emitted']['files'])} in {target}")
    if not plan.feasible:
        raise typer.Exit(NO_FEASIBLE_FLEET_EXIT)


@plan_app.command("t8")
def t8_cmd(
    osl: int = tokens_option(1000, "--osl", help="output tokens per request (not published; assumed)"),
    context: int = tokens_option(400_000, "--context", help="input context (the claim: 400K)"),
    target: float = real_option(400.0, "--target-tok-s-user", help="per-user target (the claim: 400)", lo=0, hi=1e6,
                                lo_open=True),
    weights: str = typer.Option("fp8", "--weights", help=WEIGHTS_HELP),
    kv: str = typer.Option("bf16", "--kv", help=KV_HELP),
    new_tokens: int | None = tokens_option(
        None, "--new-tokens", help="input tokens prefilled per request, the rest in the prefix cache (default: all)"),
    mtp: int = count_option(0, "--mtp", help="what-if: speculative draft length k (MTP); 0: off", lo=0,
                            hi=inputs.MTP_MAX, human=False),
    accept: float = real_option(0.0, "--accept", help="per-token draft acceptance rate", lo=0, hi=1,
                                hi_open=True),
    backend: str = typer.Option("auto", "--backend", help=BACKEND_HELP),
    usd_per_kwh: float | None = real_option(None, "--usd-per-kwh", help=USD_PER_KWH_HELP, lo=0, hi=2),
    pue: float | None = real_option(None, "--pue", help=PUE_HELP, lo=1, hi=3),
    costs_file: str | None = typer.Option(None, "--costs", help=COSTS_HELP),
    prices_file: str | None = typer.Option(None, "--prices", help=PRICES_HELP),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """tok/s/MW of LPX, Vera Rubin NVL72 and GB200 NVL72 at the T8 point, next to the vendor's 35x claim."""
    from lpxsim.plan.costs import load_costs, point_economics
    from lpxsim.plan.t8 import t8_report

    _check_backend(backend)
    check_accept_given_with_mtp(accept, mtp)
    costs = load_costs(costs_file, usd_per_kwh=usd_per_kwh, pue=pue, prices=prices_file)

    for name, v in (("osl", osl), ("context", context)):
        if v <= 0:
            raise UserError(name, f"expected a positive number of tokens, got {v}")
    rep = t8_report(osl=osl, context=context, target=target, weights=weights, kv=kv, backend=backend,
                    new_tokens=new_tokens, spec_k=mtp, spec_accept=accept)
    d = rep.as_dict()
    for r in rep.rows:  # economics of each system's row (a system without a capex reports none)
        with contextlib.suppress(UserError):
            d["systems"][r.label].update(point_economics(r.point, costs))
    emit_json(d) if as_json else _print_t8(d)
