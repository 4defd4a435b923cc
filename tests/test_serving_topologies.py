"""PD, AFD, external drafter and class routing behave as their mechanisms say."""

from __future__ import annotations

import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.core.errors import UserError
from lpxsim.serving import simulate
from lpxsim.serving.afd import AfdStepModel
from lpxsim.serving.backends import make_step_model
from lpxsim.serving.config import load_fleet
from lpxsim.serving.spec import Link
from lpxsim.serving.worker import SharedResource
from lpxsim.step.protocol import DecodeBatch
from serving_fixtures import fleet, link, pool, synthetic

pytestmark = pytest.mark.usefixtures("serving_double")

PD = fleet(pool("pre", workers=2, role="prefill"), pool("dec", system="lpx", role="decode"),
           links=[link("pre", "dec")])


def test_pd_moves_kv_over_the_link_and_decodes_on_the_decode_pool():
    res = simulate(PD, synthetic(n=100), seed=1)
    df = res.requests
    multi = df[df.osl > 1]
    assert (multi["pool"] == "pre").all() and (multi["decode_pool"] == "dec").all()
    # the KV transfer takes at least bytes / bandwidth + latency
    step = make_step_model(load_fleet(PD).pools[0])
    need = multi["isl"].map(lambda n: step.kv_bytes(n + 1) / 100e9 + 5e-6)
    assert (multi["handoff_s"] >= need * (1 - 1e-9)).all()
    slow = dict(PD, links=[link("pre", "dec", bandwidth_Bps=1e9)])
    res_slow = simulate(slow, synthetic(n=100), seed=1)
    assert res_slow.summary["e2e_s"]["mean"] > res.summary["e2e_s"]["mean"]


def test_pd_needs_a_link():
    with pytest.raises(UserError, match="links"):
        simulate(dict(PD, links=[]), synthetic(n=5), seed=0)


def _afd(bw: float, share_active: int, mb: int = 2) -> AfdStepModel:
    f = load_fleet(fleet(pool("att", role="attention"), pool("ffn", system="lpx", role="ffn"),
                         links=[link("att", "ffn")]))
    a = make_step_model(f.pools[0], part="attention")
    ff = make_step_model(f.pools[1], part="ffn")
    sh = SharedResource("ffn")
    sh.active = share_active
    return AfdStepModel(a, ff, Link("l", bw, 5e-6), sh, attention_per_ffn=4, micro_batches=mb)


def test_afd_activation_transfers_cost_time_and_contention_slows_it():
    b = DecodeBatch.uniform(64, 4096)
    fast, slow = _afd(1e12, 1).decode_step(b).latency_s, _afd(10e9, 1).decode_step(b).latency_s
    assert slow > fast
    # two crossings per layer per token at least: layers x 2 x latency
    assert fast >= 60 * 2 * 5e-6
    assert _afd(10e9, 4).decode_step(b).latency_s > slow  # four attention replicas share the link and FFN
    # ping-pong hides transfer behind the other micro-batch's attention
    assert _afd(100e9, 1, mb=2).decode_step(b).latency_s <= _afd(100e9, 1, mb=1).decode_step(b).latency_s


def test_afd_kv_lives_on_the_attention_side():
    m = _afd(100e9, 1)
    assert m.kv_capacity_bytes() == m.attention.kv_capacity_bytes()
    assert m.attention.weight_bytes < m.ffn.weight_bytes  # Gemma 4 31B: most weights are FFN


def _drafter_fleet(**spec):
    return fleet(pool("tgt", role="target"),
                 pool("dr", system="lpx", model="gemma-4-assistant", role="drafter", chips_per_worker=64),
                 links=[link("tgt", "dr")], speculation=spec)


def test_drafting_speed_rises_with_acceptance():
    wl = synthetic(n=60, osl={"kind": "fixed", "value": 300})
    lo = simulate(_drafter_fleet(), dict(wl, acceptance={"kind": "fixed", "value": 0.3}), seed=0)
    hi = simulate(_drafter_fleet(), dict(wl, acceptance={"kind": "fixed", "value": 0.9}), seed=0)
    assert hi.summary["tpot_s"]["p50"] < lo.summary["tpot_s"]["p50"]
    acc = hi.requests["spec_accepted"].sum() / (hi.requests["spec_rounds"].sum() * 4)
    assert 0.6 < acc < 0.9  # 0.9 per token, truncated at k = 4 drafts -> ~0.74 mean fraction accepted


def test_adaptive_draft_length_is_no_worse_than_a_bad_fixed_one():
    wl = synthetic(n=60, osl={"kind": "fixed", "value": 300}, acceptance={"kind": "fixed", "value": 0.95})
    fixed1 = simulate(_drafter_fleet(draft_tokens=1), wl, seed=0)
    adaptive = simulate(_drafter_fleet(adaptive=True, max_draft_tokens=8), wl, seed=0)
    assert adaptive.summary["tpot_s"]["p50"] < fixed1.summary["tpot_s"]["p50"]


def test_afd_requires_split_capable_backends():
    class Plain:
        name, chips, power_w = "plain", 1, 1.0

    with pytest.raises(UserError, match="attention"):
        AfdStepModel(Plain(), Plain(), Link("l", 1e9, 0), SharedResource("s"), 1)


def test_pd_sends_only_the_kv_the_decode_worker_lacks():
    wl = {"kind": "agentic", "num_requests": 2, "arrival": {"process": "closed", "concurrency": 1},
          "session": {"turns": 5, "first_isl": 20000, "tool_tokens": 2000, "think_s": 0.1}, "osl": 100}
    df = simulate(PD, wl, seed=0).requests.sort_values(["session", "turn"])
    first, later = df[df.turn == 0]["handoff_s"], df[df.turn > 0]["handoff_s"]
    assert later.max() < 0.5 * first.min()  # the session's earlier turns are already on the decode worker
    assert (df.groupby("session")["decode_worker"].nunique() == 1).all()


def test_pd_kv_waits_on_the_prefill_worker_until_a_decode_worker_takes_the_request():
    """A decode pool with room for one sequence: the other prompts' KV stays charged to the prefill worker while
    they wait (no KV is in neither place), crosses only once a decode worker has allocated it, and the first
    token leaves with the decode worker's stream after that."""
    one = fleet(pool("pre", role="prefill"), pool("dec", system="lpx", role="decode", max_batch=1),
                links=[link("pre", "dec")])
    burst = synthetic(n=8, rate=1e6, isl=(4096, 4096), osl=(2000, 2000))
    res = simulate(one, burst, seed=0)
    df = res.requests.sort_values("decode_start_s")
    assert (df["status"] == "completed").all()
    pre = res.pools.set_index("pool").loc["pre"]
    prompt = make_step_model(load_fleet(one).pools[0]).kv_bytes(4097)
    # each prompt waits on the prefill worker, KV charged, from the first decode start at latest to its own
    held_s = pre["kv_occupancy_mean"] * pre["kv_capacity_bytes"] * res.summary["makespan_s"] / prompt
    assert held_s >= (df["decode_start_s"] - df["decode_start_s"].min()).sum() * (1 - 1e-9) > 0
    # each crosses after its decode worker took it, and its first token leaves when it has arrived
    assert (df["first_token_s"] >= df["decode_start_s"] + df["handoff_s"] - 1e-12).all()
    assert (df["decode_start_s"].diff().dropna() > 0).all()  # one at a time


def test_afd_attention_replicas_contend_for_a_shared_ffn_replica():
    def run(ffn_workers: int):
        f = fleet(pool("att", workers=4, role="attention"),
                  pool("ffn", system="lpx", role="ffn", workers=ffn_workers),
                  links=[link("att", "ffn", bandwidth_Bps=5e9)])
        return simulate(f, synthetic(n=200, rate=200.0, osl=(64, 128)), seed=0)

    shared, dedicated = run(1), run(4)
    assert shared.summary["tpot_s"]["p50"] > 1.2 * dedicated.summary["tpot_s"]["p50"]
    ffn = shared.pools.set_index("pool").loc["ffn"]
    assert 0.5 < ffn["utilisation"] <= 1.0 + 1e-9


def test_class_routing_sends_each_class_to_its_pool():
    f = fleet(pool("lpx", system="lpx"), pool("rubin", workers=2),
              router={"classes": {"interactive": ["lpx"], "throughput": ["rubin"]}})
    wl = synthetic(n=120, classes=[{"name": "interactive", "weight": 1}, {"name": "throughput", "weight": 2}])
    df = simulate(f, wl, seed=0).requests
    assert (df.loc[df.klass == "interactive", "pool"] == "lpx").all()
    assert (df.loc[df.klass == "throughput", "pool"] == "rubin").all()
    assert 20 < (df.klass == "interactive").sum() < 60
    plain = simulate(f, synthetic(n=40), seed=0).requests  # no classes in the workload: any entry pool
    assert (plain["status"] == "completed").all() and set(plain["pool"]) <= {"lpx", "rubin"}
