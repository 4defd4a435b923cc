"""The engines' per-step host time by release (assumption "engine-release"): an answer prices the latest fitted
release, a replayed measurement the release of its own date, a measurement without one the pooled fit."""

from __future__ import annotations

import json

import pytest

from lpxsim.core.errors import UserError
from lpxsim.core.frameworks import LATEST, POOLED
from lpxsim.gpu.engine import engine_params, release_month
from lpxsim.gpu.params import fit_path

RELEASES = {"2025-11": {}, "2025-12": {}, "2026-05": {}}


def _shipped() -> dict:
    return json.loads(fit_path().read_text())["engines"]


def test_a_date_takes_the_release_in_effect_then():
    assert release_month(RELEASES, LATEST) == "2026-05"
    assert release_month(RELEASES, "2026-05-22") == "2026-05"
    assert release_month(RELEASES, "2026-09-10") == "2026-05"  # newer software than the calibration: the latest
    assert release_month(RELEASES, "2026-01-29") == "2025-12"  # a month without its own fit: the one before
    assert release_month(RELEASES, "2025-11") == "2025-11"
    assert release_month(RELEASES, "2026-05-22 14:03:00") == "2026-05"  # a spreadsheet's date and time
    # older software than every fitted release, an unknown date, an engine without releases: the pooled fit
    assert release_month(RELEASES, "2025-06-30") is None
    assert release_month(RELEASES, POOLED) is None and release_month(RELEASES, None) is None
    assert release_month({}, "2026-05-22") is None


@pytest.mark.parametrize("bad", ["yesterday", "2026/05/22", "26-05-22", "2026-5", "2026-05-32", "2026-00",
                                 "2026-02-30", "2025-02-29", "2026-04-31", "0000-01"])
def test_a_date_that_is_not_one_names_the_field(bad):
    with pytest.raises(UserError) as e:
        release_month(RELEASES, bad)
    assert e.value.field == "date" and bad in e.value.message


def test_the_shipped_fit_has_releases_and_answers_take_the_latest():
    engines = _shipped()
    for fw in ("sglang", "trtllm"):
        months = sorted(engines[fw]["releases"])
        assert len(months) >= 3
        for m in months:
            assert 0.0 <= engines[fw]["releases"][m]["step_overhead_s"] <= 20e-3
        latest = engine_params(fw)
        assert latest.release == months[-1]
        assert latest.step_overhead_s == pytest.approx(engines[fw]["releases"][months[-1]]["step_overhead_s"])
        first = engine_params(fw, months[0] + "-15")
        assert first.release == months[0]
        assert first.step_overhead_s == pytest.approx(engines[fw]["releases"][months[0]]["step_overhead_s"])
        pooled = engine_params(fw, POOLED)
        assert pooled.release == POOLED and pooled.step_overhead_s == pytest.approx(engines[fw]["step_overhead_s"])
        # the first-token host time is the engine's one fit, whatever the release
        assert latest.first_token_overhead_s == first.first_token_overhead_s == pooled.first_token_overhead_s
    assert engine_params("vllm").release == POOLED  # no calibration rows: its priors, one release


def test_a_replayed_row_is_priced_at_the_release_of_its_date():
    from lpxsim.engine.validation import calibration_rows, priced_row, step_model

    row = next(r for r in calibration_rows() if r["hardware"] == "B200" and r["framework"] == "sglang"
               and r["precision"] == "fp8" and r["conc"] == "4" and r["isl"] == "1024" and r["osl"] == "1024")
    cache: dict = {}
    old, new = dict(row, date="2025-11-20"), dict(row, date="2026-05-22")
    assert step_model(old, False, cache).engine.release == "2025-11"
    assert step_model(new, False, cache).engine.release == "2026-05"
    assert step_model(dict(row, date=""), False, cache).engine.release == POOLED
    slow, fast = priced_row(old, cache=cache)[0], priced_row(new, cache=cache)[0]
    sglang = _shipped()["sglang"]["releases"]
    gap = sglang["2025-11"]["step_overhead_s"] - sglang["2026-05"]["step_overhead_s"]
    # one decode step a token at four users: the TPOT moves by the two releases' host times apart
    assert slow["tpot_s"] - fast["tpot_s"] == pytest.approx(gap, rel=0.05)
    why = priced_row(dict(row, date="May 2026"), cache=cache)[1]
    assert why is not None and why.startswith("date:")


def test_an_answer_prices_the_latest_release_and_can_name_another():
    from lpxsim.engine.answer import answer
    from lpxsim.engine.query import Deployment, Load, Workload

    dep = Deployment("b200-hgx", 8, layout="TP8", given=True, framework="sglang")
    now = answer("deepseek-r1", dep, Workload(1024, 1024), Load(concurrency=4))
    pooled = answer("deepseek-r1", dep, Workload(1024, 1024), Load(concurrency=4), release=POOLED)
    sglang = _shipped()["sglang"]
    latest = sglang["releases"][max(sglang["releases"])]["step_overhead_s"]
    assert sglang["step_overhead_s"] > latest  # the engine shed host time since the pooled fit's mix of releases
    assert pooled.tpot_s - now.tpot_s == pytest.approx(sglang["step_overhead_s"] - latest, rel=0.05)


def test_fit_releases_reproduces_the_shipped_releases():
    from lpxsim.gpu.calibration import fit_releases, load_dated_points, point_models
    from lpxsim.gpu.params import fitted_params

    engines = _shipped()
    dated, _ = point_models(load_dated_points())
    assert {str(pm.row["release"]) for pm in dated} >= {"2025-12", "2026-05"}
    pooled = {fw: {k: v for k, v in e.items() if k != "releases"} for fw, e in engines.items()}
    got = fit_releases(dated, fitted_params(), pooled)
    for fw in ("sglang", "trtllm"):
        assert set(got[fw]) == set(engines[fw]["releases"])
        for m, v in got[fw].items():  # the file keeps four significant figures
            assert v["step_overhead_s"] == pytest.approx(engines[fw]["releases"][m]["step_overhead_s"], rel=2e-3)


def test_estimate_names_the_engine_release_it_priced():
    from typer.testing import CliRunner

    from lpxsim.cli.main import app

    r = CliRunner().invoke(app, ["estimate", "deepseek-r1", "--system", "b200-hgx", "--concurrency", "4",
                                 "--session", "none", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    latest = max(_shipped()["sglang"]["releases"])
    assert d["framework"] == "sglang" and d["engine_release"] == latest
    assert f"sglang {latest})" in d["deployment"]  # the deployment names the software it priced


def test_a_deployment_names_a_fitted_release_only():
    from lpxsim.engine.query import Deployment

    assert Deployment("b200-hgx", 8, layout="TP8", framework="sglang", engine_release="2026-05").label() == (
        "1 b200-hgx node (8 chips, TP8, sglang 2026-05), 14.3 kW")
    assert "vllm)" in Deployment("b200-hgx", 8, layout="TP8", framework="vllm", engine_release=POOLED).label()
    assert "kvsplit=4), " in Deployment("lpx", 256, layout="tp=16,stages=16,kvsplit=4").label()


def test_estimate_prices_the_release_it_is_asked_for():
    from typer.testing import CliRunner

    from lpxsim.cli.main import app

    base = ["estimate", "deepseek-r1", "--system", "b200-hgx", "--concurrency", "4", "--session", "none", "--json"]
    now = json.loads(CliRunner().invoke(app, base).stdout)
    old = json.loads(CliRunner().invoke(app, [*base, "--engine-release", "2025-12-15"]).stdout)
    assert old["engine_release"] == "2025-12" and "sglang 2025-12)" in old["deployment"]
    sglang = _shipped()["sglang"]["releases"]
    # four users: one decode step a token, so the TPOT moves by the two releases' host times apart
    gap = sglang["2025-12"]["step_overhead_s"] - sglang[max(sglang)]["step_overhead_s"]
    assert old["tpot_s"] - now["tpot_s"] == pytest.approx(gap, rel=0.05)
    for bad in ("2025-13", "last year"):
        r = CliRunner().invoke(app, [*base, "--engine-release", bad])
        assert r.exit_code == 2 and "engine-release" in r.output and bad in r.output, r.output
