"""Resolve a fleet pool to the StepModel of one of its replicas.

`backend: auto` (the default) is the detailed backend of the pool's system: the
compiled LPX backend on an LPU system, the GPU model on a GPU system, built
through the project's factory `lpxsim.backends.make_step_model` (imported
lazily). The two halves of attention/FFN disaggregation come from
`lpxsim.afd_backends`: the GPU model's attention half, a compiled FFN-only LPX
program. `backend: analytic` (the first-order roofline of this package) is
only ever used when a fleet file asks for it by name.
"""

from __future__ import annotations

from dataclasses import replace

from lpxsim.catalog import get_model, get_system
from lpxsim.errors import UserError
from lpxsim.serving.analytic import AnalyticHardware, AnalyticStepModel
from lpxsim.serving.config import PoolConfig
from lpxsim.serving.drafter import DRAFTER_NAMES, gemma4_assistant
from lpxsim.specs.model import ModelSpec
from lpxsim.stepmodel import StepModel


def pool_model(pool: PoolConfig) -> ModelSpec:
    if pool.model.lower() in DRAFTER_NAMES:
        return gemma4_assistant()
    return get_model(pool.model)


def chips_per_worker(pool: PoolConfig) -> int:
    """Chips one replica occupies, from gpus/chips/racks_per_worker (default: one node or one rack)."""
    system = get_system(pool.system)
    if pool.gpus_per_worker:
        return pool.gpus_per_worker
    if pool.chips_per_worker:
        return pool.chips_per_worker
    if pool.racks_per_worker:
        return max(1, round(pool.racks_per_worker * system.chips_per_unit))
    return system.chips_per_unit if system.is_lpu else system.topology.chips_per_node


def make_step_model(pool: PoolConfig, part: str = "all", field: str = "pools") -> StepModel:
    """The StepModel of one replica of `pool` (`part`: all | attention | ffn, the sides of an AFD pair)."""
    model = pool_model(pool)
    system = get_system(pool.system)
    chips = chips_per_worker(pool)
    kind = "lpx" if system.is_lpu else "gpu"
    backend = kind if pool.backend == "auto" else pool.backend
    if backend == "analytic":
        hw = AnalyticHardware.from_system(system)
        if pool.memory_fraction is not None:
            hw = replace(hw, usable_memory_fraction=pool.memory_fraction)
        return AnalyticStepModel(
            model, hw, chips, weights=pool.weights, kv=pool.kv,
            part=part, stages=pool.stages, tp=pool.tp, max_batch_size=pool.max_batch or 512,
            kv_layout=pool.kv_layout, label=f"analytic {model.name} on {chips} x {system.chip.name}" + (
                f"[{part}]" if part != "all" else ""),
        )
    if backend != kind:
        raise UserError(f"{field}.{pool.name}.backend", f"{pool.system} is a {kind} system; use backend: {kind} or auto")
    if part == "ffn" and kind == "lpx":
        from lpxsim.afd_backends import lpx_ffn_side

        return lpx_ffn_side(model, system.name, chips=chips, weights=pool.weights, kv=pool.kv)
    if part == "attention" and kind == "lpx":
        raise UserError(f"{field}.{pool.name}.system", "the attention side of an AFD pair runs on GPUs (it holds the KV)")
    from lpxsim.backends import Layout
    from lpxsim.backends import make_step_model as project_factory

    if kind == "lpx":
        layout = Layout(chips=chips, isl=pool.target_context, concurrency=pool.target_concurrency or 1)
    else:
        layout = Layout(gpus=chips, tp=pool.tp)
    return project_factory(model, system.name, layout, weights=pool.weights, kv=pool.kv, kv_layout=pool.kv_layout)
