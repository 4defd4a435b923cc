"""Fleets as sweep and benchmark targets: a built-in mode name or a fleet YAML file.

The built-in fleets, their workloads and the simulator call live in the engine's room
(`lpxsim.engine.fleets`); they are re-exported here for the bench layer's callers.
"""

from __future__ import annotations

import math

import pandas as pd

from lpxsim.engine.fleets import (  # noqa: F401  (re-exported)
    DEFAULT_BACKEND,
    LPX_WEIGHT_SHARE,
    MODES,
    _streams,
    agentic_workload,
    builtin_fleet,
    closed_workload,
    fleet_hardware,
    lpx_racks,
    simulate_fleet,
)


def is_fleet(target: str) -> bool:
    """A built-in mode name or a fleet YAML file."""
    from lpxsim.core.inputs import is_file  # False for a name too long, not an OSError

    return target in MODES or target.endswith((".yaml", ".yml")) and is_file(target)


def fleet_for(target: str, model: str) -> dict | str:
    return builtin_fleet(target, model) if target in MODES else target


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
