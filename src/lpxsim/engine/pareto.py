"""Pareto sets: the points no other point beats on every axis (more is better on each)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True where no other point has x' >= x and y' >= y with one strictly greater (NaN: never)."""
    import numpy as np  # here: a warm `estimate` imports the search's module but never numpy
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


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """`a` is at least as good as `b` on every axis and better on one."""
    return all(p >= q for p, q in zip(a, b, strict=True)) and any(p > q for p, q in zip(a, b, strict=True))


def nondominated(points: Sequence[Sequence[float]]) -> list[bool]:
    """Per point: no other point dominates it (any number of axes; a handful of points, so O(n^2)). Equal
    points both stay."""
    return [not any(dominates(q, p) for q in points) for p in points]
