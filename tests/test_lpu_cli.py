"""`lpxsim compile`: one JSON object with the required keys, a valid trace, one-line errors with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "emulate"
TINY = str(DATA / "llama_tiny.json")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lpxsim.cli.main", *args], capture_output=True, text=True,
                          timeout=300)


def test_compile_json_and_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    p = run("compile", TINY, "--chips", "8", "--context", "32", "--concurrency", "2", "--weights", "bf16",
            "--layout", "tp=4,stages=2,kvsplit=2", "--chip-sram-bytes", "400000", "--trace", str(trace), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)  # exactly one JSON object on stdout
    for key in ("verified", "link_conflicts", "chips_used", "tok_s_user", "latency_s", "interval_s", "compile_s"):
        assert key in d
    assert d["verified"] is True and d["link_conflicts"] == 0 and d["chips_used"] == 8
    assert d["context"] == 32 and d["concurrency"] == 2
    # issue 13: µs per mechanism on the critical path, summing to the step, and the fitted residual's share
    assert sum(d["breakdown"].values()) == pytest.approx(d["latency_s"] * 1e6, rel=1e-3)
    assert d["fitted_share"] == pytest.approx(d["breakdown"].get("fitted_overhead", 0.0) / (d["latency_s"] * 1e6),
                                              rel=1e-3)
    ev = json.loads(trace.read_text())["traceEvents"]
    assert {e["ph"] for e in ev} >= {"X", "M"}


def test_compile_table() -> None:
    p = run("compile", TINY, "--chips", "4", "--context", "16", "--weights", "bf16")
    assert p.returncode == 0, p.stderr
    assert "tok/s per user" in p.stdout and "verified" in p.stdout


@pytest.mark.parametrize("args,field", [
    (("gemma-4-31b", "--chips", "16"), "model"),
    (("gemma-4-31b", "--layout", "tp=16,stages=2"), "layout"),
    (("gemma-4-31b", "--chips", "0"), "chips"),
    (("gemma-4-31b", "--chips", "100000"), "chips"),
    (("gemma-4-31b", "--layout", "tp=3"), "layout"),
])
def test_bad_input_one_line(args: tuple[str, ...], field: str) -> None:
    p = run("compile", *args, "--json")
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:")
