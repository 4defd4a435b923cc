"""Order statistics used in benchmark summaries (numpy's linear interpolation, deterministic)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PERCENTILES = (5, 25, 50, 75, 95)


def summarize(values: Sequence[float], percentiles: Sequence[int] = PERCENTILES) -> dict[str, float]:
    """{'p5': .., 'p25': .., 'median': .., 'p75': .., 'p95': .., 'mean': .., 'n': ..} of `values`."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no values to summarize")
    qs = np.percentile(arr, list(percentiles))
    out = {("median" if p == 50 else f"p{p}"): float(q) for p, q in zip(percentiles, qs, strict=True)}
    out["mean"] = float(arr.mean())
    out["n"] = int(arr.size)
    return out


def pct_diff(simulated: float, published: float) -> float:
    """Signed difference of a simulated figure from a published one, in percent of the published."""
    return 100.0 * (simulated - published) / published
