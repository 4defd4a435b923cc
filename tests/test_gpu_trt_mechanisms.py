"""TensorRT-LLM mechanisms of round 3's seventh session: its attention-DP MoE gather and scatter priced from the
measured NCCL sweep (TRT-MOE-COMM, AIC-NCCL), and its prefill iterations carrying the running decodes (TRT-ITER)."""

import pytest

from lpxsim.engine.steady_state import steady_state
from lpxsim.gpu.step import GpuStepModel
from lpxsim.step.protocol import DecodeBatch

KW = dict(weights="fp8", kv="fp8")


@pytest.fixture(scope="module")
def trt_adp():
    return GpuStepModel("deepseek-r1", "b200-hgx", tp=8, ep=8, dp_attention=True, framework="trtllm", **KW)


def test_trt_attention_dp_gathers_and_scatters_at_the_measured_nccl_times(trt_adp):
    """On one HGX node TensorRT-LLM all-gathers the ranks' tokens and reduce-scatters the outputs each MoE layer;
    the step's collectives are the nccl-tests sweep's times for those buffers, not the fabric's all-to-all."""
    from lpxsim.gpu.compose import _dp_gather_scatter

    batch = DecodeBatch.uniform(64, 1536)
    b = trt_adp.decode_breakdown(batch)
    assert "nccl-tests" in trt_adp.cost_sources["dp_gather_scatter"]
    f = trt_adp._get("decode", 1, trt_adp._replica_contexts(batch))
    per_layer = _dp_gather_scatter(trt_adp, f, 1)
    ops = trt_adp.source[0]
    tokens = f.sequences * 8  # every rank's tokens: 64
    want = ops.nccl("all_gather", tokens * 7168 * 2.0, 8, 2) + ops.nccl("reduce_scatter", tokens * 7168 * 2.0, 8, 2)
    assert per_layer == pytest.approx(want)
    assert 15e-6 < ops.nccl("all_gather", 0.5e6, 8, 2) < 40e-6  # small buffers: NCCL's latency, not 6 us alpha
    assert b.collective_s == pytest.approx(f.collective_s + f.collectives * trt_adp.params.collective_overhead_s
                                           - f.dp_ffn_collective_s + trt_adp.model.num_layers * per_layer)
    assert f.dp_ffn_collective_s > 0


def test_sglang_attention_dp_keeps_the_fabric_model():
    sgl = GpuStepModel("deepseek-r1", "b200-hgx", tp=8, ep=8, dp_attention=True, framework="sglang", **KW)
    sgl.decode_breakdown(DecodeBatch.uniform(64, 1536))
    assert "dp_gather_scatter" not in sgl.cost_sources


class _PrefillAlone:
    """The same step, but an engine that runs its prefills as forwards of their own (as SGLang does)."""

    prefill_alone = True

    def __init__(self, inner) -> None:
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_a_mixed_prefill_iteration_holds_the_prefill_server_for_its_decode_step_too():
    """TensorRT-LLM runs a prompt in an iteration that also decodes the running batch, so a queued prompt
    waits for the prefills ahead of it and their iterations' decode steps (shared by the prompts one iteration
    packs): the wait is longer than an engine's that prefills alone, the decode phase the same."""
    trt = GpuStepModel("deepseek-r1", "b200-hgx", tp=8, framework="trtllm", **KW)
    assert trt.prefill_alone is False
    mixed = steady_state(trt, isl=7373, osl=922, concurrency=64)
    alone = steady_state(_PrefillAlone(trt), isl=7373, osl=922, concurrency=64)
    assert mixed.ttft_wait_s > alone.ttft_wait_s > 0
    # one prompt a pass at this length (8,192-token passes): the whole decode step joins each prompt's service
    assert mixed.ttft_wait_s - alone.ttft_wait_s < 64 * mixed.decode_period_s
    one = steady_state(trt, isl=7373, osl=922, concurrency=1)
    assert one.ttft_s == pytest.approx(steady_state(_PrefillAlone(trt), isl=7373, osl=922, concurrency=1).ttft_s)
