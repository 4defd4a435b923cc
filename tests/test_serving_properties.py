"""Property-based check of the run invariants over random small fleets and workloads (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.serving import simulate
from serving_fixtures import fleet, link, pool

pytestmark = pytest.mark.usefixtures("serving_double")

TOPOLOGIES = {
    "aggregated": lambda mf: fleet(pool(system="h100-hgx", model="llama-3.1-8b", workers=2, gpus_per_worker=1,
                                        memory_fraction=mf, max_batch=32)),
    "pd": lambda mf: fleet(pool("pre", system="h100-hgx", model="llama-3.1-8b", gpus_per_worker=1, role="prefill",
                                memory_fraction=mf),
                           pool("dec", system="h100-hgx", model="llama-3.1-8b", gpus_per_worker=1, role="decode",
                                memory_fraction=mf),
                           links=[link("pre", "dec")]),
}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topology=st.sampled_from(sorted(TOPOLOGIES)),
    mem=st.floats(0.12, 0.3),
    n=st.integers(1, 60),
    rate=st.floats(1.0, 200.0),
    isl_hi=st.integers(16, 6000),
    osl_hi=st.integers(1, 800),
    shared=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_invariants_hold_on_random_runs(topology, mem, n, rate, isl_hi, osl_hi, shared, seed):
    wl = {"kind": "synthetic", "num_requests": n, "arrival": {"process": "poisson", "rate": rate},
          "isl": {"kind": "uniform", "low": 1, "high": isl_hi}, "osl": {"kind": "uniform", "low": 1, "high": osl_hi}}
    if shared:
        wl["shared_prefix"] = {"tokens": 1024, "groups": 2}
        wl["hash_block_tokens"] = 64
    res = simulate(TOPOLOGIES[topology](mem), wl, seed=seed, horizon_s=3600.0)
    df = res.requests
    assert len(df) == n
    assert set(df["status"]) <= {"completed", "rejected"}
    done = df[df.status == "completed"]
    assert res.pools["output_tokens"].sum() == done["osl"].sum()
    assert (done["first_token_s"] > done["arrival_s"]).all() and (done["finish_s"] >= done["first_token_s"]).all()
    assert not res.summary["kv_over_capacity"]
    assert (res.pools["kv_occupancy_peak"] <= 1.0 + 1e-9).all()
