"""The two ceilings of agentic serving (issue 27, item 8): sessions held and streams decoding."""

from __future__ import annotations

import pytest

from lpxsim.catalog import get_model
from lpxsim.core.errors import UserError
from lpxsim.engine.query import SessionShape
from lpxsim.plan.capacity import capacity
from lpxsim.plan.session_capacity import session_ceilings, session_contexts
from lpxsim.specs.accounting import kv_bytes_per_sequence


def test_session_contexts_grow_by_new_tokens_and_output_and_stop_at_the_cap():
    assert session_contexts(1000, 200, 4, 100, None) == [1100, 1400, 1700, 2000]
    assert session_contexts(1000, 200, 5, 100, 1500) == [1100, 1400, 1600, 1600, 1600]


@pytest.mark.parametrize("system", ["lpx", "vr-nvl72"])
def test_ceilings_agree_with_plan_capacity_and_the_breakdown_sums(system):
    shape = SessionShape(first_isl=20_000, new_tokens=2_000, turns=30, think_s=4.0, context_cap=100_000)
    c = session_ceilings("gemma-4-31b", system, shape, osl=400, turn_s=2.0)
    # every held session at its last turn is exactly plan.capacity's streams at that context
    assert c.sessions_held_last_turn == capacity("gemma-4-31b", system, context=c.session_context_max).max_streams
    assert c.sessions_held > c.sessions_held_last_turn  # a population of every age holds more
    per = [kv_bytes_per_sequence(get_model("gemma-4-31b"), x)
           for x in session_contexts(20_000, 2_000, 30, 400, 100_000)]
    assert c.kv_bytes_per_session_mean == pytest.approx(sum(per) / len(per))
    assert c.sessions_held == int(c.kv_budget_bytes // c.kv_bytes_per_session_mean)
    assert c.streams_decoding == int(c.sessions_held * 2.0 / 6.0)
    assert abs(c.breakdown.check()) < 1.0  # bytes
    assert c.breakdown.free_bytes >= 0 and c.breakdown.free_bytes < c.kv_bytes_per_session_mean


def test_without_think_time_every_held_session_may_decode_and_a_tier_parks_more():
    shape = SessionShape(first_isl=8_000, new_tokens=1_000, turns=10)
    c = session_ceilings("gemma-4-31b", "lpx", shape, osl=200, offload_bytes=8.192e12)
    assert c.streams_decoding == c.sessions_held and c.duty is None
    assert c.offload_sessions == int(8.192e12 // c.kv_bytes_per_session_mean)


def test_bad_osl_and_turn_time_name_their_field():
    shape = SessionShape(first_isl=8_000, new_tokens=1_000, turns=10)
    with pytest.raises(UserError, match="osl"):
        session_ceilings("gemma-4-31b", "lpx", shape, osl=0)
    with pytest.raises(UserError, match="turn_s"):
        session_ceilings("gemma-4-31b", "lpx", shape, osl=10, turn_s=-1.0)
