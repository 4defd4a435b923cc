"""Agentic sessions as the engine's default workload (issue 27 item 7, issue 26 item 7's labels).

A session's later turn prefills only its new tokens; its KV stays resident through think time, so sessions held
and streams decoding are two numbers; past the deployment's KV the answer says how many sessions it holds and
that the rest wait (retention `hold`, the simulator's default without an offload tier). On the analytic stand-in
of one LPX rack (`analytic_double`), so it runs by default.
"""

from __future__ import annotations

import pytest

from lpxsim.core.errors import UserError
from lpxsim.engine.answer import answer_on, ceiling_for
from lpxsim.engine.query import (
    DEFAULT_NEW_TOKENS,
    DEFAULT_THINK_S,
    Load,
    SessionShape,
    Workload,
    default_session,
    session_for,
)
from lpxsim.engine.steady_state import prefill_cost

OSL = 256


@pytest.fixture(scope="module")
def rack():
    from analytic_double import double_factory
    from lpxsim.backends.factory import Layout
    from lpxsim.catalog import get_model
    from lpxsim.engine.deployment import Placed
    from lpxsim.engine.query import Deployment

    m = get_model("gemma-4-31b")
    step = double_factory(m, "lpx", Layout(racks=1.0), "fp8", "bf16", "separate")
    return Placed(Deployment("lpx", step.chips, given=True), step, m, 8)


def test_default_session_reaches_the_context_at_its_last_turn() -> None:
    for isl in (10_000, 100_000):
        s = default_session(isl, OSL)
        assert (s.new_tokens, s.think_s) == (DEFAULT_NEW_TOKENS, DEFAULT_THINK_S)
        assert s.first_isl + (s.turns - 1) * (s.new_tokens + OSL) == isl
        assert s.turns >= 2 and s.first_isl > 0
    assert default_session(100_000, OSL).turns == 44
    assert default_session(1_500, OSL) is None  # one turn's new tokens: a first turn, nothing to reuse


def test_labels_name_the_session_or_the_no_cache_loop() -> None:
    wl = Workload(100_000, OSL, session_for("agentic", 100_000, OSL))
    assert "agentic session" in wl.label() and "2,000 new tokens (98,000 cached)" in wl.label()
    assert "3 s think" in wl.label()
    assert "no prefix reuse" in Workload(100_000, OSL, session_for("none", 100_000, OSL)).label()
    with pytest.raises(UserError, match="session"):
        session_for("lru", 100_000, OSL)
    with pytest.raises(UserError, match="session"):
        session_for("none", 100_000, OSL, new_tokens=500)


def test_a_later_turn_prefills_only_its_new_tokens(rack) -> None:
    """One session alone: a later turn's TTFT is the prefill of its 2,000 new tokens over the cached 98,000, the
    first turn's the whole 100,000."""
    from lpxsim.step.protocol import PrefillChunk

    wl = Workload(100_000, OSL, SessionShape(2_992, 2_000, 44, think_s=DEFAULT_THINK_S))
    a = answer_on(rack, wl, Load(concurrency=1))
    new_only = rack.step.prefill(PrefillChunk(tokens=2_000, context=98_000)).latency_s
    assert a.ttft_s == pytest.approx(new_only, rel=1e-9)
    assert a.ttft_first_turn_s == pytest.approx(prefill_cost(rack.step, 100_000)[0], rel=1e-9)
    assert a.ttft_first_turn_s > 10 * a.ttft_s


def test_think_time_separates_sessions_held_from_streams_decoding(rack) -> None:
    base = Workload(100_000, OSL, SessionShape(2_992, 2_000, 44, think_s=0.0))
    thinking = Workload(100_000, OSL, SessionShape(2_992, 2_000, 44, think_s=DEFAULT_THINK_S))
    users = 8
    busy = answer_on(rack, base, Load(concurrency=users))
    a = answer_on(rack, thinking, Load(concurrency=users))
    d = a.as_dict()
    assert d["sessions_held"] == users and busy.streams_decoding == users
    assert 0 < a.streams_decoding < users  # the thinking sessions hold KV but do not decode
    think = DEFAULT_THINK_S * 43 / 44  # a session of 44 turns thinks 43 times: none after its last turn
    assert thinking.think_per_turn_s == pytest.approx(think)
    assert a.streams_decoding == pytest.approx(users * a.e2e_s / (a.e2e_s + think), rel=1e-9)
    assert a.kv_resident_bytes == pytest.approx(users * rack.step.kv_bytes(100_000 + OSL))
    # Little's law over each session's cycle (a turn and its think time)
    assert a.tok_s_total == pytest.approx(users * OSL / (a.e2e_s + think), rel=1e-6)
    assert a.tok_s_user >= busy.tok_s_user


def test_sessions_beyond_the_kv_are_reported_not_assumed_cached(rack) -> None:
    wl = Workload(100_000, OSL, session_for("agentic", 100_000, OSL))
    held = ceiling_for(rack.step, wl)
    # the simulator's default retention (`hold`) keeps 10 % of the KV free for held sessions' growth
    assert held == int(0.9 * rack.step.kv_capacity_bytes() // rack.step.kv_bytes(wl.context)) < 10
    users = held + 20
    a = answer_on(rack, wl, Load(concurrency=users))
    d = a.as_dict()
    assert a.over_capacity and d["sessions_held"] == held and d["sessions_waiting"] == 20
    assert d["kv_resident_bytes"] <= d["kv_capacity_bytes"]
    assert any("KV over capacity" in n and f"{held:,} sessions" in n for n in a.notes)
    at_ceiling = answer_on(rack, wl, Load(concurrency=held))
    # the aggregate is the held sessions' (the rest wait); the wait is in TTFT
    assert a.tok_s_total == pytest.approx(at_ceiling.tok_s_total, rel=1e-6)
    assert a.ttft_wait_s > 1.0


def test_no_cache_loop_is_unchanged_by_the_session_plumbing(rack) -> None:
    """--session none is the old workload: the same figures as a plain Workload(isl, osl)."""
    plain = answer_on(rack, Workload(10_000, OSL), Load(concurrency=4))
    none = answer_on(rack, Workload(10_000, OSL, session_for("none", 10_000, OSL)), Load(concurrency=4))
    assert none == plain
    assert plain.streams_decoding == 4 and plain.as_dict()["session_kind"] == "none"


def _sim_shape(isl: int) -> Workload:
    """The engine's default session at `isl` as the simulator runs it (`sim_session`: three turns ending at
    `isl`); both answer this one workload."""
    from lpxsim.engine.simulated import sim_session

    return Workload(isl, OSL, sim_session(Workload(isl, OSL, session_for("agentic", isl, OSL))))


def _agree(a, s) -> None:
    assert s.tok_s_user == pytest.approx(a.tok_s_user, rel=0.05)
    assert s.ttft_s == pytest.approx(a.ttft_s, rel=0.10)
    assert s.tok_s_total == pytest.approx(a.tok_s_total, rel=0.03)


def test_the_session_answer_agrees_with_the_simulators_sessions(rack) -> None:
    """The engine's later turns against the simulator's agentic sessions of the same shape (retention on, think
    time, one session per user) on the same replica, below the KV ceiling."""
    from lpxsim.engine.simulated import simulate_answer

    for isl in (10_000, 100_000):
        wl = _sim_shape(isl)
        load = Load(concurrency=4)
        a = answer_on(rack, wl, load)
        # TTFT: the simulator also prefills the previous output's last, partly filled 64-token unit
        _agree(a, simulate_answer(rack, wl, load, rounds=3))


def test_past_the_kv_the_engine_counts_what_hold_does(rack) -> None:
    """16 users of 100K sessions on a rack that holds 9 (the stand-in model): the simulator's default retention
    (`hold`) keeps 9 sessions resident and the others wait for one to end. Users run 80 sessions each, one after
    another, so the waits are a steady state; the engine's held sessions, aggregate and TTFT (its wait spread
    over the turns) agree within the same tolerances as below the ceiling."""
    from lpxsim.engine.simulated import simulate_answer

    wl, load = _sim_shape(100_000), Load(concurrency=16)
    a = answer_on(rack, wl, load)
    assert a.over_capacity and a.streams_admitted == 9 and a.ttft_wait_s > 1.0
    s = simulate_answer(rack, wl, load, rounds=3, sessions_per_user=80)
    assert s.requests > 3_000
    _agree(a, s)
    # the waits are most of TTFT: a check of the wait, not of the later turns' prefill
    assert s.ttft_s > 10 * a.ttft_first_turn_s


def test_a_search_never_picks_more_sessions_than_a_replica_holds(rack) -> None:
    from lpxsim.engine.answer import replica_estimate

    wl = _sim_shape(100_000)
    assert replica_estimate(rack, wl, 9).concurrency == 9
    with pytest.raises(UserError, match="holds 9 sessions"):
        replica_estimate(rack, wl, 10)


def test_a_replica_that_fits_one_session_holds_it() -> None:
    """`hold` caps the headroom it asks of a newcomer at the capacity: an empty replica admits any session that
    fits it, so where one session fits (gpt-oss-120b at 100K on one LPX rack) one is held, not 0."""
    from lpxsim.engine.concurrency import kv_fit, sessions_fit

    class OneFits:
        def kv_bytes(self, context: int) -> float:
            return 0.95e9

        def kv_capacity_bytes(self) -> float:
            return 1e9

        def max_batch(self) -> int:
            return 64

    assert kv_fit(OneFits(), 100_000) == 1 and sessions_fit(OneFits(), 100_000) == 1
