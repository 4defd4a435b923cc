"""Per-GPU work of one step: each op of the graph as seen by the busiest GPU of a replica.

The cost model (cost.py) prices these rows with the parameters; the rows do not
depend on the parameters, so the fit can re-price them cheaply. A row holds:
FLOPs, the achieved large-shape FLOP rate for the op's format, matmul rows M
(small M is inefficient), bytes split by kind of traffic (dense weights and
activations, routed-expert weights, KV), and the kernel count. Collectives of
the step are priced here directly from the catalog's alpha-beta fabrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from lpxsim.gpu.collectives import Fabric
from lpxsim.gpu.layout import Layout, busiest_share
from lpxsim.graph import Op, OpGraph, Phase, expected_experts_touched

# The graph's own per-sequence attention counts, so re-pricing a batch at new contexts matches a fresh
# lowering exactly (tests/test_gpu_model.py checks it).
from lpxsim.graph.lower import _attended, _kv_read_tokens, attention_sums, layer_templates, lower
from lpxsim.specs.model import ModelSpec

# Ops of the attention half of a layer (name suffix after "L<i>.").
ATTENTION_OPS = frozenset({
    "attn_norm", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "v_norm", "rope", "kv_write", "attention",
    "o_proj", "attn_post_norm", "attn_residual", "q_a_proj", "q_a_norm", "q_b_proj", "kv_a_proj", "kv_a_norm",
    "q_absorb", "v_absorb",
})
REPLICATED_UNDER_TP = frozenset({"q_a_proj", "kv_a_proj", "q_a_norm", "kv_a_norm"})  # MLA down-projections
HEAD_SPLIT = frozenset({"q_proj", "q_b_proj", "o_proj", "q_absorb", "v_absorb", "q_norm", "rope"})
KV_HEAD_SPLIT = frozenset({"k_proj", "v_proj", "k_norm", "v_norm", "kv_write"})
# Kernels an op launches. Residual adds are fused into the next norm (fused add-RMSNorm in SGLang,
# vLLM, TRT-LLM); a router is a gate GEMM plus top-k; routed experts are align/sort, two grouped GEMMs
# and the activation. A matmul on quantized weights (fp8, fp4) adds one kernel that quantizes its
# activations (per-token-group scales). Assumption "gpu-kernel-counts" in docs/assumptions.md.
# Projections that read the same input are one GEMM in the engines (fused QKV; MLA's fused q_a + kv_a
# "qkv_a_proj_with_mqa"): they launch no kernel of their own.
KERNELS = {"residual": 0.0, "router": 2.0, "experts": 4.0}
FUSED_INTO_PREVIOUS = frozenset({"k_proj", "v_proj", "kv_a_proj"})
FUSED_INTO = ("q_proj", "q_a_proj")  # the projections the ones above join
# A MoE layer's shared experts and its router + routed experts (they overlap on two CUDA streams).
SHARED_EXPERT_OPS = frozenset({"shared_gate_up", "shared_act", "shared_down"})
ROUTED_EXPERT_OPS = frozenset({"router", "experts"})
QUANT_KERNELS = 1.0


@dataclass
class StepFeatures:
    """Per-op arrays for the busiest GPU of a replica, plus collective seconds."""

    flops: np.ndarray
    rate: np.ndarray  # achieved large-shape FLOP/s for each op's format (0 = no compute)
    rows: np.ndarray  # M of the matmul (tokens per expert for grouped experts)
    dense_bytes: np.ndarray  # weights of dense matmuls, norms and activations
    expert_bytes: np.ndarray
    kv_bytes: np.ndarray
    kernels: np.ndarray
    is_attention_core: np.ndarray  # attention ops (priced at the flash-attention rate)
    is_attn_half: np.ndarray  # ops of the attention half of a layer (AFD split)
    att_windows: tuple[tuple[int, int | None], ...]  # (row, window) of each attention op
    collective_s: float
    attn_collective_s: float
    collectives: float  # collective calls in the step
    attn_collectives: float
    layer_count: int
    # the FFN side's gather and scatter under attention data-parallelism, all layers (in collective_s)
    dp_ffn_collective_s: float = 0.0
    # per op: what the measured tables are asked for it (see lookup_key), None if no table covers it
    lookups: tuple[tuple | None, ...] = ()
    sequences: int = 1  # sequences of the step on the busiest attention rank
    # per op: its layer when it is a shared-expert op (+1 +layer) or a router/routed-expert op (-1 -layer),
    # else 0; engines run the two on parallel CUDA streams (compose.py)
    moe_stream: np.ndarray | None = None
    # the ops of each distinct lookup key, in order of first appearance (None: work it out from `lookups`)
    groups: tuple[tuple[tuple, np.ndarray], ...] | None = None


def _suffix(op: Op) -> str:
    return _name_suffix(op.name)


@lru_cache(maxsize=65536)
def _name_suffix(name: str) -> str:
    return name.split(".", 1)[1] if name.startswith("L") and "." in name else name


def _share(op: Op, layout: Layout, att_frac: float, kvp_attention: bool) -> tuple[float, float, float]:
    """(weight divisor, work fraction, kv fraction) of `op` on the busiest GPU of a stage."""
    tp, suf = layout.tp, _suffix(op)
    if suf in ATTENTION_OPS:
        if layout.dp_attention:
            return 1.0, att_frac, att_frac
        if suf in REPLICATED_UNDER_TP or suf in ("attn_norm", "attn_residual", "attn_post_norm"):
            return 1.0, 1.0, 1.0
        # with KV parallelism each GPU stores 1/tp of the sequence and, in decode, attends over it
        if layout.kv_parallel and (suf == "kv_write" or (suf == "attention" and kvp_attention)):
            return float(tp), 1.0 / tp, 1.0 / tp
        if suf in HEAD_SPLIT or suf == "attention":
            kv_div = 1.0 if op.attrs.get("mla") else min(tp, int(op.shape[2]) if suf == "attention" else tp)
            return float(tp), 1.0 / tp, 1.0 / kv_div
        if suf in KV_HEAD_SPLIT:
            kvh = int(op.attrs.get("heads", 0) or 0) or tp
            div = 1.0 if op.attrs.get("mla") else float(min(tp, kvh))
            return div, 1.0 / div, 1.0 / div
        return 1.0, 1.0, 1.0
    if op.kind in ("matmul", "elementwise") and suf not in ("ffn_combine",):
        return float(tp), 1.0 / tp, 1.0  # dense/shared MLP and the vocab-parallel head
    if op.kind in ("norm", "residual", "embed") or suf == "ffn_combine":
        return 1.0, (att_frac if layout.dp_attention else 1.0), 1.0
    return 1.0, 1.0, 1.0


def _expert_row(op: Op, layout: Layout, skew: float) -> tuple[float, float, float]:
    """(expert weight bytes, FLOPs, rows per expert) of the grouped expert op on the busiest GPU.

    Each of the ep expert groups holds E/ep experts, each split over tp/ep GPUs. The number of
    distinct experts a group touches has mean n p and variance n p (1 - p) (n = E/ep experts, each hit
    with probability p); the busiest group is taken at mean + sigma sqrt(2 ln ep), the usual
    expected-maximum estimate, capped at n.
    """
    num, top_k = int(op.attrs["num_experts"]), int(op.attrs["top_k"])
    e_total = max(float(top_k), num * (1.0 - skew))
    touched = expected_experts_touched(num, top_k, op.tokens, skew) if skew else float(op.attrs["expected_experts"])
    per_group = e_total / layout.ep
    p = min(1.0, touched / e_total)
    mean = per_group * p
    busiest = mean
    if layout.ep > 1:
        busiest = min(per_group, mean + math.sqrt(per_group * p * (1.0 - p) * 2.0 * math.log(layout.ep)))
    slice_div = layout.tp / layout.ep
    nbytes = busiest * float(op.attrs["expert_bytes"]) / slice_div
    flops = op.flops / layout.tp * (busiest / mean if mean > 0 else 1.0)
    rows = op.tokens * float(op.attrs["top_k"]) / max(touched, 1e-9)
    return nbytes, flops, rows


ROW_PARALLEL = frozenset({"o_proj", "down", "shared_down"})  # tensor parallelism splits K, not N


def lookup_key(op: Op, layout: Layout, att_frac: float, dense_fmt: str, expert_fmt: str,
               native: frozenset[str] = frozenset(), absorb_fmt: str | None = None) -> tuple | None:
    """What to ask the measured tables for `op` on the busiest GPU (gpu/measured.py), or None.

    GEMMs: (m rows on the GPU, local n, local k, format); column-parallel ops split N over tp,
    row-parallel ones K; replicated ones (MLA down-projections, attention under DP-attention) keep
    both. MoE: tokens entering the layer and the (moe_tp, moe_ep) split. Attention: local heads
    (batch and context are added at pricing time). `native`: the non-expert matmuls stored in the experts'
    format (gpu/checkpoint.py); `absorb_fmt`: the format MLA's absorbed BMMs run in (else `dense_fmt`).
    """
    suf, tp = _suffix(op), layout.tp
    in_attn = suf in ATTENTION_OPS
    local = att_frac if (in_attn and layout.dp_attention) else 1.0
    if op.kind == "experts":
        a = op.attrs
        return ("moe", op.tokens, int(op.shape[1]), int(a["intermediate"]), int(a["top_k"]), int(a["num_experts"]),
                tp // layout.ep, layout.ep, expert_fmt)
    if op.kind == "attention":
        heads = int(op.shape[1])
        if op.attrs.get("window") is not None:
            return None
        # KV parallelism: each GPU attends all heads over 1/tp of every sequence's context (decode)
        split = 1 if (layout.dp_attention or layout.kv_parallel) else tp
        ctx_div = tp if layout.kv_parallel else 1
        if op.attrs.get("mla"):
            return ("mla", max(1, heads // split), ctx_div)
        if len(op.shape) != 4:
            return None
        kvh, head_dim = int(op.shape[2]), int(op.shape[3])
        return ("attn", max(1, heads // split), max(1, kvh // min(split, kvh)), head_dim, ctx_div)
    if op.kind != "matmul" or len(op.shape) != 3:
        return None
    m = max(1, round(op.tokens * local))
    if op.attrs.get("per_head"):
        heads = int(op.attrs.get("heads", 1))
        split = 1 if layout.dp_attention else tp
        return ("bmm", "pre" if suf == "q_absorb" else "post", m, max(1, heads // split), absorb_fmt or dense_fmt)
    _, k, n = (int(x) for x in op.shape)
    fmt = "bf16" if suf == "logits" else (expert_fmt if suf in native else dense_fmt)
    replicated = suf in REPLICATED_UNDER_TP or (in_attn and layout.dp_attention)
    if not replicated and tp > 1:
        if suf in ROW_PARALLEL:
            k = max(1, k // tp)
        else:
            n = max(1, n // tp)
    if suf == "logits":
        m = op.tokens
    return ("gemm", m, n, k, fmt)


def _fuse_projections(lookups: list[tuple | None], candidates: tuple[tuple[int, str, int], ...]) -> None:
    """Projections that read the same input run as one GEMM in the engines (fused QKV; MLA's q_a + kv_a):
    the first one's GEMM gets the summed N, the others are priced at zero ("fused").

    `candidates`: (index, name suffix, layer) of the ops this can concern (q/q_a projections and the
    ones fused into them), in order (`GraphPlan.fuse_candidates`); every other op is skipped anyway."""
    last: dict[int, int] = {}
    for i, suf, layer in candidates:
        key = lookups[i]
        if key is None or key[0] != "gemm":
            continue
        j = last.get(layer)
        if suf in FUSED_INTO_PREVIOUS and j is not None:
            prev = lookups[j]
            if prev is not None and prev[0] == "gemm" and prev[1] == key[1] and prev[3] == key[3]:
                lookups[j] = ("gemm", prev[1], prev[2] + key[2], prev[3], prev[4])
                lookups[i] = ("fused",)
                continue
        if suf in FUSED_INTO:
            last[layer] = i


@dataclass(frozen=True)
class GraphPlan:
    """What pricing needs of a lowered graph, independent of the layout and a fraction of its memory: the
    graph's distinct ops (the layers of a model repeat: an op's row depends on its shape and attributes,
    not on its layer; DeepSeek: ~20 distinct of ~1,300), which class each op is, the per-op constants, and
    the graph's own step, model and formats. A step model keeps plans, not graphs: a graph holds every op."""

    model: ModelSpec
    phase: Phase
    weights: str
    act_bytes_per_element: float
    reps: tuple[Op, ...]  # one op per class
    rep_suffixes: tuple[str, ...]
    op_class: np.ndarray  # class of each op (int index into reps)
    op_class_list: tuple[int, ...]  # the same, as Python ints (per-op lookups are Python tuples)
    moe_stream: np.ndarray
    windows: tuple[tuple[int, int | None], ...]
    fuse_candidates: tuple[tuple[int, str, int], ...]
    class_rows: tuple[np.ndarray, ...]  # the ops of each class

    def attention_ops(self) -> list[Op]:
        """The graph's attention ops in order (each as its class's op: the same shape and bytes)."""
        return [self.reps[self.op_class_list[i]] for i, _ in self.windows]


def plan_graph(graph: OpGraph) -> GraphPlan:
    """The layout-independent plan of `graph` (`plan_step` makes the same plan without the whole graph)."""
    return _plan(graph, [(-1, list(graph.ops), None)])


def plan_step(model: ModelSpec, phase: Phase, weights: str, kv: str, kv_layout: str) -> GraphPlan:
    """The plan of the whole step's graph, `plan_graph(lower(model, phase, weights, kv, kv_layout))`, equal
    field by field, from a lowering of only the first layer of each kind (`layer_templates`): a later layer
    of a kind repeats its template's ops and classes, so only its op indices and layer are worked out."""
    templates = layer_templates(model)
    distinct = tuple(sorted(set(templates)))
    part = lower(model, phase, weights, kv, kv_layout, layers=distinct)
    by_layer: dict[int, list[Op]] = {}
    for op in part.ops:
        by_layer.setdefault(op.layer, []).append(op)
    try:
        for op in part.ops:
            hash(_signature(op))
    except TypeError:  # an unhashable op is a class of its own in every layer: plan the whole graph
        return plan_graph(lower(model, phase, weights, kv, kv_layout))
    head = model.num_layers
    blocks: list[tuple[int, list[Op], int | None]] = [(-1, by_layer.get(-1, []), None)]
    blocks += [(i, by_layer.get(t, []), None if t == i else t) for i, t in enumerate(templates)]
    blocks.append((head, by_layer.get(head, []), None))
    return _plan(part, blocks)


def _signature(op: Op) -> tuple:
    """What makes two ops one class: all but the name's layer, the inputs and the weight's name (it may
    hold an unhashable attribute: then the op is a class of its own)."""
    return (op.kind, _suffix(op), op.shape, op.tokens, op.flops, op.weight_bytes, op.kv_read_bytes,
            op.kv_write_bytes, op.act_in_bytes, op.act_out_bytes, tuple(sorted(op.attrs.items())))


def _plan(graph: OpGraph, blocks: list[tuple[int, list[Op], int | None]]) -> GraphPlan:
    """The plan of the ops of `blocks` in order: (layer, ops, template), where a block with a template layer
    repeats that earlier block's classes as layer `layer` (its `ops` are the template's); else each op is
    classified. A layer of -1 keeps each op's own layer."""
    reps: list[Op] = []
    sufs: list[str] = []
    memo: dict[tuple, int] = {}
    cls: list[int] = []
    n = sum(len(ops) for _, ops, _ in blocks)
    moe_stream = np.zeros(n, dtype=np.int64)
    windows: list[tuple[int, int | None]] = []
    fuse: list[tuple[int, str, int]] = []
    # per classified block: its classes, and (offset, suffix, kind, window) of the ops noted below
    done: dict[int, tuple[list[int], list[tuple[int, str, str, int | None]]]] = {}
    for layer_of_block, ops, template in blocks:
        base = len(cls)
        if template is not None:
            classes, noted = done[template]
        else:
            classes, noted = [], []
            for j, op in enumerate(ops):
                suf = _suffix(op)
                sig: tuple | None = _signature(op)
                try:
                    c = memo.get(sig)  # type: ignore[arg-type]
                except TypeError:  # an unhashable attribute: this op is a class of its own
                    sig, c = None, None
                if c is None:
                    c = len(reps)
                    reps.append(op)
                    sufs.append(suf)
                    if sig is not None:
                        memo[sig] = c
                classes.append(c)
                if (suf in SHARED_EXPERT_OPS or suf in ROUTED_EXPERT_OPS or op.kind == "attention"
                        or suf in FUSED_INTO_PREVIOUS or suf in FUSED_INTO):
                    noted.append((j, suf, op.kind, op.attrs.get("window") if op.kind == "attention" else None))
            if layer_of_block >= 0:
                done[layer_of_block] = (classes, noted)
        cls.extend(classes)
        for j, suf, kind, window in noted:
            i = base + j
            layer = layer_of_block if layer_of_block >= 0 else ops[j].layer
            if suf in SHARED_EXPERT_OPS:
                moe_stream[i] = 1 + layer
            elif suf in ROUTED_EXPERT_OPS:
                moe_stream[i] = -1 - layer
            if kind == "attention":
                windows.append((i, window))
            if suf in FUSED_INTO_PREVIOUS or suf in FUSED_INTO:
                fuse.append((i, suf, layer))
    moe_stream.setflags(write=False)  # shared by every layout's features
    op_class = np.asarray(cls, dtype=np.intp)
    order = np.argsort(op_class, kind="stable")
    bounds = np.searchsorted(op_class[order], np.arange(len(reps) + 1))
    class_rows = tuple(order[bounds[c]:bounds[c + 1]] for c in range(len(reps)))
    return GraphPlan(graph.model, graph.phase, graph.weights, graph.act_bytes_per_element, tuple(reps),
                     tuple(sufs), op_class, tuple(cls), moe_stream, tuple(windows), tuple(fuse), class_rows)


def build(
    graph: OpGraph | GraphPlan,
    layout: Layout,
    rates: dict[str, float],
    fabric: Fabric,
    expert_skew: float = 0.0,
    dense_scale: float = 1.0,
    dense_fmt: str | None = None,
    native: frozenset[str] = frozenset(),
    absorb_fmt: str | None = None,
) -> StepFeatures:
    """Per-op features of `graph` (one replica's step, or its plan) for the busiest GPU under `layout`.

    `rates` maps the graph's weight format, "dense" (non-expert matmuls, if stored in another
    format) and "attention" to achieved FLOP/s; `dense_scale` converts non-expert weight bytes
    from the graph's format to the dense format's. `native` (gpu/checkpoint.py: in a 4-bit MoE checkpoint
    the shared experts, dense MLPs and maybe attention's output projection): those matmuls keep the graph's
    own bytes and format. `absorb_fmt`: the format MLA's absorbed BMMs run in (else the dense format).
    """
    plan = graph if isinstance(graph, GraphPlan) else plan_graph(graph)  # a step model passes its kept plan
    seqs = plan.phase.sequences
    # decode batches drift out of balance over DP-attention ranks; a prefill pass is assigned evenly
    spread = plan.phase.kind != "prefill"
    att_frac = busiest_share(seqs, layout.tp, spread) / seqs if layout.dp_attention else 1.0
    # prefill keeps head-parallel attention (no query gather); only decode/verify attend per KV slice
    kvp_attention = layout.kv_parallel and plan.phase.kind != "prefill"
    weights = plan.weights
    quant = QUANT_KERNELS if weights not in ("bf16", "fp16") else 0.0
    dense_fmt = dense_fmt or weights

    def row(op: Op, suf: str) -> tuple:
        """(lookup, attention half, kernels, flops, rate, rows, dense bytes, expert bytes, kv bytes, core)."""
        div, work, kvf = _share(op, layout, att_frac, kvp_attention)
        # a skewed routing is modelled by the roofline's expert count; the tables measured their own
        look = (None if (expert_skew and op.kind == "experts")
                else lookup_key(op, layout, att_frac, dense_fmt, weights, native, absorb_fmt))
        in_native = suf in native
        kernels = 0.0 if suf in FUSED_INTO_PREVIOUS else KERNELS.get(op.kind, 1.0) + (quant if op.kind == "matmul" else 0.0)
        act = (op.act_in_bytes + op.act_out_bytes) * work
        half = suf in ATTENTION_OPS
        if op.kind == "experts":
            eb, fl, rows = _expert_row(op, layout, expert_skew)
            return look, half, kernels, fl, rates[weights], rows, act, eb, 0.0, False
        rate, rows, core = 0.0, 0.0, False
        if op.kind in ("matmul", "router"):
            rate = rates[weights] if in_native else rates.get("dense", rates[weights])
            rows = op.tokens * (work * div if div > 1 else work)
        elif op.kind == "attention":
            rate, rows, core = rates["attention"], max(1.0, op.tokens * work), True
        dense = op.weight_bytes * (1.0 if in_native else dense_scale) / div + act
        return look, half, kernels, op.flops * work, rate, rows, dense, 0.0, (op.kv_read_bytes + op.kv_write_bytes) * kvf, core

    # each distinct op is worked out once, then spread over the ops of its class
    out = [row(op, suf) for op, suf in zip(plan.reps, plan.rep_suffixes, strict=True)]
    k = len(out)
    cls = plan.op_class
    attn_half = np.fromiter((r[1] for r in out), dtype=bool, count=k)[cls]
    core = np.fromiter((r[9] for r in out), dtype=bool, count=k)[cls]
    num = np.array([r[2:9] for r in out], dtype=float).reshape(k, 7)[cls]
    cols = {key: num[:, j].copy() for j, key in enumerate(("kernels", "flops", "rate", "rows", "dense", "expert", "kv"))}
    class_lookups = [r[0] for r in out]
    lookups: list[tuple | None] = [class_lookups[c] for c in plan.op_class_list]
    _fuse_projections(lookups, plan.fuse_candidates)
    groups = _groups(plan, class_lookups, lookups)
    coll, attn_coll, calls, attn_calls, dp_ffn = _collectives(plan, layout, fabric, att_frac)
    return StepFeatures(
        flops=cols["flops"], rate=cols["rate"], rows=np.maximum(cols["rows"], 1.0), dense_bytes=cols["dense"],
        expert_bytes=cols["expert"], kv_bytes=cols["kv"], kernels=cols["kernels"], is_attention_core=core,
        is_attn_half=attn_half, att_windows=plan.windows, collective_s=coll, attn_collective_s=attn_coll,
        collectives=calls, attn_collectives=attn_calls, layer_count=plan.model.num_layers, lookups=tuple(lookups),
        dp_ffn_collective_s=dp_ffn,
        sequences=max(1, round(seqs * att_frac)),
        moe_stream=plan.moe_stream,
        groups=groups,
    )


def _groups(plan: GraphPlan, class_lookups: list[tuple | None],
            lookups: list[tuple | None]) -> tuple[tuple[tuple, np.ndarray], ...]:
    """The ops of each distinct lookup key (ascending), keys in order of first appearance: every op of
    a class shares its class's key, except the projections `_fuse_projections` rewrote."""
    moved = {i: lookups[i] for i, _, _ in plan.fuse_candidates if lookups[i] is not class_lookups[plan.op_class_list[i]]}
    parts: dict[tuple, list[np.ndarray]] = {}
    is_moved = None
    if moved:
        is_moved = np.zeros(len(plan.op_class), dtype=bool)
        is_moved[list(moved)] = True
    for c, key in enumerate(class_lookups):
        if key is None:
            continue
        rows = plan.class_rows[c]
        if is_moved is not None:
            rows = rows[~is_moved[rows]]
        if len(rows):
            parts.setdefault(key, []).append(rows)
    moved_by_key: dict[tuple, list[int]] = {}
    for i, key in moved.items():
        if key is not None:
            moved_by_key.setdefault(key, []).append(i)
    for key, rows_of_key in moved_by_key.items():
        parts.setdefault(key, []).append(np.array(rows_of_key, dtype=np.intp))
    groups = [(key, np.sort(np.concatenate(rs)) if len(rs) > 1 else rs[0]) for key, rs in parts.items()]
    groups.sort(key=lambda g: int(g[1][0]))
    return tuple(groups)


def with_contexts(base: StepFeatures, contexts: tuple[int, ...], new_tokens: int) -> StepFeatures:
    """`base` (lowered at context 0 for every sequence) re-priced at `contexts`.

    Only attention ops depend on the context: their FLOPs scale with the keys attended and their KV
    reads with the cached tokens, per layer window. Everything else is the same for any context.
    """
    flops, kv = base.flops.copy(), base.kv_bytes.copy()
    ratios: dict[int | None, tuple[float, float]] = {}
    for row, window in base.att_windows:
        if window not in ratios:
            a0 = len(contexts) * _attended(0, new_tokens, window)
            k0 = len(contexts) * _kv_read_tokens(0, new_tokens, window)
            a, k = attention_sums(contexts, new_tokens, window)
            ratios[window] = (a / a0, k / k0)
        fa, fk = ratios[window]
        flops[row] *= fa
        kv[row] *= fk
    return replace(base, flops=flops, kv_bytes=kv)


def _collectives(
    plan: GraphPlan, layout: Layout, fabric: Fabric, att_frac: float
) -> tuple[float, float, float, float, float]:
    """(collective seconds of the step, those of the attention half, calls, calls of the attention half, the
    seconds of the FFN side's gathers and scatters under DP-attention).

    Per layer under plain TP: an all-reduce after the attention output projection and one after
    the FFN/MoE (EP without DP-attention also ends in an all-reduce in SGLang/TRT-LLM). With
    DP-attention the FFN side gathers tokens and scatters the result (all-gather + reduce-scatter),
    or with EP dispatches and combines them (two all-to-alls). KV parallelism adds, per layer, an
    all-gather of the queries and a reduce-scatter of the partial attention outputs. Plus the
    vocab-parallel embedding all-reduce, the logits all-gather, and pipeline-stage sends.
    """
    m, tp = plan.model, layout.tp
    ab = plan.act_bytes_per_element
    tokens = plan.phase.tokens
    hidden_bytes = tokens * m.hidden_size * ab
    per_layer_attn = 0.0 if layout.dp_attention else fabric.all_reduce_s(hidden_bytes, tp)
    if not layout.dp_attention:
        per_layer_ffn = fabric.all_reduce_s(hidden_bytes, tp)
    elif layout.ep > 1:
        local = hidden_bytes * att_frac
        per_layer_ffn = 2.0 * fabric.all_to_all_s(local * m.experts_per_token, tp)
    else:
        per_layer_ffn = fabric.all_gather_s(hidden_bytes, tp) + fabric.reduce_scatter_s(hidden_bytes, tp)
    kvp = 0.0
    if layout.kv_parallel and plan.phase.kind != "prefill":  # gather queries, merge partial outputs
        per = [fabric.all_gather_s(op.act_in_bytes, tp) + fabric.reduce_scatter_s(op.act_out_bytes, tp)
               for op in plan.attention_ops()]
        kvp = sum(per)
        per_layer_attn += kvp / max(1, len(per))
    head_rows = plan.phase.sequences if plan.phase.kind == "prefill" else tokens
    logits = fabric.all_gather_s(head_rows * m.vocab_size * 4.0, tp)
    embed = 0.0 if layout.dp_attention else fabric.all_reduce_s(hidden_bytes, tp)
    p2p = (layout.pp - 1) * fabric.p2p_s(hidden_bytes) if layout.pp > 1 else 0.0
    L = m.num_layers
    attn = L * per_layer_attn
    if tp == 1:
        return p2p, 0.0, float(layout.pp - 1), 0.0, 0.0
    ffn_calls = 2.0 if layout.dp_attention else 1.0
    kvp_calls = 3.0 if layout.kv_parallel and plan.phase.kind != "prefill" else 1.0
    attn_calls = 0.0 if layout.dp_attention else float(L) * kvp_calls
    calls = attn_calls + L * ffn_calls + 1.0 + (0.0 if layout.dp_attention else 1.0) + (layout.pp - 1)
    dp_ffn = L * per_layer_ffn if layout.dp_attention else 0.0
    return attn + L * per_layer_ffn + logits + embed + p2p, attn, calls, attn_calls, dp_ffn
