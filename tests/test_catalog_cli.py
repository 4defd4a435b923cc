"""The catalog commands: one JSON object with --json, provenance for every number, one-line user errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from lpxsim.cli.main import app

runner = CliRunner()
CLI = [sys.executable, "-m", "lpxsim.cli.main"]


def _json(*args: str) -> dict:
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)  # exactly one JSON object, nothing else on stdout


def test_system_lpx_json_prints_every_number_with_provenance() -> None:
    d = _json("system", "lpx")
    assert d["name"] == "lpx" and d["chips_per_unit"] == 256
    assert d["memory_bytes_per_unit"] == pytest.approx(128e9)
    assert d["derived"]["diameter_hops_one_unit"] == 2
    assert d["derived"]["scale_up_bidir_Bps_line"] == pytest.approx(640e12, rel=0.03)
    rows = {r["path"]: r for r in d["provenance"]}
    assert rows["chip.memory_bytes"] == {
        "path": "chip.memory_bytes", "value": 500e6, "unit": "B", "source": "NV-LPX", "grade": "P",
        "note": "Tom's Hardware says 512 MB (S)",
    }  # fmt: skip
    assert rows["power_w"]["grade"] == "U"
    assert all(r["source"] and r["grade"] in "PSEU" for r in d["provenance"])


def test_system_variant_and_table_output() -> None:
    d = _json("system", "lpx", "--topology", "trays-32x8")
    assert d["topology"]["chips_per_node"] == 8 and d["topology"]["nodes_per_rack"] == 32
    r = runner.invoke(app, ["system", "lpx"])
    assert r.exit_code == 0 and "NV-LPX" in r.stdout and "HC26" in r.stdout and "provenance" in r.stdout


def test_systems_json_lists_the_catalog() -> None:
    d = _json("systems")
    names = {s["name"]: s for s in d["systems"]}
    assert {"lpx", "vr-nvl72", "h200-hgx", "groq-v1"} <= set(names)
    assert names["lpx"]["chips_per_unit"] == 256
    assert names["lpx"]["power_grade"] == "U"
    assert names["gb300-nvl72"]["power_w_per_unit"] == 135e3


def test_models_json() -> None:
    d = _json("models")
    rows = {m["name"]: m for m in d["models"]}
    g = rows["gemma-4-31b"]
    assert g["params_total"] == pytest.approx(30.70e9, rel=5e-4)
    assert g["kv_bytes_per_token_bf16"] == {"sliding": 819_200, "full": 81_920}
    assert rows["deepseek-v3"]["kv_bytes_per_token_bf16"] == {"full": 70_272}


def test_model_json_keys_and_values() -> None:
    d = _json("model", "gemma-4-31b", "--context", "100000")
    assert d["params_total"] == pytest.approx(30.70e9, rel=5e-4)
    assert d["params_active"] == d["params_total"]  # dense
    assert d["weight_bytes"] == pytest.approx(30.7e9, rel=2e-3)  # FP8 = 1 B/param
    assert d["kv_bytes_per_token"] == {"sliding": 819_200, "full": 81_920, "total": 901_120}
    # 81,920 x 100K + 819,200 x 1,024 (window) = 9.03 GB
    assert d["kv_bytes_per_sequence"] == pytest.approx(81_920 * 100_000 + 819_200 * 1024)
    assert d["decode_flops_per_token"] > 2 * d["params_active"]
    groups = {g["kind"]: g for g in d["layer_groups"]}
    assert groups["sliding"]["count"] == 50 and groups["full"]["count"] == 10
    assert groups["full"]["k_eq_v"] and groups["full"]["kv_bytes_per_token_per_layer"] == 8192


def test_model_precision_and_layout_options() -> None:
    d = _json(
        "model",
        "gemma-4-31b",
        "--weights",
        "bf16",
        "--kv",
        "fp8",
        "--kv-layout",
        "k-once",
        "--context",
        "8192",
    )
    assert d["weight_bytes"] == pytest.approx(2 * 30.70e9, rel=5e-4)
    assert d["kv_bytes_per_token"]["full"] == 20_480  # 10 x 4 x 512 x 1 B, one tensor
    groups = _json("model", "deepseek-v3")["layer_groups"]
    assert [(g["ffn"], g["count"], g["experts"], g["top_k"]) for g in groups] == [
        ("dense", 3, 0, 0),
        ("moe", 58, 256, 8),
    ]
    r = runner.invoke(app, ["model", "deepseek-v3"])
    assert r.exit_code == 0 and "layer groups" in r.stdout


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def test_unknown_system_exits_2_with_a_close_match() -> None:
    p = _run("system", "lpz", "--json")
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "system" in lines[0] and "lpx" in lines[0]


def test_bad_precision_exits_2_naming_the_field() -> None:
    p = _run("model", "gemma-4-31b", "--kv", "fp9", "--json")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().startswith("error: kv:") and "fp8" in p.stderr
    p = _run("model", "gemma-4-31b", "--context", "0")
    assert p.returncode == 2 and "context" in p.stderr


def test_model_accepts_a_config_json_path() -> None:
    from importlib import resources

    path = resources.files("lpxsim.catalog").joinpath("models/meta-llama--Llama-3.1-8B.json")
    d = _json("model", str(path), "--context", "8192")
    assert d["params_total"] == pytest.approx(8.03e9, rel=1e-3)
    assert d["kv_bytes_per_sequence"] == 131_072 * 8192


def test_system_units_totals() -> None:
    t = _json("system", "lpx", "--units", "9")["totals"]
    assert t["chips"] == 2304 and t["memory_bytes"] == pytest.approx(1152e9)
    assert t["diameter_hops"] == 2 + 8  # open daisy chain of 9 racks
    assert t["power_w"] == pytest.approx(9 * 97e3)
    p = _run("system", "lpx", "--units", "10", "--json")
    assert p.returncode == 2 and "units" in p.stderr
