"""`lpxsim simulate`: one JSON object, Parquet outputs, one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lpxsim.serving import load_fleet, load_workload, simulate
from lpxsim.serving.engine import Engine, EventKind

ROOT = Path(__file__).resolve().parents[1]
# fleets on the compiler-backed LPX backend compile their shapes on first use (tens of seconds): heavy
FLEETS = [pytest.param(p, id=p.stem, marks=[pytest.mark.heavy] if "backend: lpx" in p.read_text() else [])
          for p in sorted((ROOT / "examples" / "fleets").glob("*.yaml"))]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "simulate", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def _cli_inproc(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """The console entry point in this process (fast): (exit code, stdout, stderr)."""
    from lpxsim.cli.main import run

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["lpxsim", "simulate", *args])
    try:
        run()
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_json_is_one_object_and_out_writes_parquet(tmp_path):
    p = _cli("--fleet", "examples/fleets/rubin-alone.yaml", "--trace", "tracelab-agent", "--seed", "1", "--json",
             "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["summary"]["completed"] == 19 and d["summary"]["fleet"] == "rubin-alone"
    df = pd.read_parquet(tmp_path / "o" / "requests.parquet")
    assert len(df) == 19 and {"ttft_s", "tpot_s", "e2e_s", "tok_s_user"} <= set(df.columns)
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["requests"] == 19
    # no temp files left; the folder marked as lpxsim's (a later run may write into it, a user's folder is refused)
    assert [f.name for f in (tmp_path / "o").iterdir() if f.name.startswith(".")] == [".lpxsim-output"]


@pytest.mark.parametrize("content,field", [
    ("pools: [x", "fleet"),
    ("pools:\n  - {name: a, system: vr-nvl72, model: gemma-4-31b, workers: 0}\n", "fleet.pools.0.workers"),
    ("pools:\n  - {name: a, system: nope, model: gemma-4-31b}\n", "system"),
    ("pools:\n  - {name: a, system: vr-nvl72, model: gemma-4-31b, role: prefill}\n", "fleet"),
    ("pools:\n  - {name: a, system: vr-nvl72, model: gemma-4-31b, backend: analytic}\n",
     "fleet.pools.0.backend: 'analytic' was removed"),
    ("pools:\n  - {name: a, system: lpx, model: gemma-4-31b, memory_fraction: 0.5}\n", "fleet.pools.0.memory_fraction"),
])
def test_bad_fleet_is_one_line_exit_2(tmp_path, monkeypatch, capsys, content, field):
    f = tmp_path / "f.yaml"
    f.write_text(content)
    code, out, err = _cli_inproc(monkeypatch, capsys, "--fleet", str(f), "--trace", "azure-code")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}")
    assert out == ""


def test_needs_exactly_one_workload_source(monkeypatch, capsys):
    code, _, err = _cli_inproc(monkeypatch, capsys, "--fleet", "examples/fleets/rubin-alone.yaml")
    assert code == 2 and "workload" in err
    code, _, err = _cli_inproc(monkeypatch, capsys, "--fleet", "examples/fleets/rubin-alone.yaml", "--trace",
                               "azure-code", "--duration", "-1")
    assert code == 2 and err.startswith("error: duration")


@pytest.mark.parametrize("path", FLEETS)
def test_example_fleets_load_and_run(path):
    fl = load_fleet(path)
    res = simulate(fl, {"kind": "synthetic", "num_requests": 30, "arrival": {"process": "poisson", "rate": 5.0},
                        "classes": [{"name": "interactive"}, {"name": "throughput"}]}, seed=0)
    assert res.summary["completed"] == 30
    assert res.summary["power_w"] > 0


def test_example_workloads_validate():
    for p in sorted((ROOT / "examples" / "workloads").glob("*.yaml")):
        load_workload(p)
        assert yaml.safe_load(p.read_text())["name"]


def test_engine_orders_by_time_then_kind_then_sequence():
    e = Engine(seed=0)
    seen = []
    e.schedule(1.0, EventKind.ARRIVAL, seen.append, "arrival@1")
    e.schedule(1.0, EventKind.STEP_END, seen.append, "step@1")
    e.schedule(0.5, EventKind.TIMER, seen.append, "timer@0.5")
    e.schedule(1.0, EventKind.STEP_END, seen.append, "step2@1")
    e.run()
    assert seen == ["timer@0.5", "step@1", "step2@1", "arrival@1"]
    assert e.now == 1.0 and e.events == 4


@pytest.mark.heavy
def test_builtin_mode_as_fleet(monkeypatch, capsys):
    """A built-in mode name runs as a fleet (compiles the LPX decode side's shapes on a cold cache: heavy)."""
    code, out, _ = _cli_inproc(monkeypatch, capsys, "--fleet", "rubin-lpx-pd", "--model", "llama-3.1-8b", "--trace",
                               "tracelab-agent", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["summary"]["completed"] == 19 and any("lpx-decode" in h for h in d["summary"]["hardware"])


def test_unknown_mode_as_fleet_is_one_line(monkeypatch, capsys):
    code, _, err = _cli_inproc(monkeypatch, capsys, "--fleet", "no-such-mode", "--trace", "tracelab-agent")
    assert code == 2 and err.startswith("error: fleet")


def test_rate_scale_on_a_workload_file(monkeypatch, capsys):
    args = ("--fleet", "examples/fleets/rubin-alone.yaml", "--workload")
    code, out, _ = _cli_inproc(monkeypatch, capsys, *args, "examples/workloads/chat.yaml", "--rate-scale", "0.5",
                               "--duration", "20", "--json")
    assert code == 0 and json.loads(out)["summary"]["arrival_rate"] < 30
    code, _, err = _cli_inproc(monkeypatch, capsys, *args, "examples/workloads/batch1-10k.yaml", "--rate-scale", "2")
    assert code == 2 and err.startswith("error: rate-scale")


def test_a_timeline_over_the_out_folder_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    """`--out D --timeline D` had written the tables into D, then refused the timeline."""
    d = tmp_path / "run"
    for timeline in (d, d / "summary.json"):
        code, _, err = _cli_inproc(monkeypatch, capsys, "--fleet", "lpx-alone", "--trace", "tracelab",
                                   "--out", str(d), "--timeline", str(timeline))
        assert code == 2 and err.startswith("error: timeline:") and err.count("\n") == 1, err
        assert not d.exists()
