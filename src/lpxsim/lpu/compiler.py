"""The LPX compiler pipeline: partition (search a layout) -> lower -> realise -> route + schedule -> place ->
verify.

`compile_program` compiles one step (the CLI and `LpxStepModel` call it); `deployment_layout` picks the one
layout all steps of a deployment share (the emulator compiles its prefill and decode steps on it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.graph import OpGraph, Phase, lower
from lpxsim.lpu.arch import Arch, arch_for
from lpxsim.lpu.emit import emit_all
from lpxsim.lpu.gcpause import gc_paused
from lpxsim.lpu.layout import Layout, check_shape, parse_layout, realise
from lpxsim.lpu.lowering import Lowerer
from lpxsim.lpu.memtrim import release_free_memory
from lpxsim.lpu.place import last_reads, place
from lpxsim.lpu.program import InstructionTable, LayoutInfo, Program
from lpxsim.lpu.schedule import Provenance, Scheduler
from lpxsim.lpu.timing import Timing, summarize
from lpxsim.lpu.verify import VerifyReport, verify
from lpxsim.lpu.verify_kv import KvResidency
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.specs.topology import chip_graph


@dataclass
class Target:
    """What the layout must hold and is optimised for."""

    context: int = 8192
    concurrency: int = 1


@dataclass
class CompileResult:
    program: Program
    report: VerifyReport
    timing: Timing
    layout: Layout
    memory: dict[int, dict] = field(default_factory=dict)
    compile_s: float = 0.0
    candidates: list[dict] = field(default_factory=list)
    compile_cpu_s: float = 0.0  # CPU seconds (user + sys of this process) the compile and verify took


def resolve_system(system: str | SystemSpec, racks: float | None, chips: int | None,
                   variant: str | None = None) -> tuple[SystemSpec, int, int]:
    """(system, chips available, racks spanned) from --racks / --chips."""
    s = get_system(system)
    if not s.is_lpu:
        raise UserError("system", f"{s.name} is not an LPU system; the LPX compiler targets LPU systems")
    if variant:
        s = s.with_topology(variant)
    per = s.chips_per_unit
    n = s.chips_from(racks, chips)
    units = math.ceil(n / per)
    if units > s.max_units:
        raise UserError("chips", f"{n} chips need {units} {s.unit_name}s; {s.name} joins at most {s.max_units}")
    return s, n, units


def default_phase(target: Target, replicas: int) -> Phase:
    batch = max(1, math.ceil(target.concurrency / max(1, replicas)))
    return Phase.decode([target.context] * batch)


def critical_breakdown(sched: Scheduler) -> dict[str, int]:
    """Cycles per mechanism along the step's critical path; they sum to the makespan exactly."""
    if sched.last_node < 0:
        return {}
    out = sched.prov.breakdown(sched.last_node)
    assert sum(out.values()) == sched.last_end, (out, sched.last_end)
    return dict(sorted(out.items()))


@gc_paused
def build_program(graph: OpGraph, system: SystemSpec, units: int, arch: Arch, layout: Layout,
                  n_chips: int) -> tuple[Program, dict[int, dict]]:
    """Schedule one replica of `layout` for `graph` and place it; raises DoesNotFit on SRAM overflow."""
    cg = chip_graph(system, units)
    check_shape(layout, system.topology.chips_per_node, n_chips)
    stages = realise(graph.model, layout, graph.weights)
    sched = Scheduler(arch, cg)
    lw = Lowerer(graph, arch, sched, layout, stages)
    emit_all(lw)
    breakdown = critical_breakdown(sched)
    sched.prov = Provenance()  # the critical path is read; free its nodes before placement (peak memory)
    sched.finish()
    release_free_memory()  # the provenance and scheduling state just freed, before placement allocates its own
    # Peak memory: the ready times and the declared buffers are handed over, and any last reads passed without a
    # name, so `place` frees each once it has read it. The scheduler keeps each buffer's last read on its ready
    # row; only a program that writes some buffer twice (which fails `verify`) needs the pass over it.
    once = sched.written_once()
    regions, buffers, summary = place(lw.use, sched.take_buffers(), sched.take_ready(),
                                      None if once else last_reads(sched.instructions, sched.transfers),
                                      arch.sram_bytes)
    release_free_memory()  # placement's columns and the scheduler's ready table: before `verify` builds its own
    instrs = _by_chip_and_cycle(sched.instructions)
    info = LayoutInfo(tp=layout.tp, stages=layout.stages, replicas=layout.replicas,
                      kv_seq_split=layout.kv_seq_split, micro_batches=1, stage_list=tuple(stages),
                      kv_spread=layout.kv_spread, kv_block=layout.kv_block)
    ph = graph.phase
    prog = Program(
        system=system.name, model=graph.model.name,
        phase={"kind": ph.kind, "contexts": list(ph.contexts), "new_tokens": ph.new_tokens},
        weights=graph.weights, kv=graph.kv, kv_layout=graph.kv_layout, clock_hz=arch.clock_hz,
        chip_sram_bytes=arch.sram_bytes, layout=info, regions=regions, buffers=buffers, instructions=instrs,
        transfers=sched.transfers, links=sched.links,
        meta={"racks": units, "chips_available": n_chips, "fitted": list(arch.fitted),
              "breakdown_cycles": breakdown,
              # unit rates an instruction's attrs work_bytes / work_flops (at work_flop_rate) / work_ops imply
              "rates": {"feed_bytes_per_cycle": arch.feed_bytes_per_cycle, "vxm_ops_per_cycle": arch.vxm_ops_per_cycle,
                        "mxm_flops_per_cycle": dict(arch.mxm_flops_per_cycle), "vector_bytes": arch.vector_bytes}},
    )
    return prog, summary


def _by_chip_and_cycle(instructions: InstructionTable) -> InstructionTable:
    """The instructions sorted by (chip, cycle_start, id), in place (the table is returned): a permutation of
    its columns (no records; one column copied at a time, peak memory)."""
    c = instructions.column
    instructions.permute(np.lexsort((c("id"), c("cycle_start"), c("chip"))))
    return instructions


@dataclass
class Search:
    """The layout search's answer: the system sized to the chips, the chip's rates, the candidates best first."""

    model: ModelSpec
    system: SystemSpec
    n_chips: int
    units: int
    arch: Arch
    target: Target
    candidates: list[Layout]
    info: list[dict]


def search_layouts(model: str | ModelSpec, system: str | SystemSpec = "lpx", *, racks: float | None = None,
                   chips: int | None = None, context: int = 8192, concurrency: int = 1, weights: str = "fp8",
                   kv: str = "bf16", kv_layout: str = "separate", layout: Layout | str | dict | None = None,
                   chip_sram_bytes: int | None = None, variant: str | None = None) -> Search:
    """Partition: the candidate layouts of `model` on `system` for the target, best first (one, if forced).
    Without --racks/--chips: on the fewest units that have a candidate."""
    m = get_model(model)
    if context < 0 or concurrency <= 0:
        raise UserError("context", "context must be >= 0 and concurrency > 0")
    target = Target(context=context, concurrency=concurrency)
    forced = _forced(layout)
    auto = racks is None and chips is None and not (forced and {"tp", "stages"} <= set(forced))
    s, n_chips, units = resolve_system(system, racks, chips, variant)
    while True:
        arch = arch_for(s).with_sram(chip_sram_bytes)
        candidates, info = _candidates(m, s, arch, n_chips, target, weights, kv, kv_layout, forced)
        if candidates or not auto or units >= s.max_units:
            return Search(m, s, n_chips, units, arch, target, candidates, info)
        s, n_chips, units = resolve_system(system, float(units + 1), None, variant)


def _no_fit(found: Search, weights: str) -> DoesNotFit:
    t, a = found.target, found.arch
    return DoesNotFit("model", f"{found.model.name} ({weights}) does not fit {found.n_chips} x "
                               f"{found.system.chip.name} ({a.sram_bytes:,} B each) at context {t.context:,}, "
                               f"concurrency {t.concurrency}")


@gc_paused
def compile_program(
    model: str | ModelSpec,
    system: str | SystemSpec = "lpx",
    *,
    racks: float | None = None,
    chips: int | None = None,
    context: int = 8192,
    concurrency: int = 1,
    phase: Phase | None = None,
    weights: str = "fp8",
    kv: str = "bf16",
    kv_layout: str = "separate",
    layout: Layout | str | dict | None = None,
    chip_sram_bytes: int | None = None,
    variant: str | None = None,
    run_verify: bool = True,
    kv_held: KvResidency | None = None,
) -> CompileResult:
    """Compile one step of `model` on `system` (searching a layout unless one is forced) and verify it.

    The search takes the first candidate on which this step places. The steps of one deployment must share
    their layout (it fixes where each stream's KV lives): compile them on `deployment_layout`'s. `kv_held`:
    the KV the chips hold when this step starts (`verify_kv.kv_after` of the previous step), for `verify`."""
    t0, c0 = time.perf_counter(), time.process_time()
    found = search_layouts(model, system, racks=racks, chips=chips, context=context, concurrency=concurrency,
                           weights=weights, kv=kv, kv_layout=kv_layout, layout=layout,
                           chip_sram_bytes=chip_sram_bytes, variant=variant)
    last_err: Exception | None = None
    for lay in found.candidates:
        ph = phase or default_phase(found.target, lay.replicas)
        graph = lower(found.model, ph, weights=weights, kv=kv, kv_layout=kv_layout)
        try:
            prog, summary = build_program(graph, found.system, found.units, found.arch, lay, found.n_chips)
        except DoesNotFit as e:
            last_err = e
            continue
        rep = verify(prog, graph, found.arch, kv_held=kv_held) if run_verify else VerifyReport(ok=True)
        timing = summarize(prog, graph, found.arch)
        prog.meta["layout"] = lay.describe()
        return CompileResult(prog, rep, timing, lay, summary, time.perf_counter() - t0, found.info,
                             time.process_time() - c0)
    if last_err is not None:
        raise last_err
    raise _no_fit(found, weights)


@gc_paused
def deployment_layout(model: str | ModelSpec, system: str | SystemSpec = "lpx", *, phases: Sequence[Phase],
                      racks: float | None = None, chips: int | None = None, context: int = 8192,
                      concurrency: int = 1, weights: str = "fp8", kv: str = "bf16", kv_layout: str = "separate",
                      layout: Layout | str | dict | None = None, chip_sram_bytes: int | None = None,
                      variant: str | None = None) -> Layout:
    """The one layout every step of a deployment runs on: the best candidate on which each of `phases` (its
    largest steps: the prefill chunk, the decode at the longest context) places.

    A layout fixes which chip holds each KV position (`lowering`), and a stream's KV stays on its chips
    between steps. Each step searched on its own may place on different candidates (a prefill's activations
    overflow the best one, the decode fits it), and a decode step would then read KV its chips never held."""
    found = search_layouts(model, system, racks=racks, chips=chips, context=context, concurrency=concurrency,
                           weights=weights, kv=kv, kv_layout=kv_layout, layout=layout,
                           chip_sram_bytes=chip_sram_bytes, variant=variant)
    last_err: DoesNotFit | None = None
    for lay in found.candidates:
        try:
            for ph in phases:
                graph = lower(found.model, ph, weights=weights, kv=kv, kv_layout=kv_layout)
                build_program(graph, found.system, found.units, found.arch, lay, found.n_chips)
        except DoesNotFit as e:
            last_err = e
            continue
        return lay
    if last_err is not None:
        raise last_err
    raise _no_fit(found, weights)


def _candidates(m: ModelSpec, s: SystemSpec, arch: Arch, n_chips: int, target: Target, weights: str, kv: str,
                kv_layout: str, forced: dict[str, int] | None) -> tuple[list[Layout], list[dict]]:
    from lpxsim.lpu.partition import choose_layout

    if forced is not None and {"tp", "stages"} <= set(forced):
        return [Layout(**{"replicas": 1, "kv_seq_split": 1, **forced})], []
    return choose_layout(m, s, arch, n_chips, target, weights, kv, kv_layout, forced or {})


def _forced(layout: Layout | str | dict | None) -> dict[str, int] | None:
    if layout is None:
        return None
    if isinstance(layout, Layout):
        return {"tp": layout.tp, "stages": layout.stages, "replicas": layout.replicas,
                "kv_seq_split": layout.kv_seq_split, "kv_spread": layout.kv_spread, "kv_block": layout.kv_block}
    if isinstance(layout, dict):
        return dict(layout)
    return parse_layout(layout)


__all__ = ["CompileResult", "Search", "Target", "compile_program", "deployment_layout", "resolve_system",
           "search_layouts", "replace"]
