"""The simulator's GPU workers admit new requests as the engines do and as the steady state prices it.

SGLang on Blackwell, as InferenceX launches it, reads new requests only every N decode steps
(`admission_poll`), at once after a prefill step or when idle; TensorRT-LLM with attention data-parallelism
holds waiting prefills until every rank has one, for at most `timeout` iterations (`admission_hold`). Before
the simulator had them its TTFT on those calibration configurations was 54 % and 74 % short of the measured
rows (`python benchmarks/gpu_queueing_solvers.py`). Each test runs a closed loop of drawn lengths (as
InferenceX draws them) on the B200 step model with and without the mechanism.
"""

from __future__ import annotations

import pytest

from lpxsim.backends.factory import Layout, make_step_model
from lpxsim.engine.steady_state import poll_wait_steps, steady_state
from lpxsim.serving import simulate
from lpxsim.serving.backends import pinned_step_model
from lpxsim.serving.config import load_fleet
from lpxsim.serving.workload import benchmark_loop

ISL, OSL = 1024, 256


class WithoutAdmission:
    """The same step model, its engine reading every request at once (no poll, no hold)."""

    admission_poll = None
    admission_hold = None

    def __init__(self, model) -> None:
        self._model = model

    def __getattr__(self, name: str):
        return getattr(self._model, name)


def _closed_loop(step, users: int, rounds: int = 8) -> tuple[float, float]:
    """(mean TTFT, mean TPOT) of `users` closed-loop users on one 8-GPU B200 worker running `step`, the first
    and last round left out."""
    pool = {"name": "p", "system": "b200-hgx", "backend": "auto", "model": "deepseek-r1", "role": "aggregated",
            "workers": 1, "gpus_per_worker": 8}
    fleet = load_fleet({"name": "t", "pools": [pool], "scheduler": {"token_budget": 8192, "max_batch": 256}})
    wl = benchmark_loop(users, ISL, OSL, rounds)
    with pinned_step_model(fleet.pools[0], step):
        df = simulate(fleet, wl, seed=0).requests
    steady = df.sort_values("arrival_s").iloc[users:len(df) - users]
    return float(steady["ttft_s"].mean()), float(steady["tpot_s"].mean())


@pytest.fixture(scope="module")
def sglang_b200():
    step = make_step_model("deepseek-r1", "b200-hgx", Layout(gpus=8, tp=8, ep=1, framework="sglang"),
                           weights="fp8", kv="fp8")
    assert step.admission_poll is not None
    return step


def test_the_poll_delays_a_busy_engine_by_half_its_interval(sglang_b200) -> None:
    users = 32  # at or above the launch script's threshold: a read every 30 decode steps
    ttft, tpot = _closed_loop(sglang_b200, users)
    ttft_at_once, _ = _closed_loop(WithoutAdmission(sglang_b200), users)
    expected = poll_wait_steps(sglang_b200.admission_poll, users) * tpot  # 15 steps
    assert 0.7 * expected < ttft - ttft_at_once < 1.4 * expected
    assert ttft == pytest.approx(steady_state(sglang_b200, round(0.9 * ISL), round(0.9 * OSL), users).ttft_s,
                                 rel=0.15)


def test_one_user_finds_the_engine_idle(sglang_b200) -> None:
    """An idle scheduler spins and reads at once: one user waits for no poll."""
    assert _closed_loop(sglang_b200, 1, rounds=4)[0] == pytest.approx(
        _closed_loop(WithoutAdmission(sglang_b200), 1, rounds=4)[0], rel=1e-9)


@pytest.fixture(scope="module")
def trtllm_dp_b200():
    step = make_step_model("deepseek-r1", "b200-hgx",
                           Layout(gpus=8, tp=8, ep=8, dp_attention=True, framework="trtllm"), weights="fp4", kv="fp8")
    assert step.admission_hold == (8, 60, 1)
    return step


def test_the_attention_dp_hold_waits_for_every_rank(trtllm_dp_b200) -> None:
    step = trtllm_dp_b200
    users = 64
    ttft, _ = _closed_loop(step, users)
    ttft_at_once, _ = _closed_loop(WithoutAdmission(step), users)
    assert ttft > 2.0 * ttft_at_once  # held for the other ranks, up to 60 iterations
    assert ttft == pytest.approx(steady_state(step, round(0.9 * ISL), round(0.9 * OSL), users).ttft_s, rel=0.15)


def test_no_hold_while_a_rank_runs_no_decode(trtllm_dp_b200) -> None:
    """Eight users on eight ranks: the rank whose stream just ended is idle while its user's next request
    waits, so TensorRT-LLM releases it at once (TRT-ADP), as `steady_state.held_share` says."""
    assert _closed_loop(trtllm_dp_b200, 8)[0] == pytest.approx(
        _closed_loop(WithoutAdmission(trtllm_dp_b200), 8)[0], rel=1e-9)


def test_an_unread_arrival_can_be_aborted() -> None:
    """A request waiting for the scheduler's poll (in the inbox) leaves at once when its client goes, and
    gives back its queued tokens; the worker then serves on."""
    from lpxsim.serving.online import ABORTED, OnlineSimulation

    pool = {"name": "p", "system": "b200-hgx", "backend": "gpu", "model": "deepseek-r1", "workers": 1,
            "gpus_per_worker": 8, "tp": 8, "weights": "fp8", "kv": "fp8", "framework": "sglang"}
    online = OnlineSimulation(load_fleet({"name": "t", "pools": [pool]}))
    first = [online.submit(900, 400) for _ in range(20)]
    online.advance(1.0)  # all decoding: the worker is in a long decode run
    w = online.workers[0]
    assert w.busy and w.n_dec == 20
    late = [online.submit(900, 50) for _ in range(3)]
    assert len(w.inbox) == 3 and not w.waiting  # unread until the poll
    queued = w.queued_tokens
    for r in late:
        assert online.abort(r)
    assert all(r.status == ABORTED for r in late) and not w.inbox
    assert w.queued_tokens == queued - 3 * 900
    online.advance(online.now_s + 30.0)
    assert all(r.status == "completed" for r in first)
    again = online.submit(900, 10)
    online.advance(online.now_s + 5.0)
    assert again.status == "completed"


class TokenWithTheStep(WithoutAdmission):
    """As `WithoutAdmission`, its first token coming out with the whole mixed step (as a mixing engine's)."""

    prefill_alone = False


def test_sglang_first_token_leaves_before_the_steps_decodes(sglang_b200) -> None:
    """SGLang runs a prefill batch as its own forward (no mixed chunks, SGL-MIXED): the prompt's first token is
    out when its prefill ends, not after the running decodes of that step (about one decode step earlier)."""
    assert sglang_b200.prefill_alone
    users = 8  # the poll left out of both, so that only where the token leaves differs
    alone, tpot = _closed_loop(WithoutAdmission(sglang_b200), users)
    with_step, _ = _closed_loop(TokenWithTheStep(sglang_b200), users)
    assert 0.5 * tpot < with_step - alone < 1.5 * tpot
