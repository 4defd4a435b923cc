"""The engine's question answered by the serving simulator, on exactly the engine's deployment.

The steady state (`engine.answer`) is the engine's answer for speed; this runs the event simulator on the same
replica step model, the same load and workload, so that the two can be compared (tests/test_engine_queueing.py
holds them within 5 % per-user speed, 3 % aggregate, 10 % TTFT on a stated grid) and so that the cases the
steady state cannot answer are answered by the simulator.

A closed loop starts with every user arriving at once and ends with the last users running alone: the first
and the last round of requests are left out, so the statistics are the loop's steady state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lpxsim.engine.deployment import Placed
from lpxsim.engine.query import Load, Workload

ROUNDS = 6  # requests per user; the first and the last round are warm-up and drain


@dataclass(frozen=True)
class Simulated:
    """The simulator's statistics over the loop's steady rounds (same definitions as `engine.answer`)."""

    tok_s_user: float  # mean over requests of 1 / TPOT
    ttft_s: float  # mean
    tpot_s: float  # mean
    tok_s_total: float  # output tok/s of the deployment
    requests: int  # requests the statistics are over
    e2e_s: float = math.nan  # mean


def simulate_answer(placed: Placed, workload: Workload, load: Load, rounds: int = ROUNDS,
                    seed: int = 0) -> Simulated:
    """Simulate `load.concurrency` closed-loop users of `workload` on `placed` (every replica one worker)."""
    from lpxsim.serving import simulate
    from lpxsim.serving.backends import pinned_step_model
    from lpxsim.serving.config import load_fleet

    users = int(load.concurrency)
    dep = placed.deployment
    pool = {"name": "engine", "system": dep.system, "backend": "auto", "model": placed.model.name,
            "role": "aggregated", "workers": dep.replicas, "chips_per_worker" if _is_lpu(dep.system)
            else "gpus_per_worker": dep.chips}
    fleet = load_fleet({"name": "engine-deployment", "pools": [pool],
                        "scheduler": {"token_budget": 8192, "max_batch": max(256, users)}})
    wl = {"name": "engine-check", "kind": "synthetic", "num_requests": users * rounds,
          "arrival": {"process": "closed", "concurrency": users}, "isl": workload.isl, "osl": workload.osl}
    with pinned_step_model(fleet.pools[0], placed.step):
        res = simulate(fleet, wl, seed=seed)
    df = res.requests.sort_values("arrival_s").reset_index(drop=True)
    steady = df.iloc[users:len(df) - users] if rounds > 2 else df
    # Little's law on the closed loop (no think time): each user's cycle is its request's E2E, so the deployment
    # completes users / mean(E2E) requests per second (robust to the rounds' arrivals bunching together).
    e2e = float(steady["e2e_s"].mean())
    total = users * workload.osl / e2e if e2e > 0 else math.nan
    return Simulated(float(steady["tok_s_user"].mean()), float(steady["ttft_s"].mean()),
                     float(steady["tpot_s"].mean()), float(total), len(steady), e2e)


def _is_lpu(system: str) -> bool:
    from lpxsim.catalog import get_system

    return get_system(system).is_lpu
