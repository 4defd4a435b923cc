"""The compiler's answer to "how many streams fit": the concurrency ceiling of a compiled LPX layout.

`lpxsim.plan.capacity` pools the chips' memory: all weights, a per-chip reserve, and the rest divided by one
stream's KV. A compiled layout holds memory per chip: a pipeline stage holds whole layers, a chip holds whole
experts and every KV head its query heads use, and the fullest chip decides. So the compiled ceiling is at most
the pooled one, and below it by exactly that imbalance. This module finds the layout (one replica on all the
chips given) that holds the most streams of exactly the context asked (never a context bucket) and reads its
ceiling from the compiled decode step (`LpxStepModel.stream_ceiling`), with the reason it differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from lpxsim.catalog import get_model
from lpxsim.core.errors import DoesNotFit
from lpxsim.lpu.arch import arch_for
from lpxsim.lpu.compiler import Target, resolve_system
from lpxsim.lpu.layout import Layout
from lpxsim.lpu.partition import choose_layout
from lpxsim.specs.model import ModelSpec

# The bisection's top: the step model's own batch ceiling (`LpxStepModel.max_batch`). A layout found for this
# many streams is still compiled and its ceiling read exactly (which may be higher).
MAX_SEARCHED_STREAMS = 1024


@dataclass(frozen=True)
class CompiledCeiling:
    """Streams of `context` tokens the best compiled layout holds on the chips given (0: no layout places)."""

    streams: int
    layout: str = ""
    chips_used: int = 0
    fullest_chip: int | None = None  # the chip whose SRAM runs out first
    fullest_chip_weights_bytes: float = 0.0
    mean_chip_weights_bytes: float = 0.0  # the model's weights / the chips: what the pooled count assumes
    kv_bytes_per_stream_on_fullest: float = 0.0
    reason: str = ""

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _holds(model: ModelSpec, system, arch, n: int, context: int, streams: int, weights: str, kv: str,
           kv_layout: str) -> list[Layout]:
    """Layouts (one replica, best first) whose chips the partition search finds holding `streams` streams."""
    return choose_layout(model, system, arch, n, Target(context, streams), weights, kv, kv_layout, {"replicas": 1})[0]


def compiled_ceiling(model: str | ModelSpec, system: str = "lpx", context: int = 100_000, weights: str = "fp8",
                     kv: str = "bf16", kv_layout: str = "separate", racks: float | None = None,
                     chips: int | None = None, upper: int = 1 << 16, weight_bytes: float = 0.0,
                     kv_bytes_per_stream: float = 0.0, pooled_streams: int | None = None) -> CompiledCeiling:
    """The most streams of `context` tokens one compiled replica on these chips holds, and its layout.

    The partition search (which counts weights and KV as the lowering places them) bisects the largest
    concurrency some layout holds, up to `upper` (the pooled ceiling bounds it) and MAX_SEARCHED_STREAMS; that
    layout is compiled at exactly `context` and its ceiling read from the placed memory. `weight_bytes`, `kv_bytes_per_stream` and
    `pooled_streams` (the pooled model's) only word the reason."""
    from lpxsim.lpu.stepmodel import LpxStepModel

    m = get_model(model)
    s, n, _ = resolve_system(system, racks, chips)
    arch = arch_for(s)
    if not _holds(m, s, arch, n, context, 1, weights, kv, kv_layout):
        return CompiledCeiling(0, reason=f"no layout of {m.name} places one stream of {context:,} tokens on "
                                         f"{n} x {s.chip.name}: the fullest chip of every layout overflows")
    lo, hi = 1, max(1, min(upper, MAX_SEARCHED_STREAMS))
    while lo < hi:  # the largest concurrency whose layout search still finds a layout (monotone: more KV)
        mid = (lo + hi + 1) // 2
        if _holds(m, s, arch, n, context, mid, weights, kv, kv_layout):
            lo = mid
        else:
            hi = mid - 1
    # of the layouts that hold `lo` streams, those on the most chips first (more SRAM: the most streams)
    for lay in sorted(_holds(m, s, arch, n, context, lo, weights, kv, kv_layout), key=lambda x: -x.chips):
        try:
            # laid out as found (a forced layout); its ceiling is read from the batch-1 step at `context`, so
            # the step model need not compile a batch of `lo` streams to check it
            step = LpxStepModel(m, s.name, racks=racks, chips=chips, weights=weights, kv=kv, kv_layout=kv_layout,
                                layout=lay, context=context, concurrency=1)
        except DoesNotFit:
            continue
        c = step.stream_ceiling(context)
        mean_w = weight_bytes / n if weight_bytes else 0.0
        out = CompiledCeiling(c["streams"], step.layout.describe(), step.layout.chips, c["chip"], c["weights_bytes"],
                              mean_w, c["kv_bytes_per_stream"])
        if lo == MAX_SEARCHED_STREAMS:
            return CompiledCeiling(**{**out.__dict__, "reason": (
                f"the layout search stops at {MAX_SEARCHED_STREAMS:,} streams; the layout found for them "
                f"({out.layout}, {out.chips_used:,} chips) holds {out.streams:,} stream(s) of {context:,} tokens")})
        return _with_reason(out, pooled_streams, context, kv_bytes_per_stream, n)
    return CompiledCeiling(0, reason=f"the layouts found for {lo} stream(s) of {context:,} tokens did not place")


def _with_reason(c: CompiledCeiling, pooled: int | None, context: int, kv_per_stream: float, n: int
                 ) -> CompiledCeiling:
    if pooled is None or c.streams >= pooled:
        return c
    why = (f"the compiled layout ({c.layout}) holds {c.streams} stream(s) of {context:,} tokens against the pooled "
           f"count's {pooled}: memory is per chip and the fullest one (chip {c.fullest_chip}) decides; it keeps "
           f"{_mb(c.fullest_chip_weights_bytes)} of weights and {_mb(c.kv_bytes_per_stream_on_fullest)} of each "
           f"stream's KV, where the pooled count assumes the averages, {_mb(c.mean_chip_weights_bytes)} and "
           f"{_mb(kv_per_stream / n)} (whole layers per stage, whole experts and KV heads per chip, full-attention "
           f"KV only on the stages that hold it)")
    return CompiledCeiling(**{**c.__dict__, "reason": why})


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.2f} MB" if nbytes >= 1e6 else f"{nbytes / 1e3:,.1f} kB"
