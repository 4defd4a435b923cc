"""Projection of measured op times to GPUs without measured tables (grade E).

A GPU that aiconfigurator-core has not measured (Vera Rubin, AMD Instinct, future
parts) borrows the op times of its nearest measured sibling: the measured GPU of
the same rack kind (NVL72 rack or 8-GPU node) closest in HBM bandwidth, FP8 and
FP4 peak (log distance). Each op time is then projected with what each GPU
achieves, not its spec sheet (issue 28): the part of the sibling's time that its
achieved roofline explains (bytes over achieved HBM bandwidth, spec x
`hbm_achieved_fraction`, a measured STREAM-type fraction per GPU; or FLOPs over
achieved matmul FLOP/s at the op's precision, the catalog's measured MAMF
`matmul_achieved_<fmt>_flops` or the peak at the GPU's measured MAMF fraction in
another format) scales to the target's rate, and the kernel floor above it
(launch, ramp, tail: most of a decode-sized op) carries over (`projected_op_s`).
Collectives scale by the scale-up bus bandwidth ratio (large messages) or the
all-reduce latency ratio (small ones). An AMD GPU projected from an NVIDIA
sibling thus carries AMD's own measured efficiencies (docs/validation.md, "AMD
from AMD's own mechanisms"). The rule is validated by projecting measured GPUs from each other
(benchmarks/validate_gpu.py --projection; `lpxsim validate`).
"""

from __future__ import annotations

import math
from functools import cache

from lpxsim.gpu.measured import AIC_SYSTEM, data_root
from lpxsim.specs.hardware import SystemSpec


def _rack_kind(s: SystemSpec) -> str:
    return s.topology.kind


def sibling(system: SystemSpec, forced: str | None = None) -> SystemSpec | None:
    """The measured GPU system `system` is projected from (None if no tables are installed)."""
    from lpxsim.catalog import get_system

    if data_root() is None:
        return None
    if forced is not None:
        sib = get_system(forced)
        if sib.name not in AIC_SYSTEM:
            from lpxsim.core.errors import UserError

            raise UserError("project_from", f"{sib.name} has no measured tables; choose one of {', '.join(AIC_SYSTEM)}")
        return sib
    cands = _measured_systems()
    same = [c for c in cands if _rack_kind(c) == _rack_kind(system)] or cands
    chip = system.chip

    def dist(c: SystemSpec) -> float:
        return (abs(math.log(float(c.chip.memory_bw_Bps) / float(chip.memory_bw_Bps)))
                + sum(abs(math.log(c.chip.flops(f) / chip.flops(f))) for f in ("fp8", "fp4")))

    return min(same, key=dist)


@cache
def _measured_systems() -> list[SystemSpec]:
    """The catalog systems aiconfigurator-core measured (looked up once per process: every layout of a
    search asks for its sibling)."""
    from lpxsim.catalog import get_system

    return [get_system(n) for n in AIC_SYSTEM]


def busbw(s: SystemSpec) -> float:
    """Scale-up bus bandwidth of one GPU (B/s): the catalog's NCCL figure, else its NVLink figure."""
    v = s.chip.extra.get("scale_up_busbw_Bps")
    return float(v) if v is not None else float(s.chip.nvlink_Bps or 0.0) or 1.0


def alpha(s: SystemSpec) -> float:
    v = s.chip.extra.get("allreduce_alpha_s")
    return float(v) if v is not None else 6e-6


HBM_ACHIEVED_DEFAULT = 1.0  # a GPU without a measured fraction is taken at its spec bandwidth


def achieved_hbm_Bps(s: SystemSpec) -> float:
    """HBM bandwidth the GPU reaches in a streaming kernel: spec x its measured `hbm_achieved_fraction`."""
    frac = s.chip.extra.get("hbm_achieved_fraction")
    return float(s.chip.memory_bw_Bps) * (float(frac) if frac is not None else HBM_ACHIEVED_DEFAULT)


def achieved_matmul_flops(s: SystemSpec, compute: str) -> float:
    """Matmul FLOP/s the GPU reaches at `compute` precision: the measured MAMF at that precision, else the
    peak scaled by the GPU's MAMF fraction measured at another precision (BF16 first), else the peak."""
    chip = s.chip
    got = chip.extra.get(f"matmul_achieved_{compute}_flops")
    if got is not None:
        return float(got)
    for fmt in ("bf16", "fp8"):
        have = chip.extra.get(f"matmul_achieved_{fmt}_flops")
        if have is not None and fmt in chip.peak_flops:
            return chip.flops(compute) * float(have) / float(chip.peak_flops[fmt])
    return chip.flops(compute)


def achieved_roofline_s(s: SystemSpec, flops: float, nbytes: float, compute: str) -> float:
    """An op's time at the GPU's achieved matmul rate and HBM bandwidth (the larger of the two)."""
    return max(flops / achieved_matmul_flops(s, compute), nbytes / achieved_hbm_Bps(s))


def projected_op_s(target: SystemSpec, sib: SystemSpec, sib_s: float, flops: float, nbytes: float,
                   compute: str) -> float:
    """Time on `target` of an op measured at `sib_s` on the sibling.

    A kernel's time is the work its achieved rate explains plus a floor the rate does not (launch, the
    grid's ramp and tail, synchronisation: what a decode-sized op mostly is). The explained part scales
    with the target's achieved rate (bandwidth or matmul, whichever bounds the op there); the floor carries
    over unchanged (assumption "projection-kernel-floor"). An op faster than the sibling's achieved roofline
    (cache-resident, or the measured fraction is conservative) scales whole by the roofline ratio."""
    r_sib = achieved_roofline_s(sib, flops, nbytes, compute)
    r_target = achieved_roofline_s(target, flops, nbytes, compute)
    if r_sib <= 0.0:
        return sib_s
    if sib_s <= r_sib:
        return sib_s * r_target / r_sib
    return r_target + (sib_s - r_sib)


def projected_collective_s(target: SystemSpec, sib: SystemSpec, sib_s: float, sib_floor_s: float) -> float:
    """Time on `target` of a collective measured at `sib_s` on the sibling, whose smallest message took
    `sib_floor_s` there.

    As `projected_op_s` treats a kernel: the sibling's smallest-message time is latency (launch, synchronisation,
    the protocol's hops) and scales with the two GPUs' small-message latencies (`alpha`); what a larger message adds
    above it scales with their bus bandwidths. Continuous in the message size, so a step is never cheaper for a
    larger message (a switch between the two ratios at a fixed size made Rubin's decode step faster at 25 sequences
    than at 17, and a 100-token prefill faster than a 15-token one)."""
    floor = min(max(sib_floor_s, 0.0), sib_s)
    return floor * alpha(target) / alpha(sib) + (sib_s - floor) * busbw(sib) / busbw(target)
