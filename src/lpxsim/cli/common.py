"""Shared CLI plumbing: JSON vs table output, one-line user errors, stderr console."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console

# Logs, progress and tables for people go to stderr when --json owns stdout.
out = Console()
err = Console(stderr=True)


def _clean(obj: Any) -> Any:
    """Make an object JSON-safe: dataclasses/pydantic to dicts, NaN/inf to None, numpy to Python."""
    if hasattr(obj, "model_dump"):
        return _clean(obj.model_dump())
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return _clean(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return _clean(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def emit_json(obj: Any) -> None:
    """Print exactly one JSON object on stdout."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def fmt_bytes(b: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:,.2f} {unit}"
    return f"{b:,.0f} B"


def fmt_count(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f}{unit}"
    return f"{n:,.0f}"


def economics_line(d: dict) -> str:
    """One line of a result's economics (keys of `lpxsim.plan.costs.economics`)."""
    cost = (f"${d['usd_per_mtok_output']:,.2f}/Mtok out, ${d['usd_per_mtok_input']:,.2f}/Mtok in"
            if d.get("usd_per_mtok_output") is not None else "cost: no capex in the cost model")
    return (f"economics: {cost}; facility {d['facility_kw']:,.1f} kW, {d['tok_s_per_mw_facility']:,.0f} tok/s per "
            f"facility MW; revenue ${d['revenue_usd_per_hour']:,.2f}/h at ${d['price_usd_per_mtok_output']:,.2f}/Mtok "
            f"(tier >= {d['price_tier_min_tok_s_user']:,.0f} tok/s/user)")
