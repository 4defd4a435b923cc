"""`lpxsim models`, `model`, `systems`, `system`: what is in the catalog, with sizes and provenance."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from lpxsim.catalog import all_systems, get_model, get_system, model_names
from lpxsim.cli.common import KV_HELP, WEIGHTS_HELP, emit_json, fmt_bytes, fmt_count, keep_identifiers, out
from lpxsim.cli.validate import count_option, tokens_option
from lpxsim.specs.summary import model_row, model_summary, system_row, system_summary


def _kv_str(by_kind: dict[str, float]) -> str:
    return " + ".join(f"{v:,.0f} {k}" for k, v in by_kind.items() if k != "total")


def models_cmd(json_out: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """List catalog models: size, FP8 weight bytes, BF16 KV bytes per token by layer kind."""
    rows = [model_row(get_model(n)) for n in model_names()]
    if json_out:
        emit_json({"models": rows})
        return
    t = Table(title="catalog models (weights FP8 = 1 B/param; KV BF16, K and V stored)")
    for col in (
        "name",
        "type",
        "layers",
        "params total",
        "active",
        "FP8 weights",
        "KV B/token (sum over layers)",
    ):
        t.add_column(
            col, justify="right" if col in ("layers", "params total", "active", "FP8 weights") else "left"
        )
    for r in rows:
        t.add_row(
            r["name"],
            r["type"],
            str(r["layers"]),
            fmt_count(r["params_total"]),
            fmt_count(r["params_active"]),
            fmt_bytes(r["weight_bytes_fp8"]),
            _kv_str(r["kv_bytes_per_token_bf16"]),
        )
    out.print(keep_identifiers(t))


def model_cmd(
    name: str = typer.Argument(..., help="catalog name (e.g. gemma-4-31b) or a config.json path"),
    weights: str = typer.Option("fp8", "--weights", help=WEIGHTS_HELP),
    kv: str = typer.Option("bf16", "--kv", help=KV_HELP),
    kv_layout: str = typer.Option(
        "separate", "--kv-layout", help="separate (V stored on K=V layers, as vLLM) or k-once"
    ),
    context: int = tokens_option(None, "--context", help="context length in tokens (default: the model's maximum)"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """One model: parameters, weight bytes, KV bytes per token and per sequence, decode FLOPs, layer groups."""
    s = model_summary(get_model(name), weights=weights, kv=kv, kv_layout=kv_layout, context=context)
    if json_out:
        emit_json(s)
        return
    _print_model(s)


def _print_model(s: dict[str, Any]) -> None:
    t = Table(title=f"{s['name']} ({s['type']})", show_header=False)
    t.add_column("field")
    t.add_column("value", justify="right")
    t.add_row("layers", f"{s['layers']} ({', '.join(f'{v} {k}' for k, v in s['layer_kinds'].items())})")
    t.add_row(
        "parameters total / active per token",
        f"{fmt_count(s['params_total'])} / {fmt_count(s['params_active'])}",
    )
    t.add_row(f"weights ({s['weights']})", fmt_bytes(s["weight_bytes"]))
    t.add_row(f"KV B/token ({s['kv']}, {s['kv_layout']})", _kv_str(s["kv_bytes_per_token"]))
    t.add_row(f"KV per sequence at {s['context']:,} tokens", fmt_bytes(s["kv_bytes_per_sequence"]))
    t.add_row(f"decode FLOPs per token at {s['context']:,}", fmt_count(s["decode_flops_per_token"]))
    out.print(t)
    g = Table(title="layer groups")
    cols = (
        "kind",
        "count",
        "attention",
        "heads/kv",
        "head_dim",
        "window",
        "ffn",
        "params/layer",
        "KV B/token/layer",
    )
    for col in cols:
        g.add_column(col)
    for r in s["layer_groups"]:
        ffn = f"moe {r['experts']}x top{r['top_k']}" if r["ffn"] == "moe" else "dense"
        g.add_row(
            r["kind"],
            str(r["count"]),
            r["attention"] + (" K=V" if r["k_eq_v"] else ""),
            f"{r['heads']}/{r['kv_heads']}",
            str(r["head_dim"]),
            str(r["window"] or "-"),
            ffn,
            fmt_count(r["params_per_layer"]),
            f"{r['kv_bytes_per_token_per_layer']:,.0f}",
        )
    out.print(g)
    for n in s["notes"]:
        out.print(f"[yellow]note:[/] {n}")


def systems_cmd(json_out: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """List catalog systems: chips per unit, memory, FP8 compute, power (grade U = assumed)."""
    rows = [system_row(s) for s in all_systems()]
    if json_out:
        emit_json({"systems": rows})
        return
    t = Table(title="catalog systems (per rack or node; power grade U = stated assumption)")
    for col in ("name", "title", "chips", "memory", "memory BW", "FP8 (or INT8) peak", "power"):
        t.add_column(col, justify="left" if col in ("name", "title") else "right")
    for r in rows:
        t.add_row(
            r["name"],
            r["title"],
            f"{r['chips_per_unit']} / {r['unit_name']}",
            fmt_bytes(r["memory_bytes_per_unit"]),
            fmt_bytes(r["memory_bw_Bps_per_unit"]) + "/s",
            f"{r['fp8_flops_per_unit'] / 1e15:,.1f} PF",
            f"{r['power_w_per_unit'] / 1e3:,.1f} kW ({r['power_grade']})",
        )
    out.print(keep_identifiers(t))


def system_cmd(
    name: str = typer.Argument(..., help="catalog name or alias (e.g. lpx, vr-nvl72, h200)"),
    topology: str = typer.Option(
        None, "--topology", help="a named topology variant (e.g. trays-32x8 for lpx)"
    ),
    units: int = count_option(1, "--units", help="racks (or nodes) to total chips, memory and power over",
                              hi=100_000, human=False),
    json_out: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """One system: derived per-unit figures and every number with its unit, source and grade."""
    spec = get_system(name)
    if topology:
        spec = spec.with_topology(topology)
    s = system_summary(spec, units=units)
    if json_out:
        emit_json(s)
        return
    d = s["derived"]
    out.print(f"[bold]{s['title']}[/] ({s['name']}; aliases: {', '.join(s['aliases']) or '-'})")
    out.print(
        f"{s['chips_per_unit']} x {s['chip']} per {s['unit_name']}, up to {s['max_units']} {s['unit_name']}s; "
        f"{fmt_bytes(d['memory_bytes_per_unit'])} memory, {fmt_bytes(d['memory_bw_Bps_per_unit'])}/s, "
        f"scale-up {fmt_bytes(d['scale_up_bidir_Bps_line'])}/s bidirectional (line), "
        f"{s['power_w_per_unit'] / 1e3:,.1f} kW ({s['power_grade']})"
    )
    tot = s["totals"]
    if tot["units"] > 1:
        hops = "?" if tot["diameter_hops"] is None else tot["diameter_hops"]
        out.print(
            f"{tot['units']} {s['unit_name']}s: {tot['chips']:,} chips, {fmt_bytes(tot['memory_bytes'])}, "
            f"{tot['power_w'] / 1e3:,.1f} kW, at most {hops} hops between chips"
        )
    if s["published_checks"]:
        c = Table(title="per-unit figures: derived from the chip (used) vs the vendor's table (a check, never an input)")
        for col in ("figure", "used", "derived as", "published", "source", "published/used"):
            c.add_column(col, justify="left" if col in ("figure", "derived as", "source") else "right")
        for r in s["published_checks"]:
            c.add_row(r["figure"], f"{r['used']:.4g}", r["derived_as"], f"{r['published']:.4g}", r["published_source"],
                      f"{r['ratio_published_to_used']:.3f}")
        out.print(c)
    t = Table(title="provenance (P primary, S third party, E derived, U assumed; sources in docs/sources.md)")
    for col in ("path", "value", "unit", "source", "grade", "note"):
        t.add_column(col, justify="right" if col == "value" else "left", overflow="fold")
    for r in s["provenance"]:
        t.add_row(r["path"], f"{r['value']:.6g}", r["unit"], r["source"], r["grade"], r["note"])
    out.print(t)
    for n in s["notes"]:
        out.print(f"[yellow]note:[/] {n}")


def register(app: typer.Typer) -> None:
    """Add the catalog commands to the app."""
    app.command("models")(models_cmd)
    app.command("model")(model_cmd)
    app.command("systems")(systems_cmd)
    app.command("system")(system_cmd)
