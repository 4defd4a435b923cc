"""Progress bars for a person at a terminal: rich, on stderr, and silent otherwise.

A bar shows only when stderr is a terminal and nothing asked for quiet (`--json`
owns stdout and its reader wants no noise; `quiet()` also sets LPXSIM_PROGRESS=0
so worker processes stay quiet too). Bars nest: a bar opened while another is
shown becomes one more line of the same display (the CLI's whole-command spinner
holds a sweep's bar), and leaves it when done. Everything here is a no-op, and
rich.progress is never imported, when bars are off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ENV = "LPXSIM_PROGRESS"
_quiet = False
_live: Any = None  # the rich Progress on screen, if any


def quiet(flag: bool = True) -> None:
    """Silence (or allow again) every bar of this process and of processes it starts."""
    global _quiet
    _quiet = flag
    os.environ[ENV] = "0" if flag else "1"


@contextmanager
def silenced(flag: bool = True) -> Iterator[None]:
    """Quiet while the block runs (when `flag`), then the state before it again: an in-process caller
    (a test, a notebook) that runs one `--json` command keeps its bars for the next."""
    global _quiet
    before, env = _quiet, os.environ.get(ENV)
    if flag:
        quiet()
    try:
        yield
    finally:
        _quiet = before
        if env is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = env


def allowed() -> bool:
    """Whether a bar may be drawn now: stderr is a terminal and nobody asked for quiet."""
    if _quiet or os.environ.get(ENV, "1") == "0":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stderr
        return False


class Ticker:
    """What a bar's owner moves: `advance(n)` steps, `update(...)` the label or a field."""

    def __init__(self, prog: Any = None, task: Any = None) -> None:
        self._prog, self._task = prog, task

    @property
    def shown(self) -> bool:
        return self._prog is not None

    def advance(self, n: float = 1) -> None:
        if self._prog is not None:
            self._prog.advance(self._task, n)

    def update(self, description: str | None = None, **fields: Any) -> None:
        if self._prog is not None:
            self._prog.update(self._task, description=description, **fields)


@contextmanager
def bar(label: str, total: float | None = None, note: str = "") -> Iterator[Ticker]:
    """A bar (a spinner when `total` is None) labelled `label` while the block runs; removed after it."""
    global _live
    if not allowed():
        yield Ticker()
        return
    if _live is not None:  # nested: one more line of the display already on screen
        task = _live.add_task(label, total=total, note=note)
        try:
            yield Ticker(_live, task)
        finally:
            _live.remove_task(task)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    prog = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[note]}"), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True)
    with prog:
        _live = prog
        task = prog.add_task(label, total=total, note=note)
        try:
            yield Ticker(prog, task)
        finally:
            _live = None
