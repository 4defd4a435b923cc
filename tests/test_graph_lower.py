"""The op graph agrees with the model accounting it is lowered from."""

from __future__ import annotations

import pytest

from lpxsim.catalog import get_model, model_names
from lpxsim.core.errors import UserError
from lpxsim.graph import Phase, expected_experts_touched, lower
from lpxsim.specs.accounting import attention_flops_per_token, kv_bytes_per_sequence, param_counts


@pytest.mark.parametrize("name", model_names())
def test_decode_batch1_reads_the_active_weights_once(name: str) -> None:
    m = get_model(name)
    g = lower(m, Phase.decode([4096]), weights="fp8")
    pc = param_counts(m)
    norms = sum(p.norms for p in pc.layers) + pc.final_norm
    # Every active matmul weight is read once; norms are read too; the embedding gather reads one row.
    expected = pc.active + m.hidden_size  # + the gathered embedding row
    assert g.total("weight_bytes") == pytest.approx(expected, rel=2e-3), (g.total("weight_bytes"), expected, norms)


@pytest.mark.parametrize("name", ["gemma-4-31b", "llama-3.1-8b", "gpt-oss-120b", "deepseek-v3"])
def test_decode_kv_read_matches_kv_accounting(name: str) -> None:
    m = get_model(name)
    ctx = 20_000
    g = lower(m, Phase.decode([ctx - 1]), weights="fp8", kv="bf16")
    assert g.total("kv_read_bytes") == pytest.approx(kv_bytes_per_sequence(m, ctx, "bf16"), rel=1e-9)


def test_attention_flops_match_reference_formula() -> None:
    m = get_model("gemma-4-31b")
    T = 8192
    g = lower(m, Phase.decode([T - 1]))
    att = sum(op.flops for op in g if op.kind == "attention")
    # models.md: 655,360 T + 1,638,400 min(T, 1024) for Gemma 4 31B
    assert att == pytest.approx(655_360 * T + 1_638_400 * 1024, rel=1e-9)
    assert att == pytest.approx(attention_flops_per_token(m, T), rel=1e-9)


def test_batch_scales_activations_but_not_dense_weights() -> None:
    m = get_model("llama-3.1-8b")
    g1 = lower(m, Phase.decode([1000]))
    g8 = lower(m, Phase.decode([1000] * 8))
    dense_w1 = sum(op.weight_bytes for op in g1 if op.kind == "matmul")
    dense_w8 = sum(op.weight_bytes for op in g8 if op.kind == "matmul")
    assert dense_w8 == pytest.approx(dense_w1)
    assert g8.total("kv_read_bytes") == pytest.approx(8 * g1.total("kv_read_bytes"))
    assert g8.total("flops") > 7.9 * sum(op.flops for op in g1 if op.kind == "matmul")


def test_moe_weight_bytes_grow_with_distinct_experts() -> None:
    m = get_model("deepseek-v3")
    b1 = lower(m, Phase.decode([1000])).total("weight_bytes")
    b64 = lower(m, Phase.decode([1000] * 64)).total("weight_bytes")
    assert b64 > 5 * b1  # 64 tokens touch ~222 of 256 experts per layer instead of 8


def test_expected_experts_formula() -> None:
    assert expected_experts_touched(256, 8, 1) == pytest.approx(8.0)
    assert expected_experts_touched(256, 8, 0) == 0.0
    e = expected_experts_touched(256, 8, 64)
    assert e == pytest.approx(256 * (1 - (1 - 8 / 256) ** 64))
    assert expected_experts_touched(256, 8, 10_000) == pytest.approx(256, rel=1e-6)
    assert expected_experts_touched(256, 8, 64, skew=0.5) < e


def test_prefill_attention_is_quadratic_in_the_chunk() -> None:
    m = get_model("llama-3.1-8b")
    f1 = sum(op.flops for op in lower(m, Phase.prefill(1024)) if op.kind == "attention")
    f2 = sum(op.flops for op in lower(m, Phase.prefill(2048)) if op.kind == "attention")
    assert f2 / f1 == pytest.approx(4.0, rel=0.01)


def test_sliding_window_caps_prefill_attention() -> None:
    m = get_model("gpt-oss-20b")  # window 128 on half the layers
    sl = [op for op in lower(m, Phase.prefill(4096)) if op.kind == "attention" and op.attrs["window"]]
    per_layer = sl[0].attrs["attended_keys"]
    assert per_layer == pytest.approx(128 * (4096 - 127) + 127 * 128 / 2, rel=1e-6)


def test_verify_phase_has_k_plus_one_positions() -> None:
    m = get_model("llama-3.1-8b")
    g = lower(m, Phase.verify([1000, 2000], k=3))
    assert g.phase.tokens == 8
    assert g.op("logits").tokens == 8


def test_ops_are_topologically_ordered_and_inputs_exist() -> None:
    g = lower(get_model("gemma-4-26b-a4b"), Phase.decode([5000, 6000]))
    seen: set[str] = set()
    for op in g:
        assert all(i in seen for i in op.inputs), op.name
        seen.add(op.name)


def test_empty_phase_is_a_user_error() -> None:
    with pytest.raises(UserError, match="batch"):
        lower(get_model("llama-3.1-8b"), Phase.decode([]))
