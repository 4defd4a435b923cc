"""A bounded load on `lpxsim serve`: 256 concurrent streaming clients on 127.0.0.1 for 10 s (the 60 s run is
benchmarks/serve_load.py, figures in docs/benchmarks.md). No errors, every stream gets exactly its tokens,
nothing is left running afterwards, and the server's memory stays bounded. The event-loop lag is reported
by the benchmark, not asserted here (no timed assertions in tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "serve_load.py"


def test_256_streaming_clients_for_10s():
    r = subprocess.run([sys.executable, str(BENCH), "--clients", "256", "--seconds", "10", "--max-tokens", "8",
                        "--json"], capture_output=True, text=True, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["errors"] == 0, out["first_errors"]
    assert out["completed"] >= 256  # every client finished at least one stream
    assert out["tokens"] == 8 * out["completed"]
    assert out["running_after"] == 0 and out["in_flight_after"] == 0  # nothing left in the simulation
    assert out["bounded_memory"], out
