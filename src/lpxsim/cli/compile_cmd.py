"""`lpxsim compile`: lay a model out on LPUs, schedule it clock by clock, verify, and time it."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from lpxsim.cli.common import KV_HELP, WEIGHTS_HELP, emit_json, err, fmt_bytes, out
from lpxsim.cli.validate import count_option, real_option, tokens_option
from lpxsim.core import inputs
from lpxsim.core.errors import UserError


def compile_dict(res: Any, context: int, concurrency: int) -> dict[str, Any]:
    """The JSON face of a CompileResult."""
    p, t, lay = res.program, res.timing, res.layout
    mem = res.memory
    stages = []
    for st in p.layout.stage_list:
        if st.replica:
            continue
        used = [mem[c] for c in st.chips if c in mem]
        stages.append({
            "stage": st.index, "layers": list(st.layers), "chips": [st.chips[0], st.chips[-1]], "tp": len(st.chips),
            "embed": st.embed, "head": st.head,
            "max_chip_weights_bytes": max((u["weights"] for u in used), default=0),
            "max_chip_kv_bytes": max((u["kv"] for u in used), default=0),
            "max_chip_used_bytes": max((u["used"] for u in used), default=0),
        })
    batch = t.batch
    return {
        "model": p.model, "system": p.system, "context": context, "concurrency": concurrency,
        "weights": p.weights, "kv": p.kv, "kv_layout": p.kv_layout, "layout": lay.describe(),
        "verified": res.report.ok, "errors": res.report.errors[:20], "link_conflicts": res.report.link_conflicts,
        "chips_used": lay.chips, "chips_available": p.meta.get("chips_available"),
        "tok_s_user": t.tok_s_user, "tok_s_total": t.tok_s_user * batch * lay.replicas,
        "latency_s": t.latency_s, "interval_s": t.interval_s, "batch_per_replica": batch,
        "sram_bw_util": t.sram_bw_util, "mxm_util": t.mxm_util, "link_util": t.link_util,
        "instructions": len(p.instructions), "transfers": len(p.transfers), "links_used": len(p.links),
        "clock_hz": p.clock_hz, "fitted": p.meta.get("fitted", []), "compile_s": res.compile_s,
        "compile_cpu_s": res.compile_cpu_s,
        "breakdown": {k: round(v, 4) for k, v in t.breakdown_us.items()},  # µs per mechanism; sums to the step
        "fitted_share": t.fitted_share,
        "stages": stages,
    }


def _print(d: dict[str, Any]) -> None:
    tab = Table(title=f"{d['model']} on {d['system']}: layout {d['layout']} ({d['chips_used']} chips)")
    for col in ("stage", "layers", "chips", "tp", "weights/chip", "KV/chip", "SRAM used/chip"):
        tab.add_column(col, justify="right")
    for s in d["stages"]:
        lo, hi = s["layers"]
        extra = (" +embed" if s["embed"] else "") + (" +head" if s["head"] else "")
        tab.add_row(str(s["stage"]), f"{lo}-{hi - 1}{extra}", f"{s['chips'][0]}-{s['chips'][1]}", str(s["tp"]),
                    fmt_bytes(s["max_chip_weights_bytes"]), fmt_bytes(s["max_chip_kv_bytes"]),
                    fmt_bytes(s["max_chip_used_bytes"]))
    out.print(tab)
    ok = "[green]verified[/green]" if d["verified"] else "[red]FAILED verification[/red]"
    out.print(
        f"{ok}: {d['instructions']:,} instructions, {d['transfers']:,} transfers on {d['links_used']:,} links, "
        f"{d['link_conflicts']} link conflicts\n"
        f"context {d['context']:,}, concurrency {d['concurrency']}: [bold]{d['tok_s_user']:,.0f} tok/s per user[/bold], "
        f"{d['tok_s_total']:,.0f} tok/s total (one micro-batch per replica in flight)\n"
        f"latency {d['latency_s'] * 1e6:,.1f} us per step, interval {d['interval_s'] * 1e6:,.1f} us; "
        f"SRAM BW {d['sram_bw_util']:.1%}, MXM {d['mxm_util']:.2%}, links {d['link_util']:.2%}; "
        f"compiled in {d['compile_s']:.2f} s ({d['compile_cpu_s']:.2f} s CPU)"
    )
    if d["breakdown"]:
        parts = sorted(d["breakdown"].items(), key=lambda kv: -kv[1])
        out.print("critical path (us): " + ", ".join(f"{k} {v:,.1f}" for k, v in parts)
                  + f"; fitted share {d['fitted_share']:.1%}")
    for e in d["errors"]:
        err.print(f"  {e}")


def register(app: typer.Typer) -> None:
    @app.command("compile")
    def compile_cmd(
        model: str = typer.Argument(..., help="catalog name or path to a config.json"),
        system: str = typer.Option("lpx", "--system", help="an LPU system: lpx, groq-v1"),
        racks: float | None = real_option(None, "--racks", help="racks (default: the fewest that place the model)",
                                          lo=0, hi=inputs.RACKS_MAX, lo_open=True),
        chips: int | None = count_option(None, "--chips", help="chips (instead of --racks)", hi=inputs.CHIPS_MAX,
                                         human=False),
        context: int = tokens_option(8192, "--context", help="context length (tokens already in the KV cache)"),
        concurrency: int = count_option(1, "--concurrency", help="concurrent streams the layout must hold"),
        weights: str = typer.Option("fp8", "--weights", help=WEIGHTS_HELP),
        kv: str = typer.Option("bf16", "--kv", help=KV_HELP),
        kv_layout: str = typer.Option("separate", "--kv-layout", help="separate or k-once"),
        layout: str | None = typer.Option(None, "--layout", help="force a layout, e.g. tp=16,stages=8,kvsplit=4,kvspread=0"),
        topology: str | None = typer.Option(None, "--topology", help="topology variant, e.g. trays-32x8"),
        chip_sram: float | None = real_option(None, "--chip-sram-bytes", help="override SRAM per chip (tests)",
                                              lo=1, hi=1e12),
        trace: str | None = typer.Option(None, "--trace", help="write a Chrome trace-event JSON here ('-': stdout)"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Partition, place, route and schedule one decode step; verify it; print the plan and tok/s."""
        from lpxsim.lpu import compile_program
        from lpxsim.lpu.trace import write_trace

        if trace is not None:
            if trace == "-" and as_json:
                raise UserError("trace", "'-' (stdout) cannot be used with --json: stdout holds the JSON object")
            inputs.check_output_file(trace, "trace", allow_stdout=True, reads={"model": model})  # before the compile, not after
        res = compile_program(model, system, racks=racks, chips=chips, context=context, concurrency=concurrency,
                              weights=weights, kv=kv, kv_layout=kv_layout, layout=layout,
                              chip_sram_bytes=int(chip_sram) if chip_sram else None, variant=topology)
        d = compile_dict(res, context, concurrency)
        if trace is not None:
            d["trace"] = str(write_trace(res.program, trace))
            if trace != "-":
                err.print(f"trace written to {d['trace']} (open in ui.perfetto.dev)")
        if as_json:
            emit_json(d)
        elif trace != "-":  # with '-', stdout holds the trace alone
            _print(d)
        if not res.report.ok:
            raise typer.Exit(1)

