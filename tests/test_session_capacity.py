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


def test_agent_shape_reaches_the_cap_and_refuses_a_first_turn_past_it():
    from lpxsim.engine.query import default_session
    from lpxsim.plan.session_capacity import agent_shape

    s = agent_shape(10_000, 256)
    ctxs = session_contexts(s.first_isl, s.new_tokens, s.turns, 256, s.context_cap)
    ds = default_session(10_000, 256)  # one session shape: the engine's default
    assert (s.first_isl, s.new_tokens, s.turns, s.think_s) == (ds.first_isl, ds.new_tokens, ds.turns, ds.think_s)
    assert ctxs[-1] == 10_256 and ctxs[-2] < 10_256  # the last turn reaches the cap
    with pytest.raises(UserError, match="first_isl"):
        agent_shape(1_000, 256, first_isl=5_000)


def test_turn_time_is_the_fixed_point_of_the_load_it_implies():
    from lpxsim.plan.session_capacity import solve_turn_s

    asked = []

    def turn_at(c):  # a turn slows as more streams decode at once
        asked.append(c)
        return 1.0 + 0.01 * c

    t, c = solve_turn_s(1_000, 4.0, turn_at)
    assert c == int(1_000 * t / (t + 4.0)) and t == turn_at(c)
    assert asked[0] == 1 and len(asked) <= 12  # from one stream, by bisection
    assert solve_turn_s(50, 0.0, turn_at)[1] == 50  # no think time: every held session decodes


def test_capacity_session_cli_is_session_ceilings_answer():
    import json

    from typer.testing import CliRunner

    from lpxsim.cli.main import app
    from lpxsim.plan.session_capacity import agent_shape

    res = CliRunner().invoke(app, ["capacity", "gemma-4-31b", "--system", "vr-nvl72", "--context", "100K",
                                   "--session", "--racks", "1", "--turn-s", "2", "--think-s", "6", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    c = session_ceilings("gemma-4-31b", "vr-nvl72", agent_shape(100_000, 256, think_s=6.0), osl=256, racks=1,
                         turn_s=2.0)
    assert d["sessions_held"] == c.sessions_held and d["streams_decoding"] == c.streams_decoding
    assert d["streams_decoding_mean"] == pytest.approx(c.sessions_held * 2.0 / 8.0)
    assert d["session_shape"] == c.shape_label() and set(d["breakdown"]) >= {"weights_bytes", "kv_bytes"}
    text = CliRunner().invoke(app, ["capacity", "gemma-4-31b", "--system", "vr-nvl72", "--context", "100K",
                                    "--session", "--racks", "1", "--turn-s", "2"])
    assert text.exit_code == 0 and "sessions held" in text.stdout and "streams decoding" in text.stdout
    import subprocess
    import sys

    bad = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "capacity", "gemma-4-31b", "--context", "1000",
                          "--session", "--first-isl", "5000", "--racks", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "first_isl" in bad.stderr


def test_engine_ceilings_run_on_the_engines_deployment(monkeypatch):
    from analytic_double import use_double_in_engine
    from lpxsim.engine.answer import answer_on
    from lpxsim.engine.deployment import Precision, place
    from lpxsim.engine.query import Load, Workload
    from lpxsim.plan.session_capacity import agent_shape, engine_session_ceilings

    use_double_in_engine(monkeypatch)
    shape = agent_shape(10_000, 256)
    c = engine_session_ceilings("gemma-4-31b", "vr-nvl72", shape, 256)
    placed = place("gemma-4-31b", "vr-nvl72", Workload(10_000, 256), None, Precision())
    assert c.chips == placed.deployment.powered_chips and placed.deployment.label() in c.turn_source
    at = answer_on(placed, Workload(10_000, 256, shape), Load(concurrency=max(1, c.streams_decoding)))
    assert c.turn_s == pytest.approx(at.e2e_s)
    assert c.streams_decoding_mean == pytest.approx(c.sessions_held * c.turn_s / (c.turn_s + shape.think_s))


def test_a_session_stopped_short_of_its_cap_says_so():
    """`capacity --context 1M --session --turns 1` asks about one short turn, not a 1M-token session: the
    answer says its last turn ends far below the cap (the default shape, which reaches the cap, does not)."""
    from lpxsim.plan.session_capacity import agent_shape

    short = session_ceilings("gemma-4-31b", "lpx", agent_shape(1_000_000, 256, turns=1), osl=256, turn_s=1.0)
    assert short.session_context_max < 10_000
    assert any("never reaches the 1,000,000-token cap" in n and "1 turn from" in n for n in short.notes)
    full = session_ceilings("gemma-4-31b", "lpx", agent_shape(100_000, 256), osl=256, turn_s=1.0)
    assert not any("never reaches" in n for n in full.notes)
