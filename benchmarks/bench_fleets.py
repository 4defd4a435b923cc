"""Every fleet in examples/fleets/ replaying the Mooncake conversation trace, cold cache then warm (issue 10).

Each run is a fresh process (`lpxsim simulate FLEET --trace mooncake-conversation --json`): the first with
an empty step cache ($LPXSIM_CACHE in a temporary folder), the second with what the first left there.
Reported per fleet: CPU seconds (user + sys of the child), wall seconds, peak RSS.

Run: python benchmarks/bench_fleets.py [--timeout 600] [FLEET ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GNU_TIME = "/usr/bin/time"


def run_once(fleet: Path, cache: Path, timeout: float) -> tuple[str, float, float, float]:
    """(status, CPU s, wall s, peak RSS MB) of one `lpxsim simulate` process (GNU time reports its RSS)."""
    env = {**os.environ, "LPXSIM_CACHE": str(cache)}
    env.pop("LPXSIM_NO_CACHE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rss = float("nan")
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "lpxsim.cli.main", "simulate", "--fleet", str(fleet),
               "--trace", "mooncake-conversation", "--out", out, "--json"]
        if Path(GNU_TIME).exists():
            cmd = [GNU_TIME, "-f", "%M", "-o", f"{out}/rss", *cmd]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
            status = "ok" if res.returncode == 0 else f"exit {res.returncode}: {res.stderr.strip()[-120:]}"
            if Path(f"{out}/rss").exists():
                rss = float(Path(f"{out}/rss").read_text().split()[-1]) / 1024
        except subprocess.TimeoutExpired:
            status = f"timeout {timeout:.0f} s"
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return status, cpu, wall, rss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("fleets", nargs="*", type=Path)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    fleets = args.fleets or sorted((ROOT / "examples" / "fleets").glob("*.yaml"))
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    for f in fleets:
        with tempfile.TemporaryDirectory() as cache:
            for label in ("cold", "warm"):
                status, cpu, wall, rss = run_once(f, Path(cache), args.timeout)
                print(f"{f.stem:24s} {label}: {cpu:7.1f} s CPU {wall:7.1f} s wall  peak RSS {rss:6.0f} MB  {status}",
                      flush=True)


if __name__ == "__main__":
    main()
