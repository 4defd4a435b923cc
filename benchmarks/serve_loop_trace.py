"""`lpxsim serve` with its event loop instrumented: what holds the loop, measured in CPU time as well as wall time.

Runs the ordinary `lpxsim serve` command line (arguments as for `lpxsim serve`) in this process after wrapping
asyncio's loop, and on exit writes a JSON summary to the path in the LPXSIM_LOOP_TRACE environment variable:

* every callback the loop runs (`Handle._run`): wall time and the loop thread's CPU time
  (`time.thread_time`, which does not count time the OS gave to other processes), a histogram, and the
  slowest ones by CPU with what they were (a task's coroutine, or the callback);
* every loop iteration (the callbacks run after one `select`): the time a due timer can wait behind them,
  which is the event-loop lag a server exhibits on an otherwise idle machine (`busy` = iteration minus the
  time spent in `select`);
* every cyclic-GC pause (`gc.callbacks`), by generation.

With LPXSIM_LOOP_PROFILE=P.prof also a cProfile of the serving period (deterministic: CPU per function, not
the OS's scheduling; it slows the server ~2x, so its loop figures are then not the server's). Only the serving
period counts: the figures are reset when the bridge starts (after warm-up).

On a shared machine the end-to-end lag (`lpxsim_event_loop_lag_seconds`) is mostly the OS scheduler's; the CPU
figures here are not, so they say what the server itself costs. `benchmarks/serve_load.py --loop-trace PATH`
starts the server through this script. Not for production: the wrapping costs ~1 us per callback.
"""

from __future__ import annotations

import asyncio
import asyncio.base_events
import asyncio.events
import atexit
import gc
import json
import os
import sys
import time

BOUNDS_S = (1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1)
TOP = 15


class _Dist:
    """Count, total, max and a cumulative histogram of durations (seconds)."""

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0
        self.max = 0.0
        self.over = [0] * len(BOUNDS_S)

    def add(self, dt: float) -> None:
        self.n += 1
        self.total += dt
        if dt > self.max:
            self.max = dt
        for i, b in enumerate(BOUNDS_S):
            if dt > b:
                self.over[i] += 1
            else:
                break

    def summary(self) -> dict:
        return {"count": self.n, "total_s": self.total, "max_s": self.max,
                "over": {f"{b * 1e3:g}ms": k for b, k in zip(BOUNDS_S, self.over, strict=True)}}


callback_cpu, callback_wall = _Dist(), _Dist()
iteration_cpu, iteration_busy = _Dist(), _Dist()
gc_pause = {g: _Dist() for g in range(3)}  # wall time of each collection (it holds the GIL throughout)
gc_pause_cpu = {g: _Dist() for g in range(3)}
slowest: list[tuple[float, float, str]] = []  # (cpu_s, wall_s, what)
_gc_start = [0.0, 0.0]
_serving_since = [0.0]
_iteration: dict[str, list] = {}  # what ran in the current iteration: name -> [callbacks, cpu_s]
slow_iterations: list[tuple[float, int, list]] = []  # (cpu_s, callbacks, the three costliest kinds)
priced_names: list[str] = []  # the first step shapes priced while serving
# backend calls (a miss of the memo's exact-shape table), step shapes priced from scratch (a miss of the GPU
# cost model's bucketed book: a graph lowered and priced) and GC passes, so far
counts = {"backend": 0, "priced": 0, "gc": 0}
slow_causes = {"priced a step shape": 0, "backend call (no new price)": 0, "gc pause": 0, "neither": 0}  # callbacks over SLOW_S of CPU, by cause
SLOW_S = 5e-3


# sum over iterations of (CPU - SLOW_S)+: the time a timer falling due at a random instant would find the loop
# busy for more than SLOW_S more (on an idle machine); over the load's duration, the share of lag samples > SLOW_S
excess = [0.0]
full_sizes: list[int] = []  # objects tracked (not frozen) at each full collection while serving
_profile: list = []  # a cProfile.Profile of the serving period, with LPXSIM_LOOP_PROFILE set


def _reset() -> None:
    """Forget what warm-up did: the figures cover the serving period only (from the bridge's start)."""
    if os.environ.get("LPXSIM_LOOP_PROFILE") and not _profile:
        import cProfile

        _profile.append(cProfile.Profile(time.thread_time))  # CPU, not wall: the OS's preemptions excluded
        _profile[0].enable()
    for d in (callback_cpu, callback_wall, iteration_cpu, iteration_busy, *gc_pause.values(), *gc_pause_cpu.values()):
        d.__init__()
    slowest.clear()
    slow_iterations.clear()
    excess[0] = 0.0
    for k in counts:
        counts[k] = 0
    priced_names.clear()
    for k in slow_causes:
        slow_causes[k] = 0
    _serving_since[0] = time.perf_counter()


def _what(handle, where: bool = True) -> str:
    cb = getattr(handle, "_callback", None)
    task = getattr(cb, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        at = f" at {frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno}" if frame and where else ""
        return f"task {getattr(coro, '__qualname__', coro)}{at}"
    return getattr(cb, "__qualname__", None) or repr(cb)[:80]


def _install() -> None:
    _time_callbacks()
    _time_iterations()
    _watch_gc()
    _reset_when_serving_starts()
    _count_pricing()


def _time_callbacks() -> None:
    run = asyncio.events.Handle._run

    def timed_run(self):
        before = dict(counts)
        c0, w0 = time.thread_time(), time.perf_counter()
        run(self)
        c, w = time.thread_time() - c0, time.perf_counter() - w0
        callback_cpu.add(c)
        callback_wall.add(w)
        kind = _iteration.setdefault(_what(self, where=False), [0, 0.0])
        kind[0] += 1
        kind[1] += c
        if c > SLOW_S:
            cause = ("priced a step shape" if counts["priced"] > before["priced"] else
                     "backend call (no new price)" if counts["backend"] > before["backend"] else
                     "gc pause" if counts["gc"] > before["gc"] else "neither")
            slow_causes[cause] += 1
        if c > 1e-3 and (len(slowest) < TOP or c > slowest[-1][0]):
            slowest.append((c, w, _what(self)))  # a task: where it is suspended now
            slowest.sort(reverse=True)
            del slowest[TOP:]

    asyncio.events.Handle._run = timed_run


def _time_iterations() -> None:
    run_once = asyncio.base_events.BaseEventLoop._run_once

    def timed_run_once(self):
        sel = self._selector
        if not getattr(sel, "_lpx_timed", False):
            select = sel.select

            def timed_select(timeout=None):
                t = time.perf_counter()
                try:
                    return select(timeout)
                finally:
                    sel._lpx_in_select += time.perf_counter() - t

            sel.select = timed_select
            sel._lpx_timed = True
        sel._lpx_in_select = 0.0
        _iteration.clear()
        c0, w0 = time.thread_time(), time.perf_counter()
        run_once(self)
        c = time.thread_time() - c0
        iteration_cpu.add(c)
        excess[0] += max(0.0, c - SLOW_S)
        if c > SLOW_S and (len(slow_iterations) < TOP or c > slow_iterations[-1][0]):
            kinds = sorted(((v[1], v[0], k) for k, v in _iteration.items()), reverse=True)[:3]
            slow_iterations.append((c, sum(v[0] for v in _iteration.values()), kinds))
            slow_iterations.sort(reverse=True, key=lambda x: x[0])
            del slow_iterations[TOP:]
        iteration_busy.add(time.perf_counter() - w0 - sel._lpx_in_select)

    asyncio.base_events.BaseEventLoop._run_once = timed_run_once


def _watch_gc() -> None:
    def on_gc(phase, info):
        counts["gc"] += 1
        if phase == "start" and info["generation"] == 2 and _serving_since[0] and len(full_sizes) < TOP:
            full_sizes.append(len(gc.get_objects()))  # what a full collection walks (frozen objects excluded)
        if phase == "start":
            _gc_start[:] = time.perf_counter(), time.thread_time()
        else:
            gc_pause[info["generation"]].add(time.perf_counter() - _gc_start[0])
            gc_pause_cpu[info["generation"]].add(time.thread_time() - _gc_start[1])

    gc.callbacks.append(on_gc)


def _reset_when_serving_starts() -> None:
    from lpxsim.serve.bridge import Bridge

    start = Bridge.start

    def start_and_reset(self) -> None:
        start(self)
        asyncio.get_running_loop().call_soon(_reset)  # after the callback that started it (settle_gc's collection)

    Bridge.start = start_and_reset


def _count_pricing() -> None:
    import lpxsim.backends.memo as memo

    lookup = memo.MemoStepModel._lookup

    def counted_lookup(self, section, key, compute):
        def counted():
            counts["backend"] += 1
            return compute()

        return lookup(self, section, key, counted)

    memo.MemoStepModel._lookup = counted_lookup

    import lpxsim.gpu.book as book

    get_or_compute = book.Book.get_or_compute

    def counted_get_or_compute(self, name, compute, valid=None):
        def counted():
            counts["priced"] += 1
            if len(priced_names) < TOP:
                priced_names.append(name.split("|", 1)[-1])  # kind|new tokens|batch|context bucket|graphs
            return compute()

        return get_or_compute(self, name, counted, valid)

    book.Book.get_or_compute = counted_get_or_compute


def _write() -> None:
    if _profile:
        _profile[0].disable()
        _profile[0].dump_stats(os.environ["LPXSIM_LOOP_PROFILE"])
    path = os.environ.get("LPXSIM_LOOP_TRACE")
    if not path:
        return
    out = {"serving_s": time.perf_counter() - _serving_since[0], "callback_cpu": callback_cpu.summary(),
           "callback_wall": callback_wall.summary(),
           "iteration_cpu": iteration_cpu.summary(), "iteration_busy_wall": iteration_busy.summary(),
           f"iteration_cpu_beyond_{SLOW_S * 1e3:g}ms_s": excess[0],
           "gc_pause_wall": {str(g): d.summary() for g, d in gc_pause.items()},
           "gc_pause_cpu": {str(g): d.summary() for g, d in gc_pause_cpu.items()},
           "while_serving": dict(counts), "first_shapes_priced_while_serving": priced_names,
           f"callbacks_over_{SLOW_S * 1e3:g}ms_cpu_by_cause": slow_causes,
           "slowest_iterations_by_cpu": [
               {"cpu_ms": c * 1e3, "callbacks": n, "costliest": [
                   {"what": what, "callbacks": k, "cpu_ms": kc * 1e3} for kc, k, what in kinds]}
               for c, n, kinds in slow_iterations],
           "slowest_by_cpu": [{"cpu_ms": c * 1e3, "wall_ms": w * 1e3, "what": what} for c, w, what in slowest],
           "objects_walked_by_full_collections": full_sizes,
           "gc_threshold": gc.get_threshold(), "gc_frozen": gc.get_freeze_count()}
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    _install()
    atexit.register(_write)
    from lpxsim.cli.main import run as cli

    sys.argv = ["lpxsim", *sys.argv[1:]]
    cli()
