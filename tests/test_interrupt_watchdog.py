"""Ctrl-C ends a command within a bounded time even when its main thread cannot act on it
(`lpxsim.cli.interrupt`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

STUCK = """
import sys, time
from lpxsim.cli import interrupt
assert interrupt.arm(grace_s=0.3)
print("armed", flush=True)
while True:  # a main thread that never finishes on Ctrl-C (KeyboardInterrupt swallowed)
    try:
        time.sleep(30)
    except KeyboardInterrupt:
        pass
"""

NORMAL = """
from lpxsim.cli import interrupt
assert interrupt.arm(grace_s=0.3)
assert not interrupt.arm()  # once per process: the wakeup fd is taken
print("done", flush=True)
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def test_a_stuck_main_thread_still_ends_with_130_after_the_grace() -> None:
    p = subprocess.Popen([sys.executable, "-c", STUCK], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=_env(), start_new_session=True)
    try:
        assert p.stdout.readline().strip() == "armed"
        t0 = time.monotonic()
        os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=30)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130
    assert 0.3 <= took < 10.0  # waited the grace, then ended (bound generous for a loaded machine)


def test_it_stays_out_of_the_way_of_a_normal_run() -> None:
    p = subprocess.run([sys.executable, "-c", NORMAL], capture_output=True, text=True, env=_env(), timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "done"
