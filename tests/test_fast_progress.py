"""Progress (issues 10, 30): bars at a terminal that name the stage and its counts, taken off the screen before
the answer; one plain line per stage when stderr is piped, with a heartbeat on long stages; silent under --json."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from lpxsim.core import progress

FLEET = Path(__file__).resolve().parents[1] / "examples" / "fleets" / "rubin-alone.yaml"
SIM = ["simulate", "--fleet", str(FLEET), "--trace", "azure-conv", "--duration", "600"]
BAR_MARKS = ("simulating", "lpxsim simulate", "0:00:")


def _run(args: list[str], tty: bool, tmp_path: Path) -> str:
    """stderr of `lpxsim ARGS`, with stderr a pseudo-terminal (tty) or a pipe."""
    env = {**os.environ, "LPXSIM_CACHE": str(tmp_path / "cache"), "COLUMNS": "120", "TERM": "xterm"}
    env.pop(progress.ENV, None)
    cmd = [sys.executable, "-m", "lpxsim.cli.main", *args]
    if not tty:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        return res.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=300) == 0
    return b"".join(chunks).decode(errors="replace")


def test_a_bar_at_a_terminal_lines_when_piped_and_silence_under_json(tmp_path: Path) -> None:
    shown = _run(SIM, tty=True, tmp_path=tmp_path)
    assert any(m in shown for m in BAR_MARKS), shown[-500:]
    piped = _run(SIM, tty=False, tmp_path=tmp_path)
    lines = [ln for ln in piped.splitlines() if ln.strip()]
    assert "lpxsim: simulating" in lines, piped[-500:]  # one line per stage
    assert all(ln.startswith("lpxsim: ") for ln in lines), piped[-500:]
    assert "\x1b" not in piped and "0/?" not in piped  # plain text: no escape codes, no unknown-total counter
    for tty in (True, False):
        err = _run([*SIM, "--json"], tty=tty, tmp_path=tmp_path)
        assert not any(m in err for m in BAR_MARKS) and "lpxsim: " not in err, (tty, err[-500:])


def test_bars_are_no_ops_when_not_allowed(monkeypatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with progress.bar("x", total=3) as t:
        t.advance()
        assert not t.shown
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.allowed()
    progress.quiet()
    try:
        assert not progress.allowed() and os.environ[progress.ENV] == "0"
    finally:
        progress.quiet(False)


def test_bars_nest_into_one_display(monkeypatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setenv(progress.ENV, "1")
    with progress.bar("outer") as outer:
        assert outer.shown
        with progress.bar("inner", total=2) as inner:
            inner.advance(2)
            assert inner._prog is outer._prog and len(outer._prog.tasks) == 2
        assert len(outer._prog.tasks) == 1
    assert progress._live is None


def test_piped_stages_are_lines_with_counts_and_a_heartbeat(monkeypatch, capsys) -> None:
    import time

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.setenv(progress.ENV, "1")
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.2)
    with progress.bar("sweep", total=4) as t:
        t.advance(3)
        with progress.stage("compiling 2/7: m decode x8 tp=4 @10,000"):
            time.sleep(1.0)  # a long stage: its line repeats with the elapsed time
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0] == "lpxsim: sweep 0/4" and lines[1] == "lpxsim: compiling 2/7: m decode x8 tp=4 @10,000"
    beats = [ln for ln in lines[2:] if ln.startswith("lpxsim: compiling 2/7") and ln.endswith(" s")]
    assert beats and len(beats) <= 1.0 / 0.2 + 1  # at most one per HEARTBEAT_S


def test_the_display_leaves_before_the_answer(monkeypatch) -> None:
    """Printing the answer takes the bars off the screen, so the answer's first line is not glued to a
    frame; a bar opened after it stays off until the outermost one closes."""
    from lpxsim.cli import common

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setenv(progress.ENV, "1")
    monkeypatch.setattr(common.out, "_console", None)
    with progress.bar("lpxsim x", line=False) as outer:
        assert outer.shown and progress._live is not None
        with progress.stage("compiling 1: m"):
            assert progress._live.tasks[-1].fields["note"] == "compiling 1: m"
        common.out.print("answer")
        assert progress._live is None
        with progress.bar("later") as later:
            assert not later.shown
    assert progress._live is None and not progress._ended
