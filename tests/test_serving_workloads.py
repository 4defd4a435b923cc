"""Workload generators and trace loaders (shipped traces, and the publishers' other formats)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.core.errors import UserError
from lpxsim.serving import simulate
from lpxsim.serving.traces import TRACES, load_trace
from lpxsim.serving.workload import Dist, load_workload, make_workload
from serving_fixtures import fleet, pool, synthetic

pytestmark = pytest.mark.usefixtures("serving_double")


def _take(cfg_dict, n=None, seed=0):
    wl = make_workload(load_workload(cfg_dict), np.random.default_rng(seed))
    out = list(wl.arrivals())
    return out if n is None else out[:n]


def test_poisson_and_gamma_rates_and_burstiness():
    p = _take(synthetic(n=20000, rate=50.0))
    g = _take(synthetic(n=20000, rate=50.0, arrival={"process": "gamma", "rate": 50.0, "cv": 3.0}))
    for reqs in (p, g):
        t = np.array([r.arrival_s for r in reqs])
        assert len(reqs) / t[-1] == pytest.approx(50.0, rel=0.05)
    cv = lambda rs: np.std(np.diff([r.arrival_s for r in rs])) / np.mean(np.diff([r.arrival_s for r in rs]))  # noqa: E731
    assert cv(p) == pytest.approx(1.0, abs=0.05) and cv(g) == pytest.approx(3.0, rel=0.15)


def test_duration_limits_arrivals():
    reqs = _take(dict(synthetic(rate=10.0), num_requests=None, duration_s=30.0))
    assert reqs and max(r.arrival_s for r in reqs) <= 30.0 and len(reqs) == pytest.approx(300, rel=0.2)


@pytest.mark.parametrize("d,lo,hi", [
    ({"kind": "uniform", "low": 100, "high": 200}, 100, 200),
    ({"kind": "lognormal", "median": 1000, "sigma": 0.5, "min": 10, "max": 5000}, 10, 5000),
    (7, 7, 7),
])
def test_distributions(d, lo, hi):
    x = Dist.model_validate(d).sample(np.random.default_rng(0), 5000)
    assert x.min() >= lo and x.max() <= hi


def test_bad_workload_names_the_field():
    with pytest.raises(UserError, match=r"workload\.isl"):
        load_workload({"kind": "synthetic", "num_requests": 1, "isl": {"kind": "uniform", "low": 5}})
    with pytest.raises(UserError, match="closed-loop arrivals need concurrency"):
        load_workload({"kind": "synthetic", "num_requests": 1, "arrival": {"process": "closed"}})


@pytest.mark.parametrize("name,rows", [("azure-code", 8819), ("azure-conv", 19366),
                                       ("mooncake-conversation", 12031), ("mooncake-synthetic", 3993),
                                       ("tracelab-agent", 19)])
def test_shipped_traces_load(name, rows):
    df = load_trace(name)
    assert len(df) == rows and name in TRACES
    assert df["arrival_s"].iloc[0] == 0.0 and df["arrival_s"].is_monotonic_increasing
    assert (df["isl"] >= 1).all() and (df["osl"] >= 1).all()
    if name.startswith("mooncake"):
        assert (df["hash_ids"].map(len) == np.ceil(df["isl"] / 512)).all()


def test_azure_code_trace_statistics_match_its_readme():
    df = load_trace("azure-code")
    assert df["isl"].mean() == pytest.approx(2048, abs=1) and df["osl"].median() == 13
    assert df["arrival_s"].iloc[-1] / 60 == pytest.approx(57.3, abs=0.1)


def test_other_published_formats(tmp_path):
    burst = tmp_path / "burst.csv"
    burst.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Session ID,Elapsed time\n"
                     "5.0,ChatGPT,100,20,120,Conversation log,a,1.0\n6.5,GPT-4,50,0,50,API log,b,0.1\n"
                     "7.0,ChatGPT,300,40,340,Conversation log,a,2.0\n")
    df = load_trace(str(burst))
    assert list(df["arrival_s"]) == [0.0, 2.0] and list(df["isl"]) == [100, 300]  # the failed call is dropped
    tool = tmp_path / "toolagent_trace.jsonl"
    tool.write_text("\n".join(json.dumps({"timestamp": t, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})
                              for t in (0, 1500)))
    assert list(load_trace(str(tool))["arrival_s"]) == [0.0, 1.5]
    az = tmp_path / "AzureLLMInferenceTrace_conv_1week.csv"
    az.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.0000000,10,2\n"
                  "2024-05-10 00:00:01.5000000,20,3\n")
    assert list(load_trace(str(az))["arrival_s"]) == [0.0, 1.5]
    rt = tmp_path / "round_trace.jsonl"
    rt.write_text(json.dumps({"session_id": "s", "t_input_ready_s": 0.0, "input_tokens_total": 900,
                              "output_tokens": 10}) + "\n")
    assert load_trace(str(rt))["isl"].tolist() == [900]
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match="trace"):
        load_trace(str(bad))


def test_trace_replay_with_rate_scale():
    wl = {"kind": "trace", "trace": "azure-code", "num_requests": 400}
    one = simulate(fleet(pool(workers=2)), wl, seed=0)
    two = simulate(fleet(pool(workers=2)), dict(wl, rate_scale=2.0), seed=0)
    assert one.summary["completed"] == two.summary["completed"] == 400
    assert two.requests["arrival_s"].iloc[-1] == pytest.approx(one.requests["arrival_s"].iloc[-1] / 2)


def test_mooncake_replay_reuses_prefixes():
    res = simulate(fleet(pool(workers=4)), {"kind": "trace", "trace": "mooncake-conversation",
                                            "num_requests": 1500}, seed=0)
    assert res.summary["prefix_hit_rate"] > 0.1


def test_duration_stops_arrivals_and_the_fleet_drains():
    wl = dict(synthetic(rate=20.0), num_requests=None, duration_s=10.0)
    res = simulate(fleet(pool()), wl, seed=0, duration_s=5.0)
    df = res.requests
    assert df["arrival_s"].max() <= 5.0 and (df["status"] == "completed").all()
    cut = simulate(fleet(pool()), wl, seed=0, horizon_s=2.0)
    assert (cut.requests["status"] == "incomplete").any()
    assert (cut.requests.loc[cut.requests.status == "incomplete", "finish_s"].isna()).all()


def test_gzipped_trace_and_jitter(tmp_path):
    import gzip

    p = tmp_path / "trace.jsonl.gz"
    with gzip.open(p, "wt") as f:
        for t in (0, 0, 3000, 3000):
            f.write(json.dumps({"timestamp": t, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}) + "\n")
    assert len(load_trace(str(p))) == 4
    wl = make_workload(load_workload({"kind": "trace", "trace": str(p), "trace_jitter_s": 3.0}),
                       np.random.default_rng(0))
    times = [r.arrival_s for r in wl.arrivals()]
    assert times == sorted(times) and len(set(times)) == 4 and times[0] == 0.0


def test_one_drawn_token_count_is_rounded_as_a_batch_of_them():
    """A closed loop draws one request per completion; that one-element path rounds, clips and maps NaN and
    infinities exactly as the vectorised one does for a batch."""
    from lpxsim.serving.workload import TOKENS_MAX, _tokens

    draws = [np.nan, np.inf, -np.inf, -3.0, 0.0, 0.49, 0.5, 1.5, 2.5, 3.5, 123.4999, TOKENS_MAX - 0.5,
             TOKENS_MAX + 0.5, 1e30]
    batch = _tokens(np.array(draws + [7.0]))  # two or more: the vectorised path
    for x, want in zip(draws, batch, strict=False):
        one = _tokens(np.array([x]))
        assert one.dtype == batch.dtype and one.tolist() == [want], x
