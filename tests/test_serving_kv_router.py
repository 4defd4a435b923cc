"""KV store accounting, prefix cache LRU, and the Dynamo-style router cost."""

from __future__ import annotations

import numpy as np
import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.serving import simulate
from lpxsim.serving.kvcache import KvStore
from lpxsim.serving.request import Request
from lpxsim.serving.router import Router
from serving_fixtures import fleet, pool, synthetic

pytestmark = pytest.mark.usefixtures("serving_double")


def test_kvstore_refcounts_lru_and_capacity():
    kv = KvStore(100.0)
    kv.charge(30.0)
    assert kv.insert((1, 2, 3), [10.0, 10.0, 10.0], referenced=True) == 30.0
    assert kv.used == 30.0 and kv.evictable == 0.0
    assert kv.match((1, 2, 9)) == 2
    kv.release((1, 2, 3))
    assert kv.evictable == 30.0
    assert list(kv.lru) == [3, 2, 1]  # tail units are evicted first, keeping the shared head
    assert kv.make_room(80.0)
    assert kv.evictions == 1 and kv.match((1, 2, 3)) == 2
    assert not kv.make_room(101.0) and kv.used == 20.0
    kv.acquire((1,))
    assert kv.evictable == 10.0


def test_kvstore_duplicate_insert_frees_the_copy():
    kv = KvStore(100.0)
    kv.charge(10.0)
    kv.insert((5,), [10.0], referenced=True)
    kv.charge(10.0)
    kv.insert((5,), [10.0], referenced=True)
    assert kv.used == 10.0 and kv.units[5][0] == 2


class _W:
    def __init__(self, index, cached_units, active):
        self.index = index
        self.kv = KvStore(1e12)
        for h in cached_units:
            self.kv.units[h] = [1, 1.0]
        self._active = active
        self.ctx_sum, self.queued_tokens = active, 0

    def active_tokens(self):
        return self._active

    def load(self):
        return self._active


def test_router_cost_prefers_prefix_holder_unless_loaded():
    req = Request(0, 0.0, isl=4096, osl=10, hash_ids=tuple(range(8)), hash_block_tokens=512)
    holder, idle = _W(0, range(8), active=2000), _W(1, (), active=0)
    r = Router("kv", overlap_weight=1.0, temperature=0.0, block_tokens=16, rng=np.random.default_rng(0))
    assert r.pick(req, [idle, holder]) is holder  # 4096/16 prefill blocks saved > 2000/16 decode blocks
    busy_holder = _W(0, range(8), active=10_000)
    assert r.pick(req, [idle, busy_holder]) is idle
    r0 = Router("kv", overlap_weight=0.0, temperature=0.0, block_tokens=16, rng=np.random.default_rng(0))
    assert r0.pick(req, [idle, holder]) is idle  # weight 0 = pure load balancing


def test_router_softmax_sampling_is_seeded_and_spreads():
    req = Request(0, 0.0, isl=1024, osl=10)
    ws = [_W(i, (), active=16 * i) for i in range(4)]
    picks = [Router("kv", 1.0, 2.0, 16, np.random.default_rng(1)).pick(req, ws).index for _ in range(1)]
    r = Router("kv", 1.0, 2.0, 16, np.random.default_rng(1))
    seq = [r.pick(req, ws).index for _ in range(400)]
    r2 = Router("kv", 1.0, 2.0, 16, np.random.default_rng(1))
    assert seq == [r2.pick(req, ws).index for _ in range(400)]
    assert picks[0] == seq[0]
    counts = np.bincount(seq, minlength=4)
    assert counts[0] > counts[1] > counts[2] > 0  # lower cost, more likely


def test_round_robin_and_least_load():
    ws = [_W(i, (), active=a) for i, a in enumerate((5, 1, 3))]
    req = Request(0, 0.0, 100, 10)
    rr = Router("round_robin", 1.0, 0.0, 16, np.random.default_rng(0))
    assert [rr.pick(req, ws).index for _ in range(4)] == [0, 1, 2, 0]
    assert Router("least_load", 1.0, 0.0, 16, np.random.default_rng(0)).pick(req, ws).index == 1


@pytest.mark.parametrize("policy", ["kv", "round_robin"])
def test_prefix_cache_hits_with_shared_system_prompts(policy):
    wl = synthetic(n=300, isl=(3000, 6000), shared_prefix={"tokens": 2048, "groups": 2})
    res = simulate(fleet(pool(workers=4), router={"policy": policy}), wl, seed=4)
    assert res.summary["prefix_hit_rate"] > 0.2
    assert res.summary["completed"] == 300


def test_kv_router_keeps_agentic_sessions_on_their_worker():
    wl = {"kind": "agentic", "num_requests": 6, "arrival": {"process": "poisson", "rate": 2.0},
          "session": {"turns": 6, "first_isl": 4000, "tool_tokens": 1500, "think_s": 0.5}, "osl": 200}
    # Dynamo's cost alone (no session affinity): a high overlap weight keeps each session where its KV is
    res = simulate(fleet(pool(workers=4), router={"overlap_weight": 4.0, "session_affinity": False}), wl, seed=0)
    df = res.requests
    late = df[df.turn > 0]
    assert (df.groupby("session")["worker"].nunique() == 1).all()
    assert (late["cached_tokens"] > 0).all()
    # with overlap weight 0 the router balances load and sessions lose their cache when they move
    spread = simulate(fleet(pool(workers=4), router={"overlap_weight": 0.0, "session_affinity": False}), wl,
                      seed=0).requests
    assert spread.groupby("session")["worker"].nunique().max() > 1
    assert spread["cached_tokens"].sum() < df["cached_tokens"].sum()
    # turn t+1's prompt = turn t's prompt + output + tool output
    s0 = df[df.session == 0].sort_values("turn")
    assert (s0["isl"].diff().dropna() == 200 + 1500).all()
    # with session affinity (the default) even a load-only cost keeps each session on its worker
    kept = simulate(fleet(pool(workers=4), router={"overlap_weight": 0.0}), wl, seed=0).requests
    assert (kept.groupby("session")["worker"].nunique() == 1).all()
