"""An output path that names a file the command reads is refused before any work (a new user's audit:
`compile cfg.json --trace cfg.json` replaced the config with a trace, `simulate --timeline fleet.yaml` the fleet,
`bench aa --per-request prompt.txt` the prompt), through a symbolic link too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fuzz_harness import invoke

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "emulate" / "llama_tiny.json"
FLEET = ROOT / "examples" / "fleets" / "rubin-alone.yaml"


@pytest.mark.parametrize("case", ["compile", "simulate", "simulate-link", "bench"])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path: Path, monkeypatch, case: str) -> None:
    monkeypatch.chdir(tmp_path)
    if case == "compile":
        victim = tmp_path / "cfg.json"
        shutil.copy(TINY, victim)
        argv, field = ["compile", str(victim), "--chips", "4", "--context", "64", "--trace", "./cfg.json"], "trace"
    elif case.startswith("simulate"):
        victim = tmp_path / "fleet.yaml"
        shutil.copy(FLEET, victim)
        out = victim
        if case == "simulate-link":
            out = tmp_path / "link.yaml"
            out.symlink_to(victim)
        argv = ["simulate", "--fleet", str(victim), "--trace", "tracelab-agent", "--duration", "5", "--timeline", str(out)]
        field = "timeline"
    else:
        victim = tmp_path / "prompt.txt"
        victim.write_text("a short prompt\n")
        argv = ["bench", "aa", "llama-3.1-8b", "--system", "h200-hgx", "--prompt-file", str(victim),
                "--per-request", str(victim)]
        field = "per-request"
    before = victim.read_bytes()
    res = invoke(argv, time_limit_s=120)
    assert res.code != 0 and res.exception is None, res
    lines = [ln for ln in res.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:") and "this command reads" in lines[0], res.stderr
    assert victim.read_bytes() == before
    assert {p.name for p in tmp_path.iterdir()} <= {victim.name, "link.yaml"}  # nothing else written


@pytest.mark.parametrize("argv,mine", [
    (["tour", "--systems", "h200-hgx", "--model", "llama-3.1-8b"], "index.html"),
    (["sweep", "llama-3.1-8b", "--systems", "h200-hgx", "--contexts", "1000", "--concurrency", "1"], "sweep.parquet"),
    (["simulate", "--fleet", str(FLEET), "--trace", "tracelab-agent", "--duration", "5"], "summary.json"),
    (["plan", "point", "llama-3.1-8b", "--system", "h200-hgx", "--context", "1000", "--target-tok-s-user", "50",
      "--emit"], "README.md"),
])
def test_a_results_folder_holding_a_users_files_is_refused(tmp_path: Path, argv: list[str], mine: str) -> None:
    """The audit: `tour --out u` replaced the user's u/index.html, `plan point --emit u` their README.md. A folder
    that holds files is written into only if lpxsim wrote it (its marker file)."""
    folder = tmp_path / "u"
    folder.mkdir()
    (folder / mine).write_text("mine\n")
    flag = [] if argv[-1] == "--emit" else ["--out"]
    res = invoke([*argv, *flag, str(folder)], time_limit_s=60)
    assert res.code != 0 and res.exception is None, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "lpxsim did not write" in lines[0] and mine in lines[0], res.stderr
    assert [p.name for p in folder.iterdir()] == [mine] and (folder / mine).read_text() == "mine\n"


def test_a_simulation_whose_output_name_is_a_folder_is_refused_before_it_runs(tmp_path: Path) -> None:
    """The audit: with out/summary.json a folder, the simulation ran, wrote three of its four files, then failed."""
    folder = tmp_path / "o"
    res = invoke(["simulate", "--fleet", str(FLEET), "--trace", "tracelab-agent", "--duration", "5", "--out",
                  str(folder)], time_limit_s=120)
    assert res.code == 0, res
    (folder / "summary.json").unlink()
    (folder / "summary.json").mkdir()
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    res = invoke(["simulate", "--fleet", str(FLEET), "--trace", "tracelab-agent", "--duration", "5", "--out",
                  str(folder)], time_limit_s=120)
    assert res.code != 0 and res.stderr.startswith("error: out:") and "directory" in res.stderr, res
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before  # nothing rewritten
