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

A disaggregated deployment (`disaggregated_run`: prefill workers of one layout, decode workers of another, the KV
sent from one to the other) has no steady state of its own in the engine: its run is the simulator's prefill/decode
pools on the caller's two step models, and it is what the row's figures are compared with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lpxsim.engine.steady_state import DEFAULT_PREFILL_CHUNK
from lpxsim.step.protocol import StepModel


@dataclass(frozen=True)
class PoolLayout:
    """One pool of a disaggregated deployment: `workers` replicas of `gpus` GPUs each, priced by `step`; `max_batch`:
    the engine's stated cap on a replica's running sequences (None: the step model's own)."""

    step: StepModel
    gpus: int
    workers: int
    max_batch: int | None = None


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


def disaggregated_run(prefill: PoolLayout, decode: PoolLayout, system: str, model: str, isl: int, osl: int,
                      users: int, prompts_per_user: int, link_Bps: float, link_latency_s: float,
                      link_kind: str = "nvlink", spec_k: int = 0, spec_accept: float | Sequence[float] = (),
                      seed: int = 0) -> tuple[RunLatencies, float]:
    """(latencies, output tok/s of the whole deployment) of the benchmark's closed loop on a disaggregated
    deployment of `system`: `prefill` workers prefill each prompt and send its KV over a `link_kind` link of
    `link_Bps` (one-way latency `link_latency_s`) to one of the `decode` workers, which decode it (MTP with `spec_k` drafts
    at `spec_accept` where `spec_k` > 0). The throughput is the run's output tokens over its makespan, as a
    benchmark client divides them."""
    from contextlib import ExitStack

    from lpxsim.serving import simulate
    from lpxsim.serving.backends import pinned_step_model
    from lpxsim.serving.config import load_fleet
    from lpxsim.serving.workload import benchmark_loop

    pools: list[dict] = [
        {"name": "prefill", "system": system, "backend": "auto", "model": model, "role": "prefill",
         "workers": prefill.workers, "gpus_per_worker": prefill.gpus},
        {"name": "decode", "system": system, "backend": "auto", "model": model, "role": "decode",
         "workers": decode.workers, "gpus_per_worker": decode.gpus}]
    for pool, layout in zip(pools, (prefill, decode), strict=True):
        if layout.max_batch is not None:  # the stated cap: users beyond it wait for a slot (in their first token)
            pool["max_batch"] = layout.max_batch
    if spec_k > 0:
        pools[1]["mtp"] = spec_k
        pools[1]["mtp_accept"] = spec_accept if isinstance(spec_accept, (int, float)) else list(spec_accept)
    budget = getattr(prefill.step, "prefill_pass_tokens", None) or DEFAULT_PREFILL_CHUNK
    fleet = load_fleet({"name": "disaggregated benchmark", "pools": pools,
                        "links": [{"between": ["prefill", "decode"], "kind": link_kind, "bandwidth_Bps": link_Bps,
                                   "latency_s": link_latency_s}],
                        "scheduler": {"token_budget": budget, "max_batch": max(256, users)}})
    with ExitStack() as pinned:
        for pool, layout in zip(fleet.pools, (prefill, decode), strict=True):
            pinned.enter_context(pinned_step_model(pool, layout.step))
        res = simulate(fleet, benchmark_loop(users, isl, osl, prompts_per_user), seed=seed)
    df = res.requests
    lat = RunLatencies(float(df["ttft_s"].mean()), float(df["ttft_s"].median()), float(df["tpot_s"].mean()),
                       float(df["tpot_s"].median()))
    return lat, float(res.summary["fleet_tok_s"])
