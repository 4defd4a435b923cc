"""A benchmark's finite run as its client measures it (engine.benchmark_run): the start-up burst in the mean TTFT,
rows that quote means compared with that mean, and per-position MTP acceptance in a serving pool."""

from __future__ import annotations

import pytest

from lpxsim.core.errors import UserError


def _row(conc: int, statistic: str | None = None) -> dict:
    """A B200 SGLang FP8 TP8 1k/1k row shaped like the calibration set's (its own measured latencies unused)."""
    r = {"hardware": "B200", "framework": "sglang", "precision": "fp8", "tp": "8", "ep": "1", "dp_attention": "false",
         "isl": "1024", "osl": "1024", "conc": str(conc), "spec_method": "none"}
    if statistic:
        r["latency_statistic"] = statistic
    return r


def test_a_loaded_run_mean_holds_the_start_up_burst_its_median_does_not():
    from lpxsim.engine.benchmark_run import benchmark_run
    from lpxsim.engine.steady_state import steady_state
    from lpxsim.engine.validation import LENGTH_RATIO, step_model

    users = 64
    step = step_model(_row(users), False, {})
    run = benchmark_run(step, "b200-hgx", "deepseek-r1", 8, 1024, 1024, users, 10)
    steady = steady_state(step, round(LENGTH_RATIO * 1024), round(LENGTH_RATIO * 1024), users)
    # the first 64 requests arrive together: 64 prompts queue for the prefill, so the run's mean lies above both
    # its median and the steady state, while the median stays near the steady state
    assert run.ttft_mean_s > 1.04 * run.ttft_median_s
    assert run.ttft_mean_s > 1.04 * steady.ttft_s
    assert run.ttft_median_s == pytest.approx(steady.ttft_s, rel=0.1)
    assert run.tpot_mean_s == pytest.approx(steady.tpot_s, rel=0.1)


def test_one_user_has_no_burst():
    from lpxsim.engine.benchmark_run import benchmark_run
    from lpxsim.engine.steady_state import steady_state
    from lpxsim.engine.validation import LENGTH_RATIO, step_model

    step = step_model(_row(1), False, {})
    run = benchmark_run(step, "b200-hgx", "deepseek-r1", 8, 1024, 1024, 1, 10)
    steady = steady_state(step, round(LENGTH_RATIO * 1024), round(LENGTH_RATIO * 1024), 1)
    assert run.ttft_mean_s == pytest.approx(steady.ttft_s, rel=0.02)


def test_rows_quoting_means_are_compared_with_the_run_mean():
    from lpxsim.engine.validation import mean_run_ttft_s, priced_row, step_model

    cache: dict = {}
    median, _ = priced_row(_row(64), cache=cache)
    mean, _ = priced_row(_row(64, "mean"), cache=cache)
    assert median["ttft_s"] == median["steady_ttft_s"]  # a median row: the steady state, the engine's answer
    assert mean["steady_ttft_s"] == median["ttft_s"]
    assert mean["ttft_s"] == mean_run_ttft_s(_row(64), step_model(_row(64), False, cache))
    assert mean["ttft_s"] > 1.04 * median["ttft_s"]
    assert mean["tpot_s"] == median["tpot_s"]  # TPOT's run mean is within a point of the steady state's


def test_mtp_pool_takes_one_acceptance_rate_per_draft_position():
    from lpxsim.serving import simulate
    from lpxsim.serving.config import load_fleet
    from serving_fixtures import fleet, pool

    wl = {"kind": "synthetic", "num_requests": 40, "arrival": {"process": "closed", "concurrency": 4}, "isl": 512,
          "osl": 128}
    flat = simulate(fleet(pool(backend="gpu", tp=8, mtp=2, mtp_accept=0.8)), wl, seed=0).requests
    falling = simulate(fleet(pool(backend="gpu", tp=8, mtp=2, mtp_accept=[0.8, 0.3])), wl, seed=0).requests
    # the second position accepts less, so fewer drafts land per round than at a flat 0.8 (0.8 + 0.24 vs 1.44)
    per_round = falling["spec_accepted"].sum() / falling["spec_rounds"].sum()
    assert per_round == pytest.approx(0.8 + 0.8 * 0.3, rel=0.1)
    assert per_round < flat["spec_accepted"].sum() / flat["spec_rounds"].sum()
    for bad in ([], [0.8, 1.0], 1.2):
        with pytest.raises(UserError) as e:
            load_fleet(fleet(pool(backend="gpu", tp=8, mtp=2, mtp_accept=bad)))
        assert "mtp_accept" in e.value.field
