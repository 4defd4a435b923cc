"""Saturated offline throughput (issue 28, item 5): the regime, the MLPerf table of `lpxsim validate`."""

from pathlib import Path

import pytest

from lpxsim.core.errors import UserError

MODEL = "llama-2-70b"


@pytest.fixture(scope="module")
def b200():
    from lpxsim.gpu.step import GpuStepModel

    return GpuStepModel(MODEL, "b200-hgx", tp=1, weights="fp4", kv="fp8", framework="trtllm")


def test_batch_is_the_kv_or_the_engine_cap(b200):
    from lpxsim.engine.offline import saturated_batch
    from lpxsim.gpu.step import GpuStepModel

    assert saturated_batch(b200, 300, 265) == (b200.max_batch(), "max_batch")
    small = GpuStepModel(MODEL, "b200-hgx", tp=1, weights="fp4", kv="fp8", framework="trtllm", max_batch=100_000)
    n, why = saturated_batch(small, 300, 265)
    assert why == "kv" and n == int(small.kv_capacity_bytes() // small.kv_bytes(300 + 265 // 2))


def test_packed_prefill_is_cheaper_per_token_than_one_prompt_alone(b200):
    from lpxsim.engine.offline import prefill_s_per_token
    from lpxsim.step.protocol import PrefillChunk

    packed, tokens = prefill_s_per_token(b200, 300, 8192)
    alone = b200.prefill(PrefillChunk(300)).interval_s / 300
    assert tokens == 27 * 300 and packed < 0.8 * alone
    long, tokens = prefill_s_per_token(b200, 20_000, 8192)  # a prompt longer than a pass is chunked alone
    assert tokens == 8192 and long > 0


def test_step_is_decode_plus_the_steps_share_of_prefill(b200):
    from lpxsim.engine.offline import offline_throughput, prefill_s_per_token

    p = offline_throughput(b200, 300, 265)
    per_tok, _ = prefill_s_per_token(b200, 300, p.prefill_tokens_per_pass)
    assert p.prefill_s == pytest.approx(p.batch * 300 / 265 * per_tok)
    assert p.step_s == pytest.approx(p.decode_s + p.prefill_s)
    assert p.output_tok_s_per_chip == pytest.approx(p.batch / p.step_s)


def test_saturated_regime_beats_the_closed_loop_it_replaces(b200):
    from lpxsim.engine.offline import closed_loop_ceiling, offline_throughput

    assert offline_throughput(b200, 300, 265).output_tok_s_per_chip > 1.2 * closed_loop_ceiling(b200, 300, 265)


def test_bad_lengths_name_their_field(b200):
    from lpxsim.engine.offline import offline_throughput

    with pytest.raises(UserError) as e:
        offline_throughput(b200, 0, 265)
    assert e.value.field == "isl"


def test_mlperf_points_are_sourced_and_per_gpu_consistent():
    from lpxsim.engine.validation import mlperf_points

    pts = mlperf_points()
    assert {p["model"] for p in pts} == {"llama-2-70b", "llama-3.1-405b", "llama-3.1-8b", "deepseek-r1"}
    assert {p["system"] for p in pts} >= {"b200-hgx", "h100-hgx", "mi300x", "mi325x"}  # both vendors judge it
    sources = (Path(__file__).resolve().parents[1] / "docs" / "sources.md").read_text()
    for p in pts:
        assert float(p["tok_s_per_gpu"]) == pytest.approx(float(p["tokens_per_s"]) / int(p["gpus"]), rel=1e-3)
        assert p["source"] and f"| {p['source']} |" in sources


def test_mlperf_outputs_are_what_the_runs_wrote_not_the_accuracy_bound():
    """A point's mean output is its run's (accuracy log) or the fp32 reference's, inside the band MLPerf's checker
    accepts (0.9-1.1 x the reference, MLC-GOLDEN); the results pages' TOKENS_PER_SAMPLE is that band's lower end."""
    from lpxsim.engine.validation import mlperf_points

    golden = {"llama-2-70b": 294.45, "llama-3.1-405b": 684.68, "deepseek-r1": 3886.2274}
    for p in mlperf_points():
        g = golden.get(p["model"])
        if g is None:
            continue
        assert 0.9 * g <= float(p["osl"]) <= 1.1 * g, p["id"]
        assert "accuracy run" in p["osl_source"] or "reference implementation's mean" in p["osl_source"], p["id"]


def test_mlperf_table_reports_both_regimes():
    from lpxsim.engine.validation import mlperf_offline, mlperf_points

    pt = [p for p in mlperf_points() if p["id"] == "MLP51-B200-L2-70B"]
    res = mlperf_offline(pt)
    row = res["points"][0]
    assert row["tp"] == 1
    assert row["err_pct"] == pytest.approx(100 * (row["predicted_tok_s_per_gpu"] / row["published_tok_s_per_gpu"] - 1),
                                           abs=0.1)
    assert res["saturated"]["n"] == 1 and res["saturated"]["mape_pct"] == pytest.approx(abs(row["err_pct"]), abs=0.1)
    assert row["predicted_tok_s_per_gpu"] > row["closed_loop_tok_s_per_gpu"]


def test_a_stated_layout_is_priced_at_its_caps():
    """A point that states its submission's layout is priced there: pipeline stages, attention-DP ranks, the
    batch cap per rank x pp (TensorRT-LLM's capacity scheduler), the KV share of free memory and whether the
    engine runs CUDA graphs; with its dataset and LoadGen's sample count, as each replica's finite run of its share
    of the samples."""
    import math

    from lpxsim.core.frameworks import POOLED
    from lpxsim.engine.offline import offline_throughput
    from lpxsim.engine.offline_run import offline_run
    from lpxsim.engine.validation import generated_samples, mlperf_offline, mlperf_points, point_lengths
    from lpxsim.gpu.step import GpuStepModel

    pt = [p for p in mlperf_points() if p["id"] == "MLP51-B200-L3-405B"]
    row = mlperf_offline(pt)["points"][0]
    assert row["layout"] == "TP2/PP2"
    assert pt[0]["cuda_graphs"] == "false"  # NVIDIA's harness: use_graphs False for this engine
    # the point states no software date: the engine's pooled fit (assumption "engine-release")
    m = GpuStepModel("llama-3.1-405b", "b200-hgx", tp=2, pp=2, weights="fp4", kv="fp8", framework="trtllm",
                     mem_fraction=0.95, max_batch=128 * 2, cuda_graphs=False, release=POOLED)
    want = offline_throughput(m, 9400, 616, iteration_tokens=1536)
    assert want.limited_by == "iteration_tokens"  # 1,536 tokens an iteration x 2 stages / (1 + 9400 / 616)
    assert want.batch == int(1536 * 2 / (1 + 9400 / 616))
    mix = point_lengths(pt[0])
    per_replica = math.ceil(generated_samples(int(pt[0]["samples_per_query"]), mix.samples) / 2)  # 8 GPUs / 4
    run = offline_run(m, mix, per_replica, iteration_tokens=1536)
    assert row["predicted_tok_s_per_gpu"] == pytest.approx(run.output_tok_s_per_chip, abs=0.1)
    assert row["steady_tok_s_per_gpu"] == pytest.approx(run.steady.output_tok_s_per_chip, abs=0.1)
    unstated = [{k: v for k, v in pt[0].items() if k not in ("tp", "pp")}]
    assert mlperf_offline(unstated)["points"][0]["layout"].endswith("(best)")


def test_a_vllm_point_packs_its_prefill_passes_as_stated(monkeypatch):
    """vLLM with chunked prefill off runs prompts as passes of their own of up to max_num_batched_tokens: the
    point's `prefill_pass_tokens`, not an iteration budget shared with the decodes."""
    from lpxsim.engine import offline
    from lpxsim.engine.validation import _offline_stated, mlperf_points, point_lengths
    from lpxsim.gpu.step import GpuStepModel

    seen: dict = {}
    real = offline.offline_throughput

    def spy(*args, **kw):
        seen.update(kw)
        return real(*args, **kw)

    monkeypatch.setattr(offline, "offline_throughput", spy)
    p = next(p for p in mlperf_points() if p["id"] == "MLP51-MI325X-L2-70B")
    label, pred, steady = _offline_stated(p, point_lengths(p))
    assert label == "TP1" and pred == steady > 0  # no sample count stated: the steady state
    assert seen["tokens_per_pass"] == 65536 and seen["iteration_tokens"] is None
    m = GpuStepModel(p["model"], p["system"], tp=1, weights=p["weights"], kv=p["kv"], framework=p["framework"],
                     mem_fraction=float(p["kv_mem_fraction"]), max_batch=int(p["max_batch_per_rank"]))
    assert real(m, 222, 265, tokens_per_pass=65536).prefill_tokens_per_pass == (65536 // 222) * 222


def test_pipeline_stages_overlap_micro_batches():
    """With pipeline parallelism a pass still traverses every layer (latency), but the next micro-batch enters
    when the busiest stage frees: the interval is a stage's share, so a TP2/PP2 replica holding as many
    sequences per GPU as TP2 decodes about as many tokens per GPU (it was priced as if its stages ran one after
    another: half). At equal total batch it is slower per GPU: each stage streams its weights once a
    micro-batch, for half the batch."""
    from lpxsim.engine.steady_state import decode_period
    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch, PrefillChunk

    kw = dict(weights="fp4", kv="fp8", framework="trtllm")
    tp2 = GpuStepModel("llama-3.1-405b", "b200-hgx", tp=2, **kw)
    pp2 = GpuStepModel("llama-3.1-405b", "b200-hgx", tp=2, pp=2, **kw)
    assert pp2.stage_share() == pytest.approx(63 / 126)
    c = pp2.decode_step(DecodeBatch.uniform(64, 4096))
    assert c.interval_s < 0.6 * c.latency_s
    # the same layers in one pass (the stages add their point-to-point hand-offs, microseconds)
    assert c.latency_s == pytest.approx(tp2.decode_step(DecodeBatch.uniform(64, 4096)).latency_s, rel=1e-3)
    assert pp2.prefill(PrefillChunk(4096)).interval_s == pytest.approx(
        0.5 * tp2.prefill(PrefillChunk(4096)).interval_s, rel=1e-3)
    per_gpu = [b / decode_period(m, b, 4096)[0] / m.chips for m, b in ((tp2, 128), (pp2, 256))]
    assert per_gpu[1] > 0.8 * per_gpu[0]
    # two micro-batches of 128 in flight: a token period shorter than one pass of all 256 (the serial pricing)
    assert decode_period(pp2, 256, 4096)[0] < 0.85 * pp2.decode_step(DecodeBatch.uniform(256, 4096)).latency_s


def test_decode_attention_beyond_the_tables_context_streams_at_the_kernels_measured_rate():
    """aiconfigurator's GQA decode sweep stops at 127 cached tokens for 1,024 sequences, where the time is
    still flat (per-sequence bound). Past it, the extra KV streams at the best rate the table measured
    for the shape, not at the flat point's rate scaled linearly (3x slower than the kernel reaches)."""
    from lpxsim.gpu.measured import _columns, _curve, measured_ops

    ops = measured_ops("b200_sxm", "trtllm")
    cols = ("kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim", "window_size", "batch_size", "step",
            "latency")
    t = _columns("b200_sxm", "attention", "trtllm", "generation_attention_perf.parquet", cols)
    shape = ((t["kv_cache_dtype"] == "fp8") & (t["num_heads"] == 64) & (t["num_key_value_heads"] == 8)
             & (t["head_dim"] == 128) & (t["window_size"] == 0))
    sel = shape & (t["batch_size"] == 1024)
    xs, ys = _curve(t["step"][sel], t["latency"][sel])
    last = int(xs[-1])
    assert ops.attention("decode", 1024, last, 64, 8, 128, "fp8") == pytest.approx(ys[-1] * 1e-3)
    best = max(float(b * s / y) for b, s, y in zip(t["batch_size"][shape], t["step"][shape], t["latency"][shape],
                                                    strict=True))
    beyond = ops.attention("decode", 1024, 432, 64, 8, 128, "fp8")
    assert beyond == pytest.approx((ys[-1] + 1024 * (432 - last) / best) * 1e-3, rel=1e-9)
    assert beyond < 0.75 * ys[-1] * 432 / last * 1e-3  # the 1-d rule's linear stretch of the flat point
    kv_bytes = 1024 * 432 * 8 * 128 * 2  # K and V, FP8, 8 KV heads: no faster than B200's 8 TB/s
    assert beyond > kv_bytes / 8e12


def test_the_fp4_ceiling_is_no_faster_than_a_library_has_shown(monkeypatch):
    """The ceiling's FP4-over-FP8 ratio is the datasheet's where a tuned library has shown it (Blackwell: 2x peak,
    cuBLAS up to 2.3x) and no more than 2.3x elsewhere: Blackwell Ultra's 3x datasheet ratio put GB300's FP4
    GEMMs at 3x its FP8 ones, where its own table measures 1.2x GB200's FP4 and MLPerf 1.09x per GPU."""
    from lpxsim.catalog import get_system
    from lpxsim.gpu import measured
    from lpxsim.gpu.measured import FP4_OVER_FP8_SHOWN, MeasuredOps, _fp8_over_fp4_peak

    assert _fp8_over_fp4_peak("b200_sxm") == pytest.approx(0.5)
    peak = get_system("gb300-nvl72").chip.peak_flops
    assert float(peak["fp4"]) / float(peak["fp8"]) > FP4_OVER_FP8_SHOWN  # the datasheet claims more
    assert _fp8_over_fp4_peak("gb300") == pytest.approx(1.0 / FP4_OVER_FP8_SHOWN)
    monkeypatch.setattr(measured, "UNTUNED_GEMM", {})
    ops = MeasuredOps("gb300", "trtllm")
    m, n, k = 8192, 8192, 8192
    assert ops.gemm(m, n, k, "fp4") >= ops.gemm(m, n, k, "fp8") / FP4_OVER_FP8_SHOWN * (1 - 1e-9)


def test_fp4_gemm_is_capped_by_the_fp8_kernels_fraction_of_peak_where_compute_bound(monkeypatch):
    """aiconfigurator's NVFP4 GEMM table plateaus at 1.35x its FP8 table on B200 where the tensor cores issue
    2x: at large M the FP4 GEMM takes the FP8 time x peak8 / peak4; below the ridge (weight streaming)
    the FP4 table's own time stands. (The table alone: without the tuned-kernel bound of UNTUNED_GEMM.)"""
    from lpxsim.catalog import get_system
    from lpxsim.gpu import measured
    from lpxsim.gpu.measured import MeasuredOps, _columns, _curve

    monkeypatch.setattr(measured, "UNTUNED_GEMM", {})
    ops = MeasuredOps("b200_sxm", "trtllm")  # a fresh instance: the shared one caches bounded times
    peak = get_system("b200-hgx").chip.peak_flops
    ratio = float(peak["fp8"]) / float(peak["fp4"])
    n, k = 8192, 8192
    t = _columns("b200_sxm", "gemm", "trtllm", "gemm_perf.parquet", ("gemm_dtype", "m", "n", "k", "latency"))
    sel = (t["gemm_dtype"] == "nvfp4") & (t["n"] == n) & (t["k"] == k)
    xs, ys = _curve(t["m"][sel], t["latency"][sel])
    table = dict(zip(xs.tolist(), (ys * 1e-3).tolist(), strict=True))
    big = 8192
    assert table[big] > ops.gemm(big, n, k, "fp8") * ratio * 1.1  # the table's plateau is above the ceiling
    assert ops.gemm(big, n, k, "fp4") == pytest.approx(ops.gemm(big, n, k, "fp8") * ratio)
    # below the ridge the FP4 kernel streams its weights: the table's own time, floored at its m = 1 point
    assert ops.gemm(1, n, k, "fp4") == pytest.approx(table[1])
    assert table[1] <= ops.gemm(16, n, k, "fp4") <= table[16]
    assert ops.gemm(16, n, k, "fp4") > 1.5 * ops.gemm(16, n, k, "fp8") * ratio  # not the FP8 time scaled
    m = [1, 64, 256, 1024, 4096, 8192, 16384]
    times = [ops.gemm(x, n, k, "fp4") for x in m]
    assert all(b >= a for a, b in zip(times, times[1:], strict=False))


@pytest.mark.heavy
def test_mlperf_conditions_known_within_the_acceptance_and_runs_drain():
    """Every point at its submission's layout and LoadGen's run (issue 28's offline acceptance is at most 12 %;
    this guards the shipped points, the held-out rows judge). DeepSeek-R1's few waves of long-tailed outputs
    drain below the steady state; Llama-2-70B's 60 waves of short ones do not."""
    from lpxsim.engine.validation import mlperf_offline, mlperf_points

    res = mlperf_offline(mlperf_points())
    assert res["saturated"]["n"] == len(mlperf_points()) >= 13 and res["saturated"]["median_abs_pct"] < 12.0
    rows = {r["id"]: r for r in res["points"]}
    for pid in ("MLP51-B200-DSR1", "MLP51-GB200-DSR1", "MLP51-GB300-DSR1"):
        assert rows[pid]["predicted_tok_s_per_gpu"] < 0.92 * rows[pid]["steady_tok_s_per_gpu"], pid
    l2 = rows["MLP51-B200-L2-70B"]
    assert l2["predicted_tok_s_per_gpu"] == pytest.approx(l2["steady_tok_s_per_gpu"], rel=0.01)
