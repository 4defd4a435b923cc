"""plan fleet compares every serving option per class (Rubin +/- MTP, LPX, PD, AFD, drafter) against both
the per-user speed and the TTFT P99 target. Fast stand-in: the built-in fleets on the analytic backend."""

from __future__ import annotations

import pytest

import lpxsim.bench.fleets as fleets
from lpxsim.plan.fleet import RequestClass
from lpxsim.plan.options import OPTION_MODES, class_options


@pytest.fixture(autouse=True)
def _stand_in(monkeypatch):
    monkeypatch.setattr(fleets, "DEFAULT_BACKEND", "analytic")


def _rc(**kw) -> RequestClass:
    base = dict(name="c", model="gemma-4-31b", isl=4000, osl=64, tok_s_user=50.0, concurrent_sessions=8.0)
    return RequestClass(**{**base, **kw})


def test_every_option_is_judged_and_the_best_feasible_per_mw_is_chosen() -> None:
    d = class_options(_rc(), backend="analytic")
    names = [r["option"] for r in d["options"]]
    assert set(OPTION_MODES) | {"rubin-alone+mtp"} == set(names)
    mtp = next(r for r in d["options"] if r["option"] == "rubin-alone+mtp")
    assert not mtp["feasible"] and "mtp" in mtp["reason"]  # the class gave no draft head figures
    ok = [r for r in d["options"] if r["feasible"]]
    assert ok and d["chosen"] == max(ok, key=lambda r: r["tok_s_per_mw"])["option"]
    for r in ok:
        assert r["tok_s_user_p50"] >= 50.0


def test_a_ttft_target_rules_options_out() -> None:
    loose = class_options(_rc(), backend="analytic")
    tight = class_options(_rc(ttft_p99_s=1e-6), backend="analytic")
    assert any(r["feasible"] for r in loose["options"])
    assert tight["chosen"] is None
    assert all("TTFT P99" in r["reason"] for r in tight["options"] if r["option"] != "rubin-alone+mtp")


def test_mtp_option_uses_the_class_draft_figures() -> None:
    d = class_options(_rc(mtp=2, accept=0.7), backend="analytic")
    mtp = next(r for r in d["options"] if r["option"] == "rubin-alone+mtp")
    assert mtp["feasible"] and mtp["tok_s_user_p50"] >= 50.0
