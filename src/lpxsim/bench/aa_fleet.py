"""The AA benchmark on a heterogeneous fleet (PD, AFD, drafter): the serving simulator times the requests.

Sequential requests (a closed loop of one user) go through the fleet's router,
pools and links. Answer lengths follow the same seeded log-normal as the
StepModel path (drawn by the workload generator); with speculative decoding the
acceptance of each round is drawn too, which is where most of the spread comes
from. The first streamed chunk is taken to be the first token.
"""

from __future__ import annotations

import pandas as pd

from lpxsim.bench.aa import AAPoint, AASetup
from lpxsim.bench.fleets import (
    aa_speeds_from_requests,
    closed_workload,
    fleet_for,
    fleet_hardware,
    simulate_fleet,
)
from lpxsim.bench.published import lookup
from lpxsim.bench.stats import pct_diff, summarize
from lpxsim.core.errors import UserError


def run_aa_on_fleet(target: str, model: str, setup: AASetup) -> tuple[list[AAPoint], pd.DataFrame]:
    """AA points (one per context) of `model` served by the fleet `target` (mode name or YAML path)."""
    conv = setup.conversion
    osl = {"kind": "lognormal", "median": setup.output_median / conv.o200k_per_native, "sigma": setup.output_sigma,
           "min": max(2, setup.output_min / conv.o200k_per_native), "max": setup.output_max / conv.o200k_per_native}
    fleet = fleet_for(target, model)
    points, frames = [], []
    for ctx in setup.contexts:
        isl = conv.to_native(ctx)
        wl = closed_workload(f"aa-{ctx}", isl, osl, concurrency=1, requests=setup.requests)
        res = simulate_fleet(fleet, wl, seed=setup.seed)
        speeds = aa_speeds_from_requests(res.requests, conv.o200k_per_native).dropna()
        if speeds.empty:
            raise UserError("system", f"{target}: no request completed with more than one token at {ctx:,} tokens")
        done = res.requests.loc[speeds.index]
        frames.append(done.assign(context=ctx, output_speed=speeds, system=target, model=model))
        s = res.summary
        pub = lookup(model, target, "aa_output_speed_median", ctx)
        med = summarize(speeds.to_list())
        points.append(AAPoint(
            model=model, system=target, hardware=fleet_hardware(res),
            chips=int(res.pools["chips"].sum()) if len(res.pools) else 0, power_w=s["power_w"],
            context=ctx, native_context=isl, concurrency=1, requests=len(speeds), output_speed=med,
            ttft_s=summarize(done["ttft_s"].to_list()),
            output_tokens_median=float(done["osl"].median() * conv.o200k_per_native),
            published=pub, diff_pct=pct_diff(med["median"], pub.value) if pub else None,
        ))
    return points, pd.concat(frames, ignore_index=True)
