"""The table output of every command (issue 15): identifiers never cut, numbers never end in an ellipsis,
human numbers accepted, the wording a user sees. Runs in-process on small inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fuzz_harness import check, invoke
from lpxsim.catalog import all_systems, model_names

ROOT = Path(__file__).resolve().parent.parent
TINY = str(ROOT / "tests" / "data" / "emulate" / "llama_tiny.json")


def _table(argv: list[str]) -> str:
    o = invoke(argv)
    check(o)
    assert o.code == 0, o.stderr
    assert "…" not in o.stdout, f"a cell was cut:\n{o.stdout}"  # rich's ellipsis: nothing may be cut
    return o.stdout


def _whole(name: str) -> str:
    """A name as one word of a line: a table cell or a block's value (tables become blocks at 80 columns)."""
    return rf"(?m)(^|[\s│]){re.escape(name)}(\s|│|$)"


def test_catalog_tables_keep_every_name_whole() -> None:
    text = _table(["models"])
    for name in model_names():
        assert re.search(_whole(name), text), name
    text = _table(["systems"])
    for s in all_systems():
        assert re.search(_whole(s.name), text), s.name


@pytest.mark.parametrize("argv, expected", [
    (["model", TINY, "--context", "32K"], ["KV per sequence at 32,000 tokens", "layer groups"]),
    (["system", "lpx", "--units", "2"], ["2 racks:", "provenance"]),
    (["capacity", TINY, "--context", "100k"], ["where the bytes go", "concurrency ceiling", "100,000 tokens"]),
    (["compile", TINY, "--chips", "4", "--context", "1K"], ["verified", "context 1,000", "tok/s per user"]),
    (["estimate", TINY, "--chips", "4", "--isl", "1K", "--osl", "100", "--concurrency", "2"],
     ["TTFT", "tok/s/user", "ISL 1,000 / OSL 100", "concurrency 2 on 4 lpx chips"]),
    (["estimate", TINY, "--system", "h200-hgx", "--gpus", "1", "--isl", "2k"], ["TPOT", "ISL 2,000"]),
    (["plan", "point", TINY, "--system", "h200-hgx", "--context", "2K", "--target-tok-s-user", "50"],
     ["best:", "2,000 context"]),
    (["simulate", "--fleet", "rubin-alone", "--model", TINY, "--trace", "tracelab"], ["TTFT ms", "pools"]),
    (["bench", "aa", "llama-3.1-8b", "--system", "h200-hgx", "--requests", "2", "--contexts", "1K"],
     ["Artificial Analysis output speed", "1,000"]),
])
def test_every_command_prints_its_table(argv, expected) -> None:
    text = " ".join(_table(argv).split())  # titles wrap at 80 columns
    for e in expected:
        assert e in text, f"{e!r} not in the output of {argv}:\n{text}"


def test_estimate_on_lpx_titles_the_model_once() -> None:
    """The core question on LPX: the title names the model once, then the workload, load and deployment."""
    text = _table(["estimate", TINY, "--chips", "4", "--isl", "512", "--osl", "64"])
    title = " ".join(text.split("┏")[0].split())
    assert title.startswith("llama_tiny: ISL 512 / OSL 64") and title.count("llama_tiny") == 1, title
    assert "concurrency 1 on 4 lpx chips" in title and " kW" in title, title


def test_capacity_that_does_not_fit_says_so_in_bytes() -> None:
    text = _table(["capacity", "kimi-k2", "--system", "h200-hgx", "--context", "100K"])
    flat = " ".join(text.split())
    m = re.search(r"Does not fit: needs ([\d.,]+) TB .* has ([\d.,]+) TB, ([\d.,]+) GB short", flat)
    assert m and float(m.group(1)) >= float(m.group(2)) and float(m.group(3)) > 0, flat
    assert "-" not in re.sub(r"[-─━┃┏┓┗┛┡┩└┘┌┐│╇╋]|k-once|\d-\d|[a-z]-[a-z0-9]", "", flat.split("KV precision")[0]), \
        "no negative free space or share above 100 %"
    assert not re.search(r"\d{3,}\.\d%", flat)


def test_human_numbers_and_json_agree() -> None:
    o = invoke(["capacity", TINY, "--context", "32K", "--json"])
    check(o)
    assert json.loads(o.stdout)["context"] == 32_000
    o = invoke(["capacity", TINY, "--context", "32Ki", "--json"])
    assert json.loads(o.stdout)["context"] == 32_768


def test_help_lists_real_choices_and_ranges_without_bool() -> None:
    o = invoke(["estimate", "--help"])
    assert o.code == 0
    text = " ".join(o.stdout.split())
    assert "fp16" in text and "mxfp4" in text  # every precision the specs accept
    assert "<bool>" not in text
    assert "1..10M; 32K, 1M ok" in text  # the documented range of a token count
    from lpxsim.catalog import system_names

    for name in system_names():  # --system names every catalog system
        assert name in text, name


@pytest.mark.parametrize("group", ["plan", "bench"])
def test_a_bare_group_prints_help_without_an_error_line(group: str) -> None:
    o = invoke([group])
    assert o.code == 0 and "Usage" in o.stdout and o.stderr == ""


def test_system_typo_suggests_the_real_name() -> None:
    o = invoke(["estimate", TINY, "--system", "rubin"])
    assert o.code == 2
    assert "vr-nvl72" in o.stderr, o.stderr  # the catalog name, not only aliases
    o = invoke(["capacity", "gemma-4-31", "--json"])
    assert o.code == 2 and "gemma-4-31b" in o.stderr


def test_plan_fleet_on_its_default_backend(tmp_path) -> None:
    """`plan fleet` with no --backend (auto: the project's LPX/GPU backends) sizes a small demand."""
    o = invoke(["plan", "fleet", "--demand", str(ROOT / "tests" / "data" / "plans" / "small-demand.yaml"), "--json"],
               time_limit_s=600)  # compiles LPX programs on a cold cache
    check(o)
    d = json.loads(o.stdout)
    assert d["feasible"] and d["assignments"], d
    a = d["assignments"][0]
    assert a["tok_s_user"] >= 100 and a["served"] >= a["demand"] == 5
    assert a["system"] in ("lpx", "h200-hgx")
    text = _table(["plan", "fleet", "--demand", str(ROOT / "tests" / "data" / "plans" / "small-demand.yaml")])
    assert "Fleet BOM" in text and re.search(_whole(a["system"]), text)


@pytest.mark.heavy
def test_estimate_catalog_model_on_lpx_table(monkeypatch) -> None:
    """The core question with a catalog model on one LPX rack (compiles: heavy, so past a fuzz case's bound)."""
    import fuzz_harness

    monkeypatch.setattr(fuzz_harness, "CASE_TIME_LIMIT_S", 600)
    text = _table(["estimate", "llama-3.1-8b", "--isl", "2K", "--osl", "200", "--concurrency", "4"])
    title = " ".join(text.split("┏")[0].split())
    # the engine's label: the workload (and whether it reuses a prefix), the load, the deployment, its power
    assert title.startswith("llama-3.1-8b: ISL 2,000 / OSL 200") and title.count("llama-3.1-8b") == 1, title
    assert "concurrency 4 on 1 lpx rack (256 chips" in title and " kW" in title
    # the 4 users run as 4 micro-batches of one replica, or on 4 replicas of the rack: the table says which
    assert "4 micro-batches in flight" in text or "4 replicas x" in title, text
