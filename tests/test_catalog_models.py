"""Model accounting against published figures (shared reference models.md §§1-8)."""

from __future__ import annotations

import pytest

from lpxsim.catalog import get_model, model_names
from lpxsim.specs.accounting import (
    kv_bytes_per_sequence,
    kv_bytes_per_token_by_kind,
    param_counts,
    weight_bytes,
)

GiB = 2**30

# name -> (total params, active params or None, which active convention); models.md §§4-8
PUBLISHED_PARAMS = {
    "gemma-4-31b": (30.70e9, 30.70e9, "active"),
    "gemma-4-26b-a4b": (25.23e9, 3.82e9, "active"),
    "llama-3.1-8b": (8.03e9, None, ""),
    "llama-3.1-70b": (70.55e9, None, ""),
    "llama-3.1-405b": (405.85e9, None, ""),
    "llama-2-70b": (68.98e9, None, ""),
    "llama-2-7b": (6.74e9, None, ""),  # Llama 2 paper "7B"; the HF checkpoint holds 6,738,415,616
    "deepseek-v3": (671.0e9, 37.55e9, "active_incl_embedding"),
    "kimi-k2": (1026.4e9, 32.86e9, "active_incl_embedding"),
    "gpt-oss-120b": (116.83e9, 5.13e9, "active"),
    "gpt-oss-20b": (20.91e9, 3.61e9, "active"),
    "qwen3-235b-a22b": (235.09e9, 22.19e9, "active_incl_embedding"),
    "qwen3-32b": (32.76e9, None, ""),
}

# "touched per decoded token" column of models.md §8 (non-embedding active + lm_head)
PUBLISHED_TOUCHED = {
    "llama-2-70b": 68.71e9, "llama-3.1-8b": 7.50e9, "llama-3.1-70b": 69.50e9, "llama-3.1-405b": 403.75e9,
    "deepseek-v3": 36.62e9, "kimi-k2": 31.69e9, "qwen3-235b-a22b": 21.57e9, "qwen3-32b": 31.98e9,
}  # fmt: skip

# BF16 KV bytes per token summed over layers, by layer kind (models.md §8)
PUBLISHED_KV = {
    "gemma-4-31b": {"full": 81_920, "sliding": 819_200},
    "gemma-4-26b-a4b": {"full": 20_480, "sliding": 204_800},
    "llama-2-70b": {"full": 327_680},
    "llama-3.1-8b": {"full": 131_072},
    "llama-3.1-70b": {"full": 327_680},
    "llama-3.1-405b": {"full": 516_096},
    "deepseek-v3": {"full": 70_272},
    "kimi-k2": {"full": 70_272},
    "qwen3-235b-a22b": {"full": 192_512},
    "qwen3-32b": {"full": 262_144},
    "gpt-oss-120b": {"full": 36_864, "sliding": 36_864},
    "gpt-oss-20b": {"full": 24_576, "sliding": 24_576},
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_published(name: str) -> None:
    total, active, convention = PUBLISHED_PARAMS[name]
    p = param_counts(get_model(name))
    assert p.total == pytest.approx(total, rel=1.5e-3)  # published figures carry 3-4 significant digits
    if active is not None:
        assert getattr(p, convention) == pytest.approx(active, rel=3e-3)


@pytest.mark.parametrize("name", sorted(PUBLISHED_TOUCHED))
def test_touched_parameters_per_token(name: str) -> None:
    assert param_counts(get_model(name)).active == pytest.approx(PUBLISHED_TOUCHED[name], rel=1.5e-3)


@pytest.mark.parametrize("name", sorted(PUBLISHED_KV))
def test_kv_bytes_per_token_match_published(name: str) -> None:
    assert kv_bytes_per_token_by_kind(get_model(name), "bf16", "separate") == PUBLISHED_KV[name]


def test_gemma4_vllm_kv_check_27_03_gib() -> None:
    m = get_model("gemma-4-31b")
    kv = kv_bytes_per_sequence(m, 262_144, "bf16", "separate", sliding_reserve_tokens=8192)
    assert kv / GiB == pytest.approx(27.03, abs=0.005)  # vLLM reports 27.04 GiB for one full-length request


@pytest.mark.parametrize(
    ("name", "context", "gib"),
    [
        ("gemma-4-31b", 8192, 1.41),
        ("gemma-4-31b", 32768, 3.28),
        ("gemma-4-31b", 131072, 10.78),
        ("llama-3.1-70b", 32768, 10.0),
        ("deepseek-v3", 131072, 8.58),
        ("gpt-oss-120b", 131072, 4.50),
        ("qwen3-32b", 8192, 2.00),
    ],
)
def test_kv_per_sequence_table(name: str, context: int, gib: float) -> None:
    assert kv_bytes_per_sequence(get_model(name), context, "bf16") / GiB == pytest.approx(gib, abs=0.011)


def test_fp8_weight_bytes_are_one_byte_per_parameter() -> None:
    m = get_model("gemma-4-31b")
    assert weight_bytes(m, "fp8") == pytest.approx(30.70e9, rel=5e-4)  # "a bit over 31 GB" in NV-LC
    assert weight_bytes(m, "fp4") == pytest.approx(param_counts(m).total * 4.5 / 8)


def test_every_catalog_model_loads_with_consistent_counts() -> None:
    for name in model_names():
        p = param_counts(get_model(name))
        assert 0 < p.active <= p.total, name
