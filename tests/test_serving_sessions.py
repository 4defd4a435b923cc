"""Agentic sessions as served (issue 27): KV kept between turns, retention policies past capacity, offload tiers.

The serving mechanics run on the test double (tests/analytic_double.py); every expected time below is
the double's own step cost or a tier's bytes over bandwidth, never a published figure.
"""

from __future__ import annotations

import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.serving import simulate
from lpxsim.serving.backends import make_step_model
from lpxsim.serving.config import load_fleet
from lpxsim.serving.kvcache import KvStore
from lpxsim.serving.workload import load_workload, session_workload
from lpxsim.step.protocol import PrefillChunk
from serving_fixtures import fleet, pool

pytestmark = pytest.mark.usefixtures("serving_double")

# One TP8 Rubin replica whose KV share is cut to ~15 GB (about 160K tokens of Gemma 4 31B), so a few
# long sessions fill it.
SMALL = {"memory_fraction": 0.02}


def _sessions(n, turns, first, new, osl=512, think=0.5, conc=None, **session):
    return {"name": "s", "kind": "agentic", "num_requests": n,
            "arrival": {"process": "closed", "concurrency": conc or n},
            "session": {"turns": turns, "first_isl": first, "new_tokens": new, "think_s": think, **session},
            "osl": osl}


def _step(f):
    return make_step_model(load_fleet(f).pools[0])


def test_later_turn_ttft_is_the_prefill_of_its_new_tokens_alone():
    f = fleet(pool())
    # 4,096 + 512 output = 9 whole 512-token units: the next turn's 512 new tokens are exactly what is uncached
    df = simulate(f, _sessions(1, 3, 4096, 512, think=1.0), seed=0).requests.sort_values("turn")
    step = _step(f)
    first = step.prefill(PrefillChunk(tokens=4096, context=0, sequences=1)).latency_s
    later = step.prefill(PrefillChunk(tokens=512, context=4608, sequences=1)).latency_s
    assert df["ttft_s"].iloc[0] == pytest.approx(first, rel=1e-9)
    assert df["ttft_s"].iloc[1] == pytest.approx(later, rel=1e-9)
    assert df["cached_tokens"].tolist() == [0, 4608, 4608 + 512 + 512]
    assert df["ttft_s"].iloc[1] < 0.5 * df["ttft_s"].iloc[0]


@pytest.mark.parametrize("policy", ["lru", "evict_idle", "hold"])
def test_past_capacity_evictions_happen_and_the_hit_rate_falls(policy):
    f = fleet(pool(**SMALL), retention={"policy": policy})
    few = simulate(f, _sessions(2, 8, 20_000, 2_000), seed=0).summary
    many = simulate(f, _sessions(24, 8, 20_000, 2_000), seed=0).summary
    assert few["evictions"] == 0 and few["prefix_hit_rate"] > 0.8
    assert many["evictions"] > 0
    assert many["prefix_hit_rate"] < few["prefix_hit_rate"] - (0.0 if policy == "hold" else 0.3)
    assert many["completed"] == 24 * 8 and many["rejected"] == 0


def test_hold_keeps_the_hit_rate_where_block_lru_thrashes():
    wl = _sessions(24, 8, 20_000, 2_000)
    rate = {p: simulate(fleet(pool(**SMALL), retention={"policy": p}), wl, seed=0).summary for p in ("lru", "hold")}
    assert rate["hold"]["prefix_hit_rate"] > rate["lru"]["prefix_hit_rate"] + 0.3
    assert rate["hold"]["ttft_by_turn"]["later"]["p50"] < rate["lru"]["ttft_by_turn"]["later"]["p50"]


def test_hold_never_exceeds_what_fits_and_reports_residency():
    s = simulate(fleet(pool(**SMALL)), _sessions(24, 8, 20_000, 2_000), seed=0)
    p = s.pools.iloc[0]
    assert not p["kv_over_capacity"]
    assert 1 <= s.summary["sessions_resident_max"] < 24
    assert len(p["timeline_t_s"]) == len(p["kv_occupancy_timeline"]) == len(p["sessions_resident_timeline"]) > 10
    assert max(p["kv_occupancy_timeline"]) <= 1.0 + 1e-9
    assert p["sessions_resident_timeline"][-1] == 0  # every session ended: none is held


def _second_turn(tier, policy="evict_idle"):
    f = fleet(pool(**({"offload": tier} if tier else {}), **SMALL), retention={"policy": policy})
    # two sessions of 122,880 + 512 output tokens (241 units, ~11.5 GB): only one fits, so each evicts the other
    df = simulate(f, _sessions(2, 2, 122_880, 512, think=30.0), seed=0).requests
    return df[(df["session"] == 0) & (df["turn"] == 1)].iloc[0], _step(f)


def test_a_reload_from_the_offload_tier_costs_bytes_over_bandwidth():
    tier = {"name": "host", "capacity_bytes": 1e12, "bandwidth_Bps": 2e12, "latency_s": 20e-6}
    a1, step = _second_turn(tier)
    cached = 241 * 512
    assert a1["reloaded_tokens"] == cached and a1["cached_tokens"] == cached
    reload_s = step.kv_bytes(cached) / 2e12 + 20e-6
    prefill_s = step.prefill(PrefillChunk(tokens=512, context=cached, sequences=1)).latency_s
    assert a1["ttft_s"] == pytest.approx(reload_s + prefill_s, rel=1e-9)
    # without a tier the same turn re-prefills its whole context, which takes longer
    b1, _ = _second_turn(None)
    assert b1["cached_tokens"] == 0 and b1["ttft_s"] > 2 * a1["ttft_s"]


def test_a_slow_tier_is_not_used_when_prefilling_again_is_faster():
    slow = {"name": "disk", "capacity_bytes": 1e12, "bandwidth_Bps": 5e9, "latency_s": 1e-3}
    a1, step = _second_turn(slow)
    cached = 241 * 512
    assert step.kv_bytes(cached) / 5e9 > step.prefill(PrefillChunk(tokens=8192, context=cached // 2,
                                                                    sequences=1)).latency_s * cached / 8192
    assert a1["reloaded_tokens"] == 0 and a1["cached_tokens"] == 0


def test_a_first_turn_that_can_never_fit_is_rejected_with_its_reason():
    f = fleet(pool(**SMALL))
    s = simulate(f, _sessions(3, 2, 300_000, 100), seed=0).summary  # past the 262K window
    assert s["rejected"] == 3 and list(s["reject_reasons"]) == [
        "context_window: the prompt is longer than the model's context window"]
    s = simulate(f, _sessions(3, 2, 200_000, 100), seed=0).summary  # in the window, past the ~15 GB of KV
    assert s["rejected"] == 3 and next(iter(s["reject_reasons"])).startswith("kv_capacity")


def test_a_context_past_the_cap_is_truncated_and_re_prefilled():
    f = fleet(pool())
    df = simulate(f, _sessions(1, 4, 8192, 4096, osl=512, context_cap=16_384), seed=0).requests.sort_values("turn")
    # turn 1: 8,192 + 512 + 4,096 = 12,800 (cached); turn 2 would be 17,408 > 16,384: truncated, nothing reused
    assert df["isl"].tolist() == [8192, 12_800, 16_384, 16_384]
    assert df["cached_tokens"].tolist()[:3] == [0, 8704, 0]


def test_agentic_yaml_takes_new_tokens_as_a_distribution_and_tool_tokens_as_its_old_name():
    w = load_workload({"kind": "agentic", "num_requests": 2,
                       "session": {"new_tokens": {"kind": "uniform", "low": 1000, "high": 3000}, "turns": 200}})
    assert w.session.new_tokens.kind == "uniform"
    assert load_workload({"kind": "agentic", "num_requests": 1, "session": {"tool_tokens": 7}}).session.new_tokens.value == 7


def test_session_shape_becomes_an_agentic_workload():
    from lpxsim.engine.query import SessionShape

    shape = SessionShape(first_isl=20_000, new_tokens=2_000, turns=12, think_s=1.5, context_cap=100_000)
    w = session_workload(shape, sessions=4, osl=300)
    assert w.kind == "agentic" and w.num_requests == 4 and w.arrival.concurrency == 4
    assert (w.session.first_isl.value, w.session.new_tokens.value, w.session.turns.value) == (20_000, 2_000, 12)
    assert w.session.think_s.value == 1.5 and w.session.context_cap == 100_000 and w.osl.value == 300
    df = simulate(fleet(pool()), w, seed=0).requests
    assert len(df) == 48 and (df.groupby("session")["turn"].max() == 11).all()


def test_kvstore_evicts_the_longest_idle_session_whole():
    kv = KvStore(100.0, session_whole=True)
    chains = {0: range(0, 2), 1: range(100, 102), 2: range(200, 202)}  # each session's chain of two units
    for sid, ids in chains.items():
        kv.charge(20.0)
        kv.insert(ids, [10.0, 10.0], referenced=True, session=sid, chain=ids.start)
        kv.release(ids, session=sid)
    assert kv.resident.n == 3 and kv.evictable == 60.0 and kv.match(range(0, 5)) == 2
    kv.acquire(chains[0], session=0)  # session 0 comes back: 1 is now the longest idle
    kv.release(chains[0], session=0)
    assert kv.make_room(50.0)  # 40 free + session 1 (20): one whole session goes
    assert kv.evictions == 1 and kv.match(chains[1]) == 0 and kv.match(chains[0]) == 2 and kv.match(chains[2]) == 2
    assert kv.resident.n == 2 and not kv.holds(100)
    assert not kv.make_room(70.0, spare_sessions=True)  # hold: a newcomer may not evict a held session
    kv.close_session(2, chains[2])  # ended: its chain is open to newcomers now, and goes first
    assert kv.resident.n == 1 and kv.make_room(70.0, spare_sessions=True) and kv.match(chains[2]) == 0
    assert kv.match(chains[0]) == 2 and kv.used == 20.0


def test_kvstore_block_lru_evicts_a_chain_tail_first():
    kv = KvStore(100.0)
    kv.charge(30.0)
    kv.insert(range(0, 3), [10.0] * 3, referenced=True, session=0, chain=0)
    kv.release(range(0, 3), session=0)
    assert kv.make_room(80.0) and kv.evictions == 1 and kv.match(range(0, 3)) == 2
    kv.acquire(range(0, 2), session=0)  # pinned whole: nothing more to evict
    assert not kv.make_room(90.0) and kv.match(range(0, 3)) == 2


def test_pd_a_later_turn_sends_only_its_new_blocks_and_both_sides_keep_the_session():
    from lpxsim.serving.sim import Simulation
    from serving_fixtures import link

    f = load_fleet(fleet(pool("pre", role="prefill"), pool("dec", system="lpx", role="decode"),
                         links=[link("pre", "dec")]))
    sim = Simulation(f, load_workload(_sessions(1, 3, 4096, 512, think=1.0)), seed=0).run()
    step = sim.pools["pre"].workers[0].model
    sent = sim.links["dec|pre"].bytes_sent
    # the prompt and the prefill's one token; turns 1 and 2: only what follows the 9 and 11 units held
    want = (step.kv_bytes(4097) + step.kv_bytes(5121) - step.kv_bytes(4608)
            + step.kv_bytes(6145) - step.kv_bytes(5632))
    assert sent == pytest.approx(want, rel=1e-12)
    reqs = sorted(sim.requests, key=lambda r: r.turn)
    # the prefill side holds the prompts it prefilled, not the outputs decoded on the other side: a later turn
    # prefills the previous output and its new tokens
    assert [r.cached_tokens for r in reqs] == [0, 4096, 5120]
    assert sim.resident_count("dec").max == 1 and sim.resident_count("pre").max == 1


def test_afd_the_attention_side_holds_the_sessions():
    from serving_fixtures import link

    f = fleet(pool("att", role="attention"), pool("ffn", system="lpx", role="ffn"), links=[link("att", "ffn")])
    res = simulate(f, _sessions(2, 4, 8192, 1024), seed=0)
    by = res.pools.set_index("pool")
    assert by.loc["att", "sessions_resident_max"] == 2 and by.loc["ffn", "sessions_resident_max"] == 0
    assert res.summary["prefix_hit_rate"] > 0.7


def test_the_external_drafter_holds_its_own_kv_of_every_session():
    from lpxsim.serving.sim import Simulation
    from serving_fixtures import link

    def target_kv(drafter_chips):
        f = fleet(pool("tgt", role="target"),
                  pool("dr", system="lpx", model="gemma-4-assistant", role="drafter", chips_per_worker=drafter_chips),
                  links=[link("tgt", "dr")])
        return Simulation(load_fleet(f), load_workload(_sessions(1, 1, 1000, 10)), seed=0).pools["tgt"].workers[0]

    big, small = target_kv(256), target_kv(16)
    assert big.kv.capacity == big.model.kv_capacity_bytes()  # a roomy drafter does not bind
    d = small.drafter
    ratio = small.model.kv_bytes(32_768) / d.kv_bytes(32_768)
    assert small.kv.capacity == pytest.approx(d.kv_capacity_bytes() * ratio)
    assert small.kv.capacity < big.kv.capacity


def test_a_trace_with_sessions_replays_with_retention():
    res = simulate(fleet(pool()), {"name": "t", "kind": "trace", "trace": "tracelab-agent"}, seed=0)
    df = res.requests
    assert set(df["session"]) == {0, 1} and (df.groupby("session")["turn"].max() > 3).all()
    later = df[df["turn"] > 0]
    assert (later["cached_tokens"] > 0).mean() > 0.5 and res.summary["prefix_hit_rate"] > 0.3
    assert res.summary["sessions_resident_max"] >= 1


def test_hold_moves_a_session_that_would_wait_to_a_worker_with_room():
    from lpxsim.serving.request import Request
    from lpxsim.serving.sim import Simulation

    sim = Simulation(load_fleet(fleet(pool(workers=2, **SMALL))), load_workload(_sessions(1, 1, 1000, 10)), seed=0)
    w0, w1 = sim.pools["p"].workers
    w0.kv.charge(w0.kv.capacity)  # w0's KV is all in use by running sequences
    req = Request(0, 0.0, 20_000, 10, session_hash_base=0, session=0)
    w0.submit(req)
    assert req.worker == 1 and list(w1.prefilling) == [req] and not w0.parked and w0.queued_tokens == 0
    w1.kv.charge(w1.kv.capacity)  # now neither has room: a newcomer waits where it was sent
    late = Request(1, 0.0, 20_000, 10, session_hash_base=1 << 24, session=1)
    w0.submit(late)
    assert list(w0.parked) == [late]


@pytest.mark.parametrize("policy", ["lru", "evict_idle", "hold"])
def test_every_turn_runs_when_truncating_sessions_exceed_the_kv(policy):
    # The tour's retention workload scaled to the small replica: 10 sessions whose contexts reach the 24K cap
    # (more than the KV holds for all of them) and truncate, each truncation starting a new chain. A session's
    # stale chain must stop being held when its truncated turn arrives, or under `hold` every session ends up
    # parked behind its own stale KV with nothing running.
    wl = {"name": "s", "kind": "agentic", "num_requests": 10, "arrival": {"process": "poisson", "rate": 0.5},
          "session": {"turns": 16, "first_isl": 2_000, "new_tokens": {"kind": "uniform", "low": 1_200, "high": 1_700},
                      "think_s": 2.0, "context_cap": 24_000},
          "osl": 256}
    res = simulate(fleet(pool(**SMALL), retention={"policy": policy}), wl, seed=0)
    s, d = res.summary, res.requests
    truncated = d[d["isl"] == 24_000]  # a truncated turn keeps the cap's tokens and reuses nothing
    assert len(truncated) > 10 and (truncated["cached_tokens"] == 0).all()
    assert s["evictions"] > 0 and res.pools.iloc[0]["kv_occupancy_peak"] > 0.99
    assert s["completed"] == 10 * 16 and s["rejected"] == 0
    assert s.get("incomplete", 0) == 0
    assert res.pools.iloc[0]["sessions_resident_timeline"][-1] == 0
