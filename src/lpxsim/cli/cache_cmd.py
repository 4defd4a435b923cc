"""`lpxsim cache info|clear`: where the step-cost cache lives, how big it is, and emptying it."""

from __future__ import annotations

import typer

from lpxsim.cli.common import emit_json, fmt_bytes, out

cache_app = typer.Typer(help="The on-disk step-cost cache ($LPXSIM_CACHE moves it; --no-cache bypasses it).",
                        no_args_is_help=True)


@cache_app.command("info")
def info_cmd(as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """Where the cache is, whether it is used, and how many entries and bytes it holds."""
    from lpxsim.core.cache import step_cache

    d = step_cache().info()
    if as_json:
        emit_json(d)
        return
    from rich.table import Table

    t = Table(title="lpxsim step-cost cache", show_header=False)
    t.add_row("path", d["path"])
    t.add_row("enabled", "yes" if d["enabled"] else "no (--no-cache or LPXSIM_NO_CACHE)")
    t.add_row("entries", f"{d['entries']:,}")
    t.add_row("size", fmt_bytes(d["bytes"]))
    from pathlib import Path

    t.add_row("marked", "yes (lpxsim's folder: `cache clear` may empty it)" if d["marked"] else
              "not created yet" if not Path(d["path"]).exists() else "no marker: `cache clear` refuses this folder")
    out.print(t)


@cache_app.command("clear")
def clear_cmd(as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """Delete lpxsim's cached entries (recomputed when next needed); only in a folder lpxsim created."""
    from lpxsim.core.cache import step_cache

    c = step_cache()
    removed = c.clear()
    if as_json:
        emit_json({"path": str(c.root), "removed": removed})
    else:
        out.print(f"removed {removed:,} entries from {c.root}")


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app, name="cache")
