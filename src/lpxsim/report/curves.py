"""A sweep's rows as curves: one per system and deployment, named with its layout (both frontier charts)."""

from __future__ import annotations

import pandas as pd

FRONTIER_COLUMN = {"tok_s_total": "on_frontier", "tok_s_per_mw": "on_frontier_mw"}  # `bench.sweep.collect`


def deployment_curves(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The sweep's rows as one curve per system and deployment (GPU layout pick, LPX replica size), each named
    with its layout where one layout serves every context ('vr-nvl72 (latency layout): TP4 fp8 x18')."""
    keys = [k for k in ("target", "goal", "replica_chips") if k in df.columns]
    if df.empty or not keys:  # nothing priced (every point failed): no curve
        return []
    ident = df[keys].astype(object).where(df[keys].notna(), "").astype(str).agg("|".join, axis=1)
    out = []
    for _, g in df.groupby(ident, sort=True):
        first = g.iloc[0]
        name = str(first["target"])
        goal = first.get("goal")
        if isinstance(goal, str) and goal and f"({goal} layout)" not in name:
            name += f" ({goal} layout)"
        chips = first.get("replica_chips")
        if chips is not None and pd.notna(chips):
            name += f" ({int(chips)}-chip replicas)"
        elif "replica_chips" in df and df.loc[df["target"] == first["target"], "replica_chips"].notna().any():
            name += " (whole racks, one replica)"  # beside the smaller replica sizes tiled over them
        if "layout" in g and g["layout"].nunique() == 1:
            reps = g["replicas"].dropna().unique() if "replicas" in g else []
            name += f": {g['layout'].iloc[0]}" + (f" x{int(reps[0])}" if len(reps) == 1 and reps[0] > 1 else "")
        out.append((name, g))
    return out
