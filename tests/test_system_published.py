"""`lpxsim system` shows each vendor rack figure beside the chip-derived figure the model uses (issue 14 item 6)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lpxsim.catalog import get_system
from lpxsim.cli.main import app
from lpxsim.specs.summary import system_summary


def test_lpx_sram_bandwidth_used_is_the_chip_sum_not_the_rack_table():
    rows = {r["figure"]: r for r in system_summary(get_system("lpx"))["published_checks"]}
    bw = rows["sram_bw_Bps"]
    assert bw["used"] == pytest.approx(256 * 150e12) and bw["published"] == pytest.approx(40e15)
    assert bw["ratio_published_to_used"] == pytest.approx(40 / 38.4)
    assert rows["sram_bytes"]["ratio_published_to_used"] == pytest.approx(1.0)
    assert any("38.4 PB/s is the figure used" in n for n in get_system("lpx").notes)


def test_system_cli_prints_the_check():
    r = CliRunner().invoke(app, ["system", "lpx", "--json"])
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert any(c["figure"] == "sram_bw_Bps" for c in d["published_checks"])
    r = CliRunner().invoke(app, ["system", "lpx"])
    assert "never an input" in r.stdout and "1.042" in r.stdout
