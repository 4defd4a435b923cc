"""Heterogeneous serving modes as fleets, and benchmarks that run them through the serving simulator.

The built-in fleets mirror `examples/fleets/` (shipped here so an installed
package has them): Vera Rubin NVL72 alone, LPX alone, and the three Rubin + LPX
modes -- prefill/decode disaggregation (pd), attention/FFN disaggregation (afd)
and LPX-drafts/Rubin-verifies speculative decoding (drafter). Every pool runs on
its system's detailed backend (the GPU model; compiled LPX programs, an
FFN-only one for AFD), so all modes are compared on the same cost models as
every other answer of lpxsim.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lpxsim.core.errors import UserError

MODES = ("rubin-alone", "lpx-alone", "rubin-lpx-pd", "rubin-lpx-afd", "rubin-lpx-drafter")
DEFAULT_BACKEND = "auto"  # each pool on its system's detailed backend (the only cost models)
_ETH = {"kind": "ethernet", "latency_s": 5.0e-6}  # assumptions, as in examples/fleets


def _pool(name, system, model, role, backend, **extra) -> dict:
    return {"name": name, "system": system, "backend": backend, "model": model, "role": role, **extra}


# Weights take at most this share of an LPX replica's SRAM when the built-in fleets size it (the rest
# holds KV, activations and buffers): an assumption, docs/assumptions.md "Serving modes (issue 12)".
LPX_WEIGHT_SHARE = 0.85


def lpx_racks(model: str, weights: str = "fp8") -> int:
    """Fewest whole LPX racks whose SRAM holds `model`'s weights at LPX_WEIGHT_SHARE."""
    from lpxsim.catalog import get_model, get_system
    from lpxsim.specs.accounting import param_counts
    from lpxsim.specs.precision import get_precision

    m, s = get_model(model), get_system("lpx")
    need = param_counts(m).total * get_precision(weights, "weights").bytes_per_element
    rack = float(s.chip.memory_bytes) * s.chips_per_unit * LPX_WEIGHT_SHARE
    return max(1, min(s.max_units, math.ceil(need / rack)))


def _streams(model: str, users: int, context: int | None, racks: int | None = None, chips: int | None = None,
             pow2: bool = False) -> int:
    """The concurrency an LPX pool is compiled for: `users`, capped by the streams whose KV fits
    (the capacity model), so the compiler is not asked for layouts that cannot hold them. With `pow2`
    (a pool sized for a whole workload, `osl` given) rounded down to a power of two as a sweep's deployment
    is (`bench.backends.workload_step_model`: micro-batches are power-of-two buckets), so a sweep and a modes
    run of one workload build the same deployment."""
    from lpxsim.plan.capacity import capacity
    from lpxsim.serving.drafter import assistant_for, is_drafter_name

    m = assistant_for(model) if is_drafter_name(model) else model
    if context is None:
        return max(1, int(users))
    fit = capacity(m, "lpx", int(context), racks=racks, chips=chips).max_streams
    n = max(1, min(int(users), fit))
    return 1 << (n.bit_length() - 1) if pow2 else n


def builtin_fleet(mode: str, model: str, backend: str | None = None, context: int | None = None,
                  users: int | None = None, osl: int | None = None) -> dict[str, Any]:
    """The fleet dict of a built-in mode for `model`: one Rubin NVL72 rack and/or the fewest LPX racks
    that hold the model (`lpx_racks`); every pool on its system's detailed backend by default.

    `context` and `users`: the longest request and the most concurrent users the deployment is
    compiled for (LPX pools place KV for them; the step model halves the concurrency until it fits);
    `osl`: the output tokens of that request, so that LPX pools compile at the workload's own contexts
    (`PoolConfig.target_osl`) and share a sweep's deployment of the same workload."""
    backend = backend or DEFAULT_BACKEND
    rubin = {"system": "vr-nvl72", "gpus_per_worker": 8}
    racks = lpx_racks(model) if mode in ("lpx-alone", "rubin-lpx-pd") else 1
    sized: dict[str, int] = {}
    if context is not None:
        sized["target_context"] = int(context)
        if osl is not None:
            sized["target_osl"] = int(osl)
    if users is not None:
        sized["target_concurrency"] = _streams(model, users, context, racks=racks, pow2=osl is not None)
    if mode == "rubin-alone":
        pools = [_pool("rubin", "vr-nvl72", model, "aggregated", backend, workers=9, gpus_per_worker=8)]
        extra: dict[str, Any] = {}
    elif mode == "lpx-alone":
        pools = [_pool("lpx", "lpx", model, "aggregated", backend, workers=1, racks_per_worker=racks,
                       **sized)]
        extra = {}
    elif mode == "rubin-lpx-pd":
        pools = [_pool("rubin-prefill", model=model, role="prefill", backend=backend, workers=4, **rubin),
                 _pool("lpx-decode", "lpx", model, "decode", backend, workers=1, racks_per_worker=racks,
                       **sized)]
        extra = {"links": [{"between": ["rubin-prefill", "lpx-decode"], **_ETH, "bandwidth_Bps": 200e9,
                            "latency_s": 10e-6}]}
    elif mode == "rubin-lpx-afd":
        pools = [_pool("rubin-attention", model=model, role="attention", backend=backend, workers=4, **rubin),
                 _pool("lpx-ffn", "lpx", model, "ffn", backend, workers=1, racks_per_worker=1)]
        extra = {"links": [{"between": ["rubin-attention", "lpx-ffn"], **_ETH, "bandwidth_Bps": 200e9}],
                 "afd": {"micro_batches": 2}}
    elif mode == "rubin-lpx-drafter":
        pools = [_pool("rubin-target", model=model, role="target", backend=backend, workers=4, **rubin),
                 _pool("lpx-drafter", "lpx", f"{model}-assistant", "drafter", backend, workers=4,
                       chips_per_worker=64, **{**sized, "target_concurrency": _streams(
                           f"{model}-assistant", -(-(users or 4) // 2), context, chips=64)})]
        extra = {"links": [{"between": ["rubin-target", "lpx-drafter"], **_ETH, "bandwidth_Bps": 100e9}],
                 "speculation": {"draft_tokens": 4, "adaptive": True, "max_draft_tokens": 8}}
    else:
        raise UserError("system", f"unknown mode {mode!r}; expected a catalog system or one of {', '.join(MODES)}")
    return {"name": mode, "description": f"built-in {mode} fleet for {model}", "pools": pools, **extra}


def is_fleet(target: str) -> bool:
    """A built-in mode name or a fleet YAML file."""
    from lpxsim.core.inputs import is_file  # False for a name too long, not an OSError

    return target in MODES or target.endswith((".yaml", ".yml")) and is_file(target)


def fleet_for(target: str, model: str) -> dict | str:
    return builtin_fleet(target, model) if target in MODES else target


def closed_workload(name: str, isl: int, osl: dict | int, concurrency: int, requests: int) -> dict:
    """Closed-loop synthetic workload: `concurrency` users, fixed input, the given output distribution."""
    return {"name": name, "kind": "synthetic", "num_requests": requests,
            "arrival": {"process": "closed", "concurrency": concurrency}, "isl": isl, "osl": osl}


def agentic_workload(sessions: int = 6, turns: int = 8, rate: float = 0.5) -> dict:
    """Agentic coding sessions (as examples/workloads/agentic-100k.yaml, fewer turns for the tour's budget)."""
    return {"name": f"agentic-{sessions}x{turns}", "kind": "agentic", "num_requests": sessions,
            "arrival": {"process": "poisson", "rate": rate},
            "session": {"turns": turns, "first_isl": 8000, "tool_tokens": {"kind": "uniform", "low": 3000,
                                                                            "high": 5000}, "think_s": 2.0},
            "osl": {"kind": "uniform", "low": 200, "high": 600}, "slo": {"ttft_s": 3.0, "tpot_s": 0.01}}


def simulate_fleet(fleet: dict | str, workload: dict, seed: int = 0):
    """Run the serving simulator (imported lazily: a build without it reports so)."""
    from lpxsim.serving import simulate

    return simulate(fleet, workload, seed=seed)


def fleet_hardware(res) -> str:
    """'72 vr-nvl72 + 256 lpx, 186 kW': chips per system of a simulated fleet, and its power."""
    chips: dict[str, int] = {}
    for r in res.pools.itertuples():
        chips[r.system] = chips.get(r.system, 0) + int(r.chips)
    parts = " + ".join(f"{n} {sys}" for sys, n in chips.items())
    return f"{parts}, {res.summary.get('power_w', math.nan) / 1e3:,.0f} kW"


def mode_row(mode: str, res) -> dict:
    """One row of a modes table: per-user speed with the context, concurrency and hardware it holds at."""
    summary = res.summary
    return {
        "mode": mode, "hardware": fleet_hardware(res), "mean_context": summary["mean_context"],
        "mean_concurrency": summary["mean_concurrency"], "completed": summary["completed"],
        "tok_s_user_p50": summary["tok_s_user"].get("p50", math.nan),
        "ttft_p50_s": summary["ttft_s"].get("p50", math.nan), "ttft_p90_s": summary["ttft_s"].get("p90", math.nan),
        "fleet_tok_s": summary["fleet_tok_s"], "power_kw": summary["power_w"] / 1e3,
        "tok_s_per_mw": summary["tok_s_per_mw"], "goodput_tok_s": summary["goodput_tok_s"],
    }


def aa_speeds_from_requests(df: pd.DataFrame, o200k_per_native: float) -> pd.Series:
    """AA output speed per completed request of a simulation: tokens after the first / (finish - first)."""
    from lpxsim.serving.request import DONE

    done = df[df["status"] == DONE]
    span = done["finish_s"] - done["first_token_s"]
    return ((done["osl"] - 1) * o200k_per_native / span).where((done["osl"] > 1) & (span > 0))
