"""A finite saturated run (MLPerf Offline as LoadGen runs it) and the dataset lengths it draws from."""

import numpy as np
import pytest

from lpxsim.core.errors import UserError
from lpxsim.engine.lengths import LengthMix, dataset, uniform


@pytest.fixture(scope="module")
def b200():
    from lpxsim.gpu.step import GpuStepModel

    return GpuStepModel("llama-3.1-8b", "b200-hgx", tp=1, weights="fp4", kv="fp8", framework="trtllm",
                        max_batch=256)


def test_resident_context_weights_each_sample_by_its_time_in_the_batch():
    assert uniform(800, 200).resident_context() == pytest.approx(900)
    mix = LengthMix("two", np.array([100, 1000]), np.array([10, 990]))
    # sample 1: 10 steps at contexts 101..110; sample 2: 990 steps at 1001..1990
    want = (10 * 100 + 10 * 10 / 2 + 990 * 1000 + 990 * 990 / 2) / 1000
    assert mix.resident_context() == pytest.approx(want)
    assert mix.resident_context() > mix.mean_isl + mix.mean_osl / 2  # long outputs stay longer


def test_shaping_keeps_the_shape_and_meets_the_mean_under_the_cap():
    mix = LengthMix("spread", np.full(5, 10), np.array([10, 20, 40, 80, 1000]))
    s = mix.shaped(150, max_osl=400)
    assert s.osl.max() == 400 and s.mean_osl == pytest.approx(150, abs=1)
    assert list(np.argsort(s.osl[:4])) == [0, 1, 2, 3]  # order of the uncapped kept
    assert (mix.shaped(400, max_osl=400).osl == 400).all()
    with pytest.raises(UserError) as e:
        mix.shaped(500, max_osl=400)
    assert e.value.field == "max_osl"
    with pytest.raises(UserError) as e:
        mix.shaped(0)
    assert e.value.field == "osl"


def test_packaged_datasets_match_their_published_figures():
    """The copies are checked against figures their sources publish: the DeepSeek-R1 reference run's mean output
    (4,043.4 tokens, MLPERF-DS-DSR1) and each dataset's sample count (LoadGen's performance_sample_count)."""
    dsr1 = dataset("deepseek-r1")
    assert dsr1.samples == 4388 and dsr1.mean_osl == pytest.approx(4043.4, abs=0.1)
    assert dataset("llama-3.1-405b").samples == 8313
    assert dataset("llama-3.1-8b").samples == 13368
    with pytest.raises(UserError) as e:
        dataset("no-such-set")
    assert e.value.field == "dataset"


def test_equal_lengths_in_whole_waves_run_at_the_steady_state(b200):
    """Every wave admitted together and finishing together: each wave is osl decode periods of the full batch plus
    its prompts' packed prefill, which is the steady state's step x osl."""
    from lpxsim.engine.offline_run import offline_run

    mix = uniform(500, 200)
    run = offline_run(b200, mix, 3 * 256, iteration_tokens=8192)
    assert run.slots == 256
    assert run.output_tok_s == pytest.approx(run.steady.output_tok_s, rel=1e-6)


def test_a_few_waves_of_spread_outputs_drain_below_the_steady_state(b200):
    from lpxsim.engine.offline_run import offline_run

    rng = np.random.default_rng(3)
    mix = LengthMix("spread", np.full(2000, 500), rng.integers(20, 4000, 2000))
    few = offline_run(b200, mix, 2 * 256)
    many = offline_run(b200, mix, 40 * 256)
    assert few.run_factor < many.run_factor < 1.0
    assert many.run_factor > 0.95
    # nothing ends before its longest sample has decoded at the fastest (one-sequence) step
    from lpxsim.engine.steady_state import decode_period

    assert few.makespan_s > int(mix.osl.max()) * decode_period(b200, 1, 500)[0]


def test_bad_sample_counts_and_caps_name_their_field(b200):
    from lpxsim.engine.offline import offline_throughput
    from lpxsim.engine.offline_run import offline_run

    with pytest.raises(UserError) as e:
        offline_run(b200, uniform(100, 100), 0)
    assert e.value.field == "samples"
    with pytest.raises(UserError) as e:
        offline_throughput(b200, 100, 100, concurrency=0)
    assert e.value.field == "concurrency"
    assert offline_throughput(b200, 100, 100, concurrency=7).limited_by == "concurrency"


def test_loadgen_issues_whole_permutations():
    from lpxsim.engine.offline_run import draw_order
    from lpxsim.engine.validation import generated_samples

    assert generated_samples(396_000, 4388) == 399_308  # the GB300 DeepSeek-R1 run's log (MLC-51-LOG)
    assert generated_samples(210_624, 4388) == 210_624
    order = draw_order(uniform(1, 1), 5)
    assert list(order) == [0] * 5
    mix = LengthMix("x", np.arange(1, 11), np.arange(1, 11))
    order = draw_order(mix, 20)
    assert sorted(order[:10]) == list(range(10)) and sorted(order[10:]) == list(range(10))


def test_mlperf_points_name_a_dataset_whose_prompts_they_state():
    from lpxsim.engine.validation import mlperf_points, point_lengths

    for p in mlperf_points():
        mix = point_lengths(p)
        if mix is None:
            continue
        assert int(p["isl"]) == round(mix.mean_isl), p["id"]
        assert mix.mean_osl == pytest.approx(float(p["osl"]), abs=1), p["id"]
        assert p["run_source"], p["id"]  # the sample count's source, or why there is none (then the steady state)
        assert p["samples_per_query"] or p["run_source"].startswith("none:"), p["id"]


def test_a_point_without_a_dataset_takes_its_benchmarks():
    """MLPerf fixes each benchmark's dataset and output cap: a row that names neither (a user's own point) is
    priced on its model's, prompts included; a model with no packaged set keeps the row's lengths."""
    from lpxsim.engine.validation import _point_isl, point_lengths

    row = {"model": "deepseek-r1", "isl": "300", "osl": "3498"}
    mix = point_lengths(row)
    assert mix.name == "deepseek-r1" and mix.osl.max() == 20000 and mix.mean_osl == pytest.approx(3498, abs=1)
    assert _point_isl(row, mix) == 804
    other = {"model": "qwen3-32b", "isl": "300", "osl": "200"}
    assert point_lengths(other) is None and _point_isl(other, None) == 300


def test_prompts_that_ride_a_decode_iteration_pay_what_they_add(b200):
    """TensorRT-LLM's iteration carries the decodes and the new prompts through the same GEMMs (TRT-ITER): a prompt
    costs the difference it makes to the pass, never more than a pass of its own, and the fixed costs cancel."""
    from lpxsim.engine.offline import marginal_prefill_s_per_token, offline_throughput, prefill_s_per_token
    from lpxsim.step.protocol import PrefillChunk

    def passes(n):
        return b200.prefill(PrefillChunk(tokens=200, context=0, sequences=n)).interval_s

    per_tok, tokens = marginal_prefill_s_per_token(b200, 200, decode_tokens=1000, prompt_tokens=600, room_tokens=2000)
    assert tokens == 600 and per_tok == pytest.approx((passes(8) - passes(5)) / 600)
    alone, _ = prefill_s_per_token(b200, 200, 600)
    assert 0 < per_tok < alone
    # a fractional decode share is interpolated between whole prompts
    half, _ = marginal_prefill_s_per_token(b200, 200, decode_tokens=1100, prompt_tokens=200, room_tokens=2000)
    want = (passes(6) + 0.5 * (passes(7) - passes(6)) - passes(5) - 0.5 * (passes(6) - passes(5))) / 200
    assert half == pytest.approx(want)
    # under one prompt's worth of decodes, prompts are passes of their own
    assert marginal_prefill_s_per_token(b200, 200, 100, 200, 2000) == prefill_s_per_token(b200, 200, 2000)
    # the saturated point under a token budget prices its prompts this way
    p = offline_throughput(b200, 200, 100, iteration_tokens=1024)  # 256 decodes, 512 prompt tokens a step
    per_tok, tokens = marginal_prefill_s_per_token(b200, 200, 256, 512, 1024 - 256)
    assert p.prefill_tokens_per_pass == tokens == 600 and p.prefill_s == pytest.approx(256 * 2 * per_tok)


def test_a_wave_below_the_slots_runs_at_its_own_captured_graph():
    """One wave of fewer samples than slots decodes at the wave's batch, padded to the next captured CUDA graph;
    the period table must not read it off a line spanning the jump to the next graph (a 1,500-sequence wave was
    priced 21 % slow between priced sizes 1,249 and 4,099 padded to 1,024 and 4,096 per rank); within a graph the
    bucketed mean context leaves about 1 %."""
    from lpxsim.engine.offline_run import _period_table, offline_run
    from lpxsim.engine.steady_state import decode_period
    from lpxsim.gpu.step import GpuStepModel

    graphs = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    step = GpuStepModel("llama-3.1-8b", "b200-hgx", tp=1, weights="fp4", kv="fp8", framework="trtllm",
                        max_batch=4096, graph_batches=graphs)
    assert step.decode_batch_breaks == graphs
    base, slope, grid = _period_table(step, 4000, 600)
    for b in (1500, 2048, 2049, 3000):
        exact = decode_period(step, b, 600)[0]
        assert float(np.interp(b, grid, base) + np.interp(b, grid, slope) * 600) == pytest.approx(exact, rel=0.02)
    # the run: 1,500 equal samples, one wave, each of its 100 steps at the exact period of 1,500 sequences
    run = offline_run(step, uniform(500, 100), 1500, iteration_tokens=32768)
    assert run.slots > 1500
    exact_s = sum(decode_period(step, 1500, c)[0] for c in range(501, 601)) + 1500 * 500 * (
        run.steady.prefill_s * 100 / (run.steady.batch * 500))
    assert run.makespan_s == pytest.approx(exact_s, rel=0.02)
