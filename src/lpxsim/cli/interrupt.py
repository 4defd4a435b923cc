"""Ctrl-C ends a command within a bounded time, even when its main thread cannot act on it.

Python runs a SIGINT handler only between bytecodes of the main thread, so a main thread inside a long C
call, or blocked joining a process pool's threads at exit, leaves Ctrl-C unanswered (a sweep on a loaded CI
machine once stayed alive past 60 s after SIGINT). The C-level handler still writes the signal's number to
the wakeup fd at once; a daemon thread reading it gives the main thread `grace_s` to finish the usual way
("aborted", exit 130) and otherwise ends the process itself with 130. Everything lpxsim keeps is written
whole (a temporary file and a rename), and pool workers die with their parent (`bench.workers`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

GRACE_S = 3.0  # the main thread's time to exit on its own after Ctrl-C (the sweep's promise is 2 s)
EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C


def arm(grace_s: float = GRACE_S) -> bool:
    """Start the watchdog (from the main thread; once per process). False where the platform or the caller's
    thread cannot have one, or another wakeup fd is already set (an event loop's)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r)
        os.close(w)
        return False
    if previous != -1:  # someone else's wakeup fd: give it back and stay out of the way
        signal.set_wakeup_fd(previous)
        os.close(r)
        os.close(w)
        return False
    threading.Thread(target=_watch, args=(r, grace_s), name="lpxsim-interrupt-watchdog", daemon=True).start()
    return True


def _watch(r: int, grace_s: float) -> None:
    while True:
        try:
            data = os.read(r, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            time.sleep(grace_s)
            if os.isatty(2):  # a terminal write does not block; a full pipe could
                with contextlib.suppress(OSError):
                    os.write(2, b"lpxsim: interrupted; exiting now\n")
            os._exit(EXIT_CODE)
