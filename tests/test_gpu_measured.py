"""GPU step costs from measured kernel tables (aiconfigurator-core): lookups, composition, sources."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lpxsim.catalog import get_model
from lpxsim.core.errors import UserError
from lpxsim.gpu.engine import engine_params, framework_name
from lpxsim.gpu.measured import _columns, _curve, measured_ops
from lpxsim.gpu.step import GpuStepModel
from lpxsim.step.protocol import DecodeBatch, PrefillChunk

MODEL = "deepseek-r1"


def test_gemm_lookup_reproduces_a_measured_point_and_grows_with_m():
    ops = measured_ops("b200_sxm", "sglang")
    t = _columns("b200_sxm", "gemm", "sglang", "gemm_perf.parquet", ("gemm_dtype", "m", "n", "k", "latency"))
    sel = (t["gemm_dtype"] == "fp8_block") & (t["n"] == 1536) & (t["k"] == 7168)
    xs, ys = _curve(t["m"][sel], t["latency"][sel])
    assert ops.gemm(int(xs[5]), 1536, 7168, "fp8_block") == pytest.approx(ys[5] * 1e-3)
    times = [ops.gemm(m, 1536, 7168, "fp8_block") for m in (1, 16, 256, 4096, 65536)]
    assert all(b >= a for a, b in zip(times, times[1:], strict=False))
    assert times[-1] > 10 * times[0]


def test_curve_is_non_decreasing():
    xs, ys = _curve(np.array([1, 8, 64, 8]), np.array([5.0, 2.0, 3.0, 2.2]))
    assert list(xs) == [1, 8, 64]
    assert list(ys) == [2.1, 2.1, 3.0]


def test_moe_and_mla_and_allreduce_lookups():
    ops = measured_ops("h200_sxm", "sglang")
    small = ops.moe(8, 7168, 2048, 8, 256, 1, 8, "fp8")
    big = ops.moe(4096, 7168, 2048, 8, 256, 1, 8, "fp8")
    assert small is not None and big is not None and big > 3 * small
    assert ops.moe(8, 7168, 2048, 8, 255, 1, 8, "fp8") is None  # no such table: caller falls back
    d1, d2 = ops.mla("decode", 16, 1024, 16, "bf16"), ops.mla("decode", 16, 16384, 16, "bf16")
    assert d1 is not None and d2 > d1
    assert ops.all_reduce(1 << 20, 8, True) > ops.all_reduce(1 << 10, 8, True)


def test_a_shape_missing_from_the_newest_table_version_is_read_from_an_older_one():
    """aiconfigurator-core 0.12.0's newest TRT-LLM MoE table (1.3.0rc23) holds a few new shapes only;
    DeepSeek-R1's routed experts are measured in 1.3.0rc20 and must come from there, not the roofline."""
    from lpxsim.gpu.measured import _table_paths

    paths = _table_paths("b200_sxm", "moe", "trtllm", "moe_perf.parquet")
    assert len(paths) >= 2 and "rc23" in str(paths[0])
    ops = measured_ops("b200_sxm", "trtllm")
    assert ops.moe(64, 7168, 2048, 8, 256, 1, 8, "fp8") is not None
    m = GpuStepModel(MODEL, "b200-hgx", tp=8, ep=8, weights="fp4", kv="fp8", framework="trtllm")
    m.decode_step(DecodeBatch.uniform(16, 2000))
    assert m.cost_sources["moe"].startswith("measured: aiconfigurator-core 0.12.0 b200_sxm/trtllm")


def test_moe_and_all_reduce_take_the_fastest_measured_kernel():
    """Several kernels measured for one op and shape are the engine's alternatives: the fastest counts."""
    from lpxsim.gpu.measured import MS, _select

    # TRT-LLM nvfp4 MoE on B200: CUTLASS and the TRTLLM-gen min-latency kernels, both at 64 tokens
    cols = ("moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size", "distribution", "kernel_source", "latency")
    d = _select("b200_sxm", "moe", "trtllm", "moe_perf.parquet", cols, ("kernel_source", "latency"), moe_dtype="nvfp4",
                num_tokens=64, hidden_size=7168, inter_size=2048, topk=8, num_experts=256, moe_tp_size=1,
                moe_ep_size=8, distribution="power_law_1.01")
    per_kernel = {k: float(np.median(d["latency"][d["kernel_source"] == k])) * MS for k in set(d["kernel_source"])}
    assert len(per_kernel) >= 2
    got = measured_ops("b200_sxm", "trtllm").moe(64, 7168, 2048, 8, 256, 1, 8, "fp4")
    assert got == pytest.approx(min(per_kernel.values()), rel=1e-6) and got < max(per_kernel.values())
    # GB300 TRT-LLM at 8 GPUs: MNNVL one-shot measured to 32 KB, two-shot from 128 KB; 1 MB is two-shot's
    ar = measured_ops("gb300", "trtllm")
    small, large = ar.all_reduce(16 << 10, 8, True), ar.all_reduce(1 << 20, 8, True)
    assert small < 6e-6 and 6e-6 < large < 20e-6


def _formats(m: GpuStepModel) -> dict[str, str]:
    """{op name: the format its measured-table lookup asks for} of one decode step (GEMMs and absorb BMMs)."""
    f = m._get("decode@0", 1, (0,) * 4)
    fmt = {}
    for op, key in zip(lower_ops(m), f.lookups, strict=True):
        if key is not None and key[0] in ("gemm", "bmm"):
            fmt.setdefault(op, key[-1])
    return fmt


def test_nvfp4_deepseek_checkpoint_keeps_mla_projections_bf16_and_quantises_wo():
    """NVIDIA's NVFP4 DeepSeek-R1 v2 (NV-DSR1-FP4): experts, shared experts, dense MLPs and wo in NVFP4; q_a, kv_a,
    q_b and kv_b (the absorbed BMMs) in BF16; the head BF16. Its HBM counts each class at its own width."""
    m = GpuStepModel(MODEL, "b200-hgx", tp=8, ep=8, weights="fp4")
    fmt = _formats(m)
    assert fmt["shared_gate_up"] == fmt["gate_up"] == fmt["down"] == fmt["o_proj"] == "fp4"
    assert fmt["q_a_proj"] == fmt["q_b_proj"] == fmt["q_absorb"] == fmt["v_absorb"] == "bf16"
    assert fmt["logits"] == "bf16"
    explicit = GpuStepModel(MODEL, "b200-hgx", tp=8, ep=8, weights="fp4", dense_weights="fp8")
    assert _formats(explicit)["shared_gate_up"] == _formats(explicit)["o_proj"] == "fp8_block"
    # wo in NVFP4 (0.5625 B a weight with its block scales) instead of BF16 (2 B): 61 layers x 128 heads x 128 x
    # 7168 / 8 GPUs, 1.4375 B each
    from lpxsim.gpu.memory import weight_bytes_per_gpu

    spec, lay = m.model, m.layout
    wo = 61 * 128 * 128 * 7168 / 8
    assert (weight_bytes_per_gpu(spec, lay, "fp4", "bf16")
            - weight_bytes_per_gpu(spec, lay, "fp4", "bf16", frozenset({"o_proj"}))) == pytest.approx(wo * 1.4375)


def test_gpt_oss_keeps_attention_bf16_and_other_4_bit_moe_checkpoints_the_fp8_assumption():
    from lpxsim.gpu.checkpoint import checkpoint_formats

    oss = checkpoint_formats(get_model("gpt-oss-120b"), "mxfp4")  # GPT-OSS-QUANT: only the experts are MXFP4
    assert oss.dense == "bf16" and oss.format_of("o_proj") == "bf16"
    assert _formats(GpuStepModel("gpt-oss-20b", "b200-hgx", tp=1, weights="mxfp4"))["q_proj"] == "bf16"
    qwen = checkpoint_formats(get_model("qwen3-235b-a22b"), "fp4")
    assert qwen.dense == "fp8" and qwen.format_of("shared_down") == "fp4" and qwen.format_of("o_proj") == "fp8"
    assert checkpoint_formats(get_model(MODEL), "mxfp4").dense == "fp8"
    assert checkpoint_formats(get_model("llama-3.1-70b"), "fp4").dense == "fp4"


def test_sglang_runs_mla_absorb_bmms_of_block_fp8_checkpoints_in_bf16_on_cuda_only():
    """SGLang dequantises a 128x128 block-FP8 kv_b_proj to BF16 at load on CUDA (torch.bmm); on ROCm it requantises
    it to per-tensor FP8 (bmm_fp8); TensorRT-LLM keeps the FP8 BMM (SGL-MLA-BMM)."""
    sgl = _formats(GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp8", framework="sglang"))
    trt = _formats(GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp8", framework="trtllm"))
    amd = _formats(GpuStepModel(MODEL, "mi355x", tp=8, weights="fp8", framework="sglang"))
    assert sgl["q_absorb"] == sgl["v_absorb"] == "bf16" and sgl["q_a_proj"] == "fp8_block"
    assert trt["q_absorb"] == trt["v_absorb"] == "fp8_block"
    assert amd["q_absorb"] == "fp8_block"


def test_shared_experts_overlap_the_routed_experts_on_a_second_stream():
    from lpxsim.gpu.compose import _overlap_shared_experts

    # two MoE layers: layer 0 shared 3 vs routed 5 (hidden), layer 1 shared 6 vs routed 2 (4 left)
    t = np.array([1.0, 2.0, 5.0, 9.0, 4.0, 2.0, 2.0, 7.0])
    stream = np.array([1, 1, -1, 0, 2, 2, -2, 0])
    _overlap_shared_experts(t, stream)
    assert t[:2].sum() == pytest.approx(0.0) and t[4:6].sum() == pytest.approx(4.0)
    assert t[[2, 3, 6, 7]].tolist() == [5.0, 9.0, 2.0, 7.0]  # routed and other ops untouched
    # a DeepSeek step marks its shared-expert and routed-expert ops for the overlap
    m = GpuStepModel(MODEL, "h200-hgx", tp=8, weights="fp8")
    f = m._get("decode@0", 1, (0,) * 8)
    assert (f.moe_stream > 0).sum() > 0 and (f.moe_stream < 0).sum() > 0


def test_validate_replays_the_benchmark_finite_run_throughput():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "validate_gpu.py"
    spec = importlib.util.spec_from_file_location("validate_gpu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.run_throughput_factor(1) == 1.0  # one client: no tail
    assert mod.run_throughput_factor(64) == pytest.approx(10 / (10 + 63 / 130))
    assert mod.run_throughput_factor(256) < mod.run_throughput_factor(4) < 1.0


def lower_ops(m: GpuStepModel) -> list[str]:
    """Name suffixes of the ops of a 4-sequence decode step of `m` (the order of its features)."""
    from lpxsim.gpu.features import _suffix
    from lpxsim.graph import Phase, lower

    return [_suffix(o) for o in lower(m.model, Phase("decode", (0,) * 4, 1), m.weights, m.kv, m.kv_layout).ops]


def test_measured_step_names_its_sources():
    m = GpuStepModel(MODEL, "h200-hgx", tp=8, weights="fp8")
    m.decode_step(DecodeBatch.uniform(8, 2000))
    for fam in ("gemm", "moe", "mla_attention", "all_reduce"):
        assert m.cost_sources[fam].startswith("measured: aiconfigurator-core 0.12.0 h200_sxm/sglang")
    assert "roofline" in m.cost_sources["other_ops"]


def test_unmeasured_gpu_is_projected_grade_e():
    m = GpuStepModel(MODEL, "mi325x", tp=8, weights="fp8")
    m.decode_step(DecodeBatch.uniform(8, 2000))
    # AMD's own GEMM tables price its FP8 block-scale GEMMs; what they do not cover is projected
    assert m.cost_sources["gemm"].startswith("measured: AMD aiter tuning tables")
    for fam in ("moe", "mla_attention"):
        assert "projected (grade E) from h200-hgx" in m.cost_sources[fam]
    # more HBM bandwidth than its sibling: a step whose bytes dominate (the MoE of 64 users) is faster
    h = GpuStepModel(MODEL, "h200-hgx", tp=8, weights="fp8")
    assert m.decode_step(DecodeBatch.uniform(64, 2000)).latency_s < h.decode_step(DecodeBatch.uniform(64, 2000)).latency_s
    vr = GpuStepModel(MODEL, "vr-nvl72", tp=8, weights="fp8")
    vr.decode_step(DecodeBatch.uniform(1, 100))
    assert "from gb300-nvl72" in vr.cost_sources["gemm"]


def test_framework_changes_the_step_and_is_validated():
    a = GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp8", framework="sglang")
    b = GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp8", framework="trt")
    assert b.framework == "trtllm"
    batch = DecodeBatch.uniform(32, 1000)
    assert a.decode_step(batch).latency_s != b.decode_step(batch).latency_s
    with pytest.raises(UserError) as e:
        framework_name("tgi")
    assert e.value.field == "framework"


def test_decode_runs_the_captured_cuda_graph_batch():
    """A batch of 9 replays the graph captured at 12: the GEMMs run 12 rows; the 3 padding rows are dummy
    requests that read next to no KV (CUDA-PAD), so the attention is the 9 real rows' (the padded batch's mean
    context counts them at 0)."""
    eng = engine_params("sglang")
    assert eng.graph_batch(9) == 12 and eng.graph_batch(16) == 16 and eng.graph_batch(5000) == 5000
    m = GpuStepModel(MODEL, "h200-hgx", tp=8, weights="fp8")
    nine, twelve = (m.decode_breakdown(DecodeBatch.uniform(n, 8000)) for n in (9, 12))
    assert nine.ffn_s == pytest.approx(twelve.ffn_s, rel=1e-9)
    assert nine.attn_s < twelve.attn_s and nine.total_s < twelve.total_s
    nine_short = m.decode_breakdown(DecodeBatch.uniform(9, 6000))  # 9 x 8,000 = 12 x 6,000 tokens of KV
    assert nine.total_s == pytest.approx(m.decode_breakdown(DecodeBatch.uniform(12, 6000)).total_s, rel=1e-9)
    assert nine_short.total_s < nine.total_s


def test_attention_part_is_a_share_of_the_step():
    full = GpuStepModel(MODEL, "h200-hgx", tp=8, weights="fp8")
    att = GpuStepModel(MODEL, "h200-hgx", tp=8, weights="fp8", part="attention")
    batch = DecodeBatch.uniform(32, 4000)
    assert 0 < att.decode_step(batch).latency_s < full.decode_step(batch).latency_s
    assert 0 < att.prefill(PrefillChunk(1000)).latency_s < full.prefill(PrefillChunk(1000)).latency_s
    with pytest.raises(UserError):
        GpuStepModel(MODEL, "h200-hgx", tp=8, part="ffn")


def test_prefill_and_verify_grow_with_work():
    m = GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp4")
    p1, p2 = m.prefill(PrefillChunk(1000)), m.prefill(PrefillChunk(4000))
    assert p2.interval_s > 2 * p1.interval_s
    later = m.prefill(PrefillChunk(1000, context=8000))
    assert later.interval_s > p1.interval_s  # attends over the cached prefix too
    batch = DecodeBatch.uniform(16, 2000)
    assert m.verify(batch, 3).latency_s > m.verify(batch, 0).latency_s


def test_estimate_json_reports_framework_and_cost_sources():
    from typer.testing import CliRunner

    from lpxsim.cli.main import app

    r = CliRunner().invoke(app, ["estimate", MODEL, "--system", "h200-hgx", "--tp", "8", "--framework", "trtllm",
                                 "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["framework"] == "trtllm"
    assert d["cost_sources"]["gemm"].startswith("measured: aiconfigurator-core 0.12.0 h200_sxm/trtllm")
    bad = CliRunner().invoke(app, ["estimate", MODEL, "--system", "h200-hgx", "--tp", "8", "--framework", "x"])
    assert bad.exit_code == 2 and "unknown framework 'x'" in bad.output  # refused at the option, before any work
    with pytest.raises(UserError) as e:
        GpuStepModel(MODEL, "h200-hgx", tp=8, framework="x")
    assert e.value.field == "framework"


def test_prefill_wait_is_the_closed_loop_queue():
    from lpxsim.engine.steady_state import prefill_wait

    assert prefill_wait(1.0, 0.0, 4) == pytest.approx(3.0)  # nobody thinks: wait behind the other three
    assert prefill_wait(1.0, 1e9, 64) == pytest.approx(0.0, abs=1e-6)  # nobody else is ever queued
    assert prefill_wait(1.0, 1.0, 1) == 0.0
    waits = [prefill_wait(0.1, 2.0, c) for c in (2, 8, 32, 128)]
    assert all(b > a for a, b in zip(waits, waits[1:], strict=False))


def test_admission_hold_waits_the_timeout_when_sparse_and_little_when_dense():
    from lpxsim.engine.steady_state import admission_hold_steps

    assert admission_hold_steps(1, 60, 0.5) == 0.0  # one rank: nothing to balance
    assert admission_hold_steps(4, 0, 0.5) == 0.0  # no timeout: no hold
    assert admission_hold_steps(4, 60, 1e-4) == pytest.approx(60, rel=0.05)  # alone: the whole timeout
    holds = [admission_hold_steps(4, 60, lam) for lam in (0.01, 0.1, 1.0, 10.0)]
    assert all(b < a for a, b in zip(holds, holds[1:], strict=False)) and holds[-1] < 1.0
    assert admission_hold_steps(8, 60, 1.0) > admission_hold_steps(4, 60, 1.0)  # more ranks to fill


def test_trtllm_attention_dp_holds_prefills_and_lengthens_ttft():
    """TensorRT-LLM with attention-DP balance (InferenceX's timeout of 60 steps) holds new prefills;
    SGLang and plain TP layouts do not; the estimate's TTFT grows by the hold."""
    from dataclasses import replace

    from lpxsim.engine.steady_state import steady_state

    dp = GpuStepModel(MODEL, "b200-hgx", tp=8, ep=8, dp_attention=True, weights="fp4", kv="fp8",
                      framework="trtllm")
    assert dp.admission_hold == (8, 60, 1)
    assert GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp8", framework="trtllm").admission_hold is None
    assert GpuStepModel(MODEL, "b200-hgx", tp=8, ep=8, dp_attention=True, weights="fp4",
                        framework="sglang").admission_hold is None
    held = steady_state(dp, isl=1024, osl=1024, concurrency=128)
    dp.engine = replace(dp.engine, adp_balance_timeout_iters=0)
    free = steady_state(dp, isl=1024, osl=1024, concurrency=128)
    assert held.ttft_s > free.ttft_s + 5 * held.decode_period_s
    assert held.ttft_wait_s - free.ttft_wait_s == pytest.approx(held.ttft_s - free.ttft_s, rel=1e-6)


def test_estimate_ttft_queueing_matches_a_closed_loop_simulation():
    """C users in a closed loop: the estimate's TTFT (with its prefill queue) and the simulator's agree."""
    from lpxsim.plan.estimate import steady_state
    from lpxsim.serving import simulate
    from lpxsim.serving.backends import make_step_model
    from lpxsim.serving.config import load_fleet
    from serving_fixtures import fleet, pool

    # 8,000 prompt tokens: with the 15 other users' decodes a prompt fits the simulator's 8,192-token step
    # budget in one chunk, as in the estimate (at 8,192 the event loop splits it 8,177 + 15 and the 15-token
    # pass costs a whole kernel floor; the estimate's chunk excludes decodes, SGLang's chunked-prefill size too)
    conc, isl, osl = 16, 8000, 256
    f = fleet(pool(backend="gpu", tp=8))
    res = simulate(f, {"kind": "synthetic", "num_requests": conc * 10,
                       "arrival": {"process": "closed", "concurrency": conc}, "isl": isl, "osl": osl}, seed=0)
    step = make_step_model(load_fleet(f).pools[0])
    est = steady_state(step, isl=isl, osl=osl, concurrency=conc)
    alone = steady_state(step, isl=isl, osl=osl, concurrency=1)
    assert est.ttft_wait_s > 0 and est.ttft_s > alone.ttft_s
    # the mean-field MVA against the event loop once its start-up has passed: all C users start together and,
    # with equal lengths, keep finishing (and so arriving) in waves for a while, which the estimate's random
    # arrivals do not have; the waves dissolve after six to eight turns a user (how many depends on the prefill's
    # share of a turn), so the run's last third is the steady state the estimate describes
    ttft = res.requests.sort_values("arrival_s")["ttft_s"].to_numpy()
    steady = float(np.median(ttft[2 * len(ttft) // 3:]))
    assert steady == pytest.approx(est.ttft_s, rel=0.1)
    assert float(np.median(ttft)) > steady  # the start-up waves queue more than the steady state


def test_pools_take_their_own_gpu_layout_and_framework():
    from lpxsim.serving.backends import make_step_model
    from lpxsim.serving.config import load_fleet
    from serving_fixtures import fleet, pool

    f = fleet(pool("pre", system="b200-hgx", backend="gpu", model=MODEL, tp=8, ep=8, weights="fp4", role="prefill",
                   framework="trtllm"),
              pool("dec", system="b200-hgx", backend="gpu", model=MODEL, tp=8, ep=8, dp_attention=True, weights="fp4",
                   role="decode"))
    pre, dec = (make_step_model(p) for p in load_fleet(f).pools)
    assert pre.layout.label() == "TP8/EP8" and pre.framework == "trtllm"
    assert dec.layout.label() == "TP8/EP8/DPattn" and dec.framework == "sglang"


def test_mtp_acceptance_defaults_to_the_published_figure():
    from lpxsim.catalog import get_model
    from lpxsim.specs.mtp import default_accept

    rates = default_accept(get_model(MODEL))
    assert rates[0] == 0.85  # DeepSeek-V3 report: 85-90 % on the second token, the lower end
    assert all(b < a for a, b in zip(rates, rates[1:], strict=False))  # later positions accept less
    with pytest.raises(UserError) as e:
        default_accept(get_model("llama-3.1-8b"))
    assert e.value.field == "accept"


def test_mtp_pool_drafts_with_its_own_head_and_matches_the_estimate():
    from lpxsim.plan.estimate import steady_state
    from lpxsim.serving import simulate
    from lpxsim.serving.backends import make_step_model
    from lpxsim.serving.config import load_fleet
    from serving_fixtures import fleet, pool

    conc, isl, osl, k, a = 4, 1024, 256, 2, 0.8
    wl = {"kind": "synthetic", "num_requests": conc * 20, "arrival": {"process": "closed", "concurrency": conc},
          "isl": isl, "osl": osl}
    plain = simulate(fleet(pool(backend="gpu", tp=8)), wl, seed=0)
    f = fleet(pool(backend="gpu", tp=8, mtp=k, mtp_accept=a))
    res = simulate(f, wl, seed=0)
    r = res.requests
    assert (r["spec_rounds"] > 0).all()
    # leading accepted drafts: P(>= j) = a^j, so E = a + a^2 of k = 2
    assert r["spec_accepted"].sum() / r["spec_rounds"].sum() == pytest.approx(a + a * a, rel=0.05)
    assert r["tpot_s"].median() < plain.requests["tpot_s"].median()
    est = steady_state(make_step_model(load_fleet(f).pools[0]), isl=isl, osl=osl, concurrency=conc, spec_k=k,
                       spec_accept=a)
    assert r["tpot_s"].median() == pytest.approx(est.tpot_s, rel=0.1)


def test_mtp_pool_without_a_published_acceptance_says_so():
    from lpxsim.serving import simulate
    from serving_fixtures import fleet, pool

    wl = {"kind": "synthetic", "num_requests": 2, "arrival": {"process": "closed", "concurrency": 1}, "isl": 64,
          "osl": 8}
    with pytest.raises(UserError) as e:
        simulate(fleet(pool(backend="gpu", tp=8, mtp=1)), wl, seed=0)
    assert e.value.field.endswith("mtp_accept")


def test_mtp_works_in_a_disaggregated_decode_pool():
    from lpxsim.serving import simulate
    from serving_fixtures import fleet, link, pool

    f = fleet(pool("pre", backend="gpu", tp=8, role="prefill"),
              pool("dec", backend="gpu", tp=8, role="decode", mtp=1, mtp_accept=0.7), links=[link("pre", "dec")])
    wl = {"kind": "synthetic", "num_requests": 12, "arrival": {"process": "closed", "concurrency": 4}, "isl": 512,
          "osl": 64}
    r = simulate(f, wl, seed=0).requests
    assert (r["status"] == "completed").all() and (r["decode_pool"] == "dec").all()
    assert (r["spec_rounds"] > 0).all() and r["spec_rounds"].sum() < r["output_tokens"].sum()


def test_plan_point_runs_gpu_layouts_under_the_chosen_framework():
    from lpxsim.plan.operating_point import operating_point

    sgl, trt = (operating_point("gemma-4-31b", "h200-hgx", 1024, 256, 20.0, framework=fw) for fw in ("sglang", "trtllm"))
    assert sgl.feasible and trt.feasible
    # the engines' measured kernels and fitted overheads differ, so does the best point
    assert sgl.as_dict()["tok_s_per_mw"] != trt.as_dict()["tok_s_per_mw"]
    with pytest.raises(UserError) as e:
        operating_point("gemma-4-31b", "h200-hgx", 1024, 256, 20.0, framework="foo")
    assert e.value.field == "framework"


def test_bench_step_models_take_the_framework():
    from lpxsim.bench.aa import run_aa
    from lpxsim.bench.backends import step_model

    assert step_model("gemma-4-31b", "h200-hgx", framework="trtllm").framework == "trtllm"
    assert step_model("gemma-4-31b", "h200-hgx").framework == "sglang"
    assert step_model("gemma-4-31b", "h200-hgx", isl=1024, osl=256, concurrency=4, framework="vllm").framework == "vllm"
    with pytest.raises(UserError) as e:
        run_aa("gemma-4-31b", "h200-hgx", framework="foo")
    assert e.value.field == "framework"


def test_sweep_points_carry_a_non_default_framework():
    from lpxsim.bench.sweep import evaluate_point, grid

    sgl = grid("gemma-4-31b", ["h200-hgx"], [1024], [4], osl=256, ceiling=False)
    trt = grid("gemma-4-31b", ["h200-hgx"], [1024], [4], osl=256, ceiling=False, framework="trt")
    assert "framework" not in sgl[0] and trt[0]["framework"] == "trtllm"  # default points keep their old identity
    a, b = evaluate_point(sgl[0]), evaluate_point(trt[0])
    assert b["framework"] == "trtllm" and a["tpot_s"] != b["tpot_s"]
    with pytest.raises(UserError) as e:
        grid("gemma-4-31b", ["h200-hgx"], [1024], [4], framework="foo")
    assert e.value.field == "framework"


def test_table_reader_matches_pyarrow_own_conversion():
    """The buffer-level reader (no pandas import) gives what pyarrow's to_pylist gives, strings included
    (the GEMM table's are `string`, the MoE table's `large_string`)."""
    import pyarrow.parquet as pq

    from lpxsim.gpu.measured import _table_path

    for family, fname, cols in (("gemm", "gemm_perf.parquet", ("gemm_dtype", "m", "latency")),
                                ("moe", "moe_perf.parquet", ("moe_dtype", "distribution", "num_tokens", "latency"))):
        got = _columns("h200_sxm", family, "sglang", fname, cols)
        ref = pq.read_table(_table_path("h200_sxm", family, "sglang", fname), columns=list(cols))
        for c in cols:
            assert got[c].tolist() == ref.column(c).to_pylist(), c


def test_step_memo_tables_follow_the_fitted_constants(monkeypatch):
    """A refit (catalog/fitted/gpu_fit.json) must not be answered from tables priced under the old fit."""
    import lpxsim.backends.memo as sm

    seen: list[tuple] = []
    real = sm.source_version
    monkeypatch.setattr(sm, "source_version", lambda *p: seen.append(p) or real(*p))
    sm.table_key(("backend", "x"))
    assert "lpxsim.catalog.fitted" in seen[0] and "lpxsim.gpu" in seen[0]


def test_unmeasured_attention_keeps_its_context_cost() -> None:
    """An attention shape no table covers (Gemma 4 31B's global layers whole on one GPU: 32 heads, 4 KV heads,
    head_dim 512) and the sliding-window layers are priced by the roofline at the step's context: a decode step
    and a prefill chunk over a long cached prefix cost more than at a short one (they once priced context 0)."""
    from lpxsim.gpu import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch, PrefillChunk

    m = GpuStepModel("gemma-4-31b", system="h200-hgx", gpus=1, tp=1)
    assert m.source is not None  # the measured path, where the bug was
    d = [m.decode_step(DecodeBatch.uniform(8, c)).latency_s for c in (1_000, 10_000, 100_000)]
    assert d[0] < d[1] < d[2]
    # 8 x 100K tokens of KV over the global layers alone is more than 1 ms of HBM reads on an H200
    assert d[2] - d[0] > 1e-3
    p = [m.prefill(PrefillChunk(2048, c, 1)).latency_s for c in (0, 100_000)]
    assert p[1] > 1.5 * p[0]


def test_sglang_scheduler_poll_adds_half_its_interval_to_ttft_on_blackwell():
    """SGLang as InferenceX launches it on Blackwell reads new requests every 10 decode steps below 16 users and
    every 30 from 16 (--scheduler-recv-interval): a request waits half of that on average; one user's request
    finds the engine idle; Hopper and TensorRT-LLM poll every step."""
    from dataclasses import replace

    from lpxsim.engine.steady_state import poll_wait_steps, steady_state

    sm = GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp8", kv="fp8", framework="sglang")
    assert sm.admission_poll == (16, 10, 30)
    assert [poll_wait_steps(sm.admission_poll, c) for c in (1, 4, 15, 16, 128)] == [0.0, 5.0, 5.0, 15.0, 15.0]
    assert GpuStepModel(MODEL, "h200-hgx", tp=8, weights="fp8", framework="sglang").admission_poll is None
    assert GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp8", framework="trtllm").admission_poll is None
    polled = steady_state(sm, isl=1024, osl=1024, concurrency=64)
    sm.engine = replace(sm.engine, recv_interval=None)
    free = steady_state(sm, isl=1024, osl=1024, concurrency=64)
    # the wait joins the closed loop's fixed point: about 15 decode periods more before the first token
    assert polled.ttft_s - free.ttft_s == pytest.approx(15 * polled.decode_period_s, rel=0.15)
    assert steady_state(sm, isl=1024, osl=1024, concurrency=1).ttft_wait_s == 0.0


def test_a_moe_backend_missing_from_a_table_comes_from_the_same_gpu_then_the_sibling():
    """aiconfigurator-core 0.12 timed only CUTLASS for NVFP4 MoE on B300 under TensorRT-LLM, CUTLASS and the
    TRTLLM-gen min-latency kernels on B200. B300 takes the trtllm-gen time from its own SGLang table (the same
    kernels, the same GPU) before B200's; a backend no other engine shares (CUTLASS) stays its own."""
    from lpxsim.gpu.measured import measured_ops

    b300, b200 = measured_ops("b300_sxm", "trtllm"), measured_ops("b200_sxm", "trtllm")
    shape = (7168, 2048, 8, 256, 8, 1, "fp4")  # DeepSeek-R1 routed experts, MoE TP8
    own = b300._moe_by_source(128, *shape)
    theirs = b200._moe_by_source(128, *shape)
    same_gpu = measured_ops("b300_sxm", "sglang")._moe_by_source(128, *shape)
    assert set(own) == {"moe_torch_flow_cutlass"} and "moe_torch_flow_min_latency" in theirs
    got = b300.moe_backends(128, *shape)
    assert got["trtllm"] == pytest.approx(same_gpu["sglang_flashinfer_trtllm_moe"])
    assert got["cutlass"] == pytest.approx(own["moe_torch_flow_cutlass"])
    assert b300.moe(128, *shape, backend="trtllm") < 0.6 * own["moe_torch_flow_cutlass"]
    assert b300.moe(128, *shape, backend="cutlass") == pytest.approx(own["moe_torch_flow_cutlass"])
    # nothing borrowed where the table has every backend: B200's own two
    assert b200.moe_backends(128, *shape) == pytest.approx(
        {"trtllm": theirs["moe_torch_flow_min_latency"], "cutlass": theirs["moe_torch_flow_cutlass"]})


def test_a_finer_expert_split_is_never_slower_than_a_coarser_one_that_divides_it():
    """The tables time the busiest rank; a rank of EP4 holds two EP8 ranks' experts, so EP8's busiest rank has a
    subset of EP4's work. aiconfigurator-core 0.12 times NVFP4 at EP8 and one token well above EP4 (and TP8):
    capped there, and nowhere the table already agrees (four tokens and up)."""
    ops = measured_ops("b300_sxm", "sglang")
    shape = (7168, 2048, 8, 256, 1)  # DeepSeek-R1 routed experts, expert TP 1
    raw = {ep: {t: ops._moe_by_source(t, *shape, ep, "fp4")["sglang_flashinfer_trtllm_moe"] for t in (1, 4, 64)}
           for ep in (2, 4, 8)}
    assert raw[8][1] > 1.5 * raw[4][1]  # the table's EP8 one-token point
    for t in (1, 4, 64):
        got = {ep: ops.moe(t, *shape, ep, "fp4", backend="trtllm") for ep in (1, 2, 4, 8)}
        assert got[8] <= got[4] <= got[2] <= got[1]
        assert got[8] == pytest.approx(min(raw[8][t], raw[4][t], raw[2][t]))
    assert ops.moe(1, *shape, 8, "fp4", backend="trtllm") == pytest.approx(raw[4][1])
    assert ops.moe(64, *shape, 8, "fp4", backend="trtllm") == pytest.approx(raw[8][64])


def test_a_backend_missing_from_both_engines_of_a_gpu_comes_from_the_sibling(monkeypatch):
    """With no trtllm-gen time on this GPU under either engine, the same engine's sibling GPU supplies it,
    scaled by the HBM bandwidth ratio."""
    from lpxsim.gpu import measured

    b300 = measured.MeasuredOps("b300_sxm", "trtllm")
    real = measured.measured_ops

    def no_sglang(system: str, framework: str):  # noqa: ANN202
        if framework == "sglang":
            return type("Empty", (), {"_moe_by_source": staticmethod(lambda *a: {})})()
        return real(system, framework)

    monkeypatch.setattr(measured, "measured_ops", no_sglang)
    shape = (7168, 2048, 8, 256, 8, 1, "fp4")
    b200 = real("b200_sxm", "trtllm")._moe_by_source(128, *shape)
    scale = measured._hbm_Bps("b200_sxm") / measured._hbm_Bps("b300_sxm")
    got = b300.moe_backends(128, *shape)
    assert got["trtllm"] == pytest.approx(b200["moe_torch_flow_min_latency"] * scale)


def test_trtllm_fp8_moe_runs_the_trtllm_gen_kernels_timed_under_sglang():
    """TensorRT-LLM's TRTLLM MoE backend and SGLang's flashinfer_trtllm runner launch the same trtllm-gen kernels;
    aiconfigurator-core timed them for FP8 block scales under SGLang only (DeepGEMM under TensorRT-LLM). The
    TensorRT-LLM lookup by that backend takes SGLang's time, and DeepGEMM stays selectable."""
    from lpxsim.gpu.measured import measured_ops

    trt, sgl = measured_ops("b200_sxm", "trtllm"), measured_ops("b200_sxm", "sglang")
    shape = (7168, 2048, 8, 256, 8, 1, "fp8")  # MoE TP8, as InferenceX's TP8 EP1 runs
    ours, theirs = trt._moe_by_source(8, *shape), sgl._moe_by_source(8, *shape)
    assert set(ours) == {"deepgemm"}
    assert trt.moe(8, *shape, backend="trtllm") == pytest.approx(theirs["sglang_flashinfer_trtllm_moe"])
    assert trt.moe(8, *shape, backend="deepgemm") == pytest.approx(ours["deepgemm"])
    assert trt.moe(8, *shape, backend="trtllm") < 0.5 * ours["deepgemm"]
    # Hopper has no trtllm-gen kernels: the named backend falls back to the fastest timed (CUTLASS)
    h200 = measured_ops("h200_sxm", "trtllm")
    assert h200.moe(8, *shape, backend="trtllm") == pytest.approx(min(h200.moe_backends(8, *shape).values()))
    assert set(h200.moe_backends(8, *shape)) == {"cutlass"}


def test_trtllm_nvfp4_gemms_take_the_tuned_time_of_the_same_gpu():
    """aiconfigurator's TensorRT-LLM GEMM collector times NVFP4 GEMMs outside TensorRT-LLM's autotuner (fallback
    tactic): its table has them slower than the FP8 block-scaled GEMM of the same shape at decode M. Under
    TensorRT-LLM an NVFP4 GEMM takes the same GPU's SGLang-table time; other dtypes keep their own table."""
    from lpxsim.gpu.measured import MS, _select, measured_ops

    trt, sgl = measured_ops("b200_sxm", "trtllm"), measured_ops("b200_sxm", "sglang")
    cols = ("gemm_dtype", "m", "n", "k", "latency")
    raw = _select("b200_sxm", "gemm", "trtllm", "gemm_perf.parquet", cols, ("gemm_dtype", "latency"),
                  m=1, n=512, k=7168)
    own = {dt: float(np.median(raw["latency"][raw["gemm_dtype"] == dt])) * MS for dt in ("nvfp4", "fp8_block")}
    assert own["nvfp4"] > 1.5 * own["fp8_block"]  # the untuned NVFP4 kernel: slower though it reads half the bytes
    assert trt.gemm(1, 512, 7168, "fp4") == pytest.approx(sgl.gemm(1, 512, 7168, "fp4"))
    assert trt.gemm(1, 512, 7168, "fp4") < 0.6 * own["nvfp4"]
    assert trt.gemm(1, 512, 7168, "fp8_block") == pytest.approx(own["fp8_block"], rel=0.05)


def test_the_launch_moe_backend_reaches_the_decode_step():
    """InferenceX launches TensorRT-LLM with moe_config.backend TRTLLM (FP8; NVFP4 without attention-DP) and SGLang
    with flashinfer_trtllm; the step model prices the routed experts by it, and an explicit backend overrides it."""
    from lpxsim.gpu.moe_backend import launch_moe_backend
    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch

    assert launch_moe_backend("trtllm", "fp8", False) == "trtllm"
    assert launch_moe_backend("trtllm", "fp4", False) == "trtllm"
    assert launch_moe_backend("trtllm", "fp4", True) is None  # CUTLASS in the script; not asserted (docs)
    assert launch_moe_backend("sglang", "fp8", False) == "trtllm"
    assert launch_moe_backend("vllm", "fp8", False) is None

    def step_s(backend: str | None) -> float:
        sm = GpuStepModel("deepseek-r1", "b200-hgx", tp=8, weights="fp8", kv="fp8", framework="trtllm",
                          moe_backend=backend)
        return sm.decode_step(DecodeBatch.uniform(8, 1024)).latency_s, sm.moe_backend

    from lpxsim.core.errors import UserError

    with pytest.raises(UserError, match="moe_backend"):
        step_s("marlin")
    launched, name = step_s(None)
    deepgemm, _ = step_s("deepgemm")
    assert name == "trtllm"
    # 58 MoE layers at 8 tokens: DeepGEMM's extra ~100 us per layer
    assert deepgemm - launched > 3e-3


def test_prompts_read_at_one_poll_after_a_request_share_its_prefill_pass(monkeypatch):
    """SGLang's polling scheduler reads every request that arrived since its last poll at once and packs them
    into one prefill pass: a request's first token also waits for the prompts that arrived after it in the
    same window (half the window's other arrivals, at most the pass's room); engines that read every step
    add nothing, and neither does one user."""
    from lpxsim.engine import steady_state as ss

    poll = (16, 10, 30)
    assert ss.co_admitted_later(poll, 128, 4.0, 0.02, 8) == pytest.approx(0.5 * 4.0 * 127 / 128 * 30 * 0.02)
    assert ss.co_admitted_later(poll, 128, 40.0, 0.02, 8) == 7.0  # the pass holds 8 prompts: 7 others at most
    assert ss.co_admitted_later(poll, 8, 4.0, 0.02, 8) == pytest.approx(0.5 * 4.0 * 7 / 8 * 10 * 0.02)
    assert ss.co_admitted_later(None, 128, 4.0, 0.02, 8) == 0.0
    assert ss.co_admitted_later(poll, 1, 4.0, 0.02, 8) == 0.0
    assert ss.co_admitted_later(poll, 128, 4.0, 0.02, 1) == 0.0  # an 8k prompt fills an 8k pass alone

    sm = GpuStepModel(MODEL, "b200-hgx", tp=4, ep=4, weights="fp4", kv="fp8", framework="sglang")
    with_pass = ss.steady_state(sm, isl=1024, osl=1024, concurrency=128)
    monkeypatch.setattr(ss, "co_admitted_later", lambda *a: 0.0)
    alone = ss.steady_state(sm, isl=1024, osl=1024, concurrency=128)
    _, occ = ss.prefill_cost(sm, 1024, 8192)
    # about 1.5 prompts share the pass at 128 users (a 30-step window, ~0.1 arrivals per step)
    assert 1.0 * occ < with_pass.ttft_s - alone.ttft_s < 2.5 * occ
    assert with_pass.e2e_s == pytest.approx(alone.e2e_s, rel=0.02)  # the cycle's work is unchanged


def test_sglang_prefill_on_hopper_is_priced_in_the_mha_form_it_runs():
    """aiconfigurator's SGLang collector times Hopper's context MLA in the weight-absorbed form (576 / 512 dims,
    AIC-MLA-COLLECT), which SGLang uses only for decode (SGL-MLA-MHA): the same GPU's TensorRT-LLM table, timed
    in the MHA form, prices the prefill. Blackwell's SGLang table (trtllm_mla, MHA form) and every decode keep
    their own."""
    from lpxsim.gpu.measured import _select

    h200, h200_trt = measured_ops("h200_sxm", "sglang"), measured_ops("h200_sxm", "trtllm")
    assert h200._mla_context_absorbed() and not measured_ops("b200_sxm", "sglang")._mla_context_absorbed()
    assert h200.mla("prefill", 1, 8192, 16, "bf16") == h200_trt.mla("prefill", 1, 8192, 16, "bf16")
    own = _select("h200_sxm", "mla", "sglang", "context_mla_perf.parquet",
                  ("kv_cache_dtype", "num_heads", "batch_size", "isl", "latency"), ("isl", "latency"),
                  kv_cache_dtype="bfloat16", num_heads=16, batch_size=1)
    at_8k = float(own["latency"][list(own["isl"]).index(8192)]) * 1e-3
    assert at_8k > 2.5 * h200.mla("prefill", 1, 8192, 16, "bf16")  # the absorbed form: ~3.4x the multiply-adds
    b200 = measured_ops("b200_sxm", "sglang")
    assert b200.mla("prefill", 1, 8192, 16, "bf16") != measured_ops("b200_sxm", "trtllm").mla("prefill", 1, 8192, 16,
                                                                                              "bf16")
    assert h200.mla("decode", 8, 1024, 16, "bf16") != h200_trt.mla("decode", 8, 1024, 16, "bf16")
