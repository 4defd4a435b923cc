"""The interactivity-vs-throughput frontier: operating points no other point beats on both axes."""

from __future__ import annotations

import pandas as pd

from lpxsim.engine.pareto import pareto_mask


def mark_frontier(df: pd.DataFrame, x: str = "tok_s_user", y: str = "tok_s_total",
                  group: tuple[str, ...] = ("target", "context"), column: str = "on_frontier") -> pd.DataFrame:
    """Add `column` (True on the Pareto set of `x` and `y`) to a sweep table: per target and context, over its
    concurrencies and every deployment it was swept on (the GPU layout picks, LPX replica sizes)."""
    out = df.copy()
    out[column] = False
    if x not in out or y not in out or any(g not in out for g in group):
        return out
    for _, sub in out.groupby(list(group), sort=False):
        m = pareto_mask(sub[x].to_numpy(float), sub[y].to_numpy(float))
        out.loc[sub.index[m], column] = True
    return out
