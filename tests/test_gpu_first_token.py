"""First-token time at one user: what it is made of (issue 28, item 3).

TTFT at one user = max(the prefill pass on the GPUs, the host's eager dispatch of that pass) + the
engine's first-token host time, and nothing else: no queueing, no poll wait, no decode step (both
engines stream the first token at once: docs/sources.md SGL-STREAM, TRT-STREAM).
"""

from __future__ import annotations

import math

import pytest

from lpxsim.engine.steady_state import steady_state
from lpxsim.gpu.params import fitted_params
from lpxsim.gpu.step import GpuStepModel
from lpxsim.step.protocol import PrefillChunk

DISPATCH_S = 40e-6  # a stated value, so the test does not depend on the shipped fit


def _b200(framework: str = "sglang", **kw) -> GpuStepModel:
    params = fitted_params().with_values(eager_dispatch_s=DISPATCH_S)
    return GpuStepModel("deepseek-r1", kw.pop("system", "b200-hgx"), tp=8, ep=8, weights="fp4", kv="fp8",
                        framework=framework, params=params, **kw)


def _gpu_pass_s(step: GpuStepModel, tokens: int) -> float:
    """The GPUs' share of the pass: the step's occupancy of the whole replica group."""
    return step.prefill(PrefillChunk(tokens=tokens)).interval_s


def test_dispatch_is_the_pass_kernels_times_the_per_kernel_host_time():
    s = _b200()
    kernels = s._get("prefill", 1, (0,)).kernels.sum()
    assert kernels > 1000  # DeepSeek-R1: 61 layers of a few dozen kernels
    assert math.isclose(s.prefill_dispatch_s(), kernels * DISPATCH_S, rel_tol=1e-12)


@pytest.mark.parametrize("framework", ["sglang", "trtllm"])
def test_one_user_ttft_is_the_longer_of_gpu_and_dispatch_plus_first_token_host_time(framework):
    s = _b200(framework)
    first = s.engine.first_token_overhead_s
    for isl in (922, 7373):
        e = steady_state(s, isl, 922, 1, prefill_chunk=s.prefill_chunk)
        gpu = _gpu_pass_s(s, isl)
        assert e.ttft_wait_s == 0.0  # one user: nobody ahead, the engine idles and reads at once
        assert math.isclose(e.ttft_s, max(gpu, s.prefill_dispatch_s()) + first, rel_tol=1e-9)


def test_a_short_prompt_is_host_bound_and_a_long_one_gpu_bound():
    s = _b200()
    assert _gpu_pass_s(s, 922) < s.prefill_dispatch_s() < _gpu_pass_s(s, 7373)
    # host-bound: a faster GPU does not shorten it; GPU-bound: it does
    fast = _b200(system="b300-hgx")
    short = [steady_state(m, 922, 100, 1, prefill_chunk=m.prefill_chunk).ttft_s for m in (s, fast)]
    assert math.isclose(short[0], short[1], rel_tol=1e-12)


def test_the_dispatch_floor_is_host_time_the_same_on_every_gpu():
    b200, h200 = _b200(), GpuStepModel("deepseek-r1", "h200-hgx", tp=8, ep=8, weights="fp8", framework="sglang",
                                       params=fitted_params().with_values(eager_dispatch_s=DISPATCH_S))
    assert b200.prefill_dispatch_s() == h200.prefill_dispatch_s()
    assert _gpu_pass_s(b200, 7373) < _gpu_pass_s(h200, 7373)  # the GPU part is priced per GPU


def test_other_users_see_the_gpu_occupancy_not_the_dispatch_floor():
    slow, none = _b200(), GpuStepModel("deepseek-r1", "b200-hgx", tp=8, ep=8, weights="fp4", kv="fp8",
                                       params=fitted_params().with_values(eager_dispatch_s=0.0))
    c_slow, c_none = slow.prefill(PrefillChunk(922)), none.prefill(PrefillChunk(922))
    assert c_slow.interval_s == c_none.interval_s
    assert c_slow.latency_s > c_none.latency_s


def test_an_engine_that_graphs_its_prefill_has_no_dispatch_floor():
    s = _b200("vllm")
    assert s.prefill_dispatch_s() == 0.0
    assert math.isclose(s.prefill(PrefillChunk(922)).latency_s,
                        _gpu_pass_s(s, 922) + s.engine.first_token_overhead_s, rel_tol=1e-12)


def test_the_first_token_holds_no_decode_step():
    """Streaming with --stream-interval 10 still sends the first token at once: TTFT at one user does not
    grow with the decode step (a longer output, a larger decode batch do not move it)."""
    s = _b200()
    short, long_ = (steady_state(s, 922, osl, 1, prefill_chunk=s.prefill_chunk) for osl in (16, 8192))
    assert long_.decode_period_s > short.decode_period_s  # the longer context decodes slower
    assert math.isclose(short.ttft_s, long_.ttft_s, rel_tol=1e-12)
