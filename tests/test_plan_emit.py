"""Plans that deploy: `plan fleet --emit DIR` and `plan point --emit DIR` write a fleet `simulate` takes unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lpxsim.cli.main import app
from lpxsim.plan.fleet import RequestClass, SystemChoice, parse_demand, solve_fleet
from lpxsim.plan.fleet_emit import fleet_config
from lpxsim.plan.operating_point import OperatingPoint
from lpxsim.serving import simulate
from lpxsim.serving.config import load_fleet

runner = CliRunner()

DEMAND = {"classes": [{"name": "bulk", "model": "llama-3.1-8b", "isl": 2000, "osl": 200, "tok_s_user": 30,
                       "requests_per_s": 2.0}], "systems": [{"name": "h200-hgx"}]}


def test_the_emitted_fleet_loads_and_simulates(tmp_path: Path):
    p = tmp_path / "demand.yaml"
    p.write_text(yaml.safe_dump(DEMAND))
    out = tmp_path / "deploy"
    r = runner.invoke(app, ["plan", "fleet", "--demand", str(p), "--emit", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert sorted(d["emitted"]["files"]) == sorted(["fleet.yaml", "workload-bulk.yaml", "dynamo.yaml", "README.md"])
    fleet = load_fleet(out / "fleet.yaml")
    (a,) = d["assignments"]
    (pool,) = fleet.pools
    assert (pool.system, pool.model, pool.workers) == (a["system"], a["model"], a["replicas"])
    assert pool.gpus_per_worker == a["chips"] // a["replicas"] and pool.tp is not None
    res = simulate(out / "fleet.yaml", out / "workload-bulk.yaml", duration_s=20.0)
    assert res.summary["completed"] > 0 and res.summary["rejected"] == 0
    readme = (out / "README.md").read_text()
    assert "lpxsim simulate --fleet fleet.yaml --workload workload-bulk.yaml" in readme
    assert "aiperf profile --model llama-3.1-8b --url http://127.0.0.1:PORT" in readme
    assert "STARTING POINT" in (out / "dynamo.yaml").read_text()
    assert not [f for f in out.iterdir() if f.name.endswith(".tmp")]  # atomic: no temporary left


def test_plan_point_emits_one_replica_at_its_concurrency(tmp_path: Path):
    out = tmp_path / "point"
    r = runner.invoke(app, ["plan", "point", "llama-3.1-8b", "--system", "h200-hgx", "--context", "2000", "--osl",
                            "200", "--target-tok-s-user", "50", "--emit", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    (pool,) = load_fleet(out / "fleet.yaml").pools
    assert pool.workers == 1 and pool.gpus_per_worker == d["replica_chips"]
    w = yaml.safe_load((out / "workload-point.yaml").read_text())
    assert w["arrival"] == {"process": "closed", "concurrency": d["concurrency"]} and w["isl"] == 2000


def test_an_emit_path_that_is_a_file_is_refused_before_any_work(tmp_path: Path):
    f = tmp_path / "taken"
    f.write_text("x")
    p = tmp_path / "demand.yaml"
    p.write_text(yaml.safe_dump(DEMAND))
    r = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "plan", "fleet", "--demand", str(p), "--emit",
                        str(f), "--json"], capture_output=True, text=True, check=False)
    assert r.returncode == 2 and r.stdout == "" and f.read_text() == "x"
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: emit: ") and "is not a directory" in line


def test_lpx_pools_are_emitted_as_the_plan_sized_them():
    rc = RequestClass("chat", "gemma-4-31b", 10_000, 1_000, 400.0, requests_per_s=20.0)
    op = OperatingPoint(model="gemma-4-31b", system="lpx", isl=10_000, osl=1_000, target_tok_s_user=400.0,
                        weights="fp8", kv="bf16", backend="test", feasible=True, layout="160 chips: lpx",
                        replica_chips=160, replica_units=160 / 256, replica_power_w=1.0, concurrency=8,
                        tok_s_user=400.0, tok_s_total=10_000.0, requests_per_s=10.0, best_tok_s_user=500.0)
    plan = solve_fleet([rc], [SystemChoice("lpx")], {("chat", "lpx"): op})
    demand = parse_demand({"classes": [{"name": "chat", "model": "gemma-4-31b", "isl": 10_000, "osl": 1_000,
                                        "tok_s_user": 400, "requests_per_s": 20.0}], "systems": [{"name": "lpx"}]})
    fleet, workloads, skipped = fleet_config(plan, demand)
    (pool,) = load_fleet(fleet).pools
    assert (pool.backend, pool.chips_per_worker, pool.workers) == ("lpx", 160, 2) and not skipped
    assert "keep to whole racks" in fleet["description"]
    assert workloads["workload-chat.yaml"]["arrival"] == {"process": "poisson", "rate": 20.0}


def test_plan_point_emits_the_session_workload_its_answer_was_computed_on(tmp_path: Path):
    """The default workload is an agentic session: `--emit` writes those sessions (`kind: agentic`, the shape the
    answer priced), and `simulate` on the emitted files gives the answer's figures within the engine-vs-simulator
    tolerances (tests/test_engine_sessions.py): tok/s/user 5 % and TTFT 10 % over the turns at the answer's
    context, aggregate 3 % (Little's law over each user's cycle, `engine.simulated.session_statistics`). On the
    analytic stand-in (`analytic_double`), pinned into the emitted pool."""
    from analytic_double import double_factory
    from lpxsim.backends.factory import Layout
    from lpxsim.catalog import get_model
    from lpxsim.engine.query import Workload, default_session
    from lpxsim.engine.simulated import session_statistics
    from lpxsim.plan.fleet_emit import emit_operating_point
    from lpxsim.plan.operating_point import operating_point
    from lpxsim.serving.backends import pinned_step_model
    from lpxsim.serving.workload import load_workload

    # 100K: the hold ceiling sets the concurrency (9 sessions on the stand-in rack); at 10K the search's 48 users
    # arrive at random (exponential think) and a later turn's mean TTFT is 10 % above the stagger's (its median
    # is the engine's to 0.1 %): docs/engine.md, "Sessions"
    isl, osl = 100_000, 256
    shape = default_session(isl, osl)
    op = operating_point("gemma-4-31b", "lpx", isl, osl, 1_000.0, factory=double_factory, session=shape)
    assert op.feasible and op.think_s == shape.think_s
    out = tmp_path / "point"
    emit_operating_point(op, out, session=shape)
    w = yaml.safe_load((out / "workload-point.yaml").read_text())
    assert w["kind"] == "agentic" and w["arrival"] == {"process": "closed", "concurrency": op.concurrency}
    assert w["session"]["first_isl"]["value"] == shape.first_isl and w["session"]["turns"]["value"] == shape.turns
    assert w["session"]["think_s"] == {"kind": "exponential", "mean": shape.think_s}
    fleet = load_fleet(out / "fleet.yaml")
    step = double_factory(get_model("gemma-4-31b"), "lpx", Layout(chips=op.replica_chips), "fp8", "bf16", "separate")
    with pinned_step_model(fleet.pools[0], step):
        res = simulate(fleet, load_workload(out / "workload-point.yaml"), seed=0)
    done = res.requests[res.requests["status"] == "completed"]
    at = done[done["isl"] == isl]  # the turns the answer describes: a turn at its context
    assert len(at) >= 2 * op.concurrency
    assert at["tok_s_user"].mean() == pytest.approx(op.tok_s_user, rel=0.05)
    assert at["ttft_s"].mean() == pytest.approx(op.ttft_s, rel=0.10)
    cycle = session_statistics(done, op.concurrency, Workload(isl, osl, shape))
    assert cycle.tok_s_total == pytest.approx(op.tok_s_total, rel=0.03)
