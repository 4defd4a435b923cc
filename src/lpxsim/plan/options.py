"""Every serving option for one demand class, on the detailed backends, and the one `plan fleet` picks.

Options: Rubin alone, Rubin alone with MTP (the model's own draft head: its draft length and
acceptance come from the class, `mtp` and `accept`), LPX alone, and the three Rubin + LPX modes
(PD, AFD, the external drafter). The five built-in fleets are run exactly as `lpxsim modes` runs
them (closed loop of `OPTION_USERS` users at the class's ISL and OSL), so a row here is the same
number as that command's row; MTP has no built-in fleet, so it is the operating point of
`lpxsim plan point --mtp` (steady state at the per-user target). An option is feasible when its
P50 tok/s per user reaches the class's target and, where the class gives one, its TTFT P99 is
within `ttft_p99_s`; of the feasible ones the highest output tok/s per MW wins.
"""

from __future__ import annotations

import math
from typing import Any

OPTION_USERS = 8  # closed-loop users per built-in fleet (the `light` load of `lpxsim modes`)
OPTION_MODES = ("rubin-alone", "lpx-alone", "rubin-lpx-pd", "rubin-lpx-afd", "rubin-lpx-drafter")


def _sim_option(rc: Any, mode: str, seed: int) -> dict:
    from lpxsim.bench.fleets import builtin_fleet, closed_workload, fleet_hardware, simulate_fleet

    wl = closed_workload(f"{rc.name}-{mode}", rc.isl, rc.osl, OPTION_USERS, 2 * OPTION_USERS)
    res = simulate_fleet(builtin_fleet(mode, rc.model, context=rc.isl + rc.osl, users=OPTION_USERS), wl, seed=seed)
    s = res.summary
    return {"option": mode, "method": f"closed-loop simulation, {OPTION_USERS} users",
            "tok_s_user_p50": s["tok_s_user"].get("p50", math.nan), "ttft_p99_s": s["ttft_s"].get("p99", math.nan),
            "tok_s_per_mw": s["tok_s_per_mw"], "hardware": fleet_hardware(res), "concurrency": OPTION_USERS}


def _mtp_option(rc: Any, weights: str, kv: str, kv_layout: str, backend: str) -> dict:
    from lpxsim.plan.operating_point import operating_point

    row = {"option": "rubin-alone+mtp", "method": "operating point (steady state at the target)"}
    if rc.mtp <= 0 or rc.accept <= 0:
        return {**row, "feasible": False, "reason": "give the class's mtp (draft length) and accept (acceptance)"}
    op = operating_point(rc.model, "vr-nvl72", rc.isl, rc.osl, rc.tok_s_user, weights=weights, kv=kv,
                         kv_layout=kv_layout, backend=backend, new_tokens=rc.new_tokens, spec_k=rc.mtp,
                         spec_accept=rc.accept)
    if not op.feasible:
        return {**row, "feasible": False, "reason": op.reason, "tok_s_user_p50": op.best_tok_s_user}
    return {**row, "tok_s_user_p50": op.tok_s_user, "ttft_p99_s": op.ttft_s, "tok_s_per_mw": op.tok_s_per_mw,
            "hardware": f"{op.replica_chips} vr-nvl72, {op.replica_power_w / 1e3:,.0f} kW",
            "concurrency": op.concurrency}


def _judge(row: dict, rc: Any) -> dict:
    if "feasible" in row:
        return row
    why = []
    if not row["tok_s_user_p50"] >= rc.tok_s_user:
        why.append(f"P50 {row['tok_s_user_p50']:,.0f} < {rc.tok_s_user:,.0f} tok/s/user")
    target = getattr(rc, "ttft_p99_s", None)
    if target is not None and not row["ttft_p99_s"] <= target:
        why.append(f"TTFT P99 {row['ttft_p99_s']:,.2f} s > {target:g} s")
    return {**row, "feasible": not why, "reason": "; ".join(why)}


def class_options(rc: Any, weights: str = "fp8", kv: str = "bf16", kv_layout: str = "separate",
                  backend: str = "auto", seed: int = 0) -> dict:
    """Every option for request class `rc` and the chosen one (None when none meets the class's targets)."""
    rows = [_judge(_sim_option(rc, m, seed), rc) for m in OPTION_MODES]
    rows.insert(1, _judge(_mtp_option(rc, weights, kv, kv_layout, backend), rc))
    ok = [r for r in rows if r["feasible"]]
    best = max(ok, key=lambda r: r["tok_s_per_mw"])["option"] if ok else None
    return {"class": rc.name, "model": rc.model, "context": rc.isl, "target_tok_s_user": rc.tok_s_user,
            "target_ttft_p99_s": getattr(rc, "ttft_p99_s", None), "chosen": best, "options": rows}


def fleet_options(classes: list, weights: str, kv: str, kv_layout: str, backend: str) -> list[dict]:
    """`class_options` for every class (the hook `plan fleet` calls when the demand asks for options)."""
    return [class_options(rc, weights, kv, kv_layout, backend) for rc in classes]
