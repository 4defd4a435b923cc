"""The command-line face: every command is registered, --help works, user mistakes exit 2 with one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from lpxsim.cli.main import COMMAND_MODULES, app

COMMANDS = ["models", "model", "systems", "system", "capacity", "compile", "estimate", "emulate", "simulate",
            "bench", "sweep", "tour", "plan"]


def test_every_design_command_is_registered() -> None:
    """Each command by its exact name in the click tree (not a substring of --help: `model` is in `models`),
    and each listed in --help as a row of its own."""
    import re

    from lpxsim.cli.main import command

    assert len(COMMAND_MODULES) == len(set(COMMAND_MODULES))
    registered = set(command().commands)
    for cmd in COMMANDS:
        assert cmd in registered, cmd
    res = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert res.exit_code == 0
    for cmd in COMMANDS:
        assert re.search(rf"│ {re.escape(cmd)}\s", res.output), cmd


def test_estimate_json_is_one_object_with_context_and_hardware() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "lpxsim.cli.main", "estimate", "llama-3.1-8b", "--system", "h200-hgx", "--tp", "1",
         "--gpus", "1", "--isl", "2000", "--osl", "200", "--concurrency", "4", "--json"],
        capture_output=True, text=True, check=True,
    )
    d = json.loads(res.stdout)
    from lpxsim.catalog import get_system

    # The inputs come back as given; the outputs obey the identities that define them.
    assert (d["model"], d["isl"], d["osl"], d["context"], d["concurrency"], d["chips"]) == (
        "llama-3.1-8b", 2000, 200, 2200, 4, 1)
    h200 = get_system("h200-hgx")
    assert d["power_w"] == pytest.approx(float(h200.power_w) / h200.chips_per_unit)  # one GPU's share of the node
    # tok/s/user is the mean over requests of 1 / TPOT, and where the simulator answers (docs/engine.md) the
    # requests differ a little: within 1 % of 1 / mean TPOT, and E2E = TTFT + (OSL - 1) x TPOT in the means
    assert d["tok_s_user"] == pytest.approx(1 / d["tpot_s"], rel=1e-2)
    assert d["e2e_s"] == pytest.approx(d["ttft_s"] + (d["osl"] - 1) * d["tpot_s"], rel=1e-2)
    assert d["tok_s_total"] == pytest.approx(d["concurrency"] * d["osl"] / d["e2e_s"])
    assert d["total_tok_s"] == pytest.approx(d["concurrency"] * d["context"] / d["e2e_s"])
    assert d["output_tok_s_per_gpu"] == d["output_tok_s_per_chip"] == pytest.approx(d["tok_s_total"] / d["chips"])
    assert d["total_tok_s_per_gpu"] == pytest.approx(d["total_tok_s"])
    assert d["tok_s_per_mw"] == pytest.approx(d["tok_s_total"] / (d["power_w"] / 1e6))
    assert 0 < d["ttft_s"] < d["e2e_s"] and d["tok_s_user"] < d["tok_s_total"]  # 4 users share the GPU


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
