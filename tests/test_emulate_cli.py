"""`lpxsim emulate`: one JSON object with the agreement figures, one-line user errors, exit 1 on a finding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch  # a test extra: missing, these tests must fail, not skip  # noqa: F401
import transformers  # noqa: F401
from typer.testing import CliRunner

from lpxsim.cli.main import app

DATA = Path(__file__).parent / "data" / "emulate"
runner = CliRunner()


def test_emulate_json_reports_agreement() -> None:
    r = runner.invoke(app, ["emulate", "--config", str(DATA / "gemma4_tiny.json"), "--chips", "4",
                            "--layout", "tp=2,stages=2", "--steps", "2", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["tokens_match"] is True and d["within_tolerance"] is True
    assert 0 <= d["max_abs_logit_err"] < d["tolerance"] == 1e-4
    assert (d["steps"], d["chips"], d["layout"]) == (2, 4, "tp=2,stages=2,kvsplit=1,replicas=1")
    assert len(d["emulated_tokens"]) == len(d["step_errors"]) == 3


def test_emulate_table_output() -> None:
    r = runner.invoke(app, ["emulate", "--config", str(DATA / "mixtral_tiny.json"), "--chips", "2",
                            "--layout", "tp=2,stages=1", "--steps", "1"])
    assert r.exit_code == 0, r.output
    assert "MATCH" in r.stdout and "decode 1" in r.stdout


def test_a_corrupted_program_is_a_finding_with_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from lpxsim.lpu.emulate import compare

    real = compare.compile_step

    def broken(*a, **k):  # noqa: ANN002, ANN003, ANN202
        p = real(*a, **k)
        victim = next(i for i in p.instructions if i.kind == "reduce" and i.op == "L0.down")
        return dataclasses.replace(p, instructions=[i for i in p.instructions if i.id != victim.id])

    monkeypatch.setattr(compare, "compile_step", broken)
    r = runner.invoke(app, ["emulate", "--config", str(DATA / "llama_tiny.json"), "--chips", "4",
                            "--layout", "tp=4,stages=1", "--steps", "0", "--json"])
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert d["tokens_match"] is False and d["op"].startswith("L0.") and d["chip"] >= 0 and d["cycle"] > 0


@pytest.mark.parametrize(("args", "field"), [
    (["--chips", "0"], "chips"),
    (["--chips", "2", "--steps", "-1"], "steps"),
    (["--chips", "2", "--seed", "-3"], "seed"),
])
def test_user_errors_are_one_line_exit_2(args: list[str], field: str) -> None:
    p = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "emulate", "--config",
                        str(DATA / "llama_tiny.json"), *args, "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0]


@pytest.mark.parametrize(("args", "field"), [
    (["--layout", "tp=16,stages=16"], "layout"),  # had named sram_bytes after 4 s of SRAM sizing
    (["--layout", "abc"], "layout"),
    (["--prompt-tokens", "1000"], "prompt_tokens"),  # had named steps
])
def test_request_errors_come_alone_before_the_run_starts(args: list[str], field: str) -> None:
    """Without --json the run announces its work on stderr; a bad request is refused before that line."""
    p = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "emulate", "--config", str(DATA / "llama_tiny.json"),
                        "--chips", "2", "--steps", "1", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.startswith(f"error: {field}:") and p.stderr.count("\n") == 1, p.stderr


def test_bad_config_files_are_user_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 1,
                                 "num_attention_heads": 4, "vocab_size": 64}))
    for path, word in ((tmp_path / "missing.json", "no such file"), (bad, "not valid JSON"),
                       (other, "not emulated")):
        p = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "emulate", "--config", str(path),
                            "--chips", "2"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and word in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.parametrize(("changes", "field"), [
    ({"num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 5}, "config"),  # HF's validator refuses it
    ({"hidden_size": 8, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 3}, "config.head_dim"),
])
def test_an_odd_rotary_dimension_is_one_line_exit_2(tmp_path: Path, changes: dict, field: str) -> None:
    """RoPE turns pairs of dimensions: the emulator refuses an odd head_dim before Hugging Face fails on it."""
    cfg = {**json.loads((DATA / "llama_tiny.json").read_text()), **changes}
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(cfg))
    p = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "emulate", "--config", str(path), "--chips", "2",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{field}:" in lines[0] and "RoPE" in lines[0], lines
