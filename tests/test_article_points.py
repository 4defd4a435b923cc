"""Priced rows at the article's operating points, and MoE at long context on the compiled LPX backend."""

from __future__ import annotations

import pytest

from lpxsim.plan.article_points import article_economics, moe_long_context
from lpxsim.plan.costs import load_costs


def test_rubin_rows_price_the_demo_point_and_a_loaded_point():
    rows = article_economics(systems=("vr-nvl72",), contexts=(10_000,), concurrencies={"vr-nvl72": (1, 32)})
    one, loaded = rows
    assert (one["concurrency"], loaded["concurrency"]) == (1, 32)
    assert one["context"] == loaded["context"] == 10_000 and one["model"] == "gemma-4-31b"
    assert loaded["tok_s_total"] > one["tok_s_total"] and loaded["tok_s_user"] < one["tok_s_user"]
    assert loaded["usd_per_mtok_output"] < one["usd_per_mtok_output"]  # the concurrency ceiling pays for the rack
    for r in rows:
        assert r["revenue_usd_per_hour"] is None  # no price source for a Rubin rack
        assert r["facility_kw"] > 0 and r["chips"] == 8


def test_a_point_that_does_not_fit_is_a_row_with_its_reason():
    rows = article_economics(systems=("cs-3",), contexts=(100_000,), concurrencies={"cs-3": (100_000,)},
                             model="llama-3.1-8b")
    assert len(rows) == 1 and "error" in rows[0] and rows[0]["concurrency"] == 100_000


def test_costs_flow_into_the_rows():
    cheap = article_economics(systems=("cs-3",), contexts=(10_000,), concurrencies={"cs-3": (1,)},
                              model="llama-3.1-8b", costs=load_costs(usd_per_kwh=0.0))
    dear = article_economics(systems=("cs-3",), contexts=(10_000,), concurrencies={"cs-3": (1,)},
                             model="llama-3.1-8b", costs=load_costs(usd_per_kwh=0.5))
    assert dear[0]["usd_per_mtok_output"] > cheap[0]["usd_per_mtok_output"]
    assert dear[0]["tok_s_user"] == cheap[0]["tok_s_user"]


@pytest.mark.heavy
def test_moe_at_100k_on_compiled_lpx():
    d = moe_long_context("gpt-oss-120b", 100_000, osl=1_000, racks=2.0, concurrency=16)
    assert d["chips"] == 512 and d["streams_compiled"] >= 1 and d["streams_accounting"] >= d["streams_compiled"]
    one = d["points"][0]
    assert one["concurrency"] == 1 and one["context"] == 100_000 and one["tok_s_user"] > 0
    if len(d["points"]) > 1:
        loaded = d["points"][1]
        assert loaded["tok_s_total"] > one["tok_s_total"] and loaded["tok_s_user"] <= one["tok_s_user"]


def test_a_cached_prefix_prefills_only_the_new_tokens():
    from lpxsim.plan.article_points import priced_point
    from lpxsim.wse import WseStepModel

    step = WseStepModel("llama-3.1-8b", "cs-3", weights="bf16")
    cold = priced_point(step, "cs-3", "llama-3.1-8b", 50_000, 500, 3)
    warm = priced_point(step, "cs-3", "llama-3.1-8b", 50_000, 500, 3, new_tokens=2_000)
    assert warm["new_tokens"] == 2_000 and cold["new_tokens"] == 50_000
    assert warm["ttft_s"] < cold["ttft_s"] and warm["tok_s_user"] > cold["tok_s_user"]
