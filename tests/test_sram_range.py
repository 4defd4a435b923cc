"""The SRAM machines' predicted ranges from mechanisms (issue 28, item 6): host path, loaded ceiling,
the chips actually used, speculative decoding. Wafer-scale points only (no LPU compile: fast)."""

from __future__ import annotations

import math

import pytest

from lpxsim.engine import sram_range
from lpxsim.engine.sram_range import implied_host_s, predicted_range, tokens_per_round
from lpxsim.engine.validation import published_points


def _point(pid: str, **over) -> dict:
    p = next(p for p in published_points() if p["id"] == pid)
    return p | over


def test_tokens_per_round_is_the_accepted_prefix_plus_one():
    assert tokens_per_round(0.0, 4) == 1.0  # nothing accepted: the verify's own token
    assert tokens_per_round(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert tokens_per_round(0.9, 50) < 1 / (1 - 0.9)  # bounded by the geometric limit
    with pytest.raises(ValueError):
        tokens_per_round(1.0, 3)


def test_host_path_sets_the_low_end_and_device_alone_stays_latency_bound(monkeypatch):
    r = predicted_range(_point("CB-L31-70B"))
    assert r["chips"] == 4  # the wafers Cerebras stated, not only the fewest that hold it
    assert 0 < r["low_tok_s_user"] < r["batch1_tok_s_user"] == r["high_tok_s_user"]
    assert r["spec"] is None  # the launch figure did not speculate
    # without the host path the loaded ceiling is the device's own: a wafer pipeline at the KV-full batch
    monkeypatch.setattr(sram_range, "HOST_TOKEN_S", (0.0, 0.0))
    r0 = predicted_range(_point("CB-L31-70B"))
    assert r0["low_tok_s_user"] == pytest.approx(r0["kv_full_tok_s_user"], rel=1e-3)
    assert r0["low_tok_s_user"] > 2 * r["low_tok_s_user"]
    # the low end is one user's latency plus the slowest host path when the pipeline is not the bound
    lat = 1 / r["batch1_tok_s_user"]
    assert r["low_tok_s_user"] <= 1 / (lat + sram_range.HOST_TOKEN_S[1]) * 1.001


def test_more_wafers_than_needed_are_honoured():
    four = predicted_range(_point("CB-L31-70B"))
    six = predicted_range(_point("CB-L31-70B", chips="6"))
    assert six["chips"] == 6 and six["stages"] == four["stages"]
    assert six["loaded_users"] > four["loaded_users"]  # the spare SRAM holds more KV


def test_speculation_widens_the_high_end_only_where_used_or_unstated():
    spec = predicted_range(_point("CB-L31-70B-OCT"))
    assert spec["spec"]["drafter"] == "llama-3.1-8b"
    lo_a, hi_a = (str(a) for a in sram_range.SPEC_ACCEPT)
    by = spec["spec"]["by_acceptance"]
    assert by[hi_a]["tok_s_user"] >= by[lo_a]["tok_s_user"]
    assert spec["high_tok_s_user"] == pytest.approx(by[hi_a]["tok_s_user"])
    assert spec["high_tok_s_user"] > spec["batch1_tok_s_user"]
    none = predicted_range(_point("CB-L31-70B-OCT", spec_decoding="none"))
    assert none["spec"] is None and none["high_tok_s_user"] == none["batch1_tok_s_user"]


def test_loaded_ceiling_is_the_kv_full_batch():
    from lpxsim.wse import WseStepModel

    step = WseStepModel("llama-3.1-8b", "cs-3")
    ctx = 1250
    n = sram_range._kv_full_batch(step, ctx)
    assert n == math.floor(step.kv_capacity_bytes() / step.kv_bytes(ctx)) > 1


def test_implied_host_time():
    assert implied_host_s(500.0, 1000.0) == pytest.approx(1e-3)
    assert implied_host_s(1000.0, 500.0) < 0  # the device alone is slower than the figure
