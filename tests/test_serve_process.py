"""`lpxsim serve` as a process: it says where it listens, stops cleanly on SIGINT/SIGTERM with a stream open (the
open stream ends with an error event, the timeline and the JSON summary are written, exit code 0), and warns
once it listens anywhere but loopback. How fast it stops (target 2 s) is measured by benchmarks/serve_load.py
(docs/benchmarks.md), not asserted here: on a loaded shared machine a wall-clock bound is a coin toss."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from serving_fixtures import fleet, pool

FLEET = fleet(pool(system="vr-nvl72", backend="gpu", workers=1, gpus_per_worker=8), name="one-rubin")


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump(FLEET))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "lpxsim.cli.main", "serve", "--fleet", str(f), "--port", "0",
                             "--time-scale", "50", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True)
    address = None
    for line in proc.stderr:  # bounded: the process prints its address before warming up
        m = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", line)
        if m:
            address = m.group(1)
        if "ready" in line or "failed" in line:
            break
    assert address is not None, "no address printed"
    return proc, address


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_within_2s_with_a_stream_open(tmp_path, sig):
    proc, base = _start(tmp_path, "--json", "--timeline", str(tmp_path / "t.json"))
    try:
        assert httpx.get(f"{base}/health", timeout=5).json()["status"] == "ok"
        with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=10,
                          json={"model": "gemma-4-31b", "messages": [{"role": "user", "content": "hi"}],
                                "max_tokens": 100_000, "stream": True}) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: {")  # streaming when the signal comes
            proc.send_signal(sig)
            rest = [line for line in lines if line]
            proc.wait(timeout=30)  # a bound on the wait, not the measurement
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "ERROR" not in err, err  # the open stream was ended, not torn down
    assert '"code": "shutdown"' in rest[-2] and rest[-1] == "data: [DONE]"  # the stream was ended, not cut
    summary = json.loads(proc.stdout.read())  # --json: one object on stdout
    assert summary["address"] == base and summary["models"] == {"gemma-4-31b": 262144}
    trace = json.loads((tmp_path / "t.json").read_text())  # the timeline written on the way out
    cats = {e.get("cat") for e in trace["traceEvents"]}
    assert {"request", "prefill", "decode"} <= cats


def test_other_address_warns(tmp_path):
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump(FLEET))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    cmd = [sys.executable, "-m", "lpxsim.cli.main", "serve", "--fleet", str(f), "--port", "0", "--host"]
    # 192.0.2.1 (TEST-NET-1) is not on this machine: the bind is refused, naming the host, and that line comes
    # alone (a warning about listening there had come first)
    r = subprocess.run([*cmd, "192.0.2.1"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith("error: host: cannot listen on 192.0.2.1") and r.stderr.count("\n") == 1, r.stderr
    # every address of this machine: bound, so the warning comes before the address line
    proc = subprocess.Popen([*cmd, "0.0.0.0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    seen = []
    try:
        for line in proc.stderr:  # bounded: the process prints its address before warming up
            seen.append(line)
            if "warming up" in line or "error" in line:
                break
    finally:
        proc.kill()
        proc.wait()
    assert "warning: listening on 0.0.0.0, not loopback" in seen[0] and "(no --api-key set)" in seen[0], seen
    assert "warming up" in seen[-1], seen


def test_loopback_by_default():
    from lpxsim.serve.server import ServeOptions, is_loopback

    assert ServeOptions().host == "127.0.0.1"
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("example.com")
