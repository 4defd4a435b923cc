"""`plan fleet`'s demand classes as sessions (issue 27 item 7): a class with `new_tokens` (or `session: agentic`,
or `think_s`) is the engine's default agentic session shape, think time included, so its concurrent sessions are
sessions held (each holding its KV through its tool time) and its streams decoding are priced as `estimate`
prices them; a class with none of them is the no-cache loop. Every assignment says which. On the analytic
stand-in (`analytic_double`)."""

from __future__ import annotations

import pytest

from lpxsim.core.errors import UserError
from lpxsim.engine.query import DEFAULT_NEW_TOKENS, DEFAULT_THINK_S, default_session
from lpxsim.plan.fleet import parse_demand, size_fleet

CLASS = {"name": "agents", "model": "gemma-4-31b", "isl": 100_000, "osl": 256, "tok_s_user": 100,
         "concurrent_sessions": 12}


def _demand(**extra) -> dict:
    return {"classes": [{**CLASS, **extra}], "systems": [{"name": "lpx"}]}


def test_a_class_with_new_tokens_is_the_engines_default_session() -> None:
    rc = parse_demand(_demand(new_tokens=4_000)).request_classes()[0]
    assert rc.session == default_session(100_000, 256, 4_000) and rc.session.think_s == DEFAULT_THINK_S
    assert rc.new_tokens == 4_000 and "3 s think" in rc.workload_label
    shaped = parse_demand(_demand(session="agentic")).request_classes()[0]
    assert shaped.session == default_session(100_000, 256) and shaped.new_tokens == DEFAULT_NEW_TOKENS
    thinking = parse_demand(_demand(new_tokens=4_000, think_s=10)).request_classes()[0]
    assert thinking.session.think_s == 10
    plain = parse_demand(_demand()).request_classes()[0]
    assert plain.session is None and plain.new_tokens is None and "no prefix reuse" in plain.workload_label
    with pytest.raises(UserError, match="classes.0"):
        parse_demand(_demand(session="none", think_s=3))
    with pytest.raises(UserError, match="classes.0.think_s"):
        parse_demand(_demand(think_s=-1))


def test_sessions_held_and_streams_decoding_are_priced_as_estimate(monkeypatch) -> None:
    """The fleet's operating point for a session class is `plan point`'s for the same session (one search):
    concurrency counts sessions held, more than the streams decoding, and the assignment is labelled."""
    from analytic_double import double_factory
    from lpxsim.plan.operating_point import operating_point

    plan = size_fleet(parse_demand(_demand(new_tokens=2_000)), factory=double_factory)
    assert plan.feasible
    shape = default_session(100_000, 256)
    ref = operating_point("gemma-4-31b", "lpx", 100_000, 256, 100, factory=double_factory, session=shape)
    op = plan.points[0]
    assert op.think_s == DEFAULT_THINK_S and op.session == shape.label()
    a = plan.assignments[0]
    assert a.concurrency_per_replica == ref.concurrency and a.tok_s_user == pytest.approx(ref.tok_s_user)
    assert "agentic session" in a.workload and "3 s think" in a.workload
    # sessions held vs streams decoding as the engine's answer gives them (`engine.answer.streams_decoding`:
    # held x E2E / (E2E + think a turn))
    e2e, think = ref.e2e_s, shape.think_per_turn_s
    assert a.streams_decoding_per_replica == pytest.approx(ref.concurrency * e2e / (e2e + think), rel=1e-6)
    assert 0 < a.streams_decoding_per_replica < a.concurrency_per_replica
    no_cache = size_fleet(parse_demand(_demand()), factory=double_factory)
    b = no_cache.assignments[0]
    assert "no prefix reuse" in b.workload
    assert b.streams_decoding_per_replica == b.concurrency_per_replica
