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


def test_an_unknown_gpu_engine_is_named_before_any_layout_is_tried() -> None:
    """`--framework atom` (AMD's engine, which lpxsim has no parameters for) used to reach the layout search and
    fail every layout, reporting the last one's reason ("256 experts do not split evenly over ep=1024")."""
    from lpxsim.core.errors import UserError
    from lpxsim.engine.answer import answer
    from lpxsim.engine.query import Load, Workload

    for cmd in (["estimate", "deepseek-r1", "--system", "mi300x"], ["bench", "aa", "deepseek-r1", "--system", "mi300x"],
                ["sweep", "deepseek-r1", "--systems", "b200-hgx"], ["plan", "point", "deepseek-r1", "--system", "h200-hgx"]):
        res = _lpxsim(*cmd, "--framework", "atom")
        lines = [x for x in res.stderr.strip().splitlines() if not x.startswith("lpxsim: ")]
        assert res.returncode == 2 and lines == ["error: framework: unknown framework 'atom'; choose one of sglang, "
                                                 "trtllm, vllm"], (cmd, res.stderr)
    with pytest.raises(UserError) as e:
        answer("deepseek-r1", None, Workload(1000, 1000), Load(concurrency=4), system="mi300x", framework="atom")
    assert e.value.field == "framework"
    res = _lpxsim("estimate", "deepseek-r1", "--system", "b200-hgx", "--tp", "8", "--framework", "TRT", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["framework"] == "trtllm"  # the alias resolves


def test_unknown_option_is_one_line_exit_2() -> None:
    res = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "capacity", "gemma-4-31b", "--bogus"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


# --- identity: --version, shell completion, the name of a config.json model (issue 30) --------------------

def _lpxsim(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "lpxsim.cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_version_prints_the_package_version() -> None:
    from importlib import metadata

    import lpxsim

    try:
        expected = metadata.version("lpxsim")
    except metadata.PackageNotFoundError:
        expected = lpxsim.__version__
    for args in (["--version"], ["--no-cache", "--version"]):
        res = _lpxsim(*args)
        assert res.returncode == 0, res.stderr
        assert res.stdout == f"lpxsim {expected}\n"


def test_completion_options_are_offered_and_complete_command_names() -> None:
    res = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert "--install-completion" in res.output and "--show-completion" in res.output
    pick = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}  # name the shell instead of detecting it
    script = _lpxsim("--show-completion", "bash", env=pick)
    assert script.returncode == 0 and "_LPXSIM_COMPLETE" in script.stdout and "complete_bash" in script.stdout
    # what the installed script asks: the words completing "lpxsim est" and "lpxsim cache c"
    words = _lpxsim(env={"_LPXSIM_COMPLETE": "complete_bash", "COMP_WORDS": "lpxsim est", "COMP_CWORD": "1"})
    assert words.returncode == 0 and words.stdout.split() == ["estimate"]
    words = _lpxsim(env={"_LPXSIM_COMPLETE": "complete_bash", "COMP_WORDS": "lpxsim cache c", "COMP_CWORD": "2"})
    assert words.stdout.split() == ["clear"]
    zsh = _lpxsim("--show-completion", "zsh", env=pick)
    assert zsh.returncode == 0 and "compdef" in zsh.stdout


CONFIG = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 128, "intermediate_size": 128, "model_type": "llama"}


@pytest.mark.parametrize("folder, file, name_or_path, expected", [
    ("meta-llama--Llama-3.1-8B", "config.json", "meta-llama/Llama-3.1-8B", "Llama-3.1-8B"),
    ("anything", "config.json", "/home/me/models/my-finetune/", "my-finetune"),
    ("my-model-folder", "config.json", None, "my-model-folder"),
    ("my-model-folder", "config.json", "", "my-model-folder"),
    ("some-folder", "tiny-llama.json", None, "tiny-llama"),
    ("some-folder", "CONFIG.json", 7, "some-folder"),
])
def test_a_config_path_model_is_named_for_what_it_is(tmp_path, folder, file, name_or_path, expected) -> None:
    """From `_name_or_path` (its last part), else the file's stem, else (a generic "config") its folder."""
    d = tmp_path / folder
    d.mkdir()
    cfg = dict(CONFIG, **({"_name_or_path": name_or_path} if name_or_path is not None else {}))
    (d / file).write_text(json.dumps(cfg))
    res = _lpxsim("model", str(d / file), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["name"] == expected
    assert "config" not in expected.lower()


def test_every_command_summary_is_one_line():
    """A group's --help lists each command by its docstring's first paragraph, kept as written in rich markup
    mode: a summary wrapped in the source printed as a broken line in the listing (capacity, plan point,
    plan fleet)."""
    import inspect

    from lpxsim.cli.main import app, command  # noqa: F401  (importing `app` registers every command)

    found = []

    def walk(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            found.append(f"{path} {name}".strip())
            first = inspect.cleandoc(sub.short_help or sub.help or "").split("\n\n")[0]
            assert first and "\n" not in first, f"{path} {name}: {first!r}"
            walk(sub, f"{path} {name}")

    walk(command(), "")
    assert {"capacity", "plan point", "plan fleet", "bench aa"} <= set(found)
