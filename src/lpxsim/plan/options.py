"""The Rubin + LPX modes as candidate pool types of `plan fleet`'s MILP (`lpxsim.plan.fleet`).

PD, AFD and the external drafter each run as their built-in fleet (`lpxsim.engine.fleets`) on the
detailed backends, exactly as `lpxsim modes` runs them: a closed loop of `OPTION_USERS` users at the
class's ISL and OSL. One such fleet is one replica of the pool type: it serves `OPTION_USERS`
concurrent sessions (or its completed requests/s, output tok/s / OSL) when its P50 tok/s per user
reaches the class's target and, where the class gives one, its TTFT P99 is within `ttft_p99_s`; it
occupies the racks of Vera Rubin NVL72 and of LPX its pools hold. Rubin alone (with and without MTP)
and LPX alone are the single-system operating points `plan fleet` prices on every candidate system.
"""

from __future__ import annotations

import math
from typing import Any

OPTION_USERS = 8  # closed-loop users per built-in fleet (the `light` load of `lpxsim modes`)
MIXED_MODES = ("rubin-lpx-pd", "rubin-lpx-afd", "rubin-lpx-drafter")


def mode_pool_type(rc: Any, mode: str, seed: int = 0):
    """The pool type of one Rubin + LPX mode for request class `rc` (simulated; see module docstring)."""
    from lpxsim.catalog import get_system
    from lpxsim.core.errors import UserError
    from lpxsim.engine.fleets import builtin_fleet, closed_workload, simulate_fleet
    from lpxsim.plan.fleet_types import PoolType

    method = f"closed-loop simulation, {OPTION_USERS} users (P50 speed, P99 TTFT)"
    wl = closed_workload(f"{rc.name}-{mode}", rc.isl, rc.osl, OPTION_USERS, 2 * OPTION_USERS)
    try:
        res = simulate_fleet(builtin_fleet(mode, rc.model, context=rc.isl + rc.osl, users=OPTION_USERS), wl,
                             seed=seed)
    except UserError as e:  # the model does not fit this mode's hardware: no pool type, said why
        return PoolType(rc.name, mode, method, 0.0, {}, {}, rc.model, 0.0, 0.0, 0.0, 0, "", 0.0,
                        reason=f"{e.field}: {e.message}")
    s = res.summary
    chips: dict[str, int] = {}
    for r in res.pools.itertuples():
        chips[r.system] = chips.get(r.system, 0) + int(r.chips)
    units = {name: n / get_system(name).chips_per_unit for name, n in chips.items()}
    speed = s["tok_s_user"].get("p50", math.nan)
    ttft = s["ttft_s"].get("p99", math.nan)
    why = []
    if not speed >= rc.tok_s_user:
        why.append(f"P50 {speed:,.0f} < {rc.tok_s_user:,.0f} tok/s/user")
    if rc.ttft_p99_s is not None and not ttft <= rc.ttft_p99_s:
        why.append(f"TTFT P99 {ttft:,.2f} s > {rc.ttft_p99_s:g} s")
    rps = s["fleet_tok_s"] / rc.osl
    cap = 0.0 if why else (rps if rc.requests_per_s is not None else float(OPTION_USERS))
    layout = "; ".join(f"{p.pool}: {p.workers} x {p.step_model}" for p in res.pools.itertuples())
    return PoolType(rc.name, mode, method, cap, units, chips, rc.model, speed, s["fleet_tok_s"], rps,
                    OPTION_USERS, layout, s["power_w"], ttft, "; ".join(why))


def mode_pool_types(rc: Any, seed: int = 0) -> list:
    """Every Rubin + LPX mode's pool type for request class `rc`."""
    return [mode_pool_type(rc, m, seed) for m in MIXED_MODES]
