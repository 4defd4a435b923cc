"""AFD on the detailed backends: a compiled FFN-only LPX program (MoE experts included), the GPU model's
attention half, and the activation hand-off over the stated link in the loop."""

from __future__ import annotations

import pytest

from lpxsim.catalog import get_model
from lpxsim.graph import Phase, lower
from lpxsim.serving.afd import AfdStepModel
from lpxsim.serving.backends import make_step_model
from lpxsim.serving.config import PoolConfig
from lpxsim.serving.spec import Link
from lpxsim.serving.worker import SharedResource
from lpxsim.step.protocol import DecodeBatch

MODEL = "llama-3.1-8b"


def test_ffn_only_graph_keeps_every_ffn_op_and_nothing_else() -> None:
    m = get_model("gpt-oss-120b")
    full = lower(m, Phase.decode([1000] * 4))
    ffn = lower(m, Phase.decode([1000] * 4), part="ffn")
    kinds = {op.kind for op in ffn}
    assert {"router", "experts"} <= kinds and not kinds & {"attention", "kv_write", "sample"}
    ffn_names = {op.name for op in full if ".ffn" in op.name or op.kind in ("router", "experts")
                 or op.name.split(".")[-1] in ("gate_up", "act", "down")}
    assert ffn_names <= {op.name for op in ffn}
    assert ffn.total("kv_read_bytes") == 0 and ffn.total("weight_bytes") < full.total("weight_bytes")


@pytest.fixture(scope="module")
def sides():
    att = make_step_model(PoolConfig(name="a", system="vr-nvl72", model=MODEL, gpus_per_worker=8, role="attention"),
                          part="attention")
    ffn = make_step_model(PoolConfig(name="f", system="lpx", model=MODEL, racks_per_worker=1, role="ffn"),
                          part="ffn")
    return att, ffn


@pytest.mark.heavy  # compiles LPX programs (tens of CPU seconds on a loaded machine)
def test_ffn_side_is_a_compiled_ffn_only_program(sides) -> None:
    _, ffn = sides
    assert "FFN" in ffn.name and ffn.kv_capacity_bytes() == 0
    one, many = ffn.ffn_step(1), ffn.ffn_step(64)
    assert 0 < one.interval_s <= one.latency_s and many.latency_s >= one.latency_s
    whole = make_step_model(PoolConfig(name="w", system="lpx", model=MODEL, racks_per_worker=1))
    assert one.latency_s < whole.decode_step(DecodeBatch.uniform(1, 1)).latency_s


@pytest.mark.heavy  # compiles LPX programs (tens of CPU seconds on a loaded machine)
def test_attention_side_is_cheaper_than_the_whole_gpu_step(sides) -> None:
    from lpxsim.gpu import GpuStepModel

    att, _ = sides
    b = DecodeBatch.uniform(8, 4000)
    whole = GpuStepModel(MODEL, system="vr-nvl72", gpus=8, tp=8)  # the side answers the attention half only
    assert 0 < att.attention_step(b).latency_s < whole.decode_step(b).latency_s


@pytest.mark.heavy  # compiles LPX programs (tens of CPU seconds on a loaded machine)
def test_link_latency_and_bytes_are_in_the_loop(sides) -> None:
    att, ffn = sides

    def step(lat: float, bw: float) -> float:
        afd = AfdStepModel(att, ffn, Link("x", bw, lat), SharedResource("f"), 1, micro_batches=1)
        return afd.decode_step(DecodeBatch.uniform(1, 4000)).latency_s

    base = step(5e-6, 200e9)
    layers = get_model(MODEL).num_layers
    assert step(15e-6, 200e9) - base == pytest.approx(2 * layers * 10e-6, rel=1e-6)  # two crossings per layer
    slow = step(5e-6, 1e6)  # 1 MB/s: the 2 x hidden bytes per layer now dominate
    assert slow - base == pytest.approx(2 * layers * 2 * get_model(MODEL).hidden_size / 1e6, rel=1e-3)


def test_attention_side_prices_attention_only_and_budgets_attention_weights_plus_kv() -> None:
    """Issue 12: the GPU side of AFD answers attention-only steps (GpuStepModel part="attention") and its HBM
    holds only attention weights (+ norms, embedding, head) and KV: the FFN weights live on the FFN side."""
    from lpxsim.backends.afd import gpu_attention_side
    from lpxsim.gpu import GpuStepModel
    from lpxsim.gpu.memory import attention_weight_bytes_per_gpu

    att = make_step_model(PoolConfig(name="a", system="vr-nvl72", model=MODEL, gpus_per_worker=8, role="attention"),
                          part="attention")
    whole = GpuStepModel(MODEL, system="vr-nvl72", gpus=8, tp=8)
    b = DecodeBatch.uniform(8, 4000)
    host = att.engine.step_overhead_s if att.source is not None else 0.0
    assert att.part == "attention"
    assert att.decode_step(b).latency_s == pytest.approx(whole.attention_step(b).latency_s + host)
    assert att.decode_step(b).latency_s < whole.decode_step(b).latency_s
    w = attention_weight_bytes_per_gpu(get_model(MODEL), whole.layout, "fp8")
    assert att.memory.weight_bytes == pytest.approx(w) and w < 0.5 * whole.memory.weight_bytes
    freed = whole.memory.weight_bytes - w
    assert att.memory.kv_bytes - whole.memory.kv_bytes == pytest.approx(freed * 0.9)  # the engines' 0.9 share
    assert att.kv_capacity_bytes() > whole.kv_capacity_bytes()
    # DeepSeek-V3's 671 GB of fp8 weights do not fit 2 Rubin GPUs whole; its attention side does
    from lpxsim.core.errors import DoesNotFit

    with pytest.raises(DoesNotFit):
        GpuStepModel("deepseek-v3", system="vr-nvl72", gpus=2, tp=2)
    ds = gpu_attention_side(get_model("deepseek-v3"), "vr-nvl72", 2, 2)
    assert ds.kv_capacity_bytes() > 0 and ds.memory.weight_bytes < 50e9
