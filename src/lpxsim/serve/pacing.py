"""Spreading bursts of work over event-loop iterations, so that no iteration holds the loop for long.

asyncio runs, in one iteration, every callback that became ready before it began. When 256 clients finish
together they send their next requests together, and their handlers (routing, validation, tokenizing,
submitting to the simulation: ~0.1-0.5 ms each) would all run in one iteration, every timer and stream
waiting behind them. A `Turnstile` lets a fixed number of waiting tasks through per iteration, in arrival
order; the work is the same, interleaved with everything else the loop has to do.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Turnstile:
    """At most `per_iteration` tasks pass `turn()` per event-loop iteration (FIFO)."""

    def __init__(self, per_iteration: int) -> None:
        if per_iteration < 1:
            raise ValueError("per_iteration must be at least 1")
        self.per_iteration = per_iteration
        self._waiting: deque[asyncio.Future] = deque()
        self._scheduled = False

    async def turn(self) -> None:
        """Wait for this task's turn (at least until the loop's next iteration)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._waiting.append(fut)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._release)
        await fut

    def _release(self) -> None:
        passed = 0
        while self._waiting and passed < self.per_iteration:
            fut = self._waiting.popleft()
            if not fut.done():  # a waiter cancelled meanwhile (its client left) takes no place
                fut.set_result(None)
                passed += 1
        # the tasks just let through run in the next iteration; the next group is let through after them
        if self._waiting:
            asyncio.get_running_loop().call_soon(self._release)
        else:
            self._scheduled = False
