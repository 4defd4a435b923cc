"""Bad inputs a new user's audit found reaching a traceback or passing silently: each is now one line naming the
field, a non-zero exit, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzz_harness import invoke

TINY = Path(__file__).resolve().parent / "data" / "emulate" / "llama_tiny.json"


@pytest.mark.parametrize("change,field", [({"torch_dtype": "float8"}, "config"), ({"head_dim": 0}, "config.head_dim"),
                                          ({"num_attention_heads": 0}, "config.num_attention_heads"),
                                          ({"hidden_act": "8"}, "config"),
                                          ({"rope_parameters": {"rope_type": "yarn"}}, "config")])
def test_emulate_names_a_config_transformers_cannot_build(tmp_path: Path, change: dict, field: str) -> None:
    pytest.importorskip("transformers")
    cfg = {**json.loads(TINY.read_text()), **change}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(cfg))
    res = invoke(["emulate", "--config", str(path), "--chips", "2", "--steps", "1"], time_limit_s=120)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert res.code != 0 and res.exception is None and "Traceback" not in res.stderr, res
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), res.stderr


@pytest.mark.parametrize("argv,field", [
    (["sweep", "llama-3.1-8b", "--systems", "h200-hgx", "--contexts", "1000", "--concurrency", "1", "--weights", "fp3"],
     "weights"),
    (["sweep", "llama-3.1-8b", "--systems", "h200-hgx", "--contexts", "1000", "--concurrency", "1", "--kv", "fp3"],
     "kv"),
    (["sweep", "llama-3.1-8b", "--systems", ","], "systems"),
    (["tour", "--executor", "bogus"], "executor"),
    (["tour", "--model", str(TINY)], "model"),
    (["tour", "--systems", ","], "systems"),
])
def test_a_sweep_or_tour_refuses_before_any_work(tmp_path: Path, monkeypatch, argv: list[str], field: str) -> None:
    monkeypatch.chdir(tmp_path)
    res = invoke([*argv, "--out", str(tmp_path / "out")], time_limit_s=60)
    assert res.code != 0 and res.exception is None and "Traceback" not in res.stderr, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), res.stderr
    assert not (tmp_path / "out").exists()


def test_a_sweep_of_a_config_json_prices_it(tmp_path: Path) -> None:
    """`sweep path/config.json` passed the model's name, not its path, to the points, so every point failed
    ("unknown model") and drawing the empty frontier raised."""
    res = invoke(["sweep", str(TINY), "--systems", "h200-hgx", "--contexts", "100", "--concurrency", "1",
                  "--no-ceiling", "--executor", "serial", "--out", str(tmp_path / "out"), "--json"], time_limit_s=120)
    assert res.code == 0 and res.exception is None, res
    rows = json.loads(res.stdout)["rows"]
    assert rows and all(r["fits"] for r in rows) and rows[0]["tok_s_user"] > 0


def test_the_frontier_of_a_sweep_with_nothing_priced_is_empty() -> None:
    import pandas as pd

    from lpxsim.report.curves import deployment_curves

    failed = pd.DataFrame([{"target": "h200-hgx", "context": 1000, "concurrency": 1, "fits": False}])
    assert deployment_curves(failed[failed["fits"]]) == []
