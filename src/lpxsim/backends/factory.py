"""One factory from (model, system, layout) to a hardware backend's StepModel.

The layers above the seam (serving, bench, plan, cli) build step models only
through `make_step_model`, so they never import backend internals. LPU systems
get the compiler-backed `LpxStepModel`; GPU systems the roofline `GpuStepModel`; wafer-scale
systems (Cerebras) the `WseStepModel` (SRAM-resident weights, layers pipelined over wafers).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import UserError
from lpxsim.core.frameworks import LATEST
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import StepModel


@dataclass(frozen=True)
class Layout:
    """How one replica is laid out. Unset fields are chosen by the backend's search."""

    racks: float | None = None  # LPU systems: racks (or chips)
    chips: int | None = None
    gpus: int | None = None  # GPU systems
    tp: int | None = None
    ep: int = 1
    pp: int = 1
    dp_attention: bool = False
    kv_parallel: bool = False  # GPU: KV split along the sequence over the TP group (Helix-style)
    goal: str = "latency"  # GPU layout search goal when tp is not given
    # The workload the layout searches are sized for (GPU: scored at it; LPX: KV placed for it).
    isl: int | None = None  # None: the backend's default (GPU search 1,024; LPX its default context)
    osl: int | None = None
    concurrency: int = 1
    lpx_layout: str | None = None  # a forced LPX layout string (see `lpxsim compile --help`)
    # LPX: compile steps at this workload's own contexts (0, 1,024 and isl + osl) and interpolate between
    # them, instead of the generic context buckets (a sweep point and a serving run of this workload ask only
    # about contexts up to isl + osl; see `_workload_grid`).
    workload_grid: bool = False
    framework: str = "sglang"  # GPU serving engine: sglang, trtllm or vllm (its measured kernels, its overheads)
    part: str = "all"  # GPU: "attention" prices only the attention half (attention/FFN disaggregation)
    # GPU: the engine release whose host time a step carries (gpu.engine.engine_params): the latest for an
    # answer, a measured run's own for a replay
    release: str = LATEST


def make_step_model(
    model: str | ModelSpec,
    system: str,
    layout: Layout | None = None,
    weights: str = "fp8",
    kv: str = "bf16",
    kv_layout: str = "separate",
) -> StepModel:
    """The StepModel of one replica of `model` on `system` with `layout`, behind a per-shape memo
    that persists through the step cache (`lpxsim.backends.memo`): a shape is priced once, ever."""
    m, s = get_model(model), get_system(system)
    lay = layout or Layout()
    if lay.goal not in ("latency", "throughput"):
        raise UserError("goal", f"expected latency or throughput, got {lay.goal!r}")
    _check(s, lay)
    from lpxsim.backends.memo import memoized

    build = partial(build_step_model, m, s.name, lay, weights, kv, kv_layout)
    identity: tuple = ("backend", m, s, lay, weights, kv, kv_layout)
    grid = _workload_grid(lay) if s.is_lpu else None
    if grid is not None:  # the contexts compiled decide the answers: a new grid rule must not reuse old tables
        identity += (("context_grid", grid),)
    return memoized(build, identity)


def _check(s, lay: Layout) -> None:
    """Layout fields that do not belong to the system's kind: refused before anything is built."""
    if s.is_lpu:
        if lay.gpus is not None or lay.tp is not None:
            raise UserError("gpus", f"{s.name} is an LPU system: give --racks or --chips, not --gpus/--tp")
        _workload_grid(lay)
        return
    if s.is_wafer:  # sized by any of racks / chips / gpus (wafers)
        return
    if lay.racks is not None or lay.chips is not None:
        raise UserError("racks", f"{s.name} is a GPU system: give --gpus (and --tp), not --racks/--chips")
    gpus = lay.gpus if lay.gpus is not None else (lay.tp or s.topology.chips_per_node)
    if gpus <= 0:
        raise UserError("gpus", f"expected a positive number of GPUs, got {gpus}")


def build_step_model(m: ModelSpec, system: str, lay: Layout, weights: str, kv: str, kv_layout: str) -> StepModel:
    """The backend itself, unwrapped (a layout search, and on LPX a compile): `make_step_model` memoizes it."""
    from lpxsim.core.progress import stage

    with stage(f"laying out {m.name} on {get_system(system).name}"):  # the stage a user sees (progress)
        return _build_step_model(m, system, lay, weights, kv, kv_layout)


def _build_step_model(m: ModelSpec, system: str, lay: Layout, weights: str, kv: str, kv_layout: str) -> StepModel:
    s = get_system(system)
    if s.is_lpu:
        from lpxsim.lpu import LpxStepModel

        return LpxStepModel(
            m, system=s.name, racks=lay.racks, chips=lay.chips, weights=weights, kv=kv, kv_layout=kv_layout,
            layout=lay.lpx_layout, context=_context(lay), concurrency=lay.concurrency,
            context_grid=_workload_grid(lay),
        )
    if s.is_wafer:  # Cerebras: a chain of wafers; any of --racks/--chips/--gpus sizes it
        from lpxsim.wse import WseStepModel

        wafers = lay.gpus if lay.gpus is not None else (
            s.chips_from(lay.racks, lay.chips) if (lay.racks is not None or lay.chips is not None) else None)
        return WseStepModel(m, system=s.name, wafers=wafers, weights=weights, kv=kv, kv_layout=kv_layout)
    from lpxsim.gpu import GpuStepModel, best_layout

    gpus = lay.gpus if lay.gpus is not None else (lay.tp or s.topology.chips_per_node)
    if lay.tp is None:
        return best_layout(
            m, system=s.name, gpus=gpus, goal=lay.goal, weights=weights, kv=kv, kv_layout=kv_layout,
            isl=lay.isl or 1024, osl=lay.osl or 1024, concurrency=lay.concurrency, framework=lay.framework,
            part=lay.part, release=lay.release,
        )
    return GpuStepModel(
        m, system=s.name, gpus=gpus, tp=lay.tp, ep=lay.ep, pp=lay.pp, dp_attention=lay.dp_attention,
        kv_parallel=lay.kv_parallel, weights=weights, kv=kv, kv_layout=kv_layout, framework=lay.framework, part=lay.part,
        release=lay.release,
    )


def _workload_grid(lay: Layout) -> tuple[int, ...] | None:
    """The LPX contexts compiled exactly when the layout asks for its workload's own grid: the steady state's
    mean context isl + osl/2 and the whole request isl + osl (the context the layout places KV for; the step
    model adds 0 and 1,024). Every context the workload asks about -- prefill chunks up to isl, decode from
    isl to isl + osl -- lies in [1,024, isl + osl]: decode is linear in context there (KV reads; a batch is
    compiled at the top of its bracket and re-timed by batch 1's checked per-sequence slope) and prefill is
    flat, then rising, from 1K. Where the replica is laid out for exactly this request, its target is
    isl + osl and the step model keeps that point alone (`LpxStepModel._context_grid`), so a sweep and a
    serving run of the workload (the tour's sweep and modes) share every compile (docs/benchmarks.md, "Tour
    compiles shared"); on a longer replica (the long-context default) the mean is compiled exactly, one
    decode compile for a steady-state estimate instead of two."""
    if not lay.workload_grid:
        return None
    if lay.isl is None or lay.osl is None:
        raise UserError("workload_grid", "an LPX workload grid needs both isl and osl")
    return (lay.isl + lay.osl // 2, lay.isl + lay.osl)


def _context(lay: Layout) -> int | None:
    """The context an LPX layout places KV for: the whole request, when the workload is given."""
    if lay.isl is None and lay.osl is None:
        return None
    return (lay.isl or 0) + (lay.osl or 0)
