"""The simulator and the steady-state estimate (`lpxsim.plan.estimate`) agree on long steady runs."""

from __future__ import annotations

import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.plan.estimate import steady_state
from lpxsim.serving import simulate
from lpxsim.serving.backends import make_step_model
from lpxsim.serving.config import load_fleet
from serving_fixtures import fleet, pool

pytestmark = pytest.mark.usefixtures("serving_double")


@pytest.mark.parametrize("system", ["vr-nvl72", "lpx"])
@pytest.mark.parametrize("concurrency", [1, 16])
def test_closed_loop_agrees_with_estimate_within_5pct(system, concurrency):
    f = fleet(pool(system=system))
    isl, osl = 2048, 512
    wl = {"kind": "synthetic", "num_requests": concurrency * 25,
          "arrival": {"process": "closed", "concurrency": concurrency}, "isl": isl, "osl": osl}
    res = simulate(f, wl, seed=0)
    est = steady_state(make_step_model(load_fleet(f).pools[0]), isl=isl, osl=osl, concurrency=concurrency)
    assert res.summary["fleet_tok_s"] == pytest.approx(est.tok_s_total, rel=0.05)
    assert res.requests["tpot_s"].median() == pytest.approx(est.tpot_s, rel=0.05)
    assert res.summary["mean_concurrency"] == pytest.approx(concurrency, rel=0.02)
    if concurrency == 1:  # batch 1: the same formula exactly
        assert res.requests["ttft_s"].mean() == pytest.approx(est.ttft_s, rel=1e-6)


def test_lpx_pipelines_micro_batches_gpu_does_not():
    """On the LPX rack a step's latency spans its pipeline stages while a new micro-batch enters every
    stage-interval, so 16 users run as 16 micro-batches in flight; a GPU step occupies the whole replica
    (latency = interval) and 16 users share one batch. (Per-user speed falls by about the same share on
    both in this analytic pool, ~0.79x from 1 to 16 users: that is not what distinguishes them.)"""
    from lpxsim.step.protocol import DecodeBatch

    steps = {s: make_step_model(load_fleet(fleet(pool(system=s))).pools[0]) for s in ("vr-nvl72", "lpx")}
    gpu = steps["vr-nvl72"].decode_step(DecodeBatch.uniform(1, 2304))
    lpx = steps["lpx"].decode_step(DecodeBatch.uniform(1, 2304))
    assert gpu.latency_s == pytest.approx(gpu.interval_s, rel=1e-12)
    assert lpx.latency_s > 10 * lpx.interval_s  # one stage of a many-stage pipeline
    at16 = {s: steady_state(step, 2048, 256, 16) for s, step in steps.items()}
    assert at16["lpx"].micro_batches == 16 and at16["vr-nvl72"].micro_batches == 1
    for s, step in steps.items():  # 16 users: > 12x the aggregate tok/s of one, on both
        assert at16[s].tok_s_total > 12 * steady_state(step, 2048, 256, 1).tok_s_total, s


@pytest.mark.parametrize("concurrency", [1, 16])
def test_gpu_backend_closed_loop_agrees_with_estimate(concurrency):
    """The same agreement through the project's GPU backend (lpxsim.gpu), not only the analytic model."""
    f = fleet(pool(backend="gpu", tp=8))
    wl = {"kind": "synthetic", "num_requests": concurrency * 25,
          "arrival": {"process": "closed", "concurrency": concurrency}, "isl": 2048, "osl": 512}
    res = simulate(f, wl, seed=0)
    est = steady_state(make_step_model(load_fleet(f).pools[0]), isl=2048, osl=512, concurrency=concurrency)
    assert res.summary["fleet_tok_s"] == pytest.approx(est.tok_s_total, rel=0.05)
    assert res.requests["tpot_s"].median() == pytest.approx(est.tpot_s, rel=0.05)


@pytest.mark.heavy
def test_compiled_lpx_batch1_is_flat_with_context():
    """The compiler-backed LPX backend at concurrency 1 (slow: compiles each shape once)."""
    f = fleet(pool(system="lpx", backend="lpx", target_context=131072, target_concurrency=1))
    out = {}
    for isl in (10_000, 100_000):
        wl = {"kind": "synthetic", "num_requests": 3, "arrival": {"process": "closed", "concurrency": 1},
              "isl": isl, "osl": 500}
        est = steady_state(make_step_model(load_fleet(f).pools[0]), isl=isl, osl=500, concurrency=1)
        res = simulate(f, wl, seed=0)
        out[isl] = res.requests["tok_s_user"].median()
        assert out[isl] == pytest.approx(est.tok_s_user, rel=0.05)
    assert 0.9 < out[100_000] / out[10_000] < 1.1
