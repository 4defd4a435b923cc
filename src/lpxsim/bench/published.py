"""Published figures, used ONLY for the comparison column of benchmark tables.

Nothing in lpxsim computes from these numbers: they are what the simulation is
compared against (shared reference targets.md, hardware.md §"published results").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    """One published measurement and the conditions it holds at."""

    id: str
    model: str
    system: str
    metric: str  # aa_output_speed_median (o200k tok/s), speed_bench_median, speed_bench_p80
    context: int  # input tokens (o200k for AA)
    concurrency: int
    value: float
    unit: str
    source: str
    role: str  # fit | predict | explain | invert (a parameter solved from this figure: not a prediction)


PUBLISHED: tuple[Published, ...] = (
    Published("T1", "gemma-4-31b", "lpx", "aa_output_speed_median", 10_000, 1, 3382.0, "tok/s",
              "NV-LC: Artificial Analysis measurement reported by NVIDIA (o200k_base, sequential, median)", "fit"),
    Published("T2", "gemma-4-31b", "lpx", "aa_output_speed_median", 100_000, 1, 3431.0, "tok/s",
              "NV-LC: Artificial Analysis measurement reported by NVIDIA (o200k_base, sequential, median)", "predict"),
    Published("T7", "gemma-4-31b", "lpx", "speed_bench_median", 0, 1, 4767.0, "tok/s",
              "NV-LC, HC26 slides: NVIDIA SPEED-Bench coding, vendor-run", "invert"),
    Published("T7-P80", "gemma-4-31b", "lpx", "speed_bench_p80", 0, 1, 5520.0, "tok/s",
              "NV-LC: NVIDIA SPEED-Bench coding, vendor-run", "invert"),
)


def lookup(model: str, system: str, metric: str, context: int | None = None) -> Published | None:
    """The published figure for these conditions, or None (most model/system pairs have none)."""
    for p in PUBLISHED:
        if p.model == model and p.system == system and p.metric == metric and (
            context is None or p.context == context
        ):
            return p
    return None
