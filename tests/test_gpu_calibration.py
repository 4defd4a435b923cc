"""GPU model in steady state: monotonicity, layout search, and the shipped calibration."""

from __future__ import annotations

import json

import pytest

from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.gpu import GpuStepModel, fitted_params
from lpxsim.gpu.calibration import LENGTH_RATIO, data_path, load_points, point_models, predict, summary
from lpxsim.gpu.params import BOUNDS, fit_path
from lpxsim.gpu.search import best_layout, search_layouts
from lpxsim.plan.estimate import steady_state

CONCS = [1, 2, 4, 8, 16, 32, 64, 128]


@pytest.mark.parametrize(
    "kw",
    [
        {"model": "deepseek-r1", "system": "h200-hgx", "tp": 8},
        {"model": "deepseek-r1", "system": "b200-hgx", "tp": 8, "ep": 8, "dp_attention": True, "weights": "fp4"},
        {"model": "llama-3.1-70b", "system": "h100-hgx", "tp": 4},
    ],
)
def test_more_concurrency_never_raises_tok_s_per_user(kw):
    s = GpuStepModel(**kw)
    speeds = [steady_state(s, 1024, 1024, c).tok_s_user for c in CONCS]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(speeds, speeds[1:], strict=False)), speeds
    totals = [steady_state(s, 1024, 1024, c).tok_s_total for c in CONCS]
    assert totals[-1] > 10 * totals[0]  # batching buys throughput


@pytest.mark.parametrize(("model", "system", "tp"), [("llama-3.1-70b", "h200-hgx", 4), ("deepseek-r1", "b200-hgx", 8)])
def test_more_gpus_at_fixed_tp_never_lower_throughput(model, system, tp):
    for conc in (8, 64):
        tput = [steady_state(GpuStepModel(model, system, gpus=g, tp=tp), 1024, 1024, conc).tok_s_total
                for g in (tp, 2 * tp, 4 * tp)]
        assert tput[0] <= tput[1] * (1 + 1e-9) and tput[1] <= tput[2] * (1 + 1e-9), tput


def test_best_layout_goals_trade_latency_for_throughput():
    lat = search_layouts("llama-3.1-70b", "h200-hgx", gpus=8, goal="latency", concurrency=64)
    thr = search_layouts("llama-3.1-70b", "h200-hgx", gpus=8, goal="throughput", concurrency=64)
    assert lat.estimate.tok_s_user >= thr.estimate.tok_s_user
    assert thr.estimate.total_tok_s_per_chip >= lat.estimate.total_tok_s_per_chip
    assert lat.step.chips == thr.step.chips == 8
    assert isinstance(best_layout("llama-3.1-8b", "b200-hgx", gpus=2), GpuStepModel)


def test_best_layout_says_when_nothing_fits():
    with pytest.raises(DoesNotFit, match="no layout"):
        best_layout("kimi-k2", "h100-hgx", gpus=8)
    with pytest.raises(UserError) as e:
        best_layout("llama-3.1-8b", "h100-hgx", gpus=8, isl=0)
    assert e.value.field == "isl" and not isinstance(e.value, DoesNotFit)


def test_vera_rubin_runs_without_data_and_beats_h200():
    vr = steady_state(GpuStepModel("deepseek-r1", "vr-nvl72", tp=8, weights="fp4"), 1024, 1024, 32)
    h200 = steady_state(GpuStepModel("deepseek-r1", "h200-hgx", tp=8), 1024, 1024, 32)
    assert vr.tok_s_user > h200.tok_s_user and vr.output_tok_s_per_chip > h200.output_tok_s_per_chip


def test_fit_file_is_physical_and_names_its_data():
    from lpxsim.gpu.engine import FITTED, FRAMEWORKS, PRIORS, engine_params

    assert tuple(PRIORS) == FRAMEWORKS  # every engine the CLI accepts (lpxsim.core.frameworks) has parameters

    doc = json.loads(fit_path().read_text())
    assert set(doc["fitted"]) == ({"kernel_overhead_s", "eager_dispatch_s"} | {f"engines.<framework>.{k}"
                                                                                for k in FITTED}
                                  | {"engines.<framework>.releases.<month>.step_overhead_s"})
    assert "InferenceX" in doc["data"]["source"] and len(doc["data"]["sha256"]) == 64
    p = fitted_params()
    for name in ("kernel_overhead_s", "eager_dispatch_s"):
        lo, hi = BOUNDS[name]
        assert lo <= getattr(p, name) <= hi
    for fw in FRAMEWORKS:  # vllm has no calibration rows: it keeps its priors
        e = engine_params(fw)
        assert 0.0 <= e.step_overhead_s <= 20e-3 and 0.0 <= e.first_token_overhead_s <= 1.0
        assert (fw in doc["engines"]) == (fw != "vllm")


def test_calibration_points_are_fitted_at_their_latest_date_and_lengths_scaled():
    import pandas as pd

    pts = load_points()
    assert len(pts) == 114 and (pts["runs"] >= 1).all()
    assert LENGTH_RATIO == 0.9
    assert set(pts["hardware"]) == {"H200", "B200"}
    # B200 SGLang FP4 TP8 EP8 1k/1k at 4 users ran on nine dates from 2025-12-11 to 2026-05-20: the point is the last
    rows = pd.read_csv(data_path())
    one = rows[(rows["hardware"] == "B200") & (rows["framework"] == "sglang") & (rows["precision"] == "fp4")
               & (rows["tp"] == 8) & (rows["isl"] == 1024) & (rows["osl"] == 1024) & (rows["conc"] == 4)]
    assert one["date"].nunique() >= 9
    latest = one[one["date"] == one["date"].max()]
    p = pts[(pts["hardware"] == "B200") & (pts["framework"] == "sglang") & (pts["precision"] == "fp4")
            & (pts["tp"] == 8) & (pts["isl"] == 1024) & (pts["osl"] == 1024) & (pts["conc"] == 4)]
    assert len(p) == 1 and float(p["tpot_s"].iloc[0]) == pytest.approx(float(latest["tpot_median_s"].median()))
    assert float(p["tpot_s"].iloc[0]) < float(one["tpot_median_s"].median())  # the newer image is faster


@pytest.mark.heavy  # builds and replays all 110 configurations (~30 s on 2 shared cores)
def test_shipped_fit_reproduces_tpot_within_15_percent():
    pms, rejected = point_models(load_points())
    assert len(rejected) <= 4
    s = summary(predict(pms))
    assert s["tpot_mdape_pct"] <= 15.0
    assert s["total_tok_s_per_gpu_mdape_pct"] <= 20.0


GPU_SYSTEMS = ["vr-nvl72", "gb200-nvl72", "gb300-nvl72", "h100-hgx", "h200-hgx", "b200-hgx", "b300-hgx"]


@pytest.mark.parametrize("system", GPU_SYSTEMS)
def test_every_catalog_model_runs_or_says_it_does_not_fit(system):
    from lpxsim.catalog import model_names

    ran = 0
    for name in model_names():
        try:
            s = GpuStepModel(name, system, tp=8)
        except DoesNotFit as e:
            assert "GB of weights" in e.message
            continue
        est = steady_state(s, 1024, 1024, 16)
        assert 0 < est.tpot_s < 1.0 and est.total_tok_s_per_chip > 0
        ran += 1
    assert ran >= len(model_names()) - 3


@pytest.mark.heavy
@pytest.mark.parametrize(("train", "test"), [("H200", "B200"), ("B200", "H200")])
def test_leave_one_hardware_out_within_25_percent(train, test):
    from lpxsim.gpu.calibration import fit_engines

    pms, _ = point_models(load_points())
    engines, params = fit_engines([pm for pm in pms if pm.row["hardware"] == train])
    s = summary(predict([pm for pm in pms if pm.row["hardware"] == test], params, engines))
    assert s["tpot_mdape_pct"] <= 25.0
