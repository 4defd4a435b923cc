"""Prompt and output lengths of a benchmark's dataset, and what they change in a saturated run.

A benchmark such as MLPerf's Offline scenario draws its requests from a fixed dataset, so its lengths are a
known distribution, not two means. Two things depend on more than the means:

- **resident context**: a running sequence of prompt i and output o is in the batch for o steps at contexts
  i + 1 .. i + o, so over a long run the batch's mean context is E[o i + o^2 / 2] / E[o]: long outputs are
  resident longer (length bias). With equal lengths it is i + o / 2; with reasoning outputs spread from a few
  hundred to 20,000 tokens it is far longer, and so are the batch's KV and its attention;
- **the run's end**: a finite run drains, its batch shrinking as the longest outputs finish
  (`engine.offline_run`).

Datasets ship as per-sample (input, output) token counts (`data/measured/mlperf_datasets/`, their sources in
its README).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from lpxsim.core.errors import UserError


@dataclass(frozen=True)
class LengthMix:
    """Per-sample prompt and output token counts of a dataset (equal-length arrays)."""

    name: str
    isl: np.ndarray
    osl: np.ndarray

    def __post_init__(self) -> None:
        if len(self.isl) == 0 or len(self.isl) != len(self.osl):
            raise UserError("lengths", f"{self.name}: expected equal, non-empty prompt and output columns")
        if (self.isl < 1).any() or (self.osl < 1).any():
            raise UserError("lengths", f"{self.name}: every prompt and output needs at least one token")

    @property
    def samples(self) -> int:
        return len(self.isl)

    @property
    def mean_isl(self) -> float:
        return float(self.isl.mean())

    @property
    def mean_osl(self) -> float:
        return float(self.osl.mean())

    def resident_context(self) -> float:
        """Mean context of a running sequence over a steady run: E[o i + o^2 / 2] / E[o]."""
        o, i = self.osl.astype(float), self.isl.astype(float)
        return float((o * i + o * o / 2.0).mean() / o.mean())

    def shaped(self, mean_osl: float, max_osl: int | None = None) -> LengthMix:
        """The same prompts, outputs of this shape scaled to `mean_osl` and capped at `max_osl` (a benchmark's
        output limit). The dataset's outputs come from a reference run; a submission's run states its own mean
        (its accuracy log's tokens per sample) and the benchmark its limit, so the shape is kept and the scale
        and cap are theirs."""
        if mean_osl <= 0:
            raise UserError("osl", f"expected a positive mean output length, got {mean_osl!r}")
        if max_osl is not None and max_osl < 1:
            raise UserError("max_osl", f"expected a positive output cap, got {max_osl!r}")
        cap = float(max_osl) if max_osl else float("inf")
        if cap < mean_osl:
            raise UserError("max_osl", f"an output cap of {max_osl} is below the mean of {mean_osl:g}")
        base = self.osl.astype(float)
        if np.isfinite(cap) and mean_osl >= cap:  # every output at the cap
            return LengthMix(self.name, self.isl, np.full(self.samples, int(cap), dtype=np.int64))
        lo, hi = 0.0, 2.0 * mean_osl / base.mean() + 1.0
        while np.minimum(base * hi, cap).mean() < mean_osl:
            hi *= 2.0
        for _ in range(60):  # the capped mean grows with the scale: bisect for it
            mid = (lo + hi) / 2.0
            if np.minimum(base * mid, cap).mean() < mean_osl:
                lo = mid
            else:
                hi = mid
        osl = np.maximum(1, np.rint(np.minimum(base * hi, cap))).astype(np.int64)
        return LengthMix(self.name, self.isl, osl)


def uniform(isl: int, osl: int) -> LengthMix:
    """A dataset of one prompt length and one output length."""
    return LengthMix(f"{isl}/{osl}", np.array([isl]), np.array([osl]))


@cache
def dataset(name: str) -> LengthMix:
    """The packaged per-sample lengths of benchmark dataset `name` (`data/measured/mlperf_datasets/<name>.csv`)."""
    root = resources.files("lpxsim").joinpath("data", "measured", "mlperf_datasets")
    path = root.joinpath(f"{name}.csv")
    if not path.is_file():
        have = sorted(p.name.removesuffix(".csv") for p in root.iterdir() if p.name.endswith(".csv"))
        raise UserError("dataset", f"no packaged dataset {name!r} (have: {', '.join(have)})")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    try:
        isl = np.array([int(r["input_length"]) for r in rows], dtype=np.int64)
        osl = np.array([int(r["output_length"]) for r in rows], dtype=np.int64)
    except (KeyError, ValueError) as e:
        raise UserError("dataset", f"{name}: expected integer input_length and output_length columns ({e})") from e
    return LengthMix(name, isl, osl)
