"""Memory accounting and the concurrency ceiling: where the bytes go, and how many streams fit.

On an LPX every LPU has its own 500 MB of SRAM and nothing else, so the budget is
per chip: the weights need a whole number of chips, each chip keeps a reserve
for activations and transfer buffers, and a stream's KV is spread over the
chips' free SRAM (sequence-split KV, which the compiler uses for long context).
On a GPU system the budget is HBM x mem_fraction (the engines' runtime reserve).

Every breakdown sums exactly to the memory it reports (tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lpxsim.backends.sizing import (  # noqa: F401  (re-exported: the capacity model's reserves)
    GPU_ACTIVATION_RESERVE_FRACTION,
    GPU_MEM_FRACTION,
    LPU_BUFFER_FRACTION,
    reserve_fraction,
)
from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.specs.accounting import kv_bytes_per_sequence, weight_bytes
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.specs.precision import get_precision

if TYPE_CHECKING:
    from lpxsim.plan.compiled_capacity import CompiledCeiling

# Assumptions (docs/assumptions.md, "Model accounting and KV layout").
# The reserves and their rule are the deployment sizing's (`backends.sizing`): one arithmetic for both.


@dataclass(frozen=True)
class Breakdown:
    """Where the bytes of the system go. `total_bytes` == sum of the other fields."""

    total_bytes: float
    weights_bytes: float
    reserve_bytes: float  # buffers/activations (LPX) or runtime reserve + activations (GPU)
    kv_bytes: float  # max_streams x kv_bytes_per_stream
    free_bytes: float  # left over (< one more stream), or negative: the shortfall when nothing fits

    def check(self) -> float:
        """Residual of the sum (0 up to float round-off)."""
        return self.total_bytes - (self.weights_bytes + self.reserve_bytes + self.kv_bytes + self.free_bytes)


@dataclass(frozen=True)
class KvAlternative:
    kv: str
    kv_layout: str
    kv_bytes_per_stream: float
    max_streams: int


@dataclass(frozen=True)
class CapacityReport:
    """How many concurrent streams of `context` tokens fit, and why."""

    model: str
    system: str
    chip: str
    chips: int
    units: float  # racks (or HGX nodes) this is
    unit_name: str
    context: int
    weights: str
    kv: str
    kv_layout: str
    weight_bytes: float
    kv_bytes_per_stream: float
    chip_memory_bytes: float
    chips_for_weights: int | None  # LPU systems: whole chips the weights alone need
    units_needed: int  # racks/nodes needed to hold the weights plus one stream
    max_streams: int
    breakdown: Breakdown
    power_w: float
    alternatives: list[KvAlternative] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # LPU systems, when asked: the compiler's ceiling at the same context (`lpxsim.plan.compiled_capacity`)
    compiled: CompiledCeiling | None = None
    # GPU systems, when asked: what the engine admits on these GPUs at each layout goal (`engine_ceilings`)
    engine: list[EngineCeiling] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.max_streams >= 1

    @property
    def compiled_streams(self) -> int | None:
        """Streams one compiled replica on these chips holds at `context` (None: not asked, or not an LPU)."""
        return None if self.compiled is None else self.compiled.streams


@dataclass(frozen=True)
class EngineCeiling:
    """Streams of the context the engine admits on the GPUs given, at the layout its `goal` lays out (the
    ceiling `lpxsim estimate --gpus N --goal G` runs against: KV as the layout holds it, the batch cap)."""

    goal: str
    streams: int
    deployment: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def engine_ceilings(m: ModelSpec, s: SystemSpec, context: int, weights: str, kv: str, kv_layout: str,
                    chips: int) -> tuple[list[EngineCeiling], list[str]]:
    """The engine's own ceiling on `chips` GPUs at both layout goals (one answer: `estimate`, `plan` and the sweep
    admit this many), and a note per goal that lays nothing out. The pooled count shares every GPU's memory; a
    layout's replicas each keep their sequences' KV whole on every tensor-parallel rank that needs it (MLA's
    latent cache on each, KV heads fewer than the ranks copied) and cap their batch, so it can be far lower."""
    from lpxsim.engine.answer import kv_ceiling
    from lpxsim.engine.deployment import Precision, place
    from lpxsim.engine.query import DEFAULT_OSL, Deployment, Workload

    if context < 2:
        return [], []
    osl = min(DEFAULT_OSL, context // 2)
    out, notes = [], []
    for goal in ("latency", "throughput"):
        try:
            p = place(m, s.name, Workload(context - osl, osl), Deployment(s.name, chips, given=True),
                      Precision(weights, kv, kv_layout), goal=goal)
        except UserError as e:  # DoesNotFit included: no layout of this goal places it
            notes.append(f"engine, {goal} layout: {e.message}")
            continue
        out.append(EngineCeiling(goal, kv_ceiling(p.step, context) * p.deployment.replicas, p.deployment.label()))
    return out, notes


def _units_and_chips(system: SystemSpec, racks: float | None, chips: int | None) -> tuple[int, float]:
    n = system.chips_from(racks, chips)
    return n, n / system.chips_per_unit


def _budget(system: SystemSpec, chips: int, w_bytes: float) -> tuple[float, int | None]:
    """(reserve bytes, whole chips the weights alone need on an LPU system) for `chips` chips."""
    mem = float(system.chip.memory_bytes)
    frac = reserve_fraction(system)
    chips_for_weights = math.ceil(w_bytes / (mem * (1.0 - frac))) if system.is_lpu else None
    return chips * mem * frac, chips_for_weights


def _streams(free: float, per_stream: float) -> int:
    return max(0, int(math.floor(free / per_stream + 1e-9))) if per_stream > 0 else 0


def capacity(
    model: str | ModelSpec,
    system: str | SystemSpec = "lpx",
    context: int = 100_000,
    weights: str = "fp8",
    kv: str = "bf16",
    kv_layout: str = "separate",
    racks: float | None = None,
    chips: int | None = None,
    compiled: bool = False,
) -> CapacityReport:
    """Memory breakdown and concurrency ceiling of `model` at `context` on `system`. `compiled`: also the
    deployment's own ceiling at exactly `context` -- on LPU systems the compiler's, with the reason where it is
    lower (per-chip memory); on GPU systems the engine's at each layout goal (`engine_ceilings`)."""
    m, s = get_model(model), get_system(system)
    if not isinstance(context, int) or context <= 0:
        raise UserError("context", f"expected a positive number of tokens, got {context!r}")
    get_precision(weights, "weights")
    get_precision(kv, "kv")
    n_chips, units = _units_and_chips(s, racks, chips)
    mem = float(s.chip.memory_bytes)
    total = n_chips * mem
    w = weight_bytes(m, weights)
    per_stream = kv_bytes_per_sequence(m, context, kv, kv_layout)
    reserve, chips_for_w = _budget(s, n_chips, w)
    free = total - reserve - w
    notes: list[str] = [n for n in (m.window_note(context),) if n]
    if s.chip.memory_bytes.grade == "U":
        notes.append(f"{s.chip.name} memory per chip is unpublished (grade U, {s.chip.memory_bytes.source}): "
                     "a what-if, not a prediction")
    max_streams = _streams(free, per_stream) if free > 0 else 0
    kv_total = max_streams * per_stream
    breakdown = Breakdown(
        total_bytes=total, weights_bytes=w, reserve_bytes=reserve, kv_bytes=kv_total,
        free_bytes=total - w - reserve - kv_total,
    )
    units_needed = _units_needed(s, w, per_stream)
    if max_streams == 0:
        notes.append(
            f"does not fit: needs {units_needed} {s.unit_name}(s) of {s.chip.name} for the weights plus one stream"
        )
    alternatives = [
        KvAlternative(kv_p, lay, (ps := kv_bytes_per_sequence(m, context, kv_p, lay)), _streams(max(free, 0.0), ps))
        for kv_p, lay in (("bf16", "separate"), ("bf16", "k-once"), ("fp8", "separate"), ("fp8", "k-once"))
    ]
    ceiling = None
    if compiled and s.is_lpu and max_streams >= 1:  # none pooled: none compiled (per-chip is never better)
        from lpxsim.plan.compiled_capacity import compiled_ceiling  # lazy: it loads the compiler

        ceiling = compiled_ceiling(m, s.name, context, weights, kv, kv_layout, racks=racks, chips=chips,
                                   upper=max(1, max_streams), weight_bytes=w, kv_bytes_per_stream=per_stream,
                                   pooled_streams=max_streams)
        if ceiling.reason:
            notes.append(f"compiled: {ceiling.reason}")
    engine: list[EngineCeiling] = []
    if compiled and not (s.is_lpu or s.is_wafer) and max_streams >= 1:
        engine, why = engine_ceilings(m, s, context, weights, kv, kv_layout, n_chips)
        notes += why
    return CapacityReport(
        model=m.name, system=s.name, chip=s.chip.name, chips=n_chips, units=units, unit_name=s.unit_name,
        context=context, weights=weights, kv=kv, kv_layout=kv_layout, weight_bytes=w, kv_bytes_per_stream=per_stream,
        chip_memory_bytes=mem, chips_for_weights=chips_for_w, units_needed=units_needed, max_streams=max_streams,
        breakdown=breakdown, power_w=float(s.power_w) * units, alternatives=alternatives, notes=notes,
        compiled=ceiling, engine=engine,
    )


def _units_needed(s: SystemSpec, w: float, per_stream: float) -> int:
    """Smallest whole number of racks/nodes that holds the weights, the reserves and one stream."""
    usable = s.chips_per_unit * float(s.chip.memory_bytes) * (1.0 - reserve_fraction(s))
    return max(1, math.ceil((w + per_stream) / usable))


def require_fit(report: CapacityReport) -> CapacityReport:
    """Raise DoesNotFit (a one-line user error) when not even one stream fits."""
    if not report.fits:
        raise DoesNotFit(
            "system",
            f"{report.model} ({report.weights}) at {report.context:,} tokens does not fit {report.chips} x "
            f"{report.chip}; it needs {report.units_needed} {report.unit_name}(s)",
        )
    return report
