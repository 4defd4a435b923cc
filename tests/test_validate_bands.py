"""`lpxsim validate` and the error bands (issue 28, item 8)."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from lpxsim.core.errors import UserError
from lpxsim.engine.bands import PATHS, answer_band, band_for, error_stats, path_for, shipped_path


def _close(a, b, path="") -> None:
    """Equal JSON trees, numbers to 0.05 (the file keeps two decimals; float sums may differ in the last bit)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(float(a), float(b), abs_tol=0.05), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_validate_json_reproduces_the_shipped_bands_and_every_table_has_median_and_mape():
    from lpxsim.cli.main import app
    from lpxsim.cli.validate_cmd import band_file

    r = CliRunner().invoke(app, ["validate", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    shipped = json.loads(shipped_path().read_text())
    _close(band_file(res)["bands"], shipped["bands"])
    _close(band_file(res)["layouts"], shipped["layouts"])
    _close(band_file(res)["vendors"], shipped["vendors"])
    _close(band_file(res)["systems"], shipped["systems"])
    _close(band_file(res)["speculative"], shipped["speculative"])
    assert set(res["bands"]) == set(PATHS)
    for table in ("measured_gpu", "projected_gpu"):
        for group, metrics in res[table]["groups"].items():
            for m in ("tpot", "ttft", "tok_s_user"):
                s = metrics[m]
                assert s["n"] > 0 and s["mape_pct"] >= 0 and s["median_abs_pct"] >= 0, (table, group, m)
    assert all({"median_abs_pct", "mape_pct"} <= set(p) for p in res["projection_pairs"])
    # the queueing each answer uses: on the arrival-sensitive configurations the GPU answer's solver (the
    # random-arrival steady state) beats the stagger and the simulator of identical requests; against the
    # simulator of drawn lengths it has the lower mean error and a median error within 5 points (within one from
    # round 3's seventh session to its fifteenth; 14.9 against 11.4 % after the sixteenth's refit at the latest
    # software date; 14.9 against 10.4 % since the seventeenth gave that simulator the engine's own prefill pass
    # budget, engine.benchmark_run; 23.5 against 24.8 % mean)
    q = res["queueing_solvers"]
    assert len(q["configurations"]) == 64
    ttft = {name: d["ttft"] for name, d in q["solvers"].items()}
    assert all({"median_abs_pct", "mape_pct"} <= set(d) for d in ttft.values())
    assert ttft["random"]["median_abs_pct"] < ttft["stagger"]["median_abs_pct"] < ttft["simulator"]["median_abs_pct"]
    drawn = ttft["simulator, drawn lengths"]
    assert ttft["random"]["median_abs_pct"] < drawn["median_abs_pct"] + 5.0
    assert ttft["random"]["mape_pct"] < drawn["mape_pct"]
    # the measured path replays every calibration row: all 492 fit once HBM is the driver's reading (NVSMI-MEM)
    assert res["measured_gpu"]["groups"]["all"]["tpot"]["n"] == 492
    assert res["measured_gpu"]["skipped_kv_does_not_fit"] == 0
    # every published SRAM point is predicted with its range, the range ordered
    for p in res["sram_points"]:
        assert 0 < p["low_tok_s_user"] <= p["batch1_tok_s_user"] <= p["high_tok_s_user"], p["id"]
    # item 6 as docs/validation.md reports it: every shared-endpoint figure inside its range; Groq's figures
    # imply one model-independent host time per token (1.1-1.9 ms over a 10x spread of device time)
    ranged = [p for p in res["sram_points"] if p["role"] == "range"]
    assert len(ranged) == 9 and all(p["inside_range"] for p in ranged)
    assert all(p["within_known_tolerance"] is None for p in ranged)
    # a point whose conditions are known is judged by its error (issue 28: +-30 %), not by the range, whose top is
    # the batch-1 answer itself (T2 lies 2 % above it); the fit point is judged by neither
    known = {p["id"]: p for p in res["sram_points"] if p["role"] != "range"}
    assert known["T2"]["within_known_tolerance"] is True and known["T2"]["batch1_err_pct"] > -30.0
    assert known["T1"]["within_known_tolerance"] is None
    groq = [p["implied_host_us"] for p in ranged if p["system"] == "groq-v1"]
    assert len(groq) == 4 and min(groq) > 1000 and max(groq) < 2000
    # the KV, not the pipeline's depth, bounds the loaded Groq Llama-2-70B deployment
    l2 = next(p for p in ranged if p["id"] == "GQ1-L2-70B")
    assert l2["loaded_users"] < l2["stages"] and l2["kv_full_tok_s_user"] == l2["batch1_tok_s_user"]


def test_error_stats_median_mape_and_band():
    s = error_stats([-10.0, 20.0, 5.0, -40.0, 1.0, 2.0])
    assert s.n == 6
    assert s.median_abs_pct == pytest.approx(7.5)  # |errors| 1 2 5 10 20 40
    assert s.mape_pct == pytest.approx(78 / 6, abs=0.01)
    assert s.median_signed_pct == pytest.approx(1.5)  # -40 -10 1 2 5 20
    assert s.band_pct == pytest.approx(10 + (20 - 10) * 0.4)  # 68th percentile: 3.4 of 0..5
    few = error_stats([3.0, -9.0])
    assert few.band_pct == 9.0  # fewer than five points: the largest error


def test_band_for_names_path_data_and_refuses_unknown_path_or_metric():
    b = band_for("measured-gpu")
    assert b.path == "measured-gpu" and b.metric == "tok_s_user" and b.n_points == 492
    assert 0 < b.median_abs_pct <= b.band_fraction * 100 and "InferenceX" in b.data
    lo, hi = b.interval(100.0)
    assert lo < 100 < hi
    assert band_for("projected-gpu").band_fraction >= b.band_fraction  # a projection is never more certain
    with pytest.raises(UserError) as e:
        band_for("roofline")
    assert e.value.field == "path"
    with pytest.raises(UserError) as e:
        band_for("wafer-scale", "ttft")
    assert e.value.field == "metric"


def test_path_for_tells_measured_from_projected():
    assert path_for("h200-hgx", "fp8") == "measured-gpu"
    assert path_for("b200-hgx", "fp4", "trtllm") == "measured-gpu"
    assert path_for("h200-hgx", "fp4") == "projected-gpu"  # no NVFP4 kernels measured on Hopper
    assert path_for("mi300x", "fp8") == "projected-gpu"
    assert path_for("lpx") == "compiled-lpx"
    assert path_for("groq-v1", "int8") == "compiled-lpx"
    assert path_for("cs-3", "bf16") == "wafer-scale"


def test_answer_band_follows_the_path_of_the_answer():
    assert answer_band("mi300x").path == "projected-gpu"
    b = answer_band("b200-hgx", "fp4", "trtllm", "ttft")
    assert b.path == "measured-gpu" and b.metric == "ttft"
    assert b.as_dict()["band_fraction"] == b.band_fraction
    assert answer_band("cs-3", "bf16").n_points == band_for("wafer-scale").n_points


def test_a_cross_vendor_projection_says_its_band_was_not_validated_on_that_vendor():
    from lpxsim.catalog import get_system, system_names
    from lpxsim.engine.bands import band_caveat, band_text, validated_vendors

    assert validated_vendors() == ("NVIDIA",)
    for name in system_names():
        s = get_system(name)
        if s.chip.kind == "gpu":
            assert s.vendor in ("NVIDIA", "AMD"), name  # every GPU names its maker
    for amd in ("mi300x", "mi325x", "mi355x", "helios"):
        assert "public AMD serving points (judges, not fitted)" in band_caveat(amd, path_for(amd, "fp8"))
        assert "AMD's own MLPerf Offline runs are among its judges" in band_caveat(amd, path_for(amd, "fp8"))
    assert "on MI300X's 4" in band_caveat("mi300x", "projected-gpu")  # a GPU with judge points of its own
    assert "its TTFT" in band_caveat("mi300x", "projected-gpu")
    assert "on Helios" not in band_caveat("helios", "projected-gpu")  # none: its maker's record only
    assert band_caveat("vr-nvl72", "projected-gpu") == ""  # an NVIDIA part projected from NVIDIA tables
    assert band_caveat("h200-hgx", "measured-gpu") == ""
    b = band_for("projected-gpu")
    assert band_text("mi300x", "projected-gpu", b).startswith(f"±{100 * b.band_fraction:.0f}% (projected-gpu, ")
    assert "cross-vendor" in band_text("mi300x", "projected-gpu", b)
    assert "cross-vendor" not in band_text("b300-hgx", "measured-gpu", band_for("measured-gpu"))


def test_an_attention_dp_answer_carries_the_band_and_the_bias_of_its_own_rows():
    from lpxsim.engine.bands import band_text, layout_feature, layout_record

    assert layout_feature("TP8/EP8/DPattn fp4/fp8") == "attention-dp"
    assert layout_feature("TP8/EP8 x2") == layout_feature("") == ""
    rec = layout_record("attention-dp")
    rows = rec["paths"]["measured-gpu"]["metrics"]["tok_s_user"]
    path = band_for("measured-gpu")
    b = band_for("measured-gpu", "tok_s_user", "TP4/EP4/DPattn")
    assert b.layout == "attention-dp" and b.n_points == rows["n"] < path.n_points
    assert b.median_signed_pct == rows["median_signed_pct"]
    assert b.band_fraction == round(max(rows["band_pct"], 100 * path.band_fraction) / 100, 4)
    assert band_for("measured-gpu", "tok_s_user", "TP4/EP4") == path  # no feature: the path's band
    text = band_text("b200-hgx", "measured-gpu", b)
    off = rec["offline"]
    assert f"on its {rows['n']} calibration rows" in text and f"on its {off['n']} saturated runs" in text
    assert off["points"] == sorted(off["points"]) and all("DSR1" in p or "-DEP" in p for p in off["points"])
    assert "attention-DP" not in band_text("b200-hgx", "measured-gpu", path)


def test_an_estimate_on_an_attention_dp_layout_names_that_band():
    from lpxsim.cli.main import app

    args = ["estimate", "deepseek-r1", "--system", "b200-hgx", "--gpus", "8", "--tp", "8", "--ep", "8",
            "--framework", "trtllm", "--weights", "fp4", "--kv", "fp8", "--concurrency", "64", "--session", "none",
            "--json"]
    dp = json.loads(CliRunner().invoke(app, [*args, "--dp-attention"]).stdout)
    tp = json.loads(CliRunner().invoke(app, args).stdout)
    assert "DPattn" in dp["layout"] and "attention-DP" in dp["band"] and "attention-DP" not in tp["band"]
    assert dp["tok_s_user_band_pct"] == round(100 * band_for("measured-gpu", "tok_s_user", dp["layout"]).band_fraction, 2)
    assert tp["tok_s_user_band_pct"] == round(100 * band_for("measured-gpu").band_fraction, 2)


def test_an_amd_answer_quotes_and_is_no_narrower_than_its_makers_judge_record():
    """AMD GPUs are projected from NVIDIA's tables; the projection band is measured between NVIDIA GPUs only. The
    public serving points of AMD's GPUs (InferenceX baselines, AMD's own published runs) are judges: their record
    ships in the band file, and an AMD answer's band is no narrower than it, for throughput (from their TPOT) and
    for TTFT (from the points that give one)."""
    from lpxsim.engine.bands import vendor_record

    rec = vendor_record("AMD")["metrics"]
    tok = rec["tok_s_user"]
    assert tok["n"] >= 10 and {"MI300X", "MI325X", "MI355X"} <= set(tok["gpus"])
    assert tok["min_signed_pct"] <= tok["median_signed_pct"] <= tok["max_signed_pct"]
    assert rec["ttft"]["n"] < tok["n"] and "MI300X" not in rec["ttft"]["gpus"]  # AMD's own points give no TTFT
    assert vendor_record("NVIDIA") == {}  # a measured maker has no cross-vendor record
    for metric, judged in (("tok_s_user", tok), ("tok_s_per_chip", tok), ("ttft", rec["ttft"])):
        path = band_for("projected-gpu", metric)
        amd = answer_band("mi300x", "fp8", metric=metric)
        assert amd.band_fraction == round(max(path.band_fraction * 100, judged["band_pct"]) / 100, 4), metric
        assert answer_band("vr-nvl72", "fp8", metric=metric).band_fraction == path.band_fraction  # NVIDIA from NVIDIA
    amd = answer_band("mi300x", "fp8")
    assert amd.band_fraction > band_for("projected-gpu").band_fraction and "cross-vendor record" in amd.data
    assert band_for("projected-gpu", system="mi300x").band_fraction == amd.band_fraction
    dp = band_for("projected-gpu", layout="TP8/EP8/DPattn", system="mi300x")  # a layout's own record: widened too
    assert dp.layout == "attention-dp" and dp.band_fraction == amd.band_fraction


def test_amd_public_serving_points_are_priced_and_recorded_per_gpu():
    from lpxsim.engine.validation import vendor_judge_rows, vendor_judges, vendor_records

    rows = vendor_judge_rows()
    assert rows and all(r["hardware"] == "MI300X" and r["latency_statistic"] == "median" for r in rows)
    points = vendor_judges(rows)
    assert all(p["pred_tpot_s"] and p["skipped"] is None for p in points)
    rec = vendor_records(points)["AMD"]["metrics"]
    assert set(rec) == {"tok_s_user"}  # median TPOT only: no TTFT record from these
    tok = rec["tok_s_user"]
    assert tok["n"] == len(points) == tok["gpus"]["MI300X"]["n"]
    # the record's error is tok/s/user's: measured TPOT over predicted
    errs = sorted(100 * (p["tpot_s"] / p["pred_tpot_s"] - 1) for p in points)
    assert tok["min_signed_pct"] == round(errs[0], 1) and tok["max_signed_pct"] == round(errs[-1], 1)


def test_a_system_outside_the_calibration_set_is_banded_by_its_own_judges():
    """B300 is not in the calibration replay; its 24 InferenceX pull-request baselines are. Its TTFT had been
    -49 to +121 % off them while its answers showed the measured path's +-24 %: a system's own record widens
    its bands where it has enough points, never narrows them, and never reaches a calibrated GPU."""
    from lpxsim.engine.bands import MIN_POINTS_FOR_QUANTILE, band_caveat, system_record
    from lpxsim.engine.validation import calibration_rows, system_records

    calibrated = {r["hardware"] for r in calibration_rows()}
    points = [
        {"id": "a", "hardware": "B300", "spec": "none", "tpot_s": 0.010, "pred_tpot_s": 0.008, "ttft_s": 0.1,
         "pred_ttft_s": 0.2},
        {"id": "b", "hardware": "B300", "spec": "mtp", "tpot_s": 0.010, "pred_tpot_s": 0.020, "ttft_s": 0.1,
         "pred_ttft_s": 0.9},  # drafting is judged elsewhere
        {"id": "c", "hardware": "H200", "spec": "none", "tpot_s": 0.010, "pred_tpot_s": 0.020, "ttft_s": 0.1,
         "pred_ttft_s": 0.9},  # a calibrated GPU: its record is the replay's
    ]
    rec = system_records(points, calibrated)
    assert set(rec) == {"b300-hgx"}
    m = rec["b300-hgx"]["metrics"]
    assert m["tok_s_user"]["points"] == ["a"] and m["tok_s_user"]["min_signed_pct"] == 25.0  # 10 / 8 - 1
    assert m["ttft"]["min_signed_pct"] == 100.0  # 0.2 / 0.1 - 1

    shipped = system_record("b300-hgx")["metrics"]
    assert shipped["ttft"]["n"] >= MIN_POINTS_FOR_QUANTILE
    path = path_for("b300-hgx", "fp4")
    plain = band_for(path, "ttft")
    own = band_for(path, "ttft", system="b300-hgx")
    assert own.band_fraction == round(max(plain.band_fraction * 100, shipped["ttft"]["band_pct"]) / 100, 4)
    assert own.band_fraction > plain.band_fraction and "own 24 public serving points" in own.data
    for metric in ("tok_s_user", "tok_s_per_chip"):  # never narrower than the path's
        assert band_for(path, metric, system="b300-hgx").band_fraction >= band_for(path, metric).band_fraction
    assert band_for(path, "ttft", system="b200-hgx").band_fraction == plain.band_fraction  # calibrated
    assert "24 public serving points" in band_caveat("b300-hgx", path)
    assert band_caveat("b200-hgx", path) == ""
    # fewer points than a quantile needs: the maker's cross-vendor record speaks (MI355X has one)
    assert system_record("mi355x")["metrics"]["ttft"]["n"] < MIN_POINTS_FOR_QUANTILE
    assert answer_band("mi355x", "fp8", metric="ttft").band_fraction == answer_band("mi325x", "fp8",
                                                                                    metric="ttft").band_fraction


def test_an_answer_that_drafts_is_banded_by_the_drafting_judges():
    """No calibration row drafts; the MTP judges (InferenceX's H200 MTP baselines, NVIDIA's one-user trtllm-bench
    MTP runs) had been -18 to +21 % off in tok/s/user while an MTP answer showed the measured path's +-10 %."""
    from lpxsim.engine.bands import MIN_POINTS_FOR_QUANTILE, band_text, speculative_record
    from lpxsim.engine.validation import speculative_record as record_of

    points = [{"id": "a", "hardware": "H200", "spec": "mtp", "tpot_s": 0.010, "pred_tpot_s": 0.0125, "ttft_s": 0.4,
               "pred_ttft_s": 0.3},
              {"id": "b", "hardware": "H200", "spec": "none", "tpot_s": 0.010, "pred_tpot_s": 0.02}]
    rec = record_of(points, [{"id": "c", "err_pct": 9.0}])
    assert rec["metrics"]["tok_s_user"]["points"] == ["a", "c"]
    assert rec["metrics"]["tok_s_user"]["min_signed_pct"] == -20.0  # 10 / 12.5 - 1: tok/s/user predicted low
    assert rec["metrics"]["ttft"]["points"] == ["a"] and rec["metrics"]["ttft"]["min_signed_pct"] == -25.0
    assert record_of([points[1]], []) == {}

    shipped = speculative_record()["metrics"]
    assert shipped["tok_s_user"]["n"] >= MIN_POINTS_FOR_QUANTILE
    for system in ("h200-hgx", "b200-hgx"):
        path = path_for(system, "fp8")
        plain, drafting = band_for(path, system=system), band_for(path, system=system, spec=True)
        assert drafting.band_fraction == round(max(plain.band_fraction * 100, shipped["tok_s_user"]["band_pct"])
                                               / 100, 4) > plain.band_fraction
        assert "drafting judge points" in drafting.data and "drafting" in band_text(system, path, drafting, True)
        assert "drafting" not in band_text(system, path, plain)
        assert band_for(path, "ttft", system=system, spec=True).band_fraction >= band_for(path, "ttft").band_fraction
    lpx = band_for("compiled-lpx", spec=True)  # the record is of GPU engines' drafting, not the LPX path's
    assert lpx.band_fraction == band_for("compiled-lpx").band_fraction


def test_estimate_with_mtp_carries_the_drafting_band():
    from lpxsim.cli.main import app

    args = ["estimate", "deepseek-r1", "--system", "h200-hgx", "--isl", "8192", "--osl", "1024", "--concurrency", "8",
            "--session", "none", "--json"]
    plain = json.loads(CliRunner().invoke(app, args).stdout)
    drafting = json.loads(CliRunner().invoke(app, args + ["--mtp", "2"]).stdout)
    assert drafting["tok_s_user_band_pct"] > plain["tok_s_user_band_pct"]
    assert "speculative decoding" in drafting["band"] and "speculative decoding" not in plain["band"]
