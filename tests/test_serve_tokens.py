"""Tokens of `lpxsim serve`: the filler is exactly n o200k tokens, stop strings cut it, and conversations are
recognised by content (a continuation keeps its session; a fork starts a new one)."""

from __future__ import annotations

from lpxsim.serve.tokens import (
    SESSION_STRIDE,
    SessionIndex,
    encode,
    filler_text,
    render_chat,
    reply_tokens,
    stop_cut,
    visible_text,
)


def test_filler_is_exactly_n_tokens():
    for n in (1, 2, 29, 30, 31, 500, 4097):
        assert len(encode(filler_text(n))) == n
    assert filler_text(3) + filler_text(4, start=3) == filler_text(7)


def test_reply_tokens_are_the_encoded_reply():
    assert reply_tokens(75, None, []) == encode(filler_text(75))
    assert reply_tokens(50, 4, [" to"]) == encode(" the of and")


def test_stop_strings():
    assert stop_cut(50, []) is None and stop_cut(50, ["zebra"]) is None
    assert stop_cut(50, [" to"]) == 4  # " the of and to": the 4th token completes " to"
    assert visible_text(50, 4, [" to"]) == (" the of and", 3)
    assert stop_cut(50, [" to", " of an"]) == 3  # the earliest end wins (" of an" ends inside " and")
    assert stop_cut(3, [" to"]) is None  # beyond the reply


def test_conversation_continues_and_forks():
    idx = SessionIndex(unit_tokens=8)
    turn1 = [{"role": "system", "content": "be brief " * 20}, {"role": "user", "content": "question one " * 10}]
    t1 = encode(render_chat(turn1))
    a = idx.place(t1)
    reply = filler_text(40)
    idx.record(a, t1 + encode(reply))
    turn2 = turn1 + [{"role": "assistant", "content": reply}, {"role": "user", "content": "and then?"}]
    b = idx.place(encode(render_chat(turn2)))
    assert b.session == a.session and b.session_hash_base == (a.session + 1) * SESSION_STRIDE
    fork = turn1 + [{"role": "assistant", "content": "something else entirely " * 5}, {"role": "user", "content": "?"}]
    c = idx.place(encode(render_chat(fork)))
    assert c.session != a.session  # it does not extend what the conversation produced
    other = idx.place(encode(render_chat([{"role": "user", "content": "unrelated " * 30}])))
    assert other.session not in (a.session, c.session)


def test_index_is_bounded():
    idx = SessionIndex(unit_tokens=4, max_sessions=10)
    for i in range(100):
        idx.place(encode(f"conversation {i} " * 20))
    assert len(idx.sessions()) == 10 and len(idx._owner) <= 10 * 40
    assert idx.sessions(3) == idx.sessions()[-3:][::-1]
    by_units = SessionIndex(unit_tokens=4, max_units=100)
    for i in range(50):
        by_units.place(encode(f"conversation {i} " * 20))  # ~15 units each
    assert by_units._total <= 100 and sum(len(h) for h in by_units._units.values()) == by_units._total
