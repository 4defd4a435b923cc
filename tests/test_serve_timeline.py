"""The serving timeline (`simulate --timeline`, `serving.timeline`) and the per-request CSV of `simulate --out`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analytic_double import serving_double  # noqa: F401  (the module fixture below)
from lpxsim.serving import simulate
from lpxsim.serving.timeline import TimelineRecorder, write_timeline
from serving_fixtures import fleet, link, pool, synthetic

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.usefixtures("serving_double")
def test_trace_has_every_step_transfer_and_request(tmp_path):
    f = fleet(pool("pre", workers=2, role="prefill"), pool("dec", system="lpx", role="decode"),
              links=[link("pre", "dec")])
    rec = TimelineRecorder()
    res = simulate(f, synthetic(n=40, rate=30.0), seed=2, timeline=rec)
    path = write_timeline(tmp_path / "t.json", rec, res.requests)
    ev = json.loads(Path(path).read_text())["traceEvents"]
    spans = [e for e in ev if e["ph"] == "X"]
    assert all(e["dur"] >= 0 for e in spans)
    # every prefill chunk of every request is in some step; the prefill steps hold all the prompt tokens
    prefill = [e for e in spans if e["cat"] == "prefill"]
    assert sum(e["args"]["prefill_tokens"] for e in prefill) == res.requests["isl"].sum()
    # one KV transfer per request (PD), on the link track
    assert len([e for e in spans if e["cat"] == "kv_transfer"]) == len(res.requests)
    # decode steps carry the tokens the decode pool produced: sequences x steps
    decode_tokens = sum(e["args"]["decode_sequences"] * e["args"]["steps"] for e in spans
                        if e["cat"] in ("decode", "prefill") and e["pid"] == 2)
    assert decode_tokens == int(res.pools.set_index("pool").loc["dec", "output_tokens"])
    lives = [e for e in spans if e["cat"] == "request"]
    assert {e["name"].split()[0] for e in lives} == {f"r{i}" for i in res.requests["request_id"]}
    names = {e["args"]["name"] for e in ev if e["ph"] == "M"}
    assert {"pre", "dec", "links", "requests", "pre[0]", "pre[1]", "dec[0]"} <= names


def test_simulate_cli_writes_timeline_and_csv(tmp_path):
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "simulate", "--fleet",
                        "examples/fleets/rubin-alone.yaml", "--trace", "tracelab-agent", "--json", "--out", str(out),
                        "--timeline", str(tmp_path / "t.json")], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    written = json.loads(p.stdout)["written"]
    assert str(tmp_path / "t.json") in written and str(out / "requests.csv") in written
    csv = pd.read_csv(out / "requests.csv")
    parquet = pd.read_parquet(out / "requests.parquet")
    assert list(csv.columns) == list(parquet.columns) and len(csv) == len(parquet) == 19
    assert (csv["ttft_s"] - parquet["ttft_s"]).abs().max() < 1e-12
    trace = json.loads((tmp_path / "t.json").read_text())
    assert len([e for e in trace["traceEvents"] if e.get("cat") == "request" and "decode" in e["name"]]) == 19
