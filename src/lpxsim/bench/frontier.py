"""The interactivity-vs-throughput frontier: operating points no other point beats on both axes."""

from __future__ import annotations

import numpy as np
import pandas as pd


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True where no other point has x' >= x and y' >= y with one strictly greater (NaN: never)."""
    ok = np.isfinite(x) & np.isfinite(y)
    mask = np.zeros(len(x), dtype=bool)
    idx = np.flatnonzero(ok)
    # sweep by descending x (ties: descending y); a point is on the frontier if its y beats all before it
    order = idx[np.lexsort((-y[idx], -x[idx]))]
    best = -np.inf
    for i in order:
        if y[i] > best:
            mask[i] = True
            best = y[i]
    return mask


def mark_frontier(df: pd.DataFrame, x: str = "tok_s_user", y: str = "tok_s_total",
                  group: tuple[str, ...] = ("target", "context")) -> pd.DataFrame:
    """Add `on_frontier` to a sweep table: per target and context, over its concurrencies."""
    out = df.copy()
    out["on_frontier"] = False
    if x not in out or y not in out or any(g not in out for g in group):
        return out
    for _, sub in out.groupby(list(group), sort=False):
        m = pareto_mask(sub[x].to_numpy(float), sub[y].to_numpy(float))
        out.loc[sub.index[m], "on_frontier"] = True
    return out
