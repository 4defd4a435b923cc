"""The serving simulator: event engine, workers, topologies, router, workloads, metrics.

Python API:

    from lpxsim.serving import simulate
    result = simulate("examples/fleets/rubin-alone.yaml", "examples/workloads/chat.yaml", seed=1)
    result.requests   # pandas DataFrame, one row per request
    result.summary    # dict: percentiles, goodput, fleet tok/s, tok/s per MW, concurrency, context

Costs come only from each pool's StepModel (`lpxsim.step.protocol`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lpxsim.lpu.gcpause import gc_paused
from lpxsim.serving.config import FleetConfig, load_fleet
from lpxsim.serving.workload import WorkloadConfig, load_workload

if TYPE_CHECKING:
    from lpxsim.serving.metrics import SimResult
    from lpxsim.serving.sim import Simulation

__all__ = ["FleetConfig", "SimResult", "Simulation", "WorkloadConfig", "load_fleet", "load_workload", "simulate"]

# The event engine and the metrics (pandas) load on first use, so a light submodule (e.g. the retention
# defaults in `serving.config`, which the engine reads) costs a planning command no heavy import.
_LAZY = {"SimResult": "lpxsim.serving.metrics", "Simulation": "lpxsim.serving.sim"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@gc_paused  # the run and its summary (a frame of every request) allocate only what they keep
def simulate(
    fleet: str | Path | dict | FleetConfig,
    workload: str | Path | dict | WorkloadConfig,
    seed: int = 0,
    duration_s: float | None = None,
    horizon_s: float | None = None,
    on_progress: Callable[[float], None] | None = None,
    timeline=None,
) -> SimResult:
    """Run one simulation. `duration_s` stops new arrivals; the fleet then drains.

    `horizon_s` (optional) stops the clock; requests still running are reported "incomplete".
    `timeline` (optional): a `lpxsim.serving.timeline.TimelineRecorder` that records the run.
    """
    from lpxsim.serving.metrics import summarize
    from lpxsim.serving.sim import Simulation

    f = fleet if isinstance(fleet, FleetConfig) else load_fleet(fleet)
    w = workload if isinstance(workload, WorkloadConfig) else load_workload(workload)
    t0 = time.perf_counter()
    sim = Simulation(f, w, seed=seed, duration_s=duration_s, horizon_s=horizon_s)
    if timeline is not None:
        timeline.attach(sim)
    sim.run(on_progress)
    wall = time.perf_counter() - t0
    res = summarize(sim)
    res.wall_s = wall  # kept out of `summary` so results stay bit-for-bit reproducible
    return res
