"""Invariants every run must keep: completion or a stated rejection, exact token counts, TTFT bounds,
KV within capacity, bit-for-bit determinism, Little's law."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.serving import simulate
from lpxsim.serving.backends import make_step_model
from lpxsim.serving.config import load_fleet
from lpxsim.serving.workload import load_workload
from lpxsim.step.protocol import PrefillChunk
from serving_fixtures import fleet, link, pool, synthetic

pytestmark = pytest.mark.usefixtures("serving_double")

TIGHT = pool(system="h100-hgx", model="llama-3.1-8b", workers=2, gpus_per_worker=1, memory_fraction=0.13,
             max_batch=64)


def _check_common(res) -> None:
    df = res.requests
    assert set(df["status"]) <= {"completed", "rejected"}
    rej = df[df["status"] == "rejected"]
    assert (rej["reason"].str.len() > 0).all()
    done = df[df["status"] == "completed"]
    # every completed request generated exactly its requested output length
    assert (res.pools["output_tokens"].sum()) >= done["osl"].sum()
    assert (done["finish_s"] >= done["first_token_s"]).all()
    assert (done["first_token_s"] > done["arrival_s"]).all()
    assert not res.summary["kv_over_capacity"]


@pytest.mark.parametrize("name,f", [
    ("aggregated", fleet(pool(workers=2))),
    ("lpx", fleet(pool(system="lpx"))),
    ("pd", fleet(pool("pre", workers=2, role="prefill"), pool("dec", system="lpx", role="decode"),
                 links=[link("pre", "dec")])),
    ("afd", fleet(pool("att", workers=2, role="attention"), pool("ffn", system="lpx", role="ffn"),
                  links=[link("att", "ffn")])),
    ("drafter", fleet(pool("tgt", workers=2, role="target"),
                      pool("dr", system="lpx", model="gemma-4-assistant", role="drafter", chips_per_worker=64),
                      links=[link("tgt", "dr")])),
])
def test_every_request_completes_with_its_tokens(name, f):
    res = simulate(f, synthetic(n=150), seed=3)
    _check_common(res)
    assert res.summary["completed"] == 150, name
    # tokens produced by the workers == tokens requested
    assert res.pools["output_tokens"].sum() == res.requests["osl"].sum()


def test_preemption_keeps_kv_within_capacity_and_tokens_exact():
    res = simulate(fleet(TIGHT), synthetic(n=120, rate=50.0, isl=(2000, 6000), osl=(200, 1500)), seed=1)
    _check_common(res)
    assert res.summary["preemptions"] > 0  # the test must exercise preemption
    assert res.summary["completed"] == 120
    assert res.pools["output_tokens"].sum() == res.requests["osl"].sum()  # recompute re-emits no token twice
    assert (res.pools["kv_occupancy_peak"] <= 1.0 + 1e-9).all()


def test_oversized_request_is_rejected_with_reason():
    wl = synthetic(n=20, isl={"kind": "fixed", "value": 60000}, osl={"kind": "fixed", "value": 10})
    res = simulate(fleet(TIGHT), wl, seed=0)
    assert res.summary["rejected"] == 20
    assert res.requests["reason"].str.startswith("kv_capacity").all()


def test_unrouted_class_is_rejected():
    f = fleet(pool("a"), pool("b"), router={"classes": {"interactive": ["a"]}})
    wl = synthetic(n=50, classes=[{"name": "interactive"}, {"name": "batch"}])
    res = simulate(f, wl, seed=0)
    df = res.requests
    assert (df.loc[df.klass == "batch", "status"] == "rejected").all()
    assert (df.loc[df.klass == "interactive", "status"] == "completed").all()
    assert (df.loc[df.klass == "interactive", "pool"] == "a").all()


def test_ttft_at_least_the_prefill_cost():
    f = fleet(pool(workers=2))
    res = simulate(f, synthetic(n=100), seed=2)
    step = make_step_model(load_fleet(f).pools[0])
    df = res.requests
    own = np.array([step.prefill(PrefillChunk(int(i), 0, 1)).latency_s for i in df["isl"]])
    assert (df["ttft_s"].to_numpy() >= own * (1 - 1e-12)).all()


@pytest.mark.parametrize("f", [
    fleet(pool(workers=3), router={"temperature": 0.5}),
    fleet(pool("tgt", role="target"), pool("dr", system="lpx", model="gemma-4-assistant", role="drafter",
                                            chips_per_worker=64), links=[link("tgt", "dr")],
          speculation={"adaptive": True}),
])
def test_same_seed_same_results_bit_for_bit(f):
    wl = synthetic(n=120, shared_prefix={"tokens": 1024, "groups": 3})
    a = simulate(f, wl, seed=7)
    b = simulate(f, wl, seed=7)
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    assert a.summary == b.summary
    c = simulate(f, wl, seed=8)
    assert not a.requests["arrival_s"].equals(c.requests["arrival_s"])


def test_littles_law_on_a_steady_run():
    res = simulate(fleet(pool(workers=2)), synthetic(n=4000, rate=30.0), seed=5)
    s, df = res.summary, res.requests
    # the engine's own count of requests in the system, integrated over time, matches the records
    assert s["little_L"] == pytest.approx(df["e2e_s"].sum() / s["makespan_s"], rel=1e-9)
    # Little's law in a steady window in the middle of the run: L = lambda W within 2 %
    t0, t1 = 0.2 * s["makespan_s"], 0.8 * s["makespan_s"]
    a, f = df["arrival_s"].to_numpy(), df["finish_s"].to_numpy()
    time_in_window = (np.minimum(f, t1) - np.maximum(a, t0)).clip(min=0).sum()
    L = time_in_window / (t1 - t0)
    inside = (a >= t0) & (a < t1)
    lam = inside.sum() / (t1 - t0)
    W = (f - a)[inside].mean()
    assert pytest.approx(lam * W, rel=0.02) == L
    assert L > 1.0  # a loaded system, not an empty one


def test_no_sequence_decodes_faster_than_a_batch_of_one_on_a_pipelined_rack():
    """On an LPX rack a prefill's first token leaves after its latency, mid-step: the sequence may only
    join the decode set at a step boundary, never be credited with steps that ran before it joined."""
    f = fleet(pool(system="lpx"))
    res = simulate(f, synthetic(n=300, rate=200.0, isl=(256, 2048), osl=(2, 64)), seed=4)
    step = make_step_model(load_fleet(f).pools[0])
    from lpxsim.step.protocol import DecodeBatch

    floor = step.decode_step(DecodeBatch.uniform(1, 1)).latency_s
    df = res.requests
    assert ((df["finish_s"] - df["first_token_s"]) >= (df["osl"] - 1) * floor * (1 - 1e-9)).all()


def test_a_sequence_that_nearly_fills_the_worker_still_finishes():
    """One sequence whose final KV is within a block of capacity: no preemption loop, it completes."""
    f = fleet(pool(system="h100-hgx", model="llama-3.1-8b", gpus_per_worker=1, memory_fraction=0.13))
    step = make_step_model(load_fleet(f).pools[0])
    per_token = step.kv_bytes(2) - step.kv_bytes(1)
    tokens = int(step.kv_capacity_bytes() // per_token) - 40  # a little under the ceiling
    wl = {"kind": "synthetic", "num_requests": 3, "arrival": {"process": "closed", "concurrency": 2},
          "isl": tokens - 200, "osl": 200}
    res = simulate(f, wl, seed=0, horizon_s=600.0)
    assert (res.requests["status"] == "completed").all()
    assert res.pools["output_tokens"].sum() == 600


def test_shapes_the_backend_refuses_are_skipped_not_fatal(monkeypatch):
    """A backend may refuse a micro-batch shape (DoesNotFit); the worker splits the batch further instead."""
    from lpxsim.core.errors import DoesNotFit
    from lpxsim.serving.sim import Simulation

    f = load_fleet(fleet(pool(system="lpx", max_batch=8)))
    sim = Simulation(f, load_workload(synthetic(n=60, rate=100.0)), seed=0)
    w = sim.pools["p"].workers[0]
    inner = w.model.decode_step

    def picky(batch):
        if batch.size > 3:
            raise DoesNotFit("layout", "too big")
        return inner(batch)

    monkeypatch.setattr(w.model, "decode_step", picky)  # the step model is shared within the process
    sim.run()
    assert all(r.status == "completed" for r in sim.requests)
    assert max(k[0] for k in w._period) > 3  # batches above the refused size still ran, split into micro-batches


def test_prefill_chunks_the_backend_refuses_are_halved(monkeypatch):
    from lpxsim.core.errors import DoesNotFit
    from lpxsim.serving.sim import Simulation

    f = load_fleet(fleet(pool()))
    sim = Simulation(f, load_workload(synthetic(n=30, isl=(3000, 6000))), seed=0)
    w = sim.pools["p"].workers[0]
    inner = w.model.prefill

    def picky(chunk):
        if chunk.tokens * chunk.sequences > 1000:
            raise DoesNotFit("layout", "chunk too big")
        return inner(chunk)

    monkeypatch.setattr(w.model, "prefill", picky)  # the step model is shared within the process
    sim.run()
    assert all(r.status == "completed" for r in sim.requests)
    assert w.budget <= 1000
