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
