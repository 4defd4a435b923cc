"""Progress that says what it does: rich bars at a terminal, one plain line per stage when piped.

At a terminal (stderr a TTY) a bar shows its label, counts where known ("sweep 12/40") and the stage
now running ("compiling 3: gemma-4-31b decode x8 tp=16,stages=16 @10,000"). Bars nest: a bar opened while
another is shown becomes one more line of the same display, and leaves it when done. The display is
transient, and it is taken off the screen before the command prints its answer (`end_display`), so
nothing is glued to the output.

When stderr is piped, each stage is one line on stderr ("lpxsim: compiling 3: ..."), and a stage that
runs long repeats itself with its elapsed time at most every HEARTBEAT_S seconds, so a log never goes
silent for minutes. `--json` (and `quiet()`, which also sets LPXSIM_PROGRESS=0 for worker processes)
silences both. Everything is a no-op, and rich.progress is never imported, when progress is off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ENV = "LPXSIM_PROGRESS"
HEARTBEAT_S = 10.0  # a long stage repeats its line at most this often when piped
_quiet = False
_live: Any = None  # the rich Progress on screen, if any
_ended = False  # the answer is being printed: no bar until the outermost one closes


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


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stderr
        return False


def enabled() -> bool:
    """Whether progress may be reported at all (nobody asked for quiet)."""
    return not (_quiet or os.environ.get(ENV, "1") == "0")


def allowed() -> bool:
    """Whether a bar may be drawn now: stderr is a terminal and nobody asked for quiet."""
    return enabled() and _stderr_is_tty()


def plain() -> bool:
    """Whether stages are reported as plain lines: progress is on and stderr is not a terminal."""
    return enabled() and not _stderr_is_tty()


class _Lines:
    """Piped progress: one line per stage on stderr, and a heartbeat line for a stage that runs long."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stack: list[list[Any]] = []  # [text, started, counts] of the stages now running, innermost last
        self._last = 0.0
        self._thread: threading.Thread | None = None

    def _write(self, text: str) -> None:
        try:
            sys.stderr.write(f"lpxsim: {text}\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed pipe: progress is never worth an error
            pass
        self._last = time.monotonic()

    def push(self, text: str, counts: str = "") -> list[Any]:
        entry = [text, time.monotonic(), counts]
        with self._lock:
            self._stack.append(entry)
            self._write(f"{text} {counts}".rstrip())
        self._start_heartbeat()
        return entry

    def pop(self, entry: list[Any]) -> None:
        with self._lock:
            if entry in self._stack:
                self._stack.remove(entry)

    def relabel(self, entry: list[Any], text: str | None = None, counts: str | None = None) -> None:
        """A new description is a new stage (one line); new counts only feed the heartbeat."""
        with self._lock:
            if text is not None and text != entry[0]:
                entry[0], entry[1] = text, time.monotonic()
                if counts is not None:
                    entry[2] = counts
                self._write(f"{text} {entry[2]}".rstrip())
            elif counts is not None:
                entry[2] = counts

    def _start_heartbeat(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._beat, name="lpxsim-progress", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while True:
            time.sleep(min(1.0, HEARTBEAT_S / 4))
            with self._lock:
                if not self._stack:
                    self._thread = None
                    return
                if time.monotonic() - self._last >= HEARTBEAT_S:
                    text, started, counts = self._stack[-1]
                    head = f"{text} {counts}".rstrip().removesuffix("...").rstrip()
                    self._write(f"{head} ... {time.monotonic() - started:,.0f} s")


_lines = _Lines()


class Ticker:
    """What a bar's owner moves: `advance(n)` steps, `update(...)` the label or a field."""

    def __init__(self, prog: Any = None, task: Any = None, line: list[Any] | None = None,
                 total: float | None = None) -> None:
        self._prog, self._task, self._line, self._total, self._done = prog, task, line, total, 0.0

    @property
    def shown(self) -> bool:
        return self._prog is not None

    def _counts(self) -> str:
        return f"{self._done:,.0f}/{self._total:,.0f}" if self._total is not None else ""

    def advance(self, n: float = 1) -> None:
        self._done += n
        if self._prog is not None:
            self._prog.advance(self._task, n)
        elif self._line is not None:
            _lines.relabel(self._line, counts=self._counts())

    def update(self, description: str | None = None, **fields: Any) -> None:
        if self._prog is not None:
            self._prog.update(self._task, description=description, **fields)
        elif self._line is not None:
            _lines.relabel(self._line, text=description, counts=self._counts())


def _columns() -> tuple:
    """Spinner, label, a bar and "done/total" only when the total is known, the stage note, elapsed time."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class _KnownTotal(ProgressColumn):
        def __init__(self, inner: ProgressColumn) -> None:
            super().__init__()
            self.inner = inner

        def render(self, task: Any) -> Any:
            return Text("") if task.total is None else self.inner.render(task)

    return (SpinnerColumn(), TextColumn("{task.description}"), _KnownTotal(BarColumn()),
            _KnownTotal(MofNCompleteColumn()), TextColumn("{task.fields[note]}"), TimeElapsedColumn())


@contextmanager
def bar(label: str, total: float | None = None, note: str = "", line: bool = True) -> Iterator[Ticker]:
    """A bar (a spinner when `total` is None) labelled `label` while the block runs; removed after it.
    Piped, it is a stage line (unless `line` is False: the CLI's whole-command spinner says nothing new)."""
    global _live, _ended
    if not allowed() or _ended:
        if line and plain():
            entry = _lines.push(label, f"0/{total:,.0f}" if total is not None else "")
            try:
                yield Ticker(line=entry, total=total)
            finally:
                _lines.pop(entry)
        else:
            yield Ticker(total=total)
        return
    if _live is not None:  # nested: one more line of the display already on screen
        outer = _live
        task = outer.add_task(label, total=total, note=note)
        try:
            yield Ticker(outer, task, total=total)
        finally:
            outer.remove_task(task)
        return
    from rich.console import Console
    from rich.progress import Progress

    prog = Progress(*_columns(), console=Console(stderr=True), transient=True)
    with prog:
        _live = prog
        task = prog.add_task(label, total=total, note=note)
        try:
            yield Ticker(prog, task, total=total)
        finally:
            _live, _ended = None, False


@contextmanager
def stage(text: str) -> Iterator[None]:
    """A named stage of the work ("compiling 3: gemma-4-31b decode x8 ... @10,000"): at a terminal the note
    of the innermost bar on screen while it runs; piped, one line (and heartbeats while it runs long)."""
    if _live is not None and _live.tasks:
        task = _live.tasks[-1]
        before = task.fields.get("note", "")
        _live.update(task.id, note=text)
        try:
            yield
        finally:
            if task.id in _live.task_ids:
                _live.update(task.id, note=before)
        return
    if plain():
        entry = _lines.push(text)
        try:
            yield
        finally:
            _lines.pop(entry)
        return
    yield


def end_display() -> None:
    """Take the bars off the screen for good before a command prints its answer (nothing glued to it);
    the work is done by then, and bars opened later stay off."""
    global _live, _ended
    if _live is not None:
        _live.stop()  # transient: the last frame is erased, the cursor at the start of a clean line
        _live, _ended = None, True
