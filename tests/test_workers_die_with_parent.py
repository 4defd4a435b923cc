"""Worker processes die with their parent, even when the parent is SIGKILLed (issue 15)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lpxsim.core.errors import UserError

PARENT = """
import concurrent.futures as cf, os, sys, time
from lpxsim.bench.workers import die_with_parent, process_pool

def stall(_):
    time.sleep(300)

def pid(_):
    return os.getpid()

use_prctl = sys.argv[1] == "prctl"
pool = process_pool(2) if use_prctl else cf.ProcessPoolExecutor(
    2, initializer=die_with_parent, initargs=(os.getpid(), False, 0.2))
pids = set()
while len(pids) < 2:  # both workers started and initialised
    pids |= set(pool.map(pid, range(8)))
for _ in range(2):
    pool.submit(stall, None)
print(" ".join(map(str, sorted(pids))), flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("guard", ["prctl", "watchdog"])
def test_workers_end_within_5_s_of_a_sigkilled_parent(guard: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, guard], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = parent.stdout.readline()
        workers = [int(p) for p in line.split()]
        assert len(workers) == 2 and all(_alive(p) for p in workers)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 5.0  # the promise: no worker outlives its parent by more than 5 s
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [p for p in workers if _alive(p)]
    for p in survivors:  # do not leave them behind for the rest of the suite
        os.kill(p, signal.SIGKILL)
    assert not survivors, f"workers {survivors} outlived their SIGKILLed parent by 5 s ({guard})"


def test_worker_counts_are_capped_at_4x_cores() -> None:
    from lpxsim.bench.sweep import make_executor
    from lpxsim.core.inputs import jobs_max

    with pytest.raises(UserError, match=r"workers: expected an integer in 1\.\."), make_executor(
            "process", workers=jobs_max() + 1):
        pass
    with pytest.raises(UserError, match="workers"), make_executor("thread", workers=0):
        pass
