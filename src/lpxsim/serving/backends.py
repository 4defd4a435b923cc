"""Resolve a fleet pool to the StepModel of one of its replicas.

`backend: auto` (the default) is the detailed backend of the pool's system: the
compiled LPX backend on an LPU system, the GPU model on a GPU system, built
through the project's factory `lpxsim.backends.factory.make_step_model` (imported
lazily). The two halves of attention/FFN disaggregation come from
`lpxsim.backends.afd`: the GPU model's attention half, a compiled FFN-only LPX
program. These detailed backends are the only cost models (issue 12): there
is no first-order model to ask for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.serving.config import PoolConfig
from lpxsim.serving.drafter import assistant_for, is_drafter_name
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import StepModel


def pool_model(pool: PoolConfig) -> ModelSpec:
    if is_drafter_name(pool.model):
        return assistant_for(pool.model)
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


_MEMO: dict[tuple[str, str], StepModel] = {}
_MEMO_SIZE = 64


def _memo_key(pool: PoolConfig, part: str) -> tuple[str, str]:
    """A replica's step model depends on its hardware fields only (not its name, count, role or offload tier)."""
    return pool.model_dump_json(exclude={"name", "workers", "role", "offload"}), part


def make_step_model(pool: PoolConfig, part: str = "all", field: str = "pools") -> StepModel:
    """The StepModel of one replica of `pool` (`part`: all | attention | ffn, the sides of an AFD pair).

    Step models are pure functions of the pool's hardware fields, so one process reuses them across
    simulations (a modes comparison runs the same pools at several contexts and loads)."""
    key = _memo_key(pool, part)
    hit = _MEMO.get(key)
    if hit is None:
        hit = _build_step_model(pool, part, field)
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = hit
    return hit


@contextmanager
def pinned_step_model(pool: PoolConfig, step: StepModel, part: str = "all") -> Iterator[None]:
    """Within the block, run `pool`'s replicas on `step`, a step model the caller already holds (the engine's
    deployment, whose steady state a simulation of the same deployment is checked against), instead of
    building one. The memo is restored after: a pinned layout (a forced LPX layout, a test double) must not
    answer a later simulation of a pool with the same fields."""
    key = _memo_key(pool, part)
    before = _MEMO.get(key)
    _MEMO[key] = step
    try:
        yield
    finally:
        if before is None:
            _MEMO.pop(key, None)
        else:
            _MEMO[key] = before


def _build_step_model(pool: PoolConfig, part: str, field: str) -> StepModel:
    model = pool_model(pool)
    system = get_system(pool.system)
    chips = chips_per_worker(pool)
    kind = "lpx" if system.is_lpu else "gpu"
    backend = kind if pool.backend == "auto" else pool.backend
    if backend != kind:
        raise UserError(f"{field}.{pool.name}.backend", f"{pool.system} is a {kind} system; use backend: {kind} or auto")
    if part == "ffn" and kind == "lpx":
        from lpxsim.backends.afd import lpx_ffn_side

        return lpx_ffn_side(model, system.name, chips=chips, weights=pool.weights, kv=pool.kv)
    if part == "attention" and kind == "lpx":
        raise UserError(f"{field}.{pool.name}.system", "the attention side of an AFD pair runs on GPUs (it holds the KV)")
    if part == "attention":
        from lpxsim.backends.afd import gpu_attention_side

        return gpu_attention_side(model, system.name, chips, pool.tp, weights=pool.weights, kv=pool.kv,
                                  kv_layout=pool.kv_layout)
    from lpxsim.backends.factory import Layout
    from lpxsim.backends.factory import make_step_model as project_factory

    if kind != "lpx":
        layout = Layout(gpus=chips, tp=pool.tp, ep=pool.ep, pp=pool.pp, dp_attention=pool.dp_attention,
                        framework=pool.framework)
        if pool.memory_fraction is not None:
            return _gpu_with_fraction(model, system.name, layout, pool)
        return project_factory(model, system.name, layout, weights=pool.weights, kv=pool.kv, kv_layout=pool.kv_layout)
    if pool.memory_fraction is not None:
        raise UserError(f"{field}.memory_fraction", "memory_fraction is a GPU pool's KV share of free "
                                                                "HBM; an LPX program places its KV itself")
    # LPX: compiled for the target concurrency (none given: the engine's rule for a deployment, the largest power
    # of two of the streams that fit the worker's chips at its context), halved until its KV fits (the rest
    # queue at run time). The layout is the worker's, whatever load it later meets.
    conc = pool.target_concurrency or _design_streams(model, system, chips, pool)
    size = _lpx_size(pool, chips, field)
    while True:
        layout = Layout(**size, concurrency=conc)
        try:
            return project_factory(model, system.name, layout, weights=pool.weights, kv=pool.kv,
                                   kv_layout=pool.kv_layout)
        except DoesNotFit:
            if conc == 1:
                raise
            conc //= 2


def _design_streams(model: ModelSpec, system, chips: int, pool: PoolConfig) -> int:
    """`backends.sizing.design_streams` at the pool's target context (none: the LPX default long context)."""
    from lpxsim.backends import sizing
    from lpxsim.lpu.stepmodel import DEFAULT_TARGET_CONTEXT

    context = pool.target_context or min(model.max_context or DEFAULT_TARGET_CONTEXT, DEFAULT_TARGET_CONTEXT)
    return sizing.design_streams(model, system, int(context), chips, pool.weights, pool.kv, pool.kv_layout)


def _lpx_size(pool: PoolConfig, chips: int, field: str) -> dict:
    """The Layout fields of an LPX pool besides its concurrency. With `target_osl` the pool is laid out on its
    workload's own context grid, in racks when it is sized in racks: the same Layout a sweep of that workload
    builds (`bench.backends.workload_step_model`), so the two share the layout search and every compiled step."""
    if pool.target_osl is None:
        return {"chips": chips, "isl": pool.target_context}
    in_racks = pool.racks_per_worker and not (pool.chips_per_worker or pool.gpus_per_worker)
    size: dict = {"racks": float(pool.racks_per_worker)} if in_racks else {"chips": chips}
    if pool.target_context is None or pool.target_osl >= pool.target_context:
        raise UserError(f"{field}.{pool.name}.target_osl", f"expected fewer output tokens than target_context "
                                                           f"({pool.target_context}), got {pool.target_osl}")
    return {**size, "isl": pool.target_context - pool.target_osl, "osl": pool.target_osl, "workload_grid": True}


def _gpu_with_fraction(model: ModelSpec, system: str, layout, pool: PoolConfig) -> StepModel:
    """The GPU model with the pool's KV share of free HBM, behind the same per-shape memo as every backend."""
    from functools import partial

    from lpxsim.backends.memo import memoized
    from lpxsim.gpu import GpuStepModel

    gpus = layout.gpus
    build = partial(GpuStepModel, model, system=system, gpus=gpus, tp=pool.tp or gpus, ep=pool.ep, pp=pool.pp,
                    dp_attention=pool.dp_attention, weights=pool.weights, kv=pool.kv, kv_layout=pool.kv_layout,
                    framework=pool.framework, mem_fraction=pool.memory_fraction)
    return memoized(build, ("serving-gpu", model, system, layout, pool.weights, pool.kv, pool.kv_layout,
                            pool.memory_fraction))
