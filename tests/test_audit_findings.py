"""What a new user's audit found: bad inputs reaching a traceback or passing silently (each is now one line naming
the field, a non-zero exit, and nothing written), and one user's speed printed without what the deployment holds."""

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


ROOT = Path(__file__).resolve().parents[1]


def _one_line(argv: list[str], field: str, env: dict | None = None, monkeypatch=None) -> None:
    if env and monkeypatch is not None:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
    res = invoke(argv, time_limit_s=120)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert res.code == 2 and res.exception is None and "Traceback" not in res.stderr, res
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), res.stderr


@pytest.mark.parametrize("argv,field", [
    (["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--gpus", "1", "--concurrency", "1,2,4"], "concurrency"),
    (["capacity", "llama-3.1-8b", "--context", "100,200,300"], "context"),
    (["capacity", "llama-3.1-8b", "--context", "10000", "--first-isl", "5000"], "first_isl"),
    (["capacity", "llama-3.1-8b", "--context", "10000", "--think-s", "9"], "think_s"),
    (["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--gpus", "1", "--chips", "4"], "chips"),
    (["serve", "--fleet", "rubin-alone", "--host", "999.1.1.1"], "host"),
    (["plan", "fleet", "--demand", str(ROOT / "examples" / "plans" / "mixed-demand.yaml"), "--max-racks", "-5"],
     "max_racks"),
])
def test_options_the_audit_found_misread_or_misnamed(argv: list[str], field: str) -> None:
    """`--concurrency 1,2,4` ran at 124 (a comma is a thousands separator only); a session's options without
    --session were ignored; `--chips` on a GPU system was named `racks`; a bad --host was named `port`."""
    _one_line(argv, field)


def test_a_thousands_separator_still_reads() -> None:
    from lpxsim.core.inputs import parse_count

    assert parse_count("100,000", "x", 1, 10**9) == 100_000 and parse_count("1,000,000", "x", 1, 10**9) == 10**6


def test_lpxsim_cache_pointing_at_a_file_is_named(tmp_path: Path, monkeypatch) -> None:
    from lpxsim.core.cache import reset

    f = tmp_path / "cachefile"
    f.write_text("")
    monkeypatch.setenv("LPXSIM_CACHE", str(f))
    reset()
    try:
        _one_line(["cache", "info"], "LPXSIM_CACHE")
    finally:
        monkeypatch.delenv("LPXSIM_CACHE")
        reset()


@pytest.mark.parametrize("name,body,ok", [
    ("plain.jsonl", b'{"timestamp":0,"input_length":10,"output_length":5}\n', True),  # no hash_ids: none shared
    ("bom.jsonl", b'\xef\xbb\xbf{"timestamp":0,"input_length":10,"output_length":5}\n', True),
    ("noext", b'{"timestamp":0,"input_length":10,"output_length":5}\n', True),
    ("frac.jsonl", b'{"timestamp":0,"input_length":10.5,"output_length":5}\n', "trace.input_length"),
    ("text.jsonl", b'{"timestamp":0,"input_length":"10","output_length":5}\n', "trace.input_length"),
    ("frac.csv", b"session_id,t_input_ready_s,input_tokens_total,output_tokens\na,0,10.5,5\n", "trace.input tokens"),
])
def test_a_trace_file_reads_as_its_rows_say(tmp_path: Path, name: str, body: bytes, ok) -> None:
    from lpxsim.core.errors import UserError
    from lpxsim.serving.traces import load_trace

    p = tmp_path / name
    p.write_bytes(body)
    if ok is True:
        df = load_trace(str(p))
        assert list(df["isl"]) == [10] and list(df["hash_ids"]) == [()]
    else:
        with pytest.raises(UserError) as e:
            load_trace(str(p))
        assert e.value.field == ok


def test_a_cost_written_in_yaml_exponent_form_is_a_number(tmp_path: Path) -> None:
    """PyYAML reads 3e6 as text; the cost model said "Input should be a valid dictionary"."""
    from lpxsim.plan.costs import load_costs

    f = tmp_path / "c.yaml"
    f.write_text("usd_per_kwh: 5e-2\n")
    assert load_costs(f).usd_per_kwh.value == pytest.approx(0.05)


def test_a_hugging_face_folder_is_its_config(tmp_path: Path) -> None:
    from lpxsim.catalog import get_model

    d = tmp_path / "snapshot"
    d.mkdir()
    (d / "config.json").write_text(TINY.read_text())
    assert get_model(str(d)).num_layers == get_model(str(TINY)).num_layers


def test_a_price_file_tier_is_named_as_the_price_files(tmp_path: Path) -> None:
    from lpxsim.core.errors import UserError
    from lpxsim.plan.costs import load_costs

    f = tmp_path / "p.yaml"
    f.write_text("price_ladder:\n  - usd_per_mtok_output: -1\n")
    with pytest.raises(UserError) as e:
        load_costs(prices=f)
    assert e.value.field.startswith("prices.price_ladder")


def test_estimate_prints_what_the_deployment_holds_beside_one_users_speed() -> None:
    """Batch-1 speed is never printed without the capacity: at one user `estimate` printed no ceiling (the audit)."""
    res = invoke(["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--gpus", "1", "--concurrency", "1"],
                 time_limit_s=120)
    assert res.code == 0, res
    flat = " ".join(res.stdout.split())
    assert "capacity: the deployment holds up to" in flat and "streams of 1,280 tokens (1 at this load)" in flat


def test_bench_aa_gives_what_the_deployment_holds_beside_one_users_speed() -> None:
    res = invoke(["bench", "aa", "llama-3.1-8b", "--system", "h200-hgx", "--contexts", "1000,100000", "--requests",
                  "2", "--json"], time_limit_s=120)
    assert res.code == 0, res
    rows = json.loads(res.stdout)["points"]
    holds = [r["capacity_streams"] for r in rows]
    assert all(h >= 1 for h in holds) and holds[0] > holds[1]  # fewer 100K streams than 1K ones


def test_a_kv_parallel_layout_plan_point_picks_can_be_asked_of_estimate() -> None:
    """The audit: `plan point` can pick TP2/KVP on h200-hgx and `estimate` had no flag to ask about it."""
    from lpxsim.engine.answer import answer
    from lpxsim.engine.deployment import deployment_from_flags
    from lpxsim.engine.query import Load, Workload

    dep = deployment_from_flags("h200-hgx", gpus=2, tp=2, kv_parallel=True)
    a = answer("llama-3.1-70b", dep, Workload(32_000, 256), Load(concurrency=2))
    assert "KVP" in a.deployment.layout and a.chips == 2
    _one_line(["estimate", "llama-3.1-70b", "--system", "h200-hgx", "--gpus", "2", "--kv-parallel"], "kv_parallel")
    _one_line(["estimate", "gemma-4-31b", "--system", "lpx", "--kv-parallel"], "kv_parallel")
