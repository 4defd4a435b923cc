"""Compose measured op times into one step (decode, prefill chunk, verify k+1) of a GpuStepModel.

Each op of the lowered step that the measured tables cover (GEMMs, grouped MoE,
MLA/GQA attention, MLA's absorb BMMs, TP all-reduces) takes its measured time on
the busiest GPU; every other op (norms, RoPE, activations, KV writes, router,
sampling) keeps the roofline cost model of cost.py. The framework's per-step
engine overhead is added once. On an unmeasured GPU the sibling's times are
scaled op by op (projection.py), except the GEMMs and fused MoE layers AMD's own
tuning tables (aiter's, hipBLASLt's) time on that GPU's silicon (amd_kernels.py). The step also records
which source priced each op family (`GpuStepModel.cost_sources`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lpxsim.gpu.amd_kernels import fp8_block_gemm_s, fp8_block_moe_s, fp8_tensor_gemm_s, has_tables
from lpxsim.gpu.cost import StepBreakdown, op_times
from lpxsim.gpu.features import StepFeatures
from lpxsim.gpu.measured import MeasuredOps
from lpxsim.gpu.projection import projected_collective_s, projected_op_s
from lpxsim.specs.precision import get_precision

if TYPE_CHECKING:
    from lpxsim.gpu.step import GpuStepModel

# SGLang (DeepseekV2MoE.forward_normal_dual_stream, up to 1024 tokens) and TensorRT-LLM
# (DeepseekV3MoE, maybe_execute_in_parallel on an aux stream) run a MoE layer's shared experts on a
# second CUDA stream beside the router and routed experts (docs/sources.md "SGL-DUAL", "TRT-AUX").
DUAL_STREAM_MAX_TOKENS = 1024
NARROW_KV = {"fp8": "bf16"}  # a KV format -> the wider one whose decode-attention table bounds it (projected GPUs)
ROOFLINE = "roofline (no measured table covers it): catalog specs and fitted efficiencies"
AITER_LABEL = ("measured: AMD aiter tuning tables on this GPU's silicon (FP8 block-scale GEMMs and fused MoE "
               "where they have rows; other shapes projected)")
HIPBLASLT_LABEL = ("measured: AMD hipBLASLt tuning table on this GPU's silicon (per-tensor FP8 GEMMs of the shapes "
                   "AMD's MLPerf Llama-2-70B ran; other shapes projected)")
FAMILY = {"fused": "gemm", "gemm": "gemm", "bmm": "mla_bmm", "moe": "moe", "mla": "mla_attention", "attn": "attention"}


def _lookup(sm: GpuStepModel, key: tuple, kind: str, new_tokens: int, ctx: float, seqs: int,
            kv: str | None = None) -> float | None:
    """The sibling's (or the GPU's own) measured seconds of op `key`; attention in KV format `kv` (else the step
    model's)."""
    ops = sm.source[0]
    tag = key[0]
    if tag == "fused":
        return 0.0
    if tag == "gemm":
        return ops.gemm(key[1], key[2], key[3], key[4])
    if tag == "bmm":
        return ops.mla_bmm(key[1], key[2], key[3], key[4])
    if tag == "moe":
        return ops.moe(*key[1:], backend=sm.moe_backend)
    ctx_div = key[-1]
    c = max(1, round(ctx / ctx_div))
    if kind == "prefill":
        total = round(ctx) + new_tokens
        args = ("prefill", seqs, total)
        # the table is a causal pass over `total` tokens from empty; a chunk over a cached prefix does
        # the work of its own rows only: t (c + t/2) query-key pairs of total^2 / 2
        frac = new_tokens * (ctx + new_tokens / 2.0) / (total * total / 2.0)
    else:
        args = ("decode", seqs * new_tokens, c)  # verify: k+1 query rows per sequence
        frac = 1.0
    t = _attention_s(ops, key, args, seqs, c, new_tokens, ctx_div if kind == "prefill" else 1, kv or sm.kv)
    return None if t is None else t * frac


def _attention_s(ops: MeasuredOps, key: tuple, args: tuple, seqs: int, c: int, new_tokens: int, div: int,
                 kv: str) -> float | None:
    """One attention core's time from `ops`' tables (`div`: prefill keeps head-parallel attention,
    features._share). A verify's MLA streams each sequence's KV once (`MeasuredOps.mla_verify`)."""
    if key[0] == "mla" and args[0] == "decode" and new_tokens > 1:
        return ops.mla_verify(seqs, c, max(1, key[1]), new_tokens, kv)
    if key[0] == "mla":
        return ops.mla(*args, max(1, key[1] // div), kv)
    return ops.attention(*args, max(1, key[1] // div), max(1, key[2] // min(div, key[2])), key[3], kv)


def price_measured(
    sm: GpuStepModel, f: StepFeatures, kind: str, new_tokens: int, ctx: float, graphs: bool
) -> tuple[StepBreakdown, dict[str, float]]:
    """(breakdown, seconds by source label) of one replica step from measured op times."""
    ops, sib, label = sm.source
    compute, memory, over = op_times(f, sm.params, sm.bw_Bps, graphs)
    t = np.maximum(compute, memory) + over
    measured = np.zeros(len(t), dtype=bool)
    groups = f.groups
    if groups is None:
        rows: dict[tuple, list[int]] = {}
        for i, key in enumerate(f.lookups):  # identical layers share a key: look each up once
            if key is not None:
                rows.setdefault(key, []).append(i)
        groups = tuple((key, np.asarray(idx, dtype=np.intp)) for key, idx in rows.items())
    own = sib is not None and has_tables(sm.system)  # AMD's own measured kernels where its tables have rows
    own_families: dict[str, str] = {}
    shared_fused = False
    for key, idx in groups:
        v_own = _own_time(sm, key) if own else None
        if v_own is not None:
            t[idx] = v_own[0]
            measured[idx] = True
            own_families[FAMILY[key[0]]] = v_own[2]
            shared_fused = shared_fused or v_own[1]
            continue
        v = _lookup(sm, key, kind, new_tokens, ctx, f.sequences)
        if v is None:
            continue
        i = int(idx[0])
        if sib is not None and v > 0.0:  # rows of one key have the same FLOPs and bytes
            fmt = key[-1] if key[0] in ("gemm", "bmm", "moe") else sm.kv
            nbytes = f.dense_bytes[i] + f.expert_bytes[i] + f.kv_bytes[i]
            v = projected_op_s(sm.system, sib, v, float(f.flops[i]), float(nbytes),
                               get_precision(fmt.removesuffix("_block")).compute)
            wide = _wider_kv_bound(sm, f, i, key, kind, new_tokens, ctx)
            v = v if wide is None else min(v, wide)
        t[idx] = v
        measured[idx] = True
        sm.cost_sources[FAMILY[key[0]]] = label
    for fam, own_label in own_families.items():
        sm.cost_sources[fam] = own_label
    if (~measured).any():
        sm.cost_sources.setdefault("other_ops", ROOFLINE)
    if shared_fused and f.moe_stream is not None:  # the fused MoE kernel ran the shared expert
        t[f.moe_stream > 0] = 0.0
    elif f.moe_stream is not None and f.sequences * new_tokens <= DUAL_STREAM_MAX_TOKENS:
        _overlap_shared_experts(t, f.moe_stream)
    coll, attn_coll = _collectives(sm, f, kind, new_tokens, label)
    step_over = 0.0  # the engine's per-step host time is added by the caller (it is fitted; keep memo valid)
    per_attn = float(t[f.is_attn_half].sum())
    total = float(t.sum()) + coll + step_over
    attn = per_attn + attn_coll
    rest = ~measured
    bound_c = compute >= memory
    b = StepBreakdown(
        compute_s=float(np.maximum(compute, memory)[rest & bound_c].sum()),
        memory_s=float(np.maximum(compute, memory)[rest & ~bound_c].sum()) + float(t[measured].sum()),
        overhead_s=float(over[rest].sum()) + step_over,
        collective_s=coll,
        total_s=total,
        attn_s=attn,
        ffn_s=total - attn,
    )
    return b, {label: float(t[measured].sum()), ROOFLINE: float(t[rest].sum())}


def _wider_kv_bound(sm: GpuStepModel, f: StepFeatures, i: int, key: tuple, kind: str, new_tokens: int,
                    ctx: float) -> float | None:
    """On a projected GPU, the time of a decode or verify attention op in a narrow KV format (FP8) is bounded by the
    sibling engine's kernel for the wider format (BF16), projected with that format's KV bytes: the target runs
    its own library's narrow-format kernel, never slower than a kernel that streams twice the bytes (assumption
    "projected-narrow-kv"). None where no bound applies."""
    if key[0] not in ("mla", "attn") or kind == "prefill" or sm.kv not in NARROW_KV:
        return None
    wide = NARROW_KV[sm.kv]
    v = _lookup(sm, key, kind, new_tokens, ctx, f.sequences, kv=wide)
    if v is None or v <= 0.0:
        return None
    scale = get_precision(wide).bytes_per_element / get_precision(sm.kv).bytes_per_element
    nbytes = f.dense_bytes[i] + f.expert_bytes[i] + f.kv_bytes[i] * scale
    return projected_op_s(sm.system, sm.source[1], v, float(f.flops[i]), float(nbytes), get_precision(wide).compute)


def _own_time(sm: GpuStepModel, key: tuple) -> tuple[float, bool, str] | None:
    """(seconds, shared expert included, source label) of an op AMD's own tables (aiter's or hipBLASLt's) time on
    this GPU's silicon, or None."""
    if key[0] == "gemm" and key[4] in ("fp8_block", "fp8"):
        block = key[4] == "fp8_block"
        v = (fp8_block_gemm_s if block else fp8_tensor_gemm_s)(sm.system, key[1], key[2], key[3])
        return None if v is None else (v, False, AITER_LABEL if block else HIPBLASLT_LABEL)
    if key[0] == "moe" and key[-1] in ("fp8", "fp8_block"):
        tokens, hidden, inter, topk, experts, moe_tp, moe_ep = key[1:8]
        if moe_ep != 1 or inter % moe_tp:
            return None
        got = fp8_block_moe_s(sm.system, tokens, hidden, inter // moe_tp, topk, experts)
        return None if got is None else (*got, AITER_LABEL)
    return None


def _overlap_shared_experts(t: np.ndarray, stream: np.ndarray) -> None:
    """Shared experts run beside the router and routed experts on a second CUDA stream: per MoE layer
    the pair takes max(shared, routed), so the shared ops keep only what exceeds the routed time."""
    sh, ro = stream > 0, stream < 0
    if not sh.any() or not ro.any():
        return
    size = int(max(stream.max(), -stream.min())) + 1
    shared = np.bincount(stream[sh], weights=t[sh], minlength=size)
    routed = np.bincount(-stream[ro], weights=t[ro], minlength=size)
    keep = np.where(shared > 0, np.maximum(shared - routed, 0.0) / np.where(shared > 0, shared, 1.0), 1.0)
    t[sh] *= keep[stream[sh]]


def _dp_gather_scatter(sm: GpuStepModel, f: StepFeatures, new_tokens: int) -> float | None:
    """Seconds of one layer's MoE gather and scatter under TensorRT-LLM's attention data-parallelism, from the
    measured NCCL sweep (the per-call engine overhead stays with the step's call count); None where another
    path applies or nothing was measured.

    TensorRT-LLM's fused MoE takes an all-to-all path only with more expert-parallel ranks than experts a
    token picks and a multi-node NVLink domain (or DeepEP, opted into by an environment flag): otherwise it
    all-gathers every rank's tokens (NVFP4-quantised, 0.5625 bytes an element with the block scales, where the
    experts are NVFP4; else BF16) and reduce-scatters the BF16 outputs (TRT-MOE-COMM)."""
    lay, m = sm.layout, sm.model
    if sm.framework != "trtllm" or not m.is_moe:
        return None
    if lay.ep > m.experts_per_token and sm.system.topology.chips_per_node > 8:  # MNNVL all-to-all: the fabric model
        return None
    ops, sib, _ = sm.source
    tokens = f.sequences * new_tokens * lay.tp  # every attention rank's tokens
    fp4 = sm.weights in ("fp4", "mxfp4")
    gather_bytes_per_token = m.hidden_size * (0.5625 if fp4 else 2.0)
    scatter_bytes_per_token = m.hidden_size * 2.0
    gather_elem_bytes = 1 if fp4 else 2
    ag = ops.nccl("all_gather", tokens * gather_bytes_per_token, lay.tp, gather_elem_bytes)
    rs = ops.nccl("reduce_scatter", tokens * scatter_bytes_per_token, lay.tp, 2)
    if ag is None or rs is None:
        return None
    if sib is not None:  # one token a rank: each collective's latency (projected_collective_s)
        ag_floor = ops.nccl("all_gather", lay.tp * gather_bytes_per_token, lay.tp, gather_elem_bytes)
        rs_floor = ops.nccl("reduce_scatter", lay.tp * scatter_bytes_per_token, lay.tp, 2)
        ag = projected_collective_s(sm.system, sib, ag, ag if ag_floor is None else ag_floor)
        rs = projected_collective_s(sm.system, sib, rs, rs if rs_floor is None else rs_floor)
    return ag + rs


def _collectives(sm: GpuStepModel, f: StepFeatures, kind: str, new_tokens: int, label: str) -> tuple[float, float]:
    """(collective seconds of the step, those of the attention half): the TP all-reduces (two per
    layer and the embedding's) measured where the tables have them; other collectives (DP-attention
    gathers, EP all-to-alls, KV-parallel merges, logits gather, pipeline sends) from the catalog fabric."""
    lay, m = sm.layout, sm.model
    base = f.collective_s + f.collectives * sm.params.collective_overhead_s
    base_attn = f.attn_collective_s + f.attn_collectives * sm.params.collective_overhead_s
    if lay.tp > 1 and lay.dp_attention and not lay.kv_parallel:
        measured = _dp_gather_scatter(sm, f, new_tokens)
        if measured is not None:
            sm.cost_sources["dp_gather_scatter"] = f"{label} (nccl-tests sweep)"
            sm.cost_sources.setdefault("other_collectives", "catalog fabric alpha-beta")
            return base - f.dp_ffn_collective_s + m.num_layers * measured, base_attn
    if lay.tp <= 1 or lay.dp_attention or lay.kv_parallel:
        if lay.tp > 1:
            sm.cost_sources.setdefault("collectives", "catalog fabric alpha-beta (no measured table for this collective)")
        return base, base_attn
    ops, sib, _ = sm.source
    tokens = f.sequences * new_tokens
    nbytes = int(tokens * m.hidden_size * 2)
    # aiconfigurator's all-reduce table is keyed by BF16 elements, not bytes (AIC-AR-UNITS)
    meas = ops.all_reduce(int(tokens * m.hidden_size), lay.tp, sm.cuda_graphs and kind != "prefill")
    if meas is None:
        return base, base_attn
    if sib is not None:  # one token's all-reduce is the latency the sibling shows (projected_collective_s)
        floor = ops.all_reduce(int(m.hidden_size), lay.tp, sm.cuda_graphs and kind != "prefill")
        meas = projected_collective_s(sm.system, sib, meas, meas if floor is None else floor)
    fab = sm.fabric.all_reduce_s(nbytes, lay.tp) + sm.params.collective_overhead_s
    L = m.num_layers
    n_ar = 2 * L + 1
    sm.cost_sources["all_reduce"] = label
    sm.cost_sources.setdefault("other_collectives", "catalog fabric alpha-beta")
    return base - n_ar * fab + n_ar * meas, base_attn - L * fab + L * meas
