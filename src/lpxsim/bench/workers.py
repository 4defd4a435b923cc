"""Worker processes that die with their parent, even when the parent is killed with SIGKILL.

A `concurrent.futures.ProcessPoolExecutor` worker whose parent is gone keeps computing its task (and
then blocks) for minutes. Each worker started here arms two independent guards at start-up:

1. Linux: `prctl(PR_SET_PDEATHSIG, SIGKILL)` (through ctypes): the kernel kills the worker the moment
   the thread that forked it exits. The pools here are created and first used from the caller's thread,
   which is the main thread of every lpxsim command.
2. Everywhere: a daemon thread that polls the parent pid every `WATCHDOG_S` seconds and ends the
   worker when it changed (the parent died and the worker was re-parented).

Workers write nothing the parent has not asked for (sweep points are saved by the parent), so ending
them abruptly loses only the unfinished task, which a resumed run recomputes. That is also how Ctrl-C
ends a sweep at once: workers ignore SIGINT (the terminal sends it to the whole process group; the
parent alone decides), and a pool left by an exception (KeyboardInterrupt included) cancels what has
not started and terminates its workers instead of waiting for the running tasks (`DyingPool`).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
WATCHDOG_S = 1.0  # parent-pid poll period of the fallback guard (well inside the 5 s promise)


def _arm_pdeathsig() -> bool:
    """Ask the kernel to SIGKILL this process when its parent thread exits (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int, period_s: float) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)  # the parent is gone: nobody will read our result
        time.sleep(period_s)


def die_with_parent(parent_pid: int, use_prctl: bool = True, period_s: float = WATCHDOG_S) -> None:
    """Worker initializer: arm the death signal and the parent watchdog, ignore Ctrl-C (module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if use_prctl:
        _arm_pdeathsig()
    if os.getppid() != parent_pid:  # the parent died before the guard was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid, period_s), name="lpxsim-parent-watchdog",
                     daemon=True).start()


TERMINATE_GRACE_S = 0.5  # after SIGTERM, how long a worker may take before SIGKILL


class DyingPool(cf.ProcessPoolExecutor):
    """A process pool that, left by an exception (Ctrl-C's KeyboardInterrupt included), cancels the
    tasks not started and terminates its workers at once; left normally, it waits as usual."""

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            return super().__exit__(exc_type, exc, tb)
        self.terminate()
        return False

    def terminate(self) -> None:
        """Cancel pending tasks and end every worker now (SIGTERM, then SIGKILL after a short grace)."""
        procs = list((getattr(self, "_processes", None) or {}).values())
        self.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                p.terminate()
        deadline = time.monotonic() + TERMINATE_GRACE_S
        for p in procs:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                p.join(max(0.0, deadline - time.monotonic()))
                if p.is_alive():
                    p.kill()
                    p.join(TERMINATE_GRACE_S)


def process_pool(max_workers: int | None = None) -> DyingPool:
    """A process pool whose workers die with this process (at most 4 x CPU cores of them), and end at
    once when the pool is left by an exception such as Ctrl-C."""
    from lpxsim.core import inputs

    if max_workers is not None:
        inputs.check_jobs(max_workers, "workers")
    return DyingPool(max_workers=max_workers, initializer=die_with_parent, initargs=(os.getpid(),))
