"""KV occupancy and resident sessions over time, per pool: what the report draws beside the percentiles.

The simulation offers a sample at every arrival and completion (`offer`); one is
taken when `every_s` simulated seconds have passed since the last, so the
sampler adds no events (the clock never runs past the last real one). Past
`max_points` samples the series keeps every other point and the interval
doubles, so a long run costs at most ~max_points samples per pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lpxsim.serving.sim import Simulation


class OccupancyTimeline:
    """Samples of (time, KV bytes used, sessions resident, sequences running) per pool."""

    def __init__(self, sim: Simulation, every_s: float = 0.25, max_points: int = 1024) -> None:
        self.sim = sim
        self.every_s = every_s
        self.next_s = 0.0
        self.max_points = max_points
        self.t_s: list[float] = []
        self.kv_used: dict[str, list[float]] = {}
        self.resident: dict[str, list[int]] = {}
        self.running: dict[str, list[int]] = {}

    def offer(self, now: float) -> None:
        """Take a sample if one is due."""
        if now >= self.next_s:
            self.record(now)
            if len(self.t_s) >= self.max_points:
                self._thin()
            self.next_s = now + self.every_s

    def record(self, now: float) -> None:
        """One sample of every pool with workers."""
        if self.t_s and self.t_s[-1] == now:  # a later look at the same instant replaces the earlier one
            self.t_s.pop()
            for series in (self.kv_used, self.resident, self.running):
                for v in series.values():
                    v.pop()
        self.t_s.append(now)
        for name, p in self.sim.pools.items():
            if not p.workers:
                continue
            self.kv_used.setdefault(name, []).append(sum(w.kv.used for w in p.workers))
            self.resident.setdefault(name, []).append(self.sim.resident_count(name).n)
            self.running.setdefault(name, []).append(sum(w.n_dec + len(w.prefilling) for w in p.workers))

    def _thin(self) -> None:
        self.t_s = self.t_s[::2]
        for series in (self.kv_used, self.resident, self.running):
            for k in series:
                series[k] = series[k][::2]
        self.every_s *= 2
