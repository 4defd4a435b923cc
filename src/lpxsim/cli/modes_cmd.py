"""`lpxsim modes`: each heterogeneous serving mode against Rubin alone and LPX alone (T9)."""

from __future__ import annotations

import math

import typer

from lpxsim.cli.common import band_line, emit_json, out
from lpxsim.cli.session_opts import session_option
from lpxsim.cli.validate import seed_option, tokens_option
from lpxsim.engine.query import DEFAULT_OSL

COLUMNS = (("mode", "mode", "{}"), ("context", "context", "{:,}"), ("users", "users", "{:,}"),
           ("tok_s_user_p50", "tok/s/user P50", "{:,.0f}"), ("tok_s_user_band_pct", "band", "±{:.0f}%"),
           ("tok_s_user_p10", "P10", "{:,.0f}"),
           ("ttft_p90_s", "TTFT P90 s", "{:,.2f}"), ("tok_s_per_mw", "tok/s per MW", "{:,.0f}"),
           ("speed_vs_rubin", "vs Rubin", "{:.2f}x"), ("speed_vs_lpx", "vs LPX", "{:.2f}x"),
           ("hardware", "hardware, power", "{}"))


def _cell(v, fmt: str, key: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if key == "hardware":  # racks and chips: "1 Rubin rack (32 of 72 GPUs) + 1 LPX rack, 186 kW"
        from lpxsim.report.hardware_text import NBSP, hardware_words

        return hardware_words(str(v)).replace(NBSP, " ")
    return fmt.format(v)


def register(app: typer.Typer) -> None:
    @app.command("modes")
    def modes_cmd(
        model: str = typer.Argument(..., help="catalog model name or config.json path"),
        contexts: str = typer.Option("10000,32000,100000", "--contexts", help="comma-separated prompt lengths"),
        loads: str = typer.Option("light,heavy", "--loads",
                                  help="comma-separated loads: light (8 users), heavy (64 users) or a user count"),
        osl: int = tokens_option(DEFAULT_OSL, "--osl", help="output tokens per request"),
        modes: str = typer.Option("", "--modes", help="comma-separated subset of the built-in modes (default all)"),
        session: str = session_option(),
        seed: int = seed_option(0),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    ) -> None:
        """Compare PD, AFD and the external drafter with Rubin alone and LPX alone, on the detailed backends.

        Closed loop. Default: each user is an agent session that has reached CONTEXT tokens (each turn adds new
        tokens to its cached context, then a tool call); --session none: each user sends a CONTEXT-token prompt
        prefilled whole, reads OSL tokens, sends the next."""
        from lpxsim.cli.bench_cmd import parse_int_list
        from lpxsim.core.errors import UserError
        from lpxsim.engine.query import session_for
        from lpxsim.plan.modes import (
            SOLVER_NOTE,
            ModesQuery,
            compare_modes,
            ordered,
            parse_loads,
            workload_note,
        )

        if osl <= 0:
            raise UserError("osl", f"expected a positive number of output tokens, got {osl}")
        session_for(session, 1, 1)  # an unknown name: one line, before any work
        q = ModesQuery(model=model, contexts=tuple(parse_int_list(contexts, "contexts")),
                       loads=parse_loads(loads), osl=osl,
                       modes=tuple(m.strip() for m in modes.split(",") if m.strip()), seed=seed, session=session)
        df = ordered(compare_modes(q))
        note = workload_note(session)
        if as_json:
            emit_json({"model": model, "osl": osl, "session": session, "backends": "detailed (GPU model, compiled LPX)",
                       "note": note, "solvers": SOLVER_NOTE, "rows": df.to_dict(orient="records")})
            return
        from rich.table import Table

        what = "no prefix reuse" if session == "none" else "agentic sessions (later turns)"
        t = Table(title=f"{model}: serving modes, closed loop, OSL {osl:,}, {what}")
        for _, label, _ in COLUMNS:
            t.add_column(label, justify="left" if label in ("mode", "hardware, power") else "right",
                         overflow="fold")
        for r in df.to_dict(orient="records"):
            t.add_row(*(_cell(r.get(k), fmt, k) for k, _, fmt in COLUMNS))
        t.caption = f"{note}. {SOLVER_NOTE}"
        out.print(t)
        for mode, r in df.drop_duplicates("mode").set_index("mode").iterrows():  # each mode's band, with its path
            # the row's own keys, without the interval around one row's figure: the table gives each row's ±
            keys = {k: v for k, v in r.to_dict().items() if not (isinstance(v, float) and v != v)
                    and not k.endswith(("_low", "_high"))}
            if isinstance(keys.get("band"), str):
                out.print(f"- {mode}: {band_line(keys)}")
