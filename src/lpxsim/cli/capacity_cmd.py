"""`lpxsim capacity`: memory breakdown and the concurrency ceiling of a model on a system."""

from __future__ import annotations

import typer
from rich.table import Table

from lpxsim.cli.common import KV_HELP, WEIGHTS_HELP, emit_json, fmt_bytes, out, systems_help
from lpxsim.cli.validate import count_option, real_option, tokens_option
from lpxsim.core import inputs
from lpxsim.engine.query import DEFAULT_OSL
from lpxsim.plan.capacity import CapacityReport, capacity
from lpxsim.plan.session_capacity import AGENT_NEW_TOKENS, AGENT_THINK_S, SessionCeilings


def bytes_table(title: str, rows: list[tuple[str, int]], total_bytes: int, shares: bool) -> Table:
    """Where the bytes go: one row per part and the total; `shares` adds each part's share of the total
    (left out, as "-", where the model does not fit and the parts do not add up to a deployment)."""
    t = Table(title=title)
    t.add_column("where the bytes go")
    t.add_column("bytes", justify="right")
    t.add_column("share", justify="right")
    for label, v in rows:
        t.add_row(label, fmt_bytes(v), f"{100 * v / total_bytes:.1f}%" if shares else "-")
    t.add_row("total memory", fmt_bytes(total_bytes), "100%" if shares else "-", style="bold")
    return t


def session_answer(model: str, system: str, context: int, weights: str, kv: str, kv_layout: str,
                   racks: float | None, chips: int | None, first_isl: int | None, new_tokens: int,
                   turns: int | None, think_s: float, osl: int, turn_s: float | None) -> SessionCeilings:
    """The two ceilings of `capacity --session` (`plan.session_capacity`): with --turn-s or a stated
    deployment, `session_ceilings`; otherwise on the engine's deployment with the engine's turn time."""
    from lpxsim.plan.session_capacity import agent_shape, engine_session_ceilings, session_ceilings

    shape = agent_shape(context, osl, new_tokens, think_s, first_isl, turns)
    if turn_s is None and racks is None and chips is None:
        return engine_session_ceilings(model, system, shape, osl, weights, kv, kv_layout)
    return session_ceilings(model, system, shape, osl, weights, kv, kv_layout, racks=racks, chips=chips,
                            turn_s=turn_s)


def print_sessions(c: SessionCeilings) -> None:
    """The two ceilings and where the bytes go, for people."""
    b = c.breakdown
    engine = c.sessions_held_spread is not None
    kv_row = (f"KV: {c.sessions_held:,} sessions x {fmt_bytes(c.kv_bytes_per_session_max)} (each at its last turn, "
              f"as the engine holds them)" if engine else
              f"KV: {c.sessions_held:,} sessions x {fmt_bytes(c.kv_bytes_per_session_mean)} (mean over "
              f"turns; {fmt_bytes(c.kv_bytes_per_session_max)} at the last)")
    rows = [("weights", b.weights_bytes), ("activations + buffers reserve", b.reserve_bytes), (kv_row, b.kv_bytes),
            ("free (the retention's headroom, and per-chip room no session fills)" if engine else
             "free (less than one more session)", b.free_bytes)]
    out.print(bytes_table(f"{c.model} on {c.system} ({c.chips:,} chips): agent sessions ({c.shape_label()})",
                          rows, b.total_bytes, shares=True))
    if engine:
        out.print(f"sessions held (KV resident, thinking ones included): [bold]{c.sessions_held:,}[/], as estimate, "
                  f"plan and the sweep admit them (each counted at its last turn, {c.session_context_max:,} tokens, "
                  f"with room kept free for the held sessions' growth); pooled memory would fit "
                  f"{c.sessions_held_spread:,} sessions spread over their turns, {c.sessions_held_last_turn:,} all "
                  f"at the last")
    else:
        out.print(f"sessions held (KV resident, thinking ones included): [bold]{c.sessions_held:,}[/] "
                  f"({c.sessions_held_last_turn:,} if every session were at its last turn, "
                  f"{c.session_context_max:,} tokens)")
    if c.duty is None:
        out.print(f"streams decoding: at most [bold]{c.streams_decoding:,}[/] (no turn time)")
    else:
        out.print(f"streams decoding: [bold]{c.streams_decoding_mean:,.1f}[/] on average (a turn takes "
                  f"{c.turn_s:,.2f} s, think {c.think_s:g} s: {100 * c.duty:.1f}% of a session's time; "
                  f"turn time {c.turn_source})")
    out.print(f"without prefix reuse (every turn re-prefilled, nothing held): {c.streams_no_reuse:,} streams of "
              f"{c.session_context_max:,} tokens")
    for n in c.notes:
        out.print(f"[yellow]note:[/] {n}")


def report_dict(r: CapacityReport) -> dict:
    """The JSON shape of a capacity report (also used by the tour)."""
    b = r.breakdown
    return {
        "model": r.model,
        "system": r.system,
        "chip": r.chip,
        "chips": r.chips,
        "units": r.units,
        "unit_name": r.unit_name,
        "context": r.context,
        "weights": r.weights,
        "kv": r.kv,
        "kv_layout": r.kv_layout,
        "weight_bytes": r.weight_bytes,
        "kv_bytes_per_stream": r.kv_bytes_per_stream,
        "chips_for_weights": r.chips_for_weights,
        "units_needed": r.units_needed,
        "max_streams": r.max_streams,
        "power_w": r.power_w,
        "breakdown": {
            "total_bytes": b.total_bytes,
            "weights_bytes": b.weights_bytes,
            "reserve_bytes": b.reserve_bytes,
            "kv_bytes": b.kv_bytes,
            "free_bytes": b.free_bytes,
        },
        "alternatives": [
            {"kv": a.kv, "kv_layout": a.kv_layout, "kv_bytes_per_stream": a.kv_bytes_per_stream, "max_streams": a.max_streams}
            for a in r.alternatives
        ],
        "compiled_streams": r.compiled_streams,
        "compiled": None if r.compiled is None else r.compiled.as_dict(),
        "engine": [e.as_dict() for e in r.engine],
        "notes": r.notes,
    }


def print_report(r: CapacityReport) -> None:
    """A readable breakdown table for people; a model that does not fit says so with the bytes."""
    b = r.breakdown
    fits = r.max_streams >= 1
    rows = [(f"weights ({r.weights})", b.weights_bytes), ("activations + buffers reserve", b.reserve_bytes)]
    if fits:
        rows += [
            (f"KV: {r.max_streams} streams x {fmt_bytes(r.kv_bytes_per_stream)} ({r.kv}, {r.kv_layout})", b.kv_bytes),
            ("free (less than one more stream)", b.free_bytes),
        ]
    out.print(bytes_table(f"{r.model} on {r.chips} x {r.chip} ({r.units:g} {r.unit_name}) at {r.context:,} tokens",
                          rows, b.total_bytes, shares=fits))
    if not fits:
        needs = b.weights_bytes + b.reserve_bytes + r.kv_bytes_per_stream
        out.print(
            f"[bold red]Does not fit:[/] needs {fmt_bytes(needs)} (weights, reserve and one stream of "
            f"{fmt_bytes(r.kv_bytes_per_stream)}), has {fmt_bytes(b.total_bytes)}, {fmt_bytes(needs - b.total_bytes)} short; "
            f"{r.units_needed} {r.unit_name}(s) would hold it"
        )
    if r.chips_for_weights is not None:
        out.print(f"chips for the weights alone: [bold]{r.chips_for_weights}[/] of {r.chips}")
    if fits:
        out.print(
            f"concurrency ceiling, pooled memory: [bold]{r.max_streams}[/] streams of {r.context:,} tokens "
            f"(hardware power {r.power_w / 1e3:,.0f} kW)"
        )
    if r.compiled is not None:
        c = r.compiled
        out.print(f"compiled ceiling: [bold]{c.streams}[/] streams of {r.context:,} tokens"
                  + (f" ({c.layout}, {c.chips_used} chips)" if c.layout else ""))
    for e in r.engine:
        out.print(f"engine ceiling, {e.goal} layout: [bold]{e.streams:,}[/] streams of {r.context:,} tokens on "
                  f"{e.deployment} (what estimate, plan and sweep admit there)")
    alt = Table(title="KV precision and layout alternatives")
    for col in ("kv", "layout", "KV per stream", "max streams"):
        alt.add_column(col)
    for a in r.alternatives:
        alt.add_row(a.kv, a.kv_layout, fmt_bytes(a.kv_bytes_per_stream), str(a.max_streams))
    out.print(alt)
    for n in r.notes:
        if not n.startswith("does not fit"):  # said above, with the bytes (the compiled reason, once, here)
            out.print(f"[yellow]note:[/] {n}")


def register(app: typer.Typer) -> None:
    @app.command("capacity")
    def capacity_cmd(
        model: str = typer.Argument(..., help="catalog name (lpxsim models) or path to a config.json"),
        system: str = typer.Option("lpx", "--system", help=systems_help()),
        context: int = tokens_option(100_000, "--context", help="tokens of context per stream"),
        weights: str = typer.Option("fp8", "--weights", help=WEIGHTS_HELP),
        kv: str = typer.Option("bf16", "--kv", help=KV_HELP),
        kv_layout: str = typer.Option("separate", "--kv-layout", help="separate (V stored on K=V layers, as vLLM) or k-once"),
        racks: float | None = real_option(None, "--racks", help="racks (or HGX nodes) of the system", lo=0,
                                          hi=inputs.RACKS_MAX, lo_open=True),
        chips: int | None = count_option(None, "--chips", help="number of chips (LPUs)", hi=inputs.CHIPS_MAX,
                                         human=False),
        gpus: int | None = count_option(None, "--gpus", help="number of GPUs", hi=inputs.CHIPS_MAX,
                                         human=False),
        compiled: bool = typer.Option(
            True, "--compiled/--no-compiled",
            help="also the deployment's own ceiling beside the pooled one: on LPU systems the compiled layout that "
                 "holds the most streams at exactly this context (compiled_streams), with the reason they differ; "
                 "on GPU systems the engine's at its latency and throughput layouts (engine)"),
        session: bool = typer.Option(
            False, "--session",
            help="agent sessions instead of streams: the two ceilings (sessions held, KV resident through think "
                 "time; streams decoding) of a session whose context grows to CONTEXT (the cap)"),
        first_isl: int | None = tokens_option(None, "--first-isl", help="--session: the first turn's input "
                                              "tokens (default: the engine's default session, whose whole turns "
                                              "of --new-tokens reach --context)"),
        new_tokens: int = tokens_option(AGENT_NEW_TOKENS, "--new-tokens",
                                        help="--session: input tokens each later turn adds"),
        turns: int | None = count_option(None, "--turns", help="--session: turns per session (default: until "
                                         "the context reaches --context)", hi=100_000, human=False),
        think_s: float = real_option(AGENT_THINK_S, "--think-s", help="--session: tool or think seconds between "
                                     "turns", lo=0, hi=86_400),
        osl: int = tokens_option(DEFAULT_OSL, "--osl", help="--session: output tokens per turn"),
        turn_s: float | None = real_option(None, "--turn-s", help="--session: seconds one turn takes (default: "
                                           "the engine's answer on its default deployment)", lo=0, hi=86_400,
                                           lo_open=True),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Where the bytes go, and how many concurrent streams of CONTEXT tokens fit; --session: agent sessions.

        Streams are counted in pooled memory, and on LPU systems at the compiled layout's per-chip ceiling at the
        same context, beside the engine's ceiling. With --session: how many agent sessions the deployment holds and
        how many of them decode at once."""
        from lpxsim.core.errors import UserError

        if chips is not None and gpus is not None:
            raise UserError("gpus", "give either --chips or --gpus")
        if chips is not None or gpus is not None:  # the count named as estimate names it: LPUs' or GPUs'
            from lpxsim.catalog import get_system

            s = get_system(system)
            if gpus is not None and s.is_lpu:
                raise UserError("gpus", f"{s.name} is an LPU system: give --chips or --racks, not --gpus")
            if chips is not None and not (s.is_lpu or s.is_wafer):
                raise UserError("chips", f"{s.name} is a GPU system: give --gpus or --racks, not --chips")
        if not session:  # the session's own options mean nothing without it: refused, not ignored
            given = {"first-isl": first_isl is not None, "turns": turns is not None, "turn-s": turn_s is not None,
                     "new-tokens": new_tokens != AGENT_NEW_TOKENS, "think-s": think_s != AGENT_THINK_S,
                     "osl": osl != DEFAULT_OSL}
            for option, asked in given.items():
                if asked:
                    raise UserError(option.replace("-", "_"), f"--{option} describes an agent session; add --session")
        if session:
            c = session_answer(model, system, context, weights, kv, kv_layout, racks, chips if chips is not None
                               else gpus, first_isl, new_tokens, turns, think_s, osl, turn_s)
            emit_json(c.as_dict()) if as_json else print_sessions(c)
            return
        r = capacity(model, system, context, weights, kv, kv_layout, racks=racks,
                     chips=chips if chips is not None else gpus, compiled=compiled)
        if as_json:
            emit_json(report_dict(r))
        else:
            print_report(r)
