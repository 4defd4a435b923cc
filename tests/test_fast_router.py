"""The KV-aware router's board (issue 10): the vectorised pick is the loop's pick, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.serving import simulate
from lpxsim.serving.kvcache import KvStore
from lpxsim.serving.router import Board, Router
from serving_fixtures import fleet, pool, synthetic

pytestmark = pytest.mark.usefixtures("serving_double")


def _loop_only(monkeypatch) -> None:
    """Force the reference path: every pick loops over the workers, as before the board."""
    monkeypatch.setattr(Router, "_slots", lambda self, workers: None)


def _summary(res) -> dict:
    return {k: v for k, v in res.summary.items() if "wall" not in k and "cpu" not in k}


@pytest.mark.parametrize("case", ["shared-prefix", "agentic", "pd"])
def test_board_pick_equals_the_loop_pick(case, monkeypatch) -> None:
    if case == "shared-prefix":
        f = fleet(pool(workers=12))
        wl = synthetic(n=400, rate=60.0, isl=(2000, 9000), shared_prefix={"tokens": 3072, "groups": 3})
    elif case == "agentic":
        f = fleet(pool(workers=6), router={"overlap_weight": 2.0})
        wl = {"kind": "agentic", "num_requests": 12, "arrival": {"process": "poisson", "rate": 3.0},
              "session": {"turns": 5, "first_isl": 3000, "tool_tokens": 1000, "think_s": 0.3}, "osl": 100}
    else:
        f = fleet(pool("pre", workers=3, role="prefill"), pool("dec", workers=5, role="decode"),
                  links=[{"between": ["pre", "dec"], "kind": "ethernet", "bandwidth_Bps": 100e9, "latency_s": 5e-6}])
        wl = synthetic(n=250, rate=40.0, isl=(1000, 6000), shared_prefix={"tokens": 2048, "groups": 2})
    fast = simulate(f, wl, seed=3)
    _loop_only(monkeypatch)
    slow = simulate(f, wl, seed=3)
    assert _summary(fast) == _summary(slow)
    assert fast.requests["worker"].tolist() == slow.requests["worker"].tolist()
    assert fast.summary["completed"] > 0


def test_softmax_pick_on_the_board_is_seeded(monkeypatch) -> None:
    f = fleet(pool(workers=8), router={"temperature": 50.0})
    wl = synthetic(n=200, rate=40.0, shared_prefix={"tokens": 1024, "groups": 2})
    a = simulate(f, wl, seed=5).requests["worker"].tolist()
    b = simulate(f, wl, seed=5).requests["worker"].tolist()
    assert a == b and len(set(a)) > 1


class _Tracked:
    """A worker stand-in that publishes to a board, for the index tests."""

    def __init__(self) -> None:
        self.kv = KvStore(100.0)
        self._board, self._slot = None, 0

    def track(self, board: Board, slot: int) -> None:
        self._board, self._slot = board, slot
        board.ctx[slot] = board.queued[slot] = 0
        self.kv.track(board.holders, 1 << slot, board.chains, slot)


def test_board_index_follows_inserts_and_evictions() -> None:
    board = Board()
    ws = [_Tracked() for _ in range(20)]  # more than the initial 16 slots: the arrays grow
    for w in ws:
        board.add(w)
    ws[0].kv.units[99] = [0, 1.0]  # resident before tracking is published by track(); later ones by insert
    ws[0].kv.track(board.holders, 1)
    ws[3].kv.charge(30.0)
    ws[3].kv.insert((1, 2, 3), [10.0] * 3, referenced=False)
    ws[19].kv.charge(20.0)
    ws[19].kv.insert((1, 2), [10.0] * 2, referenced=False)
    m = board.matches((1, 2, 3, 4))
    want = np.zeros(20, dtype=int)
    want[3], want[19] = 3, 2
    assert m.tolist() == want.tolist()
    assert board.matches((99,))[0] == 1 and board.matches((7,)) is None
    assert ws[3].kv.make_room(100.0)  # evicts all three units of worker 3
    m = board.matches((1, 2, 3))
    want[3] = 0
    assert m.tolist() == want.tolist()
    assert 3 not in board.holders and board.holders[1] == 1 << 19
    for w in ws:
        assert [board.matches((h,)) is not None and board.matches((h,))[ws.index(w)] == 1
                for h in w.kv.units] == [True] * len(w.kv.units)


def test_board_chain_index_follows_a_chain_growing_and_evicted() -> None:
    """A session chain is published as its unit count per slot: growth, block-LRU tail eviction and a whole
    eviction each show in the match counts, and a chain resident nowhere matches nothing."""
    board = Board()
    ws = [_Tracked() for _ in range(3)]
    for w in ws:
        board.add(w)
    base = 5 << 24
    ws[1].kv.charge(30.0)
    ws[1].kv.insert(range(base, base + 3), [10.0] * 3, referenced=False, session=7, chain=base)
    ws[2].kv.charge(10.0)
    ws[2].kv.insert(range(base, base + 1), [10.0], referenced=False, session=8, chain=base)
    assert board.chain_matches(range(base, base + 5)).tolist() == [0, 3, 1]
    assert board.chain_matches(range(base, base + 2)).tolist() == [0, 2, 1]
    ws[1].kv.charge(10.0)
    ws[1].kv.insert(range(base + 3, base + 4), [10.0], referenced=False, session=7, chain=base)  # grows
    assert board.chain_matches(range(base, base + 5)).tolist() == [0, 4, 1]
    assert ws[1].kv.make_room(ws[1].kv.capacity - ws[1].kv.used + 10.0)  # block LRU: one tail unit goes
    assert board.chain_matches(range(base, base + 5)).tolist() == [0, 3, 1]
    assert ws[2].kv.make_room(100.0)  # worker 2's only unit goes: it no longer holds the chain
    assert board.chain_matches(range(base, base + 5)).tolist() == [0, 3, 0]
    assert board.chain_matches(range(9 << 24, (9 << 24) + 2)) is None
    late = _Tracked()  # a store tracked after it cached the chain publishes it on tracking
    late.kv.charge(20.0)
    late.kv.insert(range(base, base + 2), [10.0] * 2, referenced=False, session=9, chain=base)
    board.add(late)
    assert board.chain_matches(range(base, base + 5)).tolist() == [0, 3, 0, 2]
