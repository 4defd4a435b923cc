"""`lpxsim modes` (T9): every mode at every context and load, against Rubin alone and LPX alone.
Fast stand-in: the built-in fleets on the test double of tests/analytic_double.py (the detailed run is in
docs/validation.md)."""

from __future__ import annotations

import json
import sys

import pytest

from analytic_double import use_double
from lpxsim.bench.fleets import MODES


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    from lpxsim.cli.main import run

    monkeypatch.setattr(sys, "argv", ["lpxsim", "modes", *args])
    try:
        run()
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture(autouse=True)
def _stand_in(monkeypatch):
    use_double(monkeypatch)


def test_json_has_every_mode_context_and_load_with_relative_speeds(monkeypatch, capsys) -> None:
    code, out, _ = _cli(monkeypatch, capsys, "gemma-4-31b", "--contexts", "2000,8000", "--loads", "light,3",
                        "--osl", "32", "--json")
    assert code == 0
    d = json.loads(out)
    rows = d["rows"]
    assert len(rows) == len(MODES) * 2 * 2 and "agentic sessions" in d["note"] and d["session"] == "agentic"
    # the default workload: an agent session at 8,000 tokens; 2,000 is no longer than one turn's new tokens,
    # a first turn with nothing cached: every row says which it ran
    for r in rows:
        assert ("agentic session" in r["session"]) == (r["context"] == 8000), r["session"]
    assert {(r["context"], r["load"]) for r in rows} == {(c, x) for c in (2000, 8000) for x in ("light", "3")}
    assert list(rows[0])[:8] == ["mode", "context", "load", "users", "tok_s_user_p50", "tok_s_user_p10",
                                 "ttft_p90_s", "tok_s_per_mw"]
    by = {(r["mode"], r["context"], r["load"]): r for r in rows}
    for (_mode, ctx, load), r in by.items():
        assert r["users"] == (8 if load == "light" else 3)
        assert r["tok_s_user_p10"] <= r["tok_s_user_p50"]
        rubin, lpx = by[("rubin-alone", ctx, load)], by[("lpx-alone", ctx, load)]
        assert r["speed_vs_rubin"] == pytest.approx(r["tok_s_user_p50"] / rubin["tok_s_user_p50"])
        assert r["speed_vs_lpx"] == pytest.approx(r["tok_s_user_p50"] / lpx["tok_s_user_p50"])
        assert "kW" in r["hardware"] and r["power_kw"] > 0


def test_session_none_is_the_no_cache_loop(monkeypatch, capsys) -> None:
    code, out, _ = _cli(monkeypatch, capsys, "gemma-4-31b", "--contexts", "8000", "--loads", "3", "--osl", "32",
                        "--modes", "lpx-alone,rubin-lpx-pd", "--session", "none", "--json")
    assert code == 0
    d = json.loads(out)
    assert "re-prefills" in d["note"] and all("no prefix reuse" in r["session"] for r in d["rows"])
    code, out, _ = _cli(monkeypatch, capsys, "gemma-4-31b", "--contexts", "8000", "--loads", "3", "--osl", "32",
                        "--modes", "lpx-alone,rubin-lpx-pd", "--json")
    agentic = {r["mode"]: r for r in json.loads(out)["rows"]}
    none = {r["mode"]: r for r in d["rows"]}
    # a later turn prefills 2,000 tokens, not 8,000: its TTFT is shorter, on the engine's row and the simulated one
    for mode in ("lpx-alone", "rubin-lpx-pd"):
        assert agentic[mode]["ttft_s"] < none[mode]["ttft_s"], mode


@pytest.mark.parametrize("args,field", [(("--loads", "medium"), "loads"), (("--contexts", "0"), "contexts"),
                                        (("--modes", "rubin-lpx-xyz"), "modes"), (("--session", "lru"), "session")])
def test_bad_input_is_one_line_naming_the_field(monkeypatch, capsys, args, field) -> None:
    code, _, err = _cli(monkeypatch, capsys, "gemma-4-31b", *args)
    assert code == 2 and field in err and len(err.strip().splitlines()) == 1


def test_every_mode_carries_its_band_a_mixed_one_its_widest_parts(monkeypatch, capsys) -> None:
    """The modes had no band (helper audit, round 3 twenty-fifth session). Rubin alone and LPX alone carry the
    engine answer's; a mode mixing Rubin and LPX pools carries the widest of its parts' (no measurement of a mixed
    deployment exists), and a figure any part has no validation of is named unvalidated."""
    from lpxsim.engine.bands import answer_band

    code, out, _ = _cli(monkeypatch, capsys, "gemma-4-31b", "--contexts", "8000", "--loads", "3", "--osl", "32",
                        "--json")
    assert code == 0
    rows = {r["mode"]: r for r in json.loads(out)["rows"]}
    rubin, lpx = answer_band("vr-nvl72"), answer_band("lpx")
    assert rows["rubin-alone"]["tok_s_user_band_pct"] == pytest.approx(100 * rubin.band_fraction, abs=0.01)
    assert rows["lpx-alone"]["tok_s_user_band_pct"] == pytest.approx(100 * lpx.band_fraction, abs=0.01)
    widest = max(rubin.band_fraction, lpx.band_fraction)
    for mode in ("rubin-lpx-pd", "rubin-lpx-afd", "rubin-lpx-drafter"):
        r = rows[mode]
        assert r["tok_s_user_band_pct"] == pytest.approx(100 * widest, abs=0.01), mode
        assert r["cost_path"] == "projected-gpu + compiled-lpx" and "mixed deployment" in r["band"]
        assert "ttft" in r["unvalidated"].split(",")  # LPX has no TTFT record: neither has the mix
        assert r["tok_s_user_low"] < r["tok_s_user_p50"] < r["tok_s_user_high"]
    code, out, _ = _cli(monkeypatch, capsys, "gemma-4-31b", "--contexts", "8000", "--loads", "3", "--osl", "32")
    assert code == 0 and "band" in out and "- rubin-lpx-pd: error band: tok/s/user (±" in out
    assert "nan" not in out


def test_mixed_bands_take_the_widest_part_per_metric() -> None:
    from lpxsim.engine.bands import figure_bands, mixed_bands

    figures = {"tok_s_user": 100.0, "ttft": 0.2, "tok_s_per_chip": 10.0}
    gpu = figure_bands("vr-nvl72", "projected-gpu", "", figures)
    assert mixed_bands([("vr-nvl72", "projected-gpu")] * 2, figures) == gpu  # one part: its own keys
    amd = figure_bands("mi325x", "projected-gpu", "", figures)
    mix = mixed_bands([("vr-nvl72", "projected-gpu"), ("mi325x", "projected-gpu")], figures)
    for metric in figures:
        assert mix[f"{metric}_band_pct"] == max(gpu[f"{metric}_band_pct"], amd[f"{metric}_band_pct"])
    assert mix["unvalidated"] == "" and "its other parts: projected-gpu on vr-nvl72" in mix["band"]
