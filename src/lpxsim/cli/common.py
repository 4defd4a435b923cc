"""Shared CLI plumbing: JSON vs table output, one-line user errors, stderr console."""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Any

from lpxsim.specs.precision import PRECISIONS

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def keep_identifiers(t: Table, names: int = 1) -> Table:
    """Never cut the first `names` columns (the identifiers a user types next); let every column fold.

    Rich shrinks a too-wide table by ending cells in an ellipsis, which cut catalog names
    ("gb200-n…") and, when piped, numbers. Identifier columns get `no_wrap` (rich then shrinks the
    other columns), every other column folds onto a second line instead of losing characters.
    """
    for i, col in enumerate(t.columns):
        if i < names:
            col.no_wrap = True
        col.overflow = "fold"
    t._lpxsim_kept = True  # type: ignore[attr-defined]
    return t


def _table_console(stderr: bool) -> Console:
    """A console that fits every table to its width without splitting a name or a number
    (`lpxsim.cli.table_fit`): at a narrow or piped width, low-priority columns drop, then one record per block."""
    from rich.console import Console
    from rich.table import Table

    from lpxsim.cli.table_fit import fit

    class _TableConsole(Console):
        def print(self, *objects: Any, **kw: Any) -> None:  # type: ignore[override]
            if not stderr:  # the answer: the progress display leaves first, so nothing is glued to it
                from lpxsim.core.progress import end_display

                end_display()
            super().print(*(fit(self, o) if isinstance(o, Table) else o for o in objects), **kw)

    return _TableConsole(stderr=stderr)


class _LazyConsole:
    """A `_table_console` built on first use: a `--json` answer never imports rich (~30 ms of start-up)."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            self._console = _table_console(self._stderr)
        return getattr(self._console, name)


# Logs, progress and tables for people go to stderr when --json owns stdout.
out: Console = _LazyConsole()  # type: ignore[assignment]
err: Console = _LazyConsole(stderr=True)  # type: ignore[assignment]

# --help lists the real choices (every precision the specs accept, fp16 included).
WEIGHTS_HELP = "weight precision: " + ", ".join(PRECISIONS)
KV_HELP = "KV precision: " + ", ".join(PRECISIONS)
PRICES_HELP = ("price list YAML (price_ladder: tiers of usd_per_mtok_output, min_tok_s_user, systems, source): "
               "replaces the shipped price source; revenue is reported only where a price applies")


def systems_help(extra: str = "") -> str:
    """--system help naming every catalog system (aliases: `lpxsim systems`)."""
    from lpxsim.catalog import system_names

    return f"catalog system: {', '.join(system_names())}{extra} (aliases: lpxsim system NAME)"


def table(title: str, names: tuple[str, ...] | list[str], values: tuple[str, ...] | list[str] = (), **kw: Any) -> Table:
    """A table whose identifier columns (`names`, first) are never cut and whose other columns fold.

    Identifiers (model and system names, layouts) are what a user types next, so they keep their full
    width (`no_wrap`); numbers and notes wrap (`overflow="fold"`) instead of ending in an ellipsis, also
    when the output is piped to a narrow or unknown width.
    """
    from rich.table import Table

    t = Table(title=title, **kw)
    for col in names:
        t.add_column(col, no_wrap=True, overflow="fold")
    for col in values:
        t.add_column(col, justify="right", overflow="fold")
    t._lpxsim_kept = True  # type: ignore[attr-defined]
    return t


def _clean(obj: Any) -> Any:
    """Make an object JSON-safe: dataclasses/pydantic to dicts, NaN/inf to None, numpy to Python."""
    if hasattr(obj, "model_dump"):
        return _clean(obj.model_dump())
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return _clean(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return _clean(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def emit_json(obj: Any) -> None:
    """Print exactly one JSON object on stdout."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def fmt_bytes(b: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:,.2f} {unit}"
    return f"{b:,.0f} B"


def fmt_count(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f}{unit}"
    return f"{n:,.0f}"


def _usd(v: float | None) -> str:
    return "-" if v is None else f"${v:,.2f}"


def economics_line(d: dict) -> str:
    """A result's economics in three lines (keys of `lpxsim.plan.costs.economics`): the headline cost per
    output token, revenue only with its price source named as an assumption, the allocation rule as such."""
    if d.get("usd_per_mtok_output") is not None:
        per_in = (f"; the same cost is {_usd(d['usd_per_mtok_input'])} per Mtok in"
                  if d.get("usd_per_mtok_input") is not None else "")
        cost = (f"{_usd(d['usd_per_mtok_output'])}/Mtok out (the whole cost, {_usd(d['cost_usd_per_hour'])}/h, "
                f"over the output tokens at {d.get('utilisation', 0):.0%} utilisation{per_in})")
    else:
        cost = "cost: no capex in the cost model"
    head = (f"economics: {cost}; facility {d['facility_kw']:,.1f} kW, {d['tok_s_per_mw_facility']:,.0f} output "
            "tok/s per facility MW")
    if d.get("revenue_usd_per_hour") is None:
        money = "revenue: no price source for this hardware (give one with --prices FILE)"
    else:
        margin = (f", margin {_usd(d['margin_usd_per_hour'])}/h" if d.get("margin_usd_per_hour") is not None else "")
        money = (f"revenue {_usd(d['revenue_usd_per_hour'])}/h at {_usd(d['price_usd_per_mtok_output'])}/Mtok out"
                 f"{margin} ({d.get('price_source') or 'assumption: price'})")
    lines = [head, f"  {money}"]
    if d.get("alloc_usd_per_mtok_output") is not None:
        lines.append(f"  {d['alloc_rule']}: {_usd(d['alloc_usd_per_mtok_output'])}/Mtok out + "
                     f"{_usd(d['alloc_usd_per_mtok_input'])}/Mtok in")
    return "\n".join(lines)


# tok/s/chip's band covers tok/s, tok/s/MW and the cost per token too: each is it times, or a fixed cost over it
BAND_METRIC_WORDS = {"ttft": "TTFT", "tok_s_per_chip": "throughput (tok/s, per chip, per MW) and $/Mtok"}


def band_line(d: dict) -> str:
    """'error band: tok/s/user 900-1,100 (±12% (measured-gpu, 489 points); TTFT ±28%; throughput (tok/s, per chip,
    per MW) ±10%; ...)' for the band keys of an answer (`engine.bands.figure_bands`), or '' without one. A figure
    its path has no validation of is named as such: silence would read as a figure without error."""
    if not d.get("band"):
        return ""
    speed = (f"tok/s/user {d['tok_s_user_low']:,.0f}-{d['tok_s_user_high']:,.0f} " if "tok_s_user_low" in d
             else "tok/s/user ")
    others = "".join(f"; {words} ±{d[f'{m}_band_pct']:.0f}%" for m, words in BAND_METRIC_WORDS.items()
                     if f"{m}_band_pct" in d)
    bare = [BAND_METRIC_WORDS[m] for m in d.get("unvalidated", "").split(",") if m in BAND_METRIC_WORDS]
    if bare:
        others += f"; {', '.join(bare)}: no validation on the {d['cost_path']} path"
    return f"error band: {speed}({d['band']}{others}; lpxsim validate shows the points)"
