"""Tokens of `lpxsim serve`: the filler is exactly n o200k tokens, stop strings cut it, and conversations are
recognised by content (a continuation keeps its session; a fork starts a new one)."""

from __future__ import annotations

from lpxsim.serve.tokens import (
    SESSION_STRIDE,
    WORDS,
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


def _word_by_word(n: int, start: int = 0) -> str:
    return "".join(WORDS[i % len(WORDS)] for i in range(start, start + n))


def _stop_cut_by_scanning(n: int, stop: list[str]) -> int | None:
    """stop_cut's definition, on the whole reply (what the bounded search must agree with)."""
    text = _word_by_word(n)
    ends = [text.find(s) + len(s) for s in stop if s in text]
    if not ends:
        return None
    pos = 0
    for k in range(n):
        pos += len(WORDS[k % len(WORDS)])
        if pos >= min(ends):
            return k + 1
    return n


def test_filler_built_by_cycles_is_the_word_sequence():
    for n in (0, 1, 29, 30, 31, 95, 1000):
        for start in (0, 3, 29, 30, 77):
            assert filler_text(n, start) == _word_by_word(n, start)
    assert reply_tokens(1000, None, []) == encode(_word_by_word(1000))


def test_stop_search_on_a_bounded_prefix_agrees_with_the_whole_reply():
    """stop_cut searches only the first 2 x 30 + len(stop) tokens (the filler repeats every 30 words): every
    substring of the filler, near a cycle's end or spanning two, and strings it never contains."""
    whole = _word_by_word(200)
    cases = [[whole[a:a + k]] for a in range(0, 190, 7) for k in (1, 2, 5, 11)]
    cases += [["zz" + whole[a:a + 5]] for a in range(0, 60, 9)]
    cases += [[whole[170:183], whole[40:44]], [" more the of", " one"]]
    for stop in cases:
        for n in (1, 7, 30, 31, 64, 200, 10_000):
            assert stop_cut(n, stop) == _stop_cut_by_scanning(n, stop), (n, stop)


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
