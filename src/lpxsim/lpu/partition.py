"""Partition search: which layout (tp, stages, KV sequence split, replicas) to compile.

Every candidate that tiles the topology is checked against each chip's SRAM
(weights of its stage / tp, q/o projections replicated over the KV sequence
split, its KV share at the target context and concurrency, a reserve for
activations and buffers) and priced with a per-layer critical-path estimate
built from the same cycle costs the scheduler uses. Candidates come back best
first; the compiler compiles the first one that places.
"""

from __future__ import annotations

import math

from lpxsim.core.errors import UserError
from lpxsim.graph.lower import layer_templates
from lpxsim.lpu.arch import Arch
from lpxsim.lpu.layout import Layout, balanced, heads_split, helper_stages, layer_costs, split_layers
from lpxsim.specs.accounting import kv_elements_per_token
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.specs.precision import get_precision

# SRAM kept per chip for activations, transfer buffers and schedule state: the capacity model's reserve
# (`lpxsim.plan.capacity.LPU_BUFFER_FRACTION` is this number), so the search and `lpxsim capacity` fit at the same
# budget. The search counts weights and KV as the lowering places them (within 0.2 MB of `place`).
RESERVE_FRACTION = 0.01
MAX_TRANSFERS = 400_000  # compile-cost guard (not physics): skip layouts whose all-reduces need more transfers


def transfers_estimate(model: ModelSpec, tp: int, cpn: int) -> int:
    """Transfers of one replica's all-reduces (two per layer): every chip to its node peers and rail partners."""
    k = max(1, tp // cpn)
    per_chip = min(tp, cpn) - 1 + (k - 1)
    return 2 * model.num_layers * tp * per_chip


def _tp_options(cpn: int, per_rack: int, n: int) -> list[int]:
    """Divisors of a node, then whole nodes up to one rack (groups never span racks)."""
    opts = [d for d in range(1, cpn + 1) if cpn % d == 0]
    opts += [cpn * k for k in range(2, per_rack // cpn + 1)]
    return [t for t in opts if t <= n]


def _layer_kv_per_chip(model: ModelSpec, layer: int, tp: int, kvsplit: int, kvb: float, layout_kv: str,
                       context: int, streams: int) -> tuple[float, int]:
    """(worst chip's KV bytes for this layer, sequence shards) at `context` for `streams` streams."""
    a = model.layers[layer].attention
    want = kvsplit if a.window is None else 1
    h_par, seq = heads_split(tp, a.num_heads, want)
    kvh = 1 if a.kind == "mla" else a.num_kv_heads
    worst_heads = _worst_kv_heads(a, h_par)
    tokens = context + 1 if a.window is None else min(context + 1, a.window + 1)
    per_tok = kv_elements_per_token(a, layout_kv) * kvb * worst_heads / kvh
    return per_tok * math.ceil(tokens / seq) * streams, seq


def _worst_kv_heads(a, h_par: int) -> int:
    """KV heads the fullest chip of `h_par` head shards holds (a chip holds every KV head its query heads use)."""
    if a.kind == "mla":
        return 1
    group = max(1, a.num_heads // a.num_kv_heads)
    worst = 0
    for t in range(h_par):
        h0, h1 = balanced(a.num_heads, h_par, t)
        worst = max(worst, ((max(h1, h0 + 1) - 1) // group + 1) - h0 // group)
    return worst


def _kv_proj_excess(model: ModelSpec, layer: int, wb: float, tp: int, h_par: int) -> float:
    """Bytes the fullest chip holds beyond an even 1/tp share of a layer's K and V projections: a chip holds the
    projections of every KV head its query heads use whole (`lowering`), so past tp = kv_heads they repeat."""
    a = model.layers[layer].attention
    if a.kind == "mla":
        return 0.0
    per_head = model.hidden_size * (a.head_dim + (0 if a.k_eq_v else a.v_head_dim)) * wb
    return max(0.0, per_head * (_worst_kv_heads(a, h_par) - a.num_kv_heads / tp))


def chip_bytes(model: ModelSpec, lay: Layout, weights: str, kv: str, kv_layout: str, context: int,
               streams: int, memo: dict | None = None) -> float:
    """Worst chip's SRAM need (weights + KV) for this layout (`memo`: a dict shared across the layouts of
    one search, so per-layer terms are computed once)."""
    memo = {} if memo is None else memo
    wb = get_precision(weights, "weights").bytes_per_element
    kvb = get_precision(kv, "kv").bytes_per_element
    costs = memo.get("costs")
    if costs is None:
        costs = memo["costs"] = layer_costs(model, weights)
    ranges = memo.get(("split", lay.stages))
    if ranges is None:
        ranges = memo[("split", lay.stages)] = split_layers(model, lay.stages, weights)
    # a layer's terms are its template's (`layer_templates`: the same spec but for the index)
    templates = memo.get("templates")
    if templates is None:
        templates = memo["templates"] = layer_templates(model)
    base: list[float] = []
    spread_kv: list[float] = []  # full-attention KV per chip that is shared with helper stages
    for s, (lo, hi) in enumerate(ranges):
        w = sum(costs[1 + lo:1 + hi])
        if s == 0:
            w += costs[0]
        if s == lay.stages - 1:
            w += costs[-1]
        per_chip = w / lay.tp
        extra = kvb_total = full_kv = 0.0
        for i in range(lo, hi):
            t = templates[i]
            key = (t, lay.tp, lay.kv_seq_split)
            terms = memo.get(key)
            if terms is None:
                a = model.layers[t].attention
                rep = _replicated_bytes(model, t, wb) * (1.0 - 1.0 / lay.tp) + _expert_excess(model, t, wb, lay.tp)
                h_par, seq = heads_split(lay.tp, a.num_heads, lay.kv_seq_split if a.window is None else 1)
                rep += _kv_proj_excess(model, t, wb, lay.tp, h_par)
                if seq > 1:  # q and o projections replicated over the sequence shards
                    qo = 2 * model.hidden_size * a.num_heads * a.head_dim * wb
                    rep += qo * (seq - 1) / lay.tp
                k, _ = _layer_kv_per_chip(model, t, lay.tp, lay.kv_seq_split, kvb, kv_layout, context, streams)
                terms = memo[key] = (rep, k, a.window is None)
            rep, k, full = terms
            extra += rep
            if full and lay.kv_spread:
                full_kv += k
            else:
                kvb_total += k
        base.append(per_chip + extra + kvb_total)
        spread_kv.append(full_kv)
    held = [kv / (lay.kv_spread + 1) for kv in spread_kv]  # own chunk
    for s, kv in enumerate(spread_kv):
        for h in helper_stages(s, lay.stages, lay.kv_spread):
            held[h] += kv / (lay.kv_spread + 1)
    return max(b + k for b, k in zip(base, held, strict=True))


def _replicated_bytes(model: ModelSpec, layer: int, wb: float) -> float:
    """Weights every chip of a stage holds whole: MLA down-projections, the MoE router, norms."""
    a, f, h = model.layers[layer].attention, model.layers[layer].ffn, model.hidden_size
    out = 4.0 * h * wb
    if a.kind == "mla":
        out += h * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim) * wb
    if f.is_moe:
        out += h * f.num_experts * wb
    return out


def _routed_experts(model: ModelSpec, layer: int, wb: float) -> tuple[int, int, float]:
    """(experts, top-k, bytes of one expert) of a layer's routed experts, as the lowering sizes them; (0, 0, 0)
    for a dense layer."""
    f = model.layers[layer].ffn
    if not f.is_moe:
        return 0, 0, 0.0
    mats = 3 if f.gated else 2
    return f.num_experts, f.top_k, mats * model.hidden_size * f.expert_intermediate * wb


def _expert_excess(model: ModelSpec, layer: int, wb: float, tp: int) -> float:
    """Bytes the fullest chip holds beyond an even 1/tp share of a layer's routed experts: the lowering places
    whole experts in contiguous ranges (`emit._emit_experts`), so it holds ceil(E / tp) of them; past tp = E
    that is one whole expert per chip, not E / tp of one."""
    E, _, eb = _routed_experts(model, layer, wb)
    return (math.ceil(E / tp) - E / tp) * eb if E else 0.0


def estimate_latency_s(model: ModelSpec, system: SystemSpec, arch: Arch, lay: Layout, weights: str,
                       context: int, batch: int) -> float:
    """Critical-path estimate of one decode step (ranking only; the compiled schedule is the answer)."""
    links = system.topology.links
    intra = links.get("intra_node") or next(iter(links.values()))
    hop = float(intra.latency_s)
    bw = intra.bandwidth_Bps
    f = arch.clock_hz
    lat = {u: sum(c for _, c in arch.latency_parts(u)) / f for u in ("MXM", "VXM", "MEM")}
    costs = layer_costs(model, weights)
    wb = get_precision(weights, "weights").bytes_per_element
    mem_bps = arch.feed_bytes_per_cycle * f
    h_bytes = batch * model.hidden_size * 2.0
    cross = lay.tp > system.topology.chips_per_node
    ar = 0.0 if lay.tp == 1 else (hop + h_bytes / bw + lat["VXM"]) * (2 if cross else 1)
    if cross:  # the rail step: each chip sends to tp/cpn - 1 other nodes over the global ports it has
        rail = links.get("inter_node") or intra
        ports = max(1.0, float(rail.lanes_per_chip or rail.lanes_per_link) / float(rail.lanes_per_link))
        msgs = math.ceil((lay.tp // system.topology.chips_per_node - 1) / ports)
        ar += max(0, msgs - 1) * h_bytes / rail.bandwidth_Bps
    total = 0.0
    for i in range(model.num_layers):
        a = model.layers[i].attention
        _, seq = heads_split(lay.tp, a.num_heads, lay.kv_seq_split if a.window is None else 1)
        E, k, eb = _routed_experts(model, i, wb)
        # the static schedule budgets the worst case: every routed choice lands on the fullest chip's experts
        sweep = ((costs[1 + i] - E * eb) / lay.tp + min(math.ceil(E / lay.tp), k * batch) * eb) / mem_bps
        kv_elems = kv_elements_per_token(a, "separate")
        keys = context + 1 if a.window is None else min(context + 1, a.window)
        kvh = 1 if a.kind == "mla" else a.num_kv_heads
        h_par = lay.tp // seq
        kv_read = batch * keys / seq * kv_elems * 2.0 * max(1.0, kvh / h_par) / kvh / mem_bps
        if a.window is None and lay.kv_spread:
            kv_read /= lay.kv_spread + 1
        chain = 7 * lat["VXM"] + 5 * lat["MXM"] + lat["MEM"] + 2 * ar + sweep + kv_read
        if seq > 1:
            chain += hop + lat["VXM"]
        if a.window is None and lay.kv_spread:  # q out to the helpers, partial outputs back, merge
            rail = links.get("inter_node") or intra
            back = batch * a.num_heads / h_par * (a.v_head_dim + 2) * 2.0
            chain += 2 * float(rail.latency_s) + back / rail.bandwidth_Bps + lat["MXM"] + lat["VXM"]
        total += chain
    total += (lay.stages - 1) * (hop + h_bytes / (bw / 2))
    total += costs[-1] / lay.tp / mem_bps + 2 * (lat["MXM"] + lat["VXM"]) + 2 * hop
    return total


def choose_layout(model: ModelSpec, system: SystemSpec, arch: Arch, n_chips: int, target, weights: str, kv: str,
                  kv_layout: str, forced: dict[str, int]) -> tuple[list[Layout], list[dict]]:
    """Feasible layouts, best first (per-user token period at the target), with their estimates."""
    cpn = system.topology.chips_per_node
    L = model.num_layers
    sram = arch.sram_bytes * (1.0 - RESERVE_FRACTION)
    rows: list[tuple[float, int, Layout]] = []
    info: list[dict] = []
    memos: dict[int, dict] = {}  # per stream count: per-layer terms shared by the layouts searched
    if "tp" in forced:
        tp = forced["tp"]
        if not (cpn % tp == 0 or tp % cpn == 0):
            raise UserError("layout", f"tp={tp} must divide or be a multiple of the {cpn} chips of a node")
        if "kv_seq_split" in forced and tp % forced["kv_seq_split"]:
            raise UserError("layout", f"kvsplit={forced['kv_seq_split']} must divide tp={tp}")
    tps = [forced["tp"]] if "tp" in forced else _tp_options(cpn, system.chips_per_unit, n_chips)
    rep_opts = [forced["replicas"]] if "replicas" in forced else ([1, 2, 4, 8] if target.concurrency > 1 else [1])
    for tp in tps:
        if "tp" not in forced and transfers_estimate(model, tp, cpn) > MAX_TRANSFERS:
            continue
        splits = [forced["kv_seq_split"]] if "kv_seq_split" in forced else [d for d in (1, 2, 4, 8, 16) if tp % d == 0]
        for reps in rep_opts:
            max_stages = min(L, n_chips // (tp * reps))
            if max_stages < 1:
                continue
            streams = math.ceil(target.concurrency / reps)
            for S in _stage_options(forced, max_stages):
                for p, spread in ((p, r) for p in splits for r in _spread_options(forced, S)):
                    lay = Layout(tp=tp, stages=S, replicas=reps, kv_seq_split=p, kv_spread=spread,
                                 kv_block=forced.get("kv_block", 1))
                    need = chip_bytes(model, lay, weights, kv, kv_layout, target.context, streams,
                                      memos.setdefault(streams, {}))
                    if need > sram:
                        continue
                    est = estimate_latency_s(model, system, arch, lay, weights, target.context, streams)
                    rows.append((est, lay.chips, lay))
                    info.append({"layout": lay.describe(), "chip_bytes": need, "est_latency_s": est})
    rows.sort(key=lambda r: (round(r[0], 12), r[1], r[2].kv_seq_split, r[2].replicas))
    return [r[2] for r in rows[:6]], info


def _stage_options(forced: dict[str, int], max_stages: int) -> list[int]:
    if "stages" in forced:
        return [forced["stages"]] if forced["stages"] <= max_stages else []
    return sorted({max_stages, max(1, max_stages // 2), max(1, max_stages // 4)})


def _spread_options(forced: dict[str, int], stages: int) -> list[int]:
    if "kv_spread" in forced:
        return [forced["kv_spread"]] if forced["kv_spread"] < stages else []
    return [r for r in (0, 1, 3, 7, 15) if r < stages]
