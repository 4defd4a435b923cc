"""Price a step's per-op features with the efficiency parameters: a per-op roofline plus overheads.

time(op) = max(FLOPs / (achieved rate x M / (M + m_half)),
               (1 + b_half / bytes) x (dense bytes / (BW x weight_eff) + expert bytes / (BW x expert_eff)
                                       + KV bytes / (BW x kv_eff)))
           + kernels x per-kernel overhead
With CUDA graphs off, each op also waits for its host-side launches: max(op time, kernels x launch).
A step adds the collectives (alpha-beta from the catalog, plus a fitted per-call overhead) and one
per-step engine overhead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lpxsim.gpu.features import StepFeatures
from lpxsim.gpu.params import GpuParams


@dataclass(frozen=True)
class StepBreakdown:
    """Seconds of one step, by where they go (busiest GPU of the replica)."""

    compute_s: float  # ops whose compute bound dominates
    memory_s: float  # ops whose memory bound dominates
    overhead_s: float  # kernel overheads + the per-step engine overhead
    collective_s: float
    total_s: float
    attn_s: float  # attention half of the layers incl. its collectives (AFD)
    ffn_s: float  # everything else


def op_times(f: StepFeatures, p: GpuParams, bw_Bps: float, graphs: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute seconds, memory seconds, overhead seconds) per op."""
    shape_eff = f.rows / (f.rows + p.gemm_m_half)
    rate = f.rate * np.where(f.is_attention_core, p.attention_eff, shape_eff)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(rate > 0, f.flops / np.where(rate > 0, rate, 1.0), 0.0)
    # a kernel that streams few bytes does not reach full bandwidth (ramp-up, too few CTAs)
    size = f.dense_bytes + f.expert_bytes + f.kv_bytes
    ramp = (size + p.bw_half_bytes) / np.maximum(size, 1.0)
    memory = ramp * (f.dense_bytes / p.weight_bw_eff + f.expert_bytes / p.expert_bw_eff + f.kv_bytes / p.kv_bw_eff)
    memory = memory / bw_Bps
    over = f.kernels * p.kernel_overhead_s
    if not graphs:
        busy = np.maximum(compute, memory) + over
        over = over + np.maximum(0.0, f.kernels * p.launch_overhead_s - busy)
    return compute, memory, over


def price(f: StepFeatures, p: GpuParams, bw_Bps: float, graphs: bool = True) -> StepBreakdown:
    """Seconds of one step of the replica described by `f`."""
    compute, memory, over = op_times(f, p, bw_Bps, graphs)
    bound = np.maximum(compute, memory)
    per_op = bound + over
    coll = f.collective_s + f.collectives * p.collective_overhead_s
    attn = float(per_op[f.is_attn_half].sum()) + f.attn_collective_s + f.attn_collectives * p.collective_overhead_s
    total = float(per_op.sum()) + coll + p.step_overhead_s
    return StepBreakdown(
        compute_s=float(bound[compute >= memory].sum()),
        memory_s=float(bound[compute < memory].sum()),
        overhead_s=float(over.sum()) + p.step_overhead_s,
        collective_s=coll,
        total_s=total,
        attn_s=attn,
        ffn_s=total - attn,
    )


def roofline_s(f: StepFeatures, bw_Bps: float) -> float:
    """The step's pure HBM roofline: every byte at the full spec bandwidth, nothing else."""
    return float((f.dense_bytes + f.expert_bytes + f.kv_bytes).sum()) / bw_Bps
