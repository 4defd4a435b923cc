"""The bridge between the wall clock and the fleet's event simulation.

Simulated time is wall time since start divided by the time scale. One asyncio task (the pump) keeps
the simulation at the wall clock: it advances the event loop to "now", reads how many tokens each
request has produced (`OnlineSimulation.poll`), wakes the streams that gained tokens, and sleeps until
the next simulated token or event is due (or a new request arrives). A request is submitted at the
simulated "now" of its arrival, so concurrent clients batch, queue and share KV as in `simulate`.
Everything runs on the server's event loop: step models are built and their shapes priced before the
server reports ready (`warm`), so the loop does not stop for compiles.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field

from lpxsim.serving.online import OnlineSimulation
from lpxsim.serving.request import DONE, INCOMPLETE, Request

WAKE_SLICE = 8  # streams woken per event-loop iteration (see wake_in_slices)


@dataclass(eq=False)
class Stream:
    """One request as its HTTP handler sees it: tokens produced so far, and an event set when that changes."""

    req: Request
    arrived_wall: float
    tokens: int = 0
    event: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def available(self) -> int:
        """Tokens that may be sent now: all of them once the request has completed (the simulation may
        finish it while advancing for another request, before the pump has polled)."""
        return self.req.osl if self.req.status == DONE else self.tokens

    @property
    def final(self) -> bool:
        return self.req.status != INCOMPLETE

    @property
    def completed(self) -> bool:
        return self.req.status == DONE


class Bridge:
    """Runs an `OnlineSimulation` against the wall clock, `time_scale` wall seconds per simulated second."""

    def __init__(self, online: OnlineSimulation, time_scale: float) -> None:
        self.online = online
        self.scale = float(time_scale)
        self.streams: dict[int, Stream] = {}
        self._t0 = time.monotonic()
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Future | None = None
        self._closed = False

    # --- clock ----------------------------------------------------------------------------------------
    def sim_now(self) -> float:
        return (time.monotonic() - self._t0) / self.scale

    def wall_of(self, sim_s: float) -> float:
        """The `time.monotonic()` reading at which simulated time `sim_s` falls."""
        return self._t0 + sim_s * self.scale

    # --- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        self._t0 = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._pump(), name="lpxsim-sim-pump")

    async def stop(self) -> None:
        self._closed = True
        self._kick()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # --- requests ---------------------------------------------------------------------------------------
    def submit(self, isl: int, osl: int, **ids) -> Stream:
        """A request arriving now (routed at once); its stream is woken as its tokens appear."""
        self.online.advance(self.sim_now())
        req = self.online.submit(isl, osl, **ids)
        s = Stream(req, time.monotonic())
        self.streams[req.rid] = s
        self._kick()
        return s

    def close(self, s: Stream) -> None:
        """The handler is done with `s` (answered, or its client went away): an unfinished request is aborted."""
        if self.streams.pop(s.req.rid, None) is None:
            return
        if not s.final:
            self.online.advance(self.sim_now())
            self.online.abort(s.req)
        self.online.forget(s.req)
        self._kick()

    # --- the pump ----------------------------------------------------------------------------------------
    def _kick(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def pump_once(self) -> tuple[list[Stream], float]:
        """Advance to now; returns the streams that gained tokens or finished (their counts updated, not yet
        woken) and the next simulated due time."""
        online = self.online
        online.advance(self.sim_now())
        counts, nxt = online.poll()
        streams = self.streams
        gained = []
        for rid, n in counts.items():
            s = streams.get(rid)
            if s is None:
                continue
            if n != s.tokens or s.final:
                s.tokens = n
                gained.append(s)
        return gained, nxt

    async def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            self._wake = loop.create_future()  # made first: a request arriving while streams wake kicks it
            gained, nxt = self.pump_once()
            await wake_in_slices(gained)
            handle = None
            if math.isfinite(nxt):
                delay = self.wall_of(nxt) - time.monotonic()
                if delay <= 0:
                    await asyncio.sleep(0)  # let the streams run before the next step
                    continue
                handle = loop.call_later(delay, self._kick)
            await self._wake  # already done if a request arrived or left meanwhile: pump again at once
            if handle is not None:
                handle.cancel()


async def wake_in_slices(streams: list[Stream], per_slice: int = WAKE_SLICE) -> None:
    """Wake `streams`, `per_slice` per event-loop iteration.

    Every stream of a decode batch gains its token at the same simulated instant. Woken at once, their
    handlers (each formats and writes one SSE chunk, ~40 us of CPU; ~300 us for a stream's first or last
    step: response start, or release and the next request's parse) would all run in the loop's next
    iteration: 256 of them hold the loop for 10-80 ms, and every timer and new request waits behind them.
    In slices the loop runs other ready work between slices; the last stream's token leaves when it would
    have anyway (the work is the same)."""
    for i in range(0, len(streams), per_slice):
        if i:
            await asyncio.sleep(0)  # the slice just woken runs in the next iteration; we resume after it
        for s in streams[i:i + per_slice]:
            s.event.set()


async def watch_loop_lag(observe, period_s: float = 0.01) -> None:
    """Sleep `period_s` again and again and report how late each wake-up was (the event loop's lag)."""
    loop = asyncio.get_running_loop()
    while True:
        t = loop.time()
        await asyncio.sleep(period_s)
        observe(max(0.0, loop.time() - t - period_s))
