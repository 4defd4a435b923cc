"""The serving timeline as a Chrome trace-event file (opens in ui.perfetto.dev or chrome://tracing).

A `TimelineRecorder` watches the event engine (`Engine.on_event`, called before each handler) and
keeps, per worker, every step as it ends: a fast-forwarded decode run, or a mixed step with its
prefill chunks; KV transfers between pools as they land; evictions from a worker's prefix cache as
counters. `write_timeline` adds each request's lifetime (queued + prefill up to its first token, then
decode) and writes the file atomically. Tracks: one process per pool, one thread per worker; KV
transfers on their link's track; requests packed into lanes of a "requests" process. Times are
simulated microseconds. The recorder is bounded (`max_events`): past it, steps are counted, not kept.
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Any

import pandas as pd

from lpxsim.core.outputs import atomic_write_text
from lpxsim.serving.worker import Worker

_US = 1e6


class TimelineRecorder:
    """Collects trace events from a running simulation (attach with `attach(sim)`)."""

    def __init__(self, max_events: int = 2_000_000) -> None:
        self.events: list[dict[str, Any]] = []
        self.max_events = max_events
        self.dropped = 0
        self._pids: dict[str, int] = {}
        self._evictions: dict[int, int] = {}
        self._on_transfer = None

    def attach(self, sim) -> TimelineRecorder:
        """Record `sim` (a `Simulation`) from now on."""
        self._on_transfer = sim._on_transfer
        for p in sim.pools.values():
            self._pid(p.name)
            for w in p.workers:
                self._meta("thread_name", self._pids[p.name], w.index, f"{p.name}[{w.index}]")
        sim.engine.on_event = self
        return self

    def __call__(self, time: float, kind: int, handler, arg) -> None:
        owner = getattr(handler, "__self__", None)
        if isinstance(owner, Worker) and handler.__func__ is Worker._on_step_end:
            if arg == owner.version:  # stale events (a run cut short) end nothing
                self._step(owner, time)
        elif self._on_transfer is not None and handler == self._on_transfer:
            self._transfer(time, arg)

    def flush(self, sim, now: float) -> None:
        """Record the steps still running at `now` (a run stopped before its end, e.g. a server stopping)."""
        for w in sim.workers():
            if w.busy and w.run_start < now:
                self._step(w, now, running=True)

    # --- what is recorded ------------------------------------------------------------------------------
    def _step(self, w: Worker, end: float, running: bool = False) -> None:
        chunks = w.run_chunks or []
        prefill = sum(t for _, t in chunks)
        name = (f"prefill {prefill} tok x{len(chunks)} + decode {w.n_dec}" if chunks
                else f"decode {w.n_dec} x {w.run_k} steps") + (" (running when the trace ended)" if running else "")
        self._add({"name": name, "cat": "prefill" if chunks else "decode", "ph": "X", "pid": self._pid(w.pool),
                   "tid": w.index, "ts": w.run_start * _US, "dur": (end - w.run_start) * _US,
                   "args": {"decode_sequences": w.n_dec, "steps": w.run_k, "step_s": w.run_dt,
                            "prefill_tokens": prefill, "prefill_requests": [r.rid for r, _ in chunks],
                            "kv_used_bytes": w.kv.used}})
        ev = w.kv.evictions
        before = self._evictions.get(id(w), 0)
        if ev != before:
            self._evictions[id(w)] = ev
            self._add({"name": "evictions", "ph": "C", "pid": self._pid(w.pool), "tid": w.index, "ts": end * _US,
                       "args": {f"{w.pool}[{w.index}]": ev}})

    def _transfer(self, done: float, arg) -> None:
        req, src, dst = arg[:3]
        start = done - req.handoff_s
        self._add({"name": f"KV r{req.rid}", "cat": "kv_transfer", "ph": "X", "pid": self._pid("links"),
                   "tid": 0, "ts": start * _US, "dur": req.handoff_s * _US,
                   "args": {"from": f"{src.pool}[{src.index}]", "to": f"{dst.pool}[{dst.index}]",
                            "context_tokens": req.isl + req.generated}})

    # --- plumbing ----------------------------------------------------------------------------------------
    def _add(self, ev: dict) -> None:
        if len(self.events) >= self.max_events:
            self.dropped += 1
            return
        self.events.append(ev)

    def _pid(self, name: str) -> int:
        pid = self._pids.get(name)
        if pid is None:
            pid = self._pids[name] = len(self._pids) + 1
            self._meta("process_name", pid, 0, name)
        return pid

    def _meta(self, kind: str, pid: int, tid: int, name: str) -> None:
        self.events.append({"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})


def request_events(requests: pd.DataFrame, pid: int) -> list[dict[str, Any]]:
    """Each request's lifetime (a `request_frame`), packed into lanes reused once their request has finished."""
    out: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                                  "args": {"name": "requests"}}]
    free: list[int] = []
    busy: list[tuple[float, int]] = []  # (end, lane)
    lanes = 0
    for r in requests.sort_values(["arrival_s", "request_id"]).itertuples():
        end = r.finish_s if r.finish_s == r.finish_s else r.arrival_s
        while busy and busy[0][0] <= r.arrival_s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else lanes
        lanes = max(lanes, lane + 1)
        heapq.heappush(busy, (end, lane))
        args = {"isl": int(r.isl), "osl": int(r.osl), "cached_tokens": int(r.cached_tokens), "status": r.status,
                "worker": f"{r.pool}[{r.worker}]", "preemptions": int(r.preemptions)}
        first = r.first_token_s if r.first_token_s == r.first_token_s else end
        out.append({"name": f"r{r.request_id} queue+prefill", "cat": "request", "ph": "X", "pid": pid,
                    "tid": lane, "ts": r.arrival_s * _US, "dur": max(0.0, first - r.arrival_s) * _US, "args": args})
        if end > first:
            out.append({"name": f"r{r.request_id} decode", "cat": "request", "ph": "X", "pid": pid, "tid": lane,
                        "ts": first * _US, "dur": (end - first) * _US, "args": args})
    return out


def write_timeline(path: str | Path, recorder: TimelineRecorder, requests: pd.DataFrame) -> str:
    """Write the Chrome trace (workers' steps, transfers, evictions, request lifetimes) to `path` atomically."""
    path = Path(path)
    events = recorder.events + request_events(requests, pid=len(recorder._pids) + 1)
    doc = {"traceEvents": events, "displayTimeUnit": "ms",
           "otherData": {"time_unit": "simulated microseconds", "steps_not_recorded": recorder.dropped}}
    # one atomic writer for every output: never over a device, a FIFO or a folder
    atomic_write_text(path, json.dumps(doc, separators=(",", ":")), field="timeline")
    return str(path)
