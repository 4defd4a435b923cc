"""Issue 30 item 1: tables never split a name or a number, at any width, piped or not.

Every table-printing command runs twice in-process with its output piped: at 400 columns (nothing needs
wrapping) and at 80. Every word of the wide output (names, numbers with their separators, units) must
appear whole in the narrow one; a word folded across lines ("vr-nvl" / "72", "72," / "960") would not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analytic_double import use_double
from fuzz_harness import check, invoke
from lpxsim.cli import common

ROOT = Path(__file__).resolve().parent.parent
TINY = str(ROOT / "tests" / "data" / "emulate" / "llama_tiny.json")
_BOX = re.compile(r"[│┃┏┓┗┛┡┩└┘┌┐╇╋┳┻━─═╭╮╰╯┼├┤┬┴]")

COMMANDS = [
    ["models"],
    ["systems"],
    ["model", TINY, "--context", "32K"],
    ["model", "gemma-4-31b"],
    ["system", "lpx", "--units", "2"],
    ["system", "vr-nvl72"],
    ["capacity", TINY, "--context", "100k"],
    ["capacity", "kimi-k2", "--system", "h200-hgx", "--context", "100K"],
    ["compile", TINY, "--chips", "4", "--context", "1K"],
    ["estimate", TINY, "--chips", "4", "--isl", "1K", "--osl", "100", "--concurrency", "2"],
    ["estimate", TINY, "--system", "h200-hgx", "--gpus", "1", "--isl", "2k"],
    ["plan", "point", TINY, "--system", "h200-hgx", "--context", "2K", "--target-tok-s-user", "50"],
    ["simulate", "--fleet", "rubin-alone", "--model", TINY, "--trace", "tracelab"],
    ["bench", "aa", "llama-3.1-8b", "--system", "h200-hgx", "--requests", "2", "--contexts", "1K"],
    ["emulate", "--config", str(ROOT / "tests" / "data" / "emulate" / "llama_tiny.json"), "--chips", "4",
     "--steps", "2"],
    ["modes", "gemma-4-31b", "--contexts", "2000", "--loads", "light", "--osl", "32"],
    ["sweep", "llama-3.1-8b", "--systems", "h200-hgx", "--contexts", "1000", "--concurrency", "1,2", "--osl", "64",
     "--out", "SWEEP_OUT"],
    ["plan", "fleet", "--demand", str(ROOT / "tests" / "data" / "plans" / "small-demand.yaml")],
    ["cache", "info"],
]


_WALL_TIME = re.compile(r"compiled in [\d.,]+ s \([\d.,]+ s CPU\)")  # differs between two runs


def _words(text: str) -> set[str]:
    """The words of a command's output: box drawing removed, a block's "label" and a table's "label:" alike."""
    flat = _WALL_TIME.sub("", " ".join(_BOX.sub(" ", text).split()))
    return {w.rstrip(":") for w in flat.split()} - {""}


def _at_width(monkeypatch, columns: int, argv: list[str]) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(common.out, "_console", None)  # the lazy consoles read COLUMNS when first used
    monkeypatch.setattr(common.err, "_console", None)
    o = invoke(argv, time_limit_s=300)
    check(o)
    assert o.code == 0, o.stderr
    return o.stdout + o.stderr


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]).replace(str(ROOT), ""))
def test_no_word_is_split_at_80_columns(monkeypatch, tmp_path, argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)  # a short output path: a path longer than the width is not a table's to keep
    argv = ["sw" if a == "SWEEP_OUT" else a for a in argv]
    if argv[0] == "modes":
        use_double(monkeypatch)  # the serving modes on the analytic test double (a full run is docs/validation.md)
    wide = _at_width(monkeypatch, 400, argv)
    narrow = _at_width(monkeypatch, 80, argv)
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
    assert "…" not in narrow, narrow
    missing = _words(wide) - _words(narrow)
    assert not missing, f"split or lost at 80 columns: {sorted(missing)[:20]}\n{narrow}"


def test_systems_piped_at_80_columns_keeps_every_name_and_number(monkeypatch) -> None:
    """The check anyone can run: `COLUMNS=80 lpxsim systems | cat`."""
    from lpxsim.catalog import all_systems

    text = _at_width(monkeypatch, 80, ["systems"])
    lines = text.splitlines()
    for s in all_systems():
        assert any(re.search(rf"(^|[\s│]){re.escape(s.name)}(\s|│|$)", ln) for ln in lines), s.name
    assert "38,400.00 TB/s" in text and "1,584.00 TB/s" in text  # numbers with their units, on one line


def test_fit_keeps_a_wide_table_and_wraps_text_at_spaces_only() -> None:
    """Between the two extremes: text columns wrap at spaces, name and number columns keep their width."""
    from rich.console import Console

    from lpxsim.cli.table_fit import fit

    t = common.table("t", ["name"], ["tok/s per user"])
    t.add_column("note")
    t.add_row("gb200-nvl72", "1,234,567.8", "a long note that wraps at its spaces only " * 2)
    console = Console(width=60, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(fit(console, t))
    text = console.export_text()
    assert "gb200-nvl72" in text and "1,234,567.8" in text
    assert "┃" in text or "│" in text  # still a table, not blocks
    assert max(len(ln) for ln in text.splitlines()) <= 60
