"""The event engine: a heapq loop with typed events and deterministic tie-breaking.

An event is (time, kind, seq, handler, arg). Ties at equal time are broken by
the event kind's priority (a step that ends frees capacity before an arrival
at the same instant is routed) and then by the order events were scheduled.
Handlers are plain callables; stale events (a decode run that an arrival cut
short) carry a version the handler checks, so nothing is ever removed from
the heap. One seeded `numpy.random.Generator` per run lives here.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import numpy as np


class EventKind(IntEnum):
    """Event types, in tie-breaking priority order (lower fires first at equal time)."""

    STEP_END = 0  # a worker's step or fast-forwarded decode run ends
    JOIN = 1  # a prefilled sequence's first token leaves a pipelined worker
    TRANSFER_DONE = 2  # KV or activations arrived over a link
    ARRIVAL = 3  # a request arrives at the router
    TIMER = 4  # anything else (progress, horizon)


class Engine:
    """Discrete-event loop. `schedule` returns nothing; `run` processes events in order."""

    __slots__ = ("now", "_heap", "_seq", "rng", "events", "_stop", "on_progress", "progress_every", "on_event")

    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        self.rng = np.random.default_rng(seed)
        self.events = 0
        self._stop = False
        self.on_progress: Callable[[float], None] | None = None
        self.progress_every = 50_000
        # optional observer called as on_event(time, kind, handler, arg) before each handler (a timeline)
        self.on_event: Callable[[float, int, Callable[[Any], None], Any], None] | None = None

    def schedule(self, time: float, kind: EventKind, handler: Callable[[Any], None], arg: Any = None) -> None:
        """Schedule `handler(arg)` at `time` (never before now)."""
        if time < self.now:
            time = self.now
        self._seq += 1
        heapq.heappush(self._heap, (time, int(kind), self._seq, handler, arg))

    def stop(self) -> None:
        self._stop = True

    def run(self, horizon_s: float = float("inf")) -> float:
        """Process events until none remain, `stop()` is called, or the next one lies past `horizon_s`."""
        heap = self._heap
        pop = heapq.heappop
        every = self.progress_every
        while heap and not self._stop:
            if heap[0][0] > horizon_s:
                break
            time, _kind, _seq, handler, arg = pop(heap)
            self.now = time
            if self.on_event is not None:
                self.on_event(time, _kind, handler, arg)
            handler(arg)
            self.events += 1
            if self.on_progress is not None and self.events % every == 0:
                self.on_progress(time)
        return self.now

    @property
    def pending(self) -> int:
        return len(self._heap)
