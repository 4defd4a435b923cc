"""Projection to unmeasured GPUs by achieved, not spec, rates, with the kernel floor carried over (issue 28)."""

from __future__ import annotations

import pytest

from lpxsim.catalog import get_system
from lpxsim.gpu.projection import achieved_hbm_Bps, achieved_matmul_flops, achieved_roofline_s, projected_op_s


def test_bandwidth_bound_ops_scale_by_achieved_hbm():
    mi, h = get_system("mi300x"), get_system("h200-hgx")
    assert achieved_hbm_Bps(mi) == pytest.approx(5.3e12 * 0.81)
    assert achieved_hbm_Bps(h) == pytest.approx(4.8e12 * 0.90)
    # a weight read (bytes >> FLOPs / peak) measured at the sibling's achieved bandwidth scales whole
    sib_s = achieved_roofline_s(h, 1e6, 1e9, "fp8")
    t = projected_op_s(mi, h, sib_s, flops=1e6, nbytes=1e9, compute="fp8")
    assert t / sib_s == pytest.approx(4.8 * 0.90 / (5.3 * 0.81))
    assert t / sib_s > 4.8 / 5.3  # the spec ratio over-credits MI300X


def test_compute_bound_ops_scale_by_measured_matmul_throughput():
    mi, h, mi355 = get_system("mi300x"), get_system("h200-hgx"), get_system("mi355x")
    assert achieved_matmul_flops(mi, "fp8") == pytest.approx(1.273e15)  # AMD's measured FP8 max-achievable
    assert achieved_matmul_flops(h, "fp8") == pytest.approx(1.4534e15)  # measured FP8 MAMF
    # MI355X has a measured BF16 MAMF only: its FP8 figure is the peak at the same fraction
    bf16 = mi355.chip.extra["matmul_achieved_bf16_flops"]
    assert achieved_matmul_flops(mi355, "fp8") == pytest.approx(
        mi355.chip.flops("fp8") * float(bf16) / float(mi355.chip.peak_flops["bf16"]))
    sib_s = 2.0 * achieved_roofline_s(h, 1e15, 1e6, "fp8")  # a big GEMM at half its achievable rate
    t = projected_op_s(mi, h, sib_s, flops=1e15, nbytes=1e6, compute="fp8")
    ratio = 1.4534e15 / 1.273e15
    assert ratio > 1.0 > h.chip.flops("fp8") / mi.chip.flops("fp8")  # spec says MI300X is faster; measured, slower
    assert t == pytest.approx(sib_s / 2 * ratio + sib_s / 2)  # the explained half scales, the rest carries over


def test_a_kernel_floor_does_not_shrink_with_bandwidth():
    """A decode-sized op (20 us measured, 1 us of bytes) gains almost nothing from 2.5x the HBM bandwidth:
    the floor carries over, only the microsecond the bandwidth explains shrinks."""
    gb300, vr = get_system("gb300-nvl72"), get_system("vr-nvl72")
    bw_ratio = achieved_hbm_Bps(gb300) / achieved_hbm_Bps(vr)
    assert bw_ratio < 0.5
    nbytes = 1e-6 * achieved_hbm_Bps(gb300)
    t = projected_op_s(vr, gb300, 20e-6, flops=1.0, nbytes=nbytes, compute="fp8")
    assert t == pytest.approx(19e-6 + 1e-6 * bw_ratio)
    # the same op measured at its roofline (no floor) scales whole, as before
    assert projected_op_s(vr, gb300, 1e-6, flops=1.0, nbytes=nbytes, compute="fp8") == pytest.approx(1e-6 * bw_ratio)
    # measured faster than the sibling's achieved roofline (cache-resident): scales whole, never negative
    assert 0 < projected_op_s(vr, gb300, 0.5e-6, flops=1.0, nbytes=nbytes, compute="fp8") < 0.5e-6


def test_a_projected_collective_is_never_cheaper_for_a_larger_message():
    """A projected GPU's all-reduce is the sibling's measured time, its smallest message's share scaled by the
    latencies and the rest by the bus bandwidths (projected_collective_s): continuous, so a step is never cheaper for
    more tokens. (A switch between the two ratios at 256 KiB made Rubin's decode step faster at 25 sequences than at
    17, and a 100-token prefill faster than a 15-token one.)"""
    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch, PrefillChunk

    rubin = GpuStepModel("gemma-4-31b", "vr-nvl72", tp=8, framework="sglang")
    decode = [rubin.decode_step(DecodeBatch.uniform(b, 8000)).interval_s for b in range(1, 161, 4)]
    assert all(a <= b + 1e-12 for a, b in zip(decode, decode[1:], strict=False))
    prefill = [rubin.prefill(PrefillChunk(tokens=t, context=0, sequences=1)).interval_s for t in (15, 100, 1000, 8000)]
    assert all(a <= b for a, b in zip(prefill, prefill[1:], strict=False))


def test_projected_narrow_kv_attention_is_never_slower_than_the_wider_format():
    """H200 SGLang's FP8-KV MLA decode table runs several times slower than its BF16 one, which streams twice
    the bytes (an upcasting path, not a KV-bound kernel). A GPU projected from it runs its own library's FP8-KV
    kernel (MI325X: aiter's persistent MLA), so its FP8-KV decode is bounded by the wider format's table
    (assumption "projected-narrow-kv"); a measured GPU keeps its engine's own table."""
    from lpxsim.gpu.measured import measured_ops
    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch

    ops = measured_ops("h200_sxm", "sglang")
    assert ops.mla("decode", 64, 8000, 16, "fp8") > 3 * ops.mla("decode", 64, 8000, 16, "bf16")
    batch = DecodeBatch.uniform(64, 8000)
    steps = {kv: GpuStepModel("deepseek-r1", "mi325x", tp=8, weights="fp8", kv=kv, framework="sglang").decode_step(
        batch).latency_s for kv in ("fp8", "bf16")}
    assert steps["fp8"] <= steps["bf16"]
    measured = {kv: GpuStepModel("deepseek-r1", "h200-hgx", tp=8, weights="fp8", kv=kv, framework="sglang").decode_step(
        batch).latency_s for kv in ("fp8", "bf16")}
    assert measured["fp8"] > measured["bf16"]  # the measured GPU's own engine table stands
