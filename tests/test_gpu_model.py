"""GPU cost model: collectives, KV capacity, MoE expert counting, the StepModel seam, known patterns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.gpu import Fabric, GpuStepModel, fabric_for
from lpxsim.gpu.collectives import domain_size
from lpxsim.gpu.memory import weight_bytes_per_gpu
from lpxsim.graph import expected_experts_touched
from lpxsim.specs.accounting import weight_bytes
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepModel

# --- collectives -----------------------------------------------------------------------


def test_ring_collectives_follow_alpha_beta():
    f = Fabric("t", alpha_s=5e-6, bw_Bps=100e9)
    assert f.all_reduce_s(1e9, 1) == 0.0
    assert f.all_reduce_s(1e9, 8) == pytest.approx(5e-6 + 2 * 7 / 8 * 1e9 / 100e9)
    assert f.all_gather_s(1e9, 8) == pytest.approx(5e-6 + 7 / 8 * 1e9 / 100e9)
    assert f.reduce_scatter_s(1e9, 4) == pytest.approx(5e-6 + 3 / 4 * 1e9 / 100e9)
    assert f.all_to_all_s(1e9, 2) == pytest.approx(5e-6 + 0.5 * 1e9 / 100e9)
    # an all-reduce moves twice the bytes of a reduce-scatter (it is one plus an all-gather)
    assert f.all_reduce_s(1e9, 8) - f.alpha_s == pytest.approx(2 * (f.reduce_scatter_s(1e9, 8) - f.alpha_s))
    # small messages cost alpha, large ones bandwidth
    assert f.all_reduce_s(1.0, 8) == pytest.approx(5e-6, rel=1e-3)


def test_fabric_choice_follows_the_scale_up_domain():
    hgx, nvl = get_system("h200-hgx"), get_system("gb200-nvl72")
    assert domain_size(hgx) == 8 and domain_size(nvl) == 72
    inside, across = fabric_for(hgx, 8), fabric_for(hgx, 16)
    assert inside.name == "scale-up" and across.name == "scale-out"
    assert across.alpha_s > inside.alpha_s and across.bw_Bps < inside.bw_Bps
    assert fabric_for(nvl, 64).name == "scale-up"
    # catalog NCCL figures: ~6 us alpha, 370 GB/s ring busBW on NVLink4
    assert inside.alpha_s == pytest.approx(6e-6) and inside.bw_Bps == pytest.approx(370e9)
    assert fabric_for(hgx, 8, cuda_graphs=False).alpha_s > inside.alpha_s


# --- MoE expert counting -----------------------------------------------------------------


@pytest.mark.parametrize(("E", "k", "B"), [(256, 8, 1), (256, 8, 16), (128, 8, 64), (8, 2, 4)])
def test_expected_experts_matches_monte_carlo(E, k, B):
    rng = np.random.default_rng(7)
    trials = 3000
    hits = [len(np.unique(np.concatenate([rng.choice(E, k, replace=False) for _ in range(B)])))
            for _ in range(trials)]
    assert expected_experts_touched(E, k, B) == pytest.approx(np.mean(hits), rel=0.02)


def test_expert_parallel_busiest_gpu_reads_at_least_the_mean():
    b = DecodeBatch.uniform(8, 1024)
    tp8 = GpuStepModel("deepseek-r1", "h200-hgx", tp=8)
    ep8 = GpuStepModel("deepseek-r1", "h200-hgx", tp=8, ep=8)
    fe_tp = tp8._get("decode", 1, b.contexts).expert_bytes.sum()
    fe_ep = ep8._get("decode", 1, b.contexts).expert_bytes.sum()
    assert fe_ep > fe_tp  # load imbalance over expert groups costs the busiest GPU
    assert fe_ep < 3 * fe_tp


# --- KV capacity and fit -------------------------------------------------------------------


def test_kv_capacity_is_hbm_minus_weights_and_activations():
    s = GpuStepModel("llama-3.1-70b", "h200-hgx", tp=8, mem_fraction=0.9)
    mem = s.memory
    assert mem.weight_bytes == pytest.approx(weight_bytes(get_model("llama-3.1-70b"), "fp8") / 8, rel=0.01)
    hbm = float(get_system("h200-hgx").chip.memory_bytes)
    assert 150e9 < hbm < 151e9  # the driver's 143,771 MiB, not the marketed 141 GB read as 10^9 B
    assert mem.kv_bytes == pytest.approx((hbm - mem.weight_bytes - mem.activation_bytes) * 0.9)
    # GQA with 8 KV heads splits 8 ways under TP8: the replica holds 8 GPUs' worth of KV
    assert s.kv_capacity_bytes() == pytest.approx(8 * mem.kv_bytes)
    tokens = s.kv_capacity_bytes() / s.kv_bytes(1)
    assert 1e6 < tokens < 4e6
    assert GpuStepModel("llama-3.1-70b", "h200-hgx", tp=8, mem_fraction=0.5).kv_capacity_bytes() < s.kv_capacity_bytes()
    two = GpuStepModel("llama-3.1-70b", "h200-hgx", gpus=16, tp=8)
    assert two.kv_capacity_bytes() == pytest.approx(2 * s.kv_capacity_bytes())


def test_mla_kv_is_replicated_under_tp_and_split_under_dp_attention():
    tp = GpuStepModel("deepseek-r1", "h200-hgx", tp=8)
    dp = GpuStepModel("deepseek-r1", "h200-hgx", tp=8, dp_attention=True)
    assert tp.kv_capacity_bytes() == pytest.approx(tp.memory.kv_bytes)
    # DP attention replicates attention weights, so less room per GPU, but 8x less KV replication
    assert dp.memory.kv_bytes < tp.memory.kv_bytes
    assert dp.kv_capacity_bytes() > 4 * tp.kv_capacity_bytes()


def test_does_not_fit_is_a_clear_user_error():
    with pytest.raises(DoesNotFit, match="GB of weights"):
        GpuStepModel("deepseek-r1", "h100-hgx", tp=8)
    with pytest.raises(DoesNotFit):
        GpuStepModel("llama-3.1-405b", "h100-hgx", tp=1, weights="bf16")
    assert weight_bytes_per_gpu(get_model("deepseek-r1"), GpuStepModel("deepseek-r1", "b200-hgx", tp=8).layout,
                                "fp4") < 60e9


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"tp": 8, "ep": 3}, "ep"),
        ({"tp": 4, "ep": 8}, "ep"),
        ({"tp": 8, "pp": 0}, "pp"),
        ({"gpus": 12, "tp": 8}, "gpus"),
    ],
)
def test_bad_layouts_name_the_field(kw, field):
    with pytest.raises(UserError) as e:
        GpuStepModel("deepseek-r1", "b200-hgx", **kw)
    assert e.value.field == field


def test_dense_model_rejects_ep_and_lpx_is_not_a_gpu():
    with pytest.raises(UserError, match="dense"):
        GpuStepModel("llama-3.1-70b", "h200-hgx", tp=8, ep=2)
    with pytest.raises(UserError) as e:
        GpuStepModel("llama-3.1-8b", "lpx", tp=1)
    assert e.value.field == "system"


# --- the seam ------------------------------------------------------------------------------


def test_step_model_seam():
    from lpxsim.serving.protocols import SplitStepModel

    s = GpuStepModel("llama-3.1-70b", "h200-hgx", tp=4)
    assert isinstance(s, StepModel) and isinstance(s, SplitStepModel)
    assert s.chips == 4 and s.power_w == pytest.approx(10200.0 / 8 * 4)
    d = s.decode_step(DecodeBatch.uniform(16, 2048))
    assert d.latency_s == d.interval_s > 0
    assert s.verify(DecodeBatch.uniform(16, 2048), 3).latency_s > d.latency_s
    p1, p2 = s.prefill(PrefillChunk(1024)), s.prefill(PrefillChunk(4096))
    assert p2.interval_s > 3 * p1.interval_s  # prefill is compute-bound: ~linear in tokens
    # host-side first-token work delays the token but does not hold the GPUs (4,096 tokens: a pass longer than
    # its host dispatch, which a 1,024-token pass of 80 layers about equals)
    assert p2.latency_s - p2.interval_s == pytest.approx(s.engine.first_token_overhead_s)
    assert s.kv_bytes(2000) == pytest.approx(2 * s.kv_bytes(1000))
    assert s.max_batch() >= 256
    assert s.attention_step(DecodeBatch.uniform(16, 2048)).latency_s + s.ffn_step(16).latency_s == pytest.approx(
        d.latency_s, rel=0.05)
    assert s.num_layers == 80 and s.activation_bytes_per_token == 8192 * 2


def test_longer_context_costs_more_and_sliding_windows_cap_it():
    s = GpuStepModel("llama-3.1-70b", "h200-hgx", tp=8)
    assert s.decode_step(DecodeBatch.uniform(32, 32768)).latency_s > s.decode_step(DecodeBatch.uniform(32, 1024)).latency_s
    g = GpuStepModel("gpt-oss-120b", "h200-hgx", tp=1)
    short, long_ = g.decode_step(DecodeBatch.uniform(8, 8192)), g.decode_step(DecodeBatch.uniform(8, 65536))
    full_growth = 65536 / 8192
    assert long_.latency_s / short.latency_s < full_growth / 2  # half the layers are window-capped


def test_cuda_graphs_help_small_batches():
    on = GpuStepModel("llama-3.1-8b", "h200-hgx", tp=1)
    off = GpuStepModel("llama-3.1-8b", "h200-hgx", tp=1, cuda_graphs=False)
    b = DecodeBatch.uniform(1, 512)
    assert off.decode_step(b).latency_s > on.decode_step(b).latency_s


def test_data_parallel_replicas_split_the_batch():
    one = GpuStepModel("llama-3.1-8b", "h200-hgx", tp=1)
    eight = GpuStepModel("llama-3.1-8b", "h200-hgx", gpus=8, tp=1)
    assert eight.decode_step(DecodeBatch.uniform(64, 1024)).latency_s == pytest.approx(
        one.decode_step(DecodeBatch.uniform(8, 1024)).latency_s)
    p, p1 = eight.prefill(PrefillChunk(2048)), one.prefill(PrefillChunk(2048))
    assert p.latency_s == pytest.approx(p1.latency_s)
    assert p.interval_s == pytest.approx(p1.interval_s / 8)


# --- known patterns: batch-1 decode against the model's own HBM roofline ----------------------


@pytest.mark.parametrize("name", ["llama-3.1-70b", "qwen3-32b", "gemma-4-31b"])
def test_dense_batch1_decode_reaches_half_to_most_of_the_roofline(name):
    s = GpuStepModel(name, "h200-hgx", tp=1)
    b = DecodeBatch.uniform(1, 1024)
    frac = s.decode_roofline_s(b) / s.decode_step(b).latency_s
    assert 0.45 <= frac <= 0.85


@pytest.mark.parametrize("name", ["deepseek-r1", "kimi-k2"])
def test_large_moe_on_8_gpus_reaches_far_less(name):
    s = GpuStepModel(name, "b200-hgx", tp=8, weights="fp4")
    b = DecodeBatch.uniform(1, 1024)
    assert s.decode_roofline_s(b) / s.decode_step(b).latency_s < 0.3
    assert math.isfinite(s.decode_step(b).latency_s)


@pytest.mark.parametrize(("name", "k"), [("deepseek-r1", 0), ("gpt-oss-20b", 0), ("gemma-4-31b", 3)])
def test_repriced_contexts_match_a_fresh_lowering(name, k):
    from lpxsim.gpu.features import build
    from lpxsim.graph import Phase, lower

    s = GpuStepModel(name, "b200-hgx", tp=8 if name == "deepseek-r1" else 2, weights="fp4")
    rng = np.random.default_rng(3)
    ctx = tuple(int(c) for c in rng.integers(1, 9000, size=7))
    kind = "verify" if k else "decode"
    fast = s._get(kind, k + 1, ctx)
    graph = lower(s.model, Phase(kind, ctx, k + 1), s.weights, s.kv, s.kv_layout)
    # a 4-bit MoE checkpoint's FFN matmuls (and DeepSeek's wo) are 4-bit: gpu/checkpoint.py
    slow = build(graph, s.layout, s.rates, s.fabric, 0.0, s._dense_scale, native=s.formats.native)
    np.testing.assert_allclose(fast.flops, slow.flops, rtol=1e-12)
    np.testing.assert_allclose(fast.kv_bytes, slow.kv_bytes, rtol=1e-12)
    np.testing.assert_allclose(fast.dense_bytes, slow.dense_bytes, rtol=1e-12)


@pytest.mark.parametrize(("tokens", "context"), [(100, 0), (700, 0), (3000, 5000), (1024, 0), (20000, 0)])
def test_bucketed_prefill_is_close_to_a_direct_lowering(tokens, context):
    from lpxsim.gpu.cost import price
    from lpxsim.gpu.features import build
    from lpxsim.graph import Phase, lower

    s = GpuStepModel("deepseek-r1", "h200-hgx", tp=8, measured=False)  # the roofline path's buckets
    graph = lower(s.model, Phase.prefill(tokens, context, 1), s.weights, s.kv, s.kv_layout)
    direct = price(build(graph, s.layout, s.rates, s.fabric, 0.0, s._dense_scale), s.params, s.bw_Bps, graphs=False).total_s
    assert s.prefill(PrefillChunk(tokens, context)).interval_s == pytest.approx(direct, rel=0.03)
    assert s.attention_prefill(PrefillChunk(tokens, context)).latency_s < direct


def test_expert_skew_reads_fewer_experts_at_moderate_batch():
    b = DecodeBatch.uniform(16, 1024)
    flat = GpuStepModel("deepseek-r1", "b200-hgx", tp=8, weights="fp4")
    skewed = GpuStepModel("deepseek-r1", "b200-hgx", tp=8, weights="fp4", expert_skew=0.5)
    assert skewed.decode_step(b).latency_s < flat.decode_step(b).latency_s
    with pytest.raises(UserError):
        GpuStepModel("deepseek-r1", "b200-hgx", tp=8, expert_skew=1.0)


def test_fp4_moe_keeps_attention_wider_by_default():
    """NVFP4 DeepSeek keeps MLA's projections in BF16 (gpu/checkpoint.py); other 4-bit MoE checkpoints FP8."""
    mixed = GpuStepModel("deepseek-r1", "b200-hgx", tp=8, weights="fp4")
    pure = GpuStepModel("deepseek-r1", "b200-hgx", tp=8, weights="fp4", dense_weights="fp4")
    assert mixed.dense_weights == "bf16" and pure.dense_weights == "fp4"
    assert mixed.memory.weight_bytes > pure.memory.weight_bytes
    b = DecodeBatch.uniform(1, 1024)
    assert mixed.decode_roofline_s(b) > pure.decode_roofline_s(b)
    assert GpuStepModel("llama-3.1-70b", "b200-hgx", tp=8, weights="fp4").dense_weights == "fp4"
    assert GpuStepModel("qwen3-235b-a22b", "b200-hgx", tp=4, ep=4, weights="fp4").dense_weights == "fp8"
    assert "fp4/bf16" in mixed.name


def test_kv_parallelism_splits_long_context_kv_over_the_tp_group():
    tp = GpuStepModel("deepseek-r1", "gb200-nvl72", tp=8, weights="fp4")
    kvp = GpuStepModel("deepseek-r1", "gb200-nvl72", tp=8, weights="fp4", kv_parallel=True)
    assert kvp.kv_capacity_bytes() == pytest.approx(8 * tp.kv_capacity_bytes())
    long_ = DecodeBatch.uniform(4, 100_000)
    assert kvp.decode_step(long_).latency_s < 0.8 * tp.decode_step(long_).latency_s
    assert kvp.decode_roofline_s(long_) < 0.5 * tp.decode_roofline_s(long_)
    # at short context the extra query gather / output merge costs more than the KV it saves
    short = DecodeBatch.uniform(1, 512)
    assert kvp.decode_step(short).latency_s > tp.decode_step(short).latency_s
    # prefill stays head-parallel
    assert kvp.prefill(PrefillChunk(4096)).interval_s == pytest.approx(tp.prefill(PrefillChunk(4096)).interval_s,
                                                                      rel=0.01)
    assert "KVP" in kvp.name
    with pytest.raises(UserError) as e:
        GpuStepModel("deepseek-r1", "gb200-nvl72", tp=8, kv_parallel=True, dp_attention=True)
    assert e.value.field == "kv_parallel"
