"""The decode step alone: a calibration row's median inter-token latency spans as many decode steps as its launch
streams tokens at a time (InferenceX: SGLang's --stream-interval, TensorRT-LLM's stream_interval), so it measures
one step without the other users' prefills; `gpu_replay` compares the engine's decode step with it."""

from __future__ import annotations

import pytest

from lpxsim.engine import validation as V
from lpxsim.engine.inferencex_launch import launch_stream_interval


def test_stream_interval_is_what_each_launch_script_sets():
    assert launch_stream_interval("H200", "sglang", "fp8") == 10
    assert launch_stream_interval("B200", "sglang", "fp8") == 30
    assert launch_stream_interval("B200", "sglang", "fp4") == 10
    assert launch_stream_interval("B300", "sglang", "fp8") == 30
    assert launch_stream_interval("H200", "trt", "fp8") == launch_stream_interval("B200", "trtllm", "fp4") == 10
    assert launch_stream_interval("MI325X", "sglang", "fp8") is None  # AMD's scripts were not read
    assert launch_stream_interval("H200", "vllm", "fp8") is None


def _h200_row(conc: str, date: str = "2026-05-17") -> dict:
    return next(r for r in V.calibration_rows() if r["hardware"] == "H200" and r["framework"] == "sglang"
                and r["isl"] == "8192" and r["osl"] == "1024" and r["conc"] == conc and r["date"] == date)


def test_measured_step_is_the_median_itl_over_the_stream_interval():
    r = _h200_row("16")
    assert V.measured_decode_step_s(r) == pytest.approx(float(r["itl_median_s"]) / 10)
    # what the chunk spans shows in the data: TPOT (the step plus the interrupting prefills) lies between
    # the step and ten steps
    assert V.measured_decode_step_s(r) < float(r["tpot_median_s"]) < 10 * V.measured_decode_step_s(r)
    assert V.measured_decode_step_s(dict(r, spec_method="mtp")) is None
    assert V.measured_decode_step_s(dict(r, itl_median_s="")) is None
    assert V.measured_decode_step_s(dict(r, hardware="MI325X")) is None
    # a chunk of 30 steps while 63 other users start ~1 request per 921 steps each: ~2 prefills in the median
    # chunk, which is then no step alone; at 1K / 8K the same users start requests 8x less often
    b200 = dict(r, hardware="B200", conc="64", osl="1024")
    assert V.measured_decode_step_s(b200) is None
    assert V.measured_decode_step_s(dict(b200, osl="8192")) == pytest.approx(float(r["itl_median_s"]) / 30)


def test_replay_compares_the_engines_decode_step_with_it():
    from lpxsim.engine.steady_state import decode_period

    rows = [_h200_row("4"), _h200_row("16")]
    cache: dict = {}
    res = V.gpu_replay(rows)
    (cfg,) = res["decode_step_by_config"]
    assert cfg["config"] == "H200 sglang fp8" and cfg["step"]["n"] == 2
    errs, shares = [], []
    for r in rows:
        p = V.replay_row(r, cache=cache)
        step = V.step_model(r, False, cache)
        isl, osl = round(V.LENGTH_RATIO * 8192), round(V.LENGTH_RATIO * 1024)
        period, _ = decode_period(step, int(r["conc"]), isl + osl // 2)
        assert p["decode_step_s"] == pytest.approx(period)
        errs.append(100 * (period / V.measured_decode_step_s(r) - 1))
        shares.append(100 * (float(r["tpot_median_s"]) / V.measured_decode_step_s(r) - 1))
    assert cfg["step"]["median_signed_pct"] == pytest.approx(sum(errs) / 2, abs=0.06)
    assert cfg["interruptions_measured_pct"] == pytest.approx(sum(shares) / 2, abs=0.06)
    # more users, more of the others' prefills inside one user's decode
    assert 0 < shares[0] < shares[1]
