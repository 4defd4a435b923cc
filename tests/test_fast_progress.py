"""Progress bars (issue 10): drawn at a terminal, silent under --json or when stderr is not a terminal."""

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


def test_a_bar_at_a_terminal_and_silence_when_piped_or_json(tmp_path: Path) -> None:
    shown = _run(SIM, tty=True, tmp_path=tmp_path)
    assert any(m in shown for m in BAR_MARKS), shown[-500:]
    for args, tty in ((SIM, False), ([*SIM, "--json"], True), ([*SIM, "--json"], False)):
        err = _run(args, tty=tty, tmp_path=tmp_path)
        assert not any(m in err for m in BAR_MARKS), (args, tty, err[-500:])


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
