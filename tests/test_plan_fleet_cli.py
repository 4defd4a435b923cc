"""`lpxsim plan point | fleet | t8`: one JSON object with --json; bad demand files exit 2 naming the field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lpxsim.cli.main import app
from lpxsim.core.errors import UserError
from lpxsim.plan.fleet import load_demand, size_fleet

runner = CliRunner()
CLI = [sys.executable, "-m", "lpxsim.cli.main"]

DEMAND = """
classes:
  - name: interactive
    model: llama-3.1-8b
    isl: 8000
    osl: 500
    tok_s_user: 200
    concurrent_sessions: 40
  - name: bulk
    model: llama-3.1-70b
    isl: 4000
    osl: 500
    tok_s_user: 30
    requests_per_s: 5
systems:
  - name: h200-hgx
  - name: gb200-nvl72
"""


def _json(*args: str) -> dict:
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def test_point_json() -> None:
    d = _json("plan", "point", "llama-3.1-70b", "--system", "h200-hgx", "--context", "8000", "--osl", "500",
              "--target-tok-s-user", "100")
    assert d["feasible"] and d["tok_s_user"] >= 100 and d["context"] == 8000 and d["concurrency"] >= 1
    assert d["replica_chips"] > 0 and d["tok_s_per_mw"] > 0 and d["candidates"]
    # the answer's error band: the engine's, for its cost path (issue 28 item 8), around the answer's figure
    from lpxsim.engine.bands import answer_band, path_for

    b = answer_band("h200-hgx", "fp8", "sglang")
    assert d["cost_path"] == path_for("h200-hgx", "fp8", "sglang") == b.path
    assert (d["tok_s_user_low"], d["tok_s_user_high"]) == pytest.approx(b.interval(d["tok_s_user"]))
    assert d["band"].startswith(f"±{100 * b.band_fraction:.0f}%") and b.path in d["band"]
    assert d["ttft_low"] < d["ttft_s"] < d["ttft_high"]


def test_point_table_carries_context_and_concurrency() -> None:
    r = runner.invoke(app, ["plan", "point", "llama-3.1-70b", "--system", "h200-hgx", "--context", "8000",
                            "--target-tok-s-user", "100"])
    text = " ".join(r.stdout.split())
    assert r.exit_code == 0 and "at 8,000 context and concurrency" in text
    assert "error band: tok/s/user" in text


def test_fleet_json(tmp_path: Path) -> None:
    p = tmp_path / "demand.yaml"
    p.write_text(DEMAND)
    d = _json("plan", "fleet", "--demand", str(p))
    assert d["feasible"] and d["bom"] and d["total_power_w"] > 0
    classes = {a["request_class"] for a in d["assignments"]}
    assert classes == {"interactive", "bulk"}
    from lpxsim.engine.bands import answer_band

    for a in d["assignments"]:
        assert a["tok_s_user"] > 0 and a["context"] in (8000, 4000) and a["concurrency_per_replica"] >= 1
        b = answer_band(a["system"])  # each assignment carries its system's band, around its own speed
        assert a["cost_path"] == b.path and a["tok_s_user_band_pct"] == round(100 * b.band_fraction, 2)
        assert (a["tok_s_user_low"], a["tok_s_user_high"]) == pytest.approx(b.interval(a["tok_s_user"]))
        per_chip = answer_band(a["system"], metric="tok_s_per_chip")  # and its throughput, around its own
        assert a["tok_s_per_chip_band_pct"] == round(100 * per_chip.band_fraction, 2)
    # the fleet's capacity (so the racks the demand needs) carries the widest of its systems' throughput bands
    widest = max(round(100 * answer_band(a["system"], metric="tok_s_per_chip").band_fraction, 2)
                 for a in d["assignments"])
    assert d["capacity_band_pct"] == widest and d["capacity_cost_path"]
    text = " ".join(runner.invoke(app, ["plan", "fleet", "--demand", str(p)]).stdout.split())
    assert text.count("error band: tok/s/user") == len(d["assignments"])
    assert f"capacity error band: ±{widest:.0f}% per rack" in text
    served = {c: sum(a["served"] for a in d["assignments"] if a["request_class"] == c) for c in classes}
    assert served["interactive"] >= 40 and served["bulk"] >= 5
    # --systems restricts the candidates
    d = _json("plan", "fleet", "--demand", str(p), "--systems", "h200-hgx")
    assert {b["system"] for b in d["bom"]} == {"h200-hgx"}


def test_infeasible_fleet_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "demand.yaml"
    p.write_text(DEMAND.replace("tok_s_user: 200", "tok_s_user: 1000000"))
    r = runner.invoke(app, ["plan", "fleet", "--demand", str(p), "--json"])
    assert r.exit_code == 3, r.output  # no feasible fleet: its own exit code (docs/cli.md)
    d = json.loads(r.stdout)
    assert not d["feasible"] and "interactive" in d["reasons"][0] and "1,000,000" in d["reasons"][0]
    assert d["closest"]["kind"] == "target" and d["closest"]["targets"]["interactive"] < 1e6


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("classes: [", "demand"),
        ("- just a list", "demand"),
        ("classes: []", "classes"),
        (DEMAND.replace("isl: 8000", "isl: -5"), "classes.0.isl"),
        (DEMAND.replace("    concurrent_sessions: 40\n", ""), "classes.0"),
        (DEMAND.replace("requests_per_s: 5", "requests_per_s: 5\n    concurrent_sessions: 3"), "classes.1"),
        (DEMAND.replace("name: h200-hgx", "name: h300-hgx"), "system"),
        (DEMAND.replace("model: llama-3.1-8b", "model: llama-9"), "classes.0.model"),
        (DEMAND + "colour: blue\n", "colour"),
    ],
)
def test_bad_demand_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    p = tmp_path / "demand.yaml"
    p.write_text(text)
    with pytest.raises(UserError) as e:
        size_fleet(load_demand(p))
    assert str(e.value).startswith(f"{field}"), str(e.value)


def test_bad_demand_exits_2_with_one_line(tmp_path: Path) -> None:
    p = tmp_path / "demand.yaml"
    p.write_text(DEMAND.replace("isl: 8000", "isl: -5"))
    r = _run("plan", "fleet", "--demand", str(p), "--json")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: classes.0.isl"), lines


@pytest.mark.parametrize("cmd", [("plan", "t8"), ("plan", "fleet", "--demand", "x"),
                                 ("plan", "point", "llama-3.1-8b", "--context", "1000", "--target-tok-s-user", "10")])
def test_the_removed_analytic_backend_is_one_line(cmd) -> None:
    """Issue 12: one cost model in every answer; asking for the first-order model names the field."""
    r = _run(*cmd, "--backend", "analytic", "--json")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: backend: 'analytic' was removed"), lines


def test_missing_demand_file_exits_2(tmp_path: Path) -> None:
    r = _run("plan", "fleet", "--demand", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "demand" in r.stderr


def test_t8_json_has_every_system() -> None:
    d = _json("plan", "t8")
    assert {"lpx", "vr-nvl72", "gb200-nvl72"} <= set(d["systems"])
    assert d["context"] == 400_000 and d["target_tok_s_user"] == 400.0 and d["claim"]["ratio_vs_gb200"] == 35.0


def test_t8_default_backend_uses_the_gpu_model() -> None:
    from lpxsim.plan.t8 import t8_report

    d = t8_report(frontier_targets=()).as_dict()
    for name in ("vr-nvl72", "gb200-nvl72"):
        r = d["systems"][name]
        assert r["backend"] == "project" and r["best_tok_s_user"] > 0
        assert r["feasible"] == (r["tok_s_user"] >= 400.0)


def test_new_tokens_cannot_exceed_the_input(tmp_path: Path) -> None:
    p = tmp_path / "demand.yaml"
    p.write_text(DEMAND.replace("isl: 8000", "isl: 8000\n    new_tokens: 9000"))
    with pytest.raises(UserError, match="classes.0"):
        load_demand(p)


@pytest.mark.parametrize("path", sorted((Path(__file__).parent.parent / "examples" / "plans").glob("*.yaml")))
def test_example_demands_parse(path: Path) -> None:
    spec = load_demand(path)
    assert spec.request_classes() and spec.system_choices()
