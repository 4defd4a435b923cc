"""T8: the synthetic 2T MoE, each system's tok/s/MW at 400 tok/s/user and 400K context, the 35x claim as a column."""

from __future__ import annotations

import pytest

from lpxsim.plan.t8 import T8_CLAIM_RATIO, synthetic_moe_2t, t8_report
from lpxsim.specs.accounting import kv_bytes_per_sequence, param_counts


def test_synthetic_model_is_kimi_k2_with_more_experts() -> None:
    m = synthetic_moe_2t()
    pc = param_counts(m)
    assert 1.85e12 < pc.total < 2.05e12 and 31e9 < pc.active < 33e9
    assert m.num_layers == 61 and m.is_mla and m.max_context >= 400_000
    assert {layer.ffn.num_experts for layer in m.layers if layer.ffn.is_moe} == {720}
    # MLA latent KV: (512 + 64) x 61 layers x 2 bytes per token
    assert kv_bytes_per_sequence(m, 400_000, "bf16", "separate") == pytest.approx(576 * 61 * 2 * 400_000)


@pytest.fixture(scope="module")
def report():
    return t8_report()


def test_every_system_has_a_row_with_provenance(report) -> None:
    d = report.as_dict()
    assert set(d["systems"]) == {"lpx", "vr-nvl72", "gb200-nvl72"}  # no first-order what-if rows
    assert {"lpx", "vr-nvl72", "gb200-nvl72"} <= set(d["systems"])
    for r in d["systems"].values():
        for key in ("feasible", "tok_s_user", "context", "concurrency", "tok_s_per_mw", "rack_power_w",
                    "power_source", "power_grade", "ratio_vs_gb200"):
            assert key in r
        assert r["context"] == 400_000 and r["target_tok_s_user"] == 400.0
    assert d["systems"]["lpx"]["power_grade"] == "U" and d["systems"]["vr-nvl72"]["power_grade"] == "U"
    assert d["systems"]["gb200-nvl72"]["power_grade"] == "S"
    assert d["claim"] == {"ratio_vs_gb200": T8_CLAIM_RATIO, "source": report.claim_source, "role": "comparison only"}


def test_lpx_alone_cannot_hold_2t_and_says_why(report) -> None:
    lpx = report.as_dict()["systems"]["lpx"]
    assert not lpx["feasible"] and "16 racks" in lpx["reason"] and "at most 9" in lpx["reason"]
    assert any(n.startswith("lpx: cannot serve 400 tok/s/user") for n in report.notes)


def test_ratios_are_computed_not_written_in() -> None:
    # at 50 tok/s/user both GPU racks reach the target on the detailed backends (at 400 neither does)
    rows = t8_report(target=50.0, frontier_targets=()).as_dict()["systems"]
    assert rows["gb200-nvl72"]["feasible"] and rows["vr-nvl72"]["feasible"]
    for r in rows.values():
        if r["ratio_vs_gb200"] is not None:
            base = rows["gb200-nvl72"]
            assert r["ratio_vs_gb200"] == pytest.approx(r["tok_s_per_mw"] / base["tok_s_per_mw"])
            assert r["feasible"] and r["tok_s_user"] >= 50.0
        if r["feasible"]:
            assert r["tok_s_per_mw"] == pytest.approx(r["output_tok_s"] / (r["replica_power_w"] / 1e6))
    assert rows["vr-nvl72"]["ratio_vs_gb200"] is not None


def test_the_claim_is_never_an_input(monkeypatch) -> None:
    import lpxsim.plan.t8 as t8

    kw = dict(frontier_targets=())
    before = [r.as_dict() for r in t8.t8_report(**kw).rows]
    monkeypatch.setattr(t8, "T8_CLAIM_RATIO", 1.0)
    after = [r.as_dict() for r in t8.t8_report(**kw).rows]
    assert before == after


def test_frontier_rows_carry_context_and_concurrency(report) -> None:
    d = report.as_dict()
    assert [f["target_tok_s_user"] for f in d["frontier"]] == [25.0, 50.0, 100.0, 200.0]
    for f in d["frontier"]:
        assert f["context"] == 400_000
        for v in f["systems"].values():
            assert (v["tok_s_per_mw"] is None) == (v["concurrency"] is None)
            if v["tok_s_user"] is not None:
                assert v["tok_s_user"] >= f["target_tok_s_user"]
