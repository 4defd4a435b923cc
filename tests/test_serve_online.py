"""The online driver (`lpxsim.serving.online`) against `simulate`: the same arrivals give the same token times,
tokens read between events land on the step boundaries, and an abort gives back everything it held."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.serving import simulate
from lpxsim.serving.config import load_fleet
from lpxsim.serving.online import ABORTED, OnlineSimulation
from serving_fixtures import fleet, link, pool, synthetic

pytestmark = pytest.mark.usefixtures("serving_double")

FLEETS = {
    "gpu-2": fleet(pool(workers=2)),
    "lpx": fleet(pool(system="lpx")),
    "pd": fleet(pool("pre", workers=2, role="prefill"), pool("dec", system="lpx", role="decode"),
                links=[link("pre", "dec")]),
}
WORKLOAD = synthetic(n=60, rate=40.0, isl=(256, 3000), osl=(8, 120),
                     shared_prefix={"tokens": 1024, "groups": 2}, hash_block_tokens=256)


def _replay(f: dict, df) -> tuple[OnlineSimulation, dict[int, list[float]]]:
    """Feed `simulate`'s requests to an online simulation at their arrival times; record every token's time."""
    online = OnlineSimulation(load_fleet(f))
    arrivals = df.sort_values(["arrival_s", "request_id"])
    pending = list(arrivals.itertuples())
    times: dict[int, list[float]] = {}
    seen: dict[int, int] = {}
    by_rid = {}
    while pending or online.live:
        counts, nxt = online.poll()
        for rid, n in counts.items():
            old = seen.get(rid, 0)
            times.setdefault(rid, []).extend([online.now_s] * (n - old))
            seen[rid] = n
            req = by_rid[rid]
            if req.status != "incomplete":
                online.forget(req)
        t_next = min(nxt, pending[0].arrival_s if pending else math.inf)
        if not math.isfinite(t_next):
            break
        online.advance(t_next)
        while pending and pending[0].arrival_s <= online.now_s:
            r = pending.pop(0)
            req = online.submit(r.isl, r.osl, hash_ids=r.hash_ids, hash_block_tokens=256)
            assert req.rid == r.request_id
            by_rid[req.rid] = req
    return online, times


@pytest.mark.parametrize("name", list(FLEETS))
def test_online_matches_simulate(name):
    f = FLEETS[name]
    res = simulate(f, WORKLOAD, seed=3)
    sim_df = res.requests.copy()
    # simulate's requests with their prefix ids (the frame does not carry them): rebuild from the workload
    from lpxsim.serving.sim import Simulation
    from lpxsim.serving.workload import load_workload

    ref = Simulation(load_fleet(f), load_workload(WORKLOAD), seed=3)
    ids = {r.rid: r.hash_ids for r in ref.workload.arrivals()}
    sim_df["hash_ids"] = sim_df["request_id"].map(ids)
    online, times = _replay(f, sim_df)
    done = {r.rid: r for r in online.finished}
    assert len(done) == len(sim_df)
    for row in sim_df.itertuples():
        r = done[row.request_id]
        assert r.status == row.status
        assert r.first_token_s == pytest.approx(row.first_token_s, rel=1e-12, abs=1e-12)
        assert r.finish_s == pytest.approx(row.finish_s, rel=1e-12, abs=1e-12)
        t = times[row.request_id]
        assert len(t) == row.osl  # every token was read, none twice
        assert t[0] == pytest.approx(row.first_token_s, abs=1e-9)
        assert t[-1] == pytest.approx(row.finish_s, abs=1e-9)
        assert np.all(np.diff(t) >= 0)
    # the tokens read between events reproduce the simulated TPOT
    tpot = [(times[r.request_id][-1] - times[r.request_id][0]) / (r.osl - 1) for r in sim_df.itertuples() if r.osl > 1]
    assert np.allclose(tpot, sim_df[sim_df["osl"] > 1]["tpot_s"].to_numpy(), rtol=1e-9)


def test_abort_frees_everything():
    f = FLEETS["gpu-2"]
    online = OnlineSimulation(load_fleet(f))
    reqs = [online.submit(2000, 400) for _ in range(40)]
    online.advance(0.05)
    counts, _ = online.poll()
    assert any(0 < counts[r.rid] < r.osl for r in reqs)  # some are mid-stream when their clients leave
    for r in reqs:
        online.abort(r)
    t = online.now_s
    while online._pending_abort:
        t = min(online.next_event_s(), t + 1.0)
        online.advance(t)
    assert all(r.status == ABORTED for r in reqs)
    for w in online.workers:
        assert w.n_dec == 0 and not w.prefilling and not w.waiting and not w.finish_heap
        assert w.queued_tokens == 0 and w.ctx_sum == 0
        assert w.kv.used == pytest.approx(w.kv.evictable, abs=1.0)  # only unreferenced cached units remain
    assert online.sim.in_system == 0
    # the fleet still serves after the aborts
    r = online.submit(500, 10)
    online.advance(online.now_s + 10.0)
    assert r.status == "completed"


def test_stream_sends_every_token_of_a_request_finished_before_the_pump_polled():
    """The simulation may finish a request while advancing for another one's arrival; its stream must still
    count all of its tokens (a load run once ended two streams one token short)."""
    import asyncio

    from lpxsim.serve.bridge import Bridge

    async def scenario():
        b = Bridge(OnlineSimulation(load_fleet(FLEETS["gpu-2"])), time_scale=1.0)
        clock = [0.0]
        b.sim_now = lambda: clock[0]
        a = b.submit(100, 5)
        clock[0] = 10.0  # much later: `a` completes inside the next submit's advance, before any poll
        b.submit(100, 5)
        assert a.req.status == "completed" and a.tokens == 0
        return a.available

    assert asyncio.run(scenario()) == 5
