"""The command-line face: every command is registered, --help works, user mistakes exit 2 with one line."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from lpxsim.cli.main import COMMAND_MODULES, app

COMMANDS = ["models", "model", "systems", "system", "capacity", "compile", "estimate", "emulate", "simulate",
            "bench", "sweep", "tour", "plan"]


def test_every_design_command_is_registered() -> None:
    assert len(COMMAND_MODULES) == len(set(COMMAND_MODULES))
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in COMMANDS:
        assert cmd in res.output, cmd


def test_estimate_json_is_one_object_with_context_and_hardware() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "lpxsim.cli.main", "estimate", "llama-3.1-8b", "--system", "h200-hgx", "--tp", "1",
         "--gpus", "1", "--isl", "2000", "--osl", "200", "--concurrency", "4", "--json"],
        capture_output=True, text=True, check=True,
    )
    d = json.loads(res.stdout)
    for key in ("ttft_s", "tpot_s", "tok_s_user", "output_tok_s_per_gpu", "total_tok_s_per_gpu", "context",
                "concurrency", "system", "chips", "power_w"):
        assert key in d, key
    assert d["concurrency"] == 4 and d["chips"] == 1 and d["tok_s_user"] > 0


def test_wrong_layout_flags_for_the_system_are_user_errors() -> None:
    res = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "estimate", "llama-3.1-8b", "--system", "lpx",
                          "--gpus", "8"], capture_output=True, text=True)
    assert res.returncode == 2 and "gpus" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "estimate", "llama-3.1-8b", "--system", "h200-hgx",
                          "--racks", "1"], capture_output=True, text=True)
    assert res.returncode == 2 and "racks" in res.stderr


def test_unknown_option_is_one_line_exit_2() -> None:
    res = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "capacity", "gemma-4-31b", "--bogus"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
