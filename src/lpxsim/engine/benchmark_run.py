"""A serving benchmark's finite run, as its client measures it (issue 28 item 3: the client's pattern and the TTFT
definition).

InferenceX's client (and aiperf's concurrency mode) runs a closed loop of C users sending `prompts_per_user` x C
requests, each request's lengths drawn in [0.8, 1] x nominal (`serving.workload.benchmark_loop`). The run starts
with all C users' first requests arriving together at an idle engine: their C x ISL prompt tokens queue for the
prefill, pass after pass of the engine's budget, and the last of them waits for all the others. Those first C
requests are a tenth of the run's requests and wait several times the steady first-token time, so a *mean* TTFT
over the run lies well above the steady state's (which has no term for a start), while the median barely moves.
The engine answers the steady state; a row that quotes a mean (InferenceX's pull-request tables, a user's file)
is compared with this run's mean.

The run is simulated by the serving simulator on the caller's step model (pinned: the same deployment the steady
state prices), one replica, the engine's own prefill pass budget (`prefill_pass_tokens`, else the default chunk).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lpxsim.engine.steady_state import DEFAULT_PREFILL_CHUNK
from lpxsim.step.protocol import StepModel


@dataclass(frozen=True)
class RunLatencies:
    """Latency statistics over every request of one simulated benchmark run (seconds)."""

    ttft_mean_s: float
    ttft_median_s: float
    tpot_mean_s: float
    tpot_median_s: float


def benchmark_run(step: StepModel, system: str, model: str, replica_gpus: int, isl: int, osl: int, users: int,
                  prompts_per_user: int, spec_k: int = 0, spec_accept: float | Sequence[float] = (),
                  seed: int = 0) -> RunLatencies:
    """Mean and median TTFT and TPOT of the benchmark's closed loop of `users` sending `prompts_per_user` x `users`
    requests of nominal `isl` / `osl` tokens to one replica of `replica_gpus` GPUs of `system` running `step`
    (MTP with `spec_k` drafts at `spec_accept`, one rate or one per draft position, where `spec_k` > 0)."""
    from lpxsim.serving import simulate
    from lpxsim.serving.backends import pinned_step_model
    from lpxsim.serving.config import load_fleet
    from lpxsim.serving.workload import benchmark_loop

    pool: dict = {"name": "benchmark", "system": system, "backend": "auto", "model": model, "role": "aggregated",
                  "workers": 1, "gpus_per_worker": replica_gpus}
    if spec_k > 0:
        pool["mtp"] = spec_k
        pool["mtp_accept"] = spec_accept if isinstance(spec_accept, (int, float)) else list(spec_accept)
    budget = getattr(step, "prefill_pass_tokens", None) or DEFAULT_PREFILL_CHUNK
    fleet = load_fleet({"name": "benchmark", "pools": [pool],
                        "scheduler": {"token_budget": budget, "max_batch": max(256, users)}})
    with pinned_step_model(fleet.pools[0], step):
        df = simulate(fleet, benchmark_loop(users, isl, osl, prompts_per_user), seed=seed).requests
    return RunLatencies(float(df["ttft_s"].mean()), float(df["ttft_s"].median()), float(df["tpot_s"].mean()),
                        float(df["tpot_s"].median()))
