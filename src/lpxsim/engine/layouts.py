"""The replica layouts the deployment search tries (`engine.search`), smallest first.

LPX (`lpx_sizes`): chip counts from the fewest whole nodes that place the model (weights plus one stream of
the workload, the capacity model's arithmetic: `backends.sizing`) up to the fewest whole racks -- that size,
its double, the powers of two of nodes in between, and the whole racks. At each size the compiler's layout
search picks tp, stages, kvsplit and kvspread for the most streams that fit; where that pick spreads KV over
other stages (kvspread, which makes a prefill ship its chunk's queries and KV around the rack), the search
also tries the same size without spreading (`NO_KV_SPREAD`), which holds fewer streams and prefills locally.
Sizes are pruned before anything compiles: a size whose memory holds no stream, and any size above the fewest
whole racks (a replica larger than that straddles racks and is never the cheaper way to hold the workload),
are not tried. Each size costs a layout search and its compiles (seconds each on a cold cache, then read
from the step cache on disk).

GPUs (`replica_layouts`): on the fewest whole domains, every TP x PP x EP x attention-DP x KV-parallel layout
the GPU backend's own search considers (`gpu.search.candidate_layouts`), each as a replica (TP4 on an NVL72:
18 replicas per rack); on twice that, the backend search's latency and throughput picks; wide EP over the
domain for MoE on both.
"""

from __future__ import annotations

from dataclasses import replace

from lpxsim.backends import sizing
from lpxsim.backends.factory import Layout
from lpxsim.catalog import get_model, get_system
from lpxsim.engine.deployment import Placed, Precision, default_units, place
from lpxsim.engine.query import Deployment, Workload
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec

MAX_REPLICA_SIZES = 2  # GPU replica sizes tried: the smallest that fits, then its double
MAX_LPX_SIZES = 6  # LPX sizes tried at most (the ladder of `lpx_sizes` is shorter for every catalog model)
NO_KV_SPREAD = "kvspread=0"  # the LPX layout constraint tried next to a pick that spreads KV


def replica_layouts(model: ModelSpec, system: SystemSpec, context: int, weights: str, kv: str, kv_layout: str
                    ) -> tuple[list[Layout], str]:
    """Replica layouts to try, smallest first, and a reason when none fits the system."""
    need_units = sizing.units_needed(model, system, context, weights, kv, kv_layout)
    if need_units > system.max_units:
        return [], (
            f"{model.name} ({weights}) + one {context:,}-token stream needs {need_units} {system.unit_name}s of "
            f"{system.chip.name}; {system.name} joins at most {system.max_units}"
        )
    if system.is_lpu:
        return [Layout(chips=c) for c in lpx_sizes(model, system, context, weights, kv, kv_layout)], ""
    node = system.topology.chips_per_node
    sizes, units = [], need_units
    while units <= system.max_units and len(sizes) < MAX_REPLICA_SIZES:
        sizes.append(units * node)
        units *= 2
    out: list[Layout] = []
    for i, g in enumerate(sizes):
        if i == 0:
            out += gpu_layouts(model, g)
        # the backend searches at its own reference workload, so take both of its goals' picks
        out += [Layout(gpus=g, goal="throughput"), Layout(gpus=g, goal="latency")]
        wide = wide_ep_layout(model, g)
        if wide is not None:
            out.append(wide)
    return list(dict.fromkeys(out)), ""


def gpu_layouts(model: ModelSpec, gpus: int) -> list[Layout]:
    """Every layout the GPU backend's search considers on `gpus` GPUs, stated (each is one replica size)."""
    from lpxsim.gpu.search import candidate_layouts

    return [Layout(gpus=gpus, tp=c["tp"], ep=c["ep"], pp=c["pp"], dp_attention=c["dp_attention"],
                   kv_parallel=c.get("kv_parallel", False)) for c in candidate_layouts(model, gpus)]


def lpx_sizes(model: ModelSpec, system: SystemSpec, context: int, weights: str, kv: str, kv_layout: str
              ) -> list[int]:
    """LPX chip counts to try, smallest first: the fewest whole nodes holding the weights plus one stream, its
    double, the powers of two of nodes in between, and the fewest whole racks (nothing above them)."""
    node, per_unit = system.topology.chips_per_node, system.chips_per_unit
    top = system.max_units * per_unit
    fewest = node
    while fewest < top and sizing.streams_that_fit(model, system, context, fewest, weights, kv, kv_layout) < 1:
        fewest += node
    racks = sizing.units_needed(model, system, context, weights, kv, kv_layout) * per_unit
    ladder = {fewest, 2 * fewest, racks}
    n = node
    while n < per_unit:
        ladder.add(n)
        n *= 2
    sizes = sorted(c for c in ladder if fewest <= c <= min(racks, top))
    return sizes[:MAX_LPX_SIZES]


def no_spread_variant(layout: Layout, step_name: str) -> Layout | None:
    """The same LPX size without KV spreading, where the chosen layout spreads KV (None otherwise)."""
    if layout.lpx_layout is not None or "kvspread=" not in step_name:
        return None
    return Layout(chips=layout.chips, racks=layout.racks, lpx_layout=NO_KV_SPREAD)


def wide_ep_layout(model: ModelSpec, gpus: int) -> Layout | None:
    """MoE on a whole GPU domain: attention data-parallel, experts spread over every GPU (wide EP).

    The layouts large MoE deployments use on NVL72 (e.g. DeepSeek-V3 with EP over the domain); the
    GPU backend's own search covers power-of-two TP/EP only, so this one is tried as well.
    """
    if not model.is_moe:
        return None
    experts = next(layer.ffn.num_experts for layer in model.layers if layer.ffn.is_moe)
    ep = max(d for d in range(1, gpus + 1) if gpus % d == 0 and experts % d == 0)
    return Layout(gpus=gpus, tp=gpus, ep=ep, dp_attention=True) if ep > 1 else None


def tiled(model: str | ModelSpec, system: str, workload: Workload, replica_chips: int,
          precision: Precision = Precision()) -> Placed:
    """One replica of `replica_chips` chips (its layout searched for `workload`, as a deployment of that many
    chips the user gives), tiled over the fewest whole units that hold the workload: `units x chips_per_unit //
    replica_chips` replicas, the chips left over idle but powered. The deployment the sweep draws for a smaller
    LPX replica size (`bench.sweep`)."""
    p = precision
    m, s = get_model(model) if isinstance(model, str) else model, get_system(system)
    one = place(m, s.name, workload, Deployment(s.name, replica_chips, given=True), p)
    chips = default_units(m, s, workload.context, p) * s.chips_per_unit
    per = one.step.chips
    replicas = max(1, chips // per)
    dep = replace(one.deployment, chips=per, replicas=replicas, idle_chips=max(0, chips - replicas * per),
                  given=False)
    return Placed(dep, one.step, m, one.design_streams, one.framework, one.goal)
