"""Heterogeneous serving modes as fleets, and the closed-loop workloads the serving simulator runs on them.

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


def _streams(model: str, users: int | None, context: int | None, racks: int | None = None,
             chips: int | None = None, pow2: bool = False) -> int:
    """The concurrency an LPX pool is compiled for. With `pow2` (a pool sized for a whole workload, `osl`
    given) the engine's rule for a deployment (`backends.sizing.design_streams`): the largest power of two of
    the streams that fit its chips, whatever the load, so that a modes run, a sweep and `estimate` of one
    workload run on one deployment. Without it (plan fleet's sizing) `users`, capped by the streams that fit."""
    from lpxsim.backends import sizing
    from lpxsim.catalog import get_model, get_system
    from lpxsim.serving.drafter import assistant_for, is_drafter_name

    if context is None:
        return max(1, int(users or 1))
    m = assistant_for(model) if is_drafter_name(model) else get_model(model)
    s = get_system("lpx")
    n = s.chips_from(racks, chips) if (racks is not None or chips is not None) else s.chips_per_unit
    if pow2:
        return sizing.design_streams(m, s, int(context), n)
    fit = sizing.streams_that_fit(m, s, int(context), n)
    return max(1, min(int(users or 1), fit))


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
                           f"{model}-assistant", -(-(users or 4) // 2), context, chips=64, pow2=osl is not None)})]
        extra = {"links": [{"between": ["rubin-target", "lpx-drafter"], **_ETH, "bandwidth_Bps": 100e9}],
                 "speculation": {"draft_tokens": 4, "adaptive": True, "max_draft_tokens": 8}}
    else:
        raise UserError("system", f"unknown mode {mode!r}; expected a catalog system or one of {', '.join(MODES)}")
    return {"name": mode, "description": f"built-in {mode} fleet for {model}", "pools": pools, **extra}


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


