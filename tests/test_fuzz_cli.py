"""Fuzz every command's arguments in-process: no traceback, no hang, one-line errors (issue 15).

Cheap inputs keep each case in milliseconds: tiny config.json models (tests/data/emulate), small
systems, short traces. A drawn value is usually wrong (NaN, inf, negative, huge, junk text) and
sometimes right, so both the validators and the commands behind them are exercised.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz_harness import FUZZ, argv, check, count_text, invoke, maybe, real_text

DATA = Path(__file__).parent / "data" / "emulate"
TINY = [str(DATA / "llama_tiny.json"), str(DATA / "mixtral_tiny.json"), str(DATA / "qwen3_tiny.json")]
MODELS = st.sampled_from([*TINY, "llama-3.1-8b", "gemma-4-31b", "gema-4-31b", "no-such-model", "", "/etc",
                          "/dev/null", "x.json"])
SMALL_MODELS = st.sampled_from([*TINY, "nope", "/dev/null"])
SYSTEMS = st.sampled_from(["lpx", "h200-hgx", "vr-nvl72", "gb200-nvl72", "groq-v1", "rubin", "LPX", "", "nvl72"])
GPU_SYSTEMS = st.sampled_from(["h200-hgx", "vr-nvl72", "b200-hgx", "rubin"])
PRECISION = st.sampled_from(["fp8", "bf16", "fp16", "int8", "fp4", "mxfp4", "fp3", "", "FP8"])
KV_LAYOUT = st.sampled_from(["separate", "k-once", "both"])
TOKENS = count_text(st.integers(1, 4096))
SMALL = count_text(st.integers(1, 8))
FRACTION = real_text(st.floats(0, 1))
JSON = st.sampled_from([[], ["--json"]])
# Wrong for every count option (seeds included): NaN, inf, negative, huge, junk, not whole.
BAD_COUNT = st.sampled_from(["nan", "inf", "-1", "1e18", "10**13", "abc", "", "1.5", "99999999999", "-0.5"])


def _precisions() -> st.SearchStrategy[list[str]]:
    return argv(maybe("--weights", PRECISION), maybe("--kv", PRECISION), maybe("--kv-layout", KV_LAYOUT))


@FUZZ
@given(st.sampled_from(["models", "systems", "plan", "bench", "", "--help", "nope", "model", "system"]), JSON)
def test_fuzz_bare_commands(cmd, js):
    check(invoke([c for c in [cmd] if c] + js))


@FUZZ
@given(MODELS, argv(maybe("--context", TOKENS), _precisions(), JSON))
def test_fuzz_model(model, opts):
    check(invoke(["model", model, *opts]))


@FUZZ
@given(st.sampled_from(["lpx", "groq-v1", "h200-hgx", "rubin", "vr-nvl72"]),
       argv(maybe("--units", SMALL), maybe("--topology", st.sampled_from(["trays-32x8", "ring", ""])), JSON))
def test_fuzz_system(name, opts):
    check(invoke(["system", name, *opts]))


@FUZZ
@given(MODELS, argv(maybe("--system", SYSTEMS), maybe("--context", count_text(st.integers(1, 10**7))),
                    maybe("--racks", real_text(st.floats(0.5, 3))), maybe("--chips", SMALL),
                    maybe("--gpus", SMALL), _precisions(), JSON))
def test_fuzz_capacity(model, opts):
    check(invoke(["capacity", model, *opts]))


@FUZZ
@given(SMALL_MODELS, argv(maybe("--system", st.sampled_from(["lpx", "groq-v1", "h200-hgx"])),
                          maybe("--chips", count_text(st.integers(1, 16))), maybe("--context", TOKENS),
                          maybe("--concurrency", SMALL), maybe("--racks", real_text(st.floats(0.01, 2))),
                          maybe("--layout", st.sampled_from(["tp=2,stages=2", "tp=0", "stages=99", "x", ""])),
                          maybe("--chip-sram-bytes", real_text(st.floats(1e3, 1e9))), JSON))
def test_fuzz_compile(model, opts):
    check(invoke(["compile", model, *opts]), allow_exit_1=True)  # exit 1: a failed verification (a finding)


@FUZZ
@given(SMALL_MODELS, SYSTEMS,
       argv(maybe("--isl", TOKENS), maybe("--osl", TOKENS), maybe("--concurrency", SMALL),
            maybe("--chips", count_text(st.integers(1, 16))), maybe("--gpus", SMALL), maybe("--tp", SMALL),
            maybe("--ep", SMALL), maybe("--pp", SMALL), maybe("--mtp", SMALL), maybe("--accept", FRACTION),
            maybe("--racks", real_text(st.floats(0.01, 2))),
            maybe("--goal", st.sampled_from(["latency", "throughput", "speed"])), _precisions(), JSON))
def test_fuzz_estimate(model, system, opts):
    check(invoke(["estimate", model, "--system", system, *opts]))


@FUZZ
@given(SMALL_MODELS, GPU_SYSTEMS,
       argv(maybe("--context", TOKENS), maybe("--osl", TOKENS), maybe("--target-tok-s-user", real_text(st.floats(1, 500))),
            maybe("--new-tokens", TOKENS), maybe("--mtp", SMALL), maybe("--accept", FRACTION),
            maybe("--backend", st.sampled_from(["analytic", "auto", "project", "magic"])), _precisions(), JSON))
def test_fuzz_plan_point(model, system, opts):
    check(invoke(["plan", "point", model, "--system", system, *opts]))


@FUZZ
@given(argv(maybe("--context", count_text(st.integers(1, 10**7))), maybe("--osl", TOKENS),
            maybe("--target-tok-s-user", real_text(st.floats(1, 1000))), maybe("--new-tokens", TOKENS),
            maybe("--mtp", SMALL), maybe("--accept", FRACTION), _precisions(), JSON),
       st.sampled_from(["--context", "--osl", "--target-tok-s-user", "--mtp", "--accept"]),
       st.sampled_from(["nan", "inf", "-1", "1e18", "0", "abc", "10**18"]))
def test_fuzz_plan_t8_bad_values(opts, flag, bad):
    """A bad value anywhere in `plan t8` is refused up front (a valid T8 run is test_plan_fleet_t8's job)."""
    # the removed 'analytic' backend keeps a valid run from starting; the bad value is refused before it
    o = invoke(["plan", "t8", "--backend", "analytic", *opts, flag, bad])
    check(o)
    assert o.code == 2
    if bad not in ("0",) or flag not in ("--mtp", "--accept"):
        assert "backend" not in o.stderr, f"plan t8 {flag} {bad} was accepted"


@FUZZ
@given(st.sampled_from(["examples/plans/mixed-demand.yaml", "/dev/null", "nope.yaml", "/etc", "README.md"]),
       maybe("--systems", st.sampled_from(["lpx", "", ",", "nope", "lpx,rubin"])),
       st.sampled_from(["magic", "analytic"]), JSON)
def test_fuzz_plan_fleet(demand, systems, backend, js):
    check(invoke(["plan", "fleet", "--demand", demand, *systems, "--backend", backend, *js]))


# Built-in LPX fleets compile Gemma 4 31B on first use (tens of CPU-seconds): over a fuzz case's time
# bound, so the fuzzed fleets are GPU ones; the LPX fleets run in tests/test_serving_cli.py.
@FUZZ
@given(st.sampled_from(["rubin-alone", "examples/fleets/rubin-alone.yaml", "nope", "/dev/null"]),
       st.sampled_from([["--trace", "tracelab"], ["--trace", "nope"], ["--workload", "/dev/null"],
                        ["--workload", "examples/workloads/chat.yaml", "--trace", "tracelab"], []]),
       argv(maybe("--rate-scale", real_text(st.floats(0.5, 4))), maybe("--duration", real_text(st.floats(1, 60))),
            maybe("--seed", count_text(st.integers(0, 3))), maybe("--model", SMALL_MODELS), JSON))
def test_fuzz_simulate(fleet, source, opts):
    check(invoke(["simulate", "--fleet", fleet, *source, *opts]))


@FUZZ
@given(st.sampled_from(["llama-3.1-8b", "nope", *TINY]),
       argv(maybe("--contexts", st.one_of(TOKENS, st.sampled_from(["1000,100K", ",", "1e13", "1,2,nan"]))),
            maybe("--requests", SMALL), maybe("--seed", SMALL), maybe("--output-median", TOKENS),
            maybe("--token-ratio", real_text(st.floats(0.5, 2))), maybe("--per-request", st.just("/etc/hostname")),
            maybe("--prompt-file", st.sampled_from(["/dev/null", "/bin/sh", "nope.txt"])), JSON),
       st.sampled_from(["--requests", "--seed", "--output-median", "--token-ratio", "--contexts", "--system"]),
       st.sampled_from(["nan", "-1", "0", "1e18", "10**13", "abc", "rubin"]))
def test_fuzz_bench_aa_bad_values(model, opts, flag, bad):
    """Bad values in `bench aa` are refused before any work (a valid run is test_bench_aa's job)."""
    o = invoke(["bench", "aa", model, "--system", "h200-hgx", *opts, flag, bad])
    check(o)
    if not (flag == "--seed" and bad == "0"):
        assert o.code == 2, f"bench aa {flag} {bad} was accepted"


@FUZZ
@given(st.sampled_from(["llama-3.1-8b", "nope", *TINY]),
       argv(maybe("--contexts", st.sampled_from(["100", "1e13", ",", "1K,nan"])),
            maybe("--concurrency", st.sampled_from(["1", "0", "1e9", "1,2", "-4"])),
            maybe("--osl", TOKENS), maybe("--workers", count_text(st.integers(1, 2))),
            maybe("--executor", st.sampled_from(["serial", "fork", "dask"])),
            maybe("--systems", st.sampled_from(["h200-hgx", "rubin", ""]))),
       st.sampled_from(["--workers", "--osl", "--contexts", "--concurrency"]).flatmap(
           lambda f: st.tuples(st.just(f), BAD_COUNT)) | st.just(("--out", "/etc/hostname")))
def test_fuzz_sweep_bad_values(model, opts, bad_opt):
    o = invoke(["sweep", model, *opts, *bad_opt])
    check(o)
    assert o.code == 2, f"sweep {bad_opt} was accepted"


@FUZZ
@given(argv(maybe("--contexts", st.sampled_from(["100", "1e13", ","])), maybe("--requests", SMALL),
            maybe("--jobs", count_text(st.integers(1, 2))), maybe("--seed", SMALL),
            maybe("--model", SMALL_MODELS), maybe("--systems", st.sampled_from(["lpx", "rubin,", ""]))),
       st.sampled_from(["--jobs", "--requests", "--seed", "--contexts"]).flatmap(
           lambda f: st.tuples(st.just(f), BAD_COUNT)) | st.just(("--out", "/etc/hostname")))
def test_fuzz_tour_bad_values(opts, bad_opt):
    """Bad values in `tour` are refused before any work (a valid tour is test_tour_cli's job)."""
    o = invoke(["tour", *opts, *bad_opt])
    check(o)
    assert o.code == 2, f"tour {bad_opt} was accepted"


@pytest.mark.parametrize("argv_", [
    ["compile", "llama-3.1-8b", "--concurrency", "1000000000"],
    ["plan", "t8", "--context", str(10**18)],
    ["bench", "aa", "llama-3.1-8b", "--contexts", str(10**13)],
    ["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--pp", str(10**18)],
    ["estimate", "llama-3.1-8b", "--mtp", str(10**18)],
    ["capacity", "llama-3.1-8b", "--racks", "1e-300"],
    ["capacity", "llama-3.1-8b", "--racks", "nan"],
    ["sweep", "llama-3.1-8b", "--out", "/etc/hostname"],
    ["simulate", "--fleet", "lpx-alone", "--trace", "tracelab", "--seed", "-1"],
    ["tour", "--jobs", "100000"],
])
def test_the_issue_cases_are_one_line_errors(argv_):
    """Each hang, traceback and absurd-but-accepted value the issue lists: now exit 2, one line, at once."""
    o = invoke(argv_)
    check(o)
    assert o.code == 2, argv_
    assert o.stderr.startswith("error: ") and o.stderr.count("\n") == 1, o.stderr


def _human(v: int) -> str:
    return f"{v // 1000}K" if v % 1000 == 0 and v >= 1000 else str(v)


IN_RANGE_FUZZ = settings(FUZZ, max_examples=40)  # every case runs a backend (~0.1 s): fewer of them
IN_RANGE = st.fixed_dictionaries({
    "isl": st.integers(1, 8000).map(_human), "osl": st.integers(1, 2000).map(_human),
    "concurrency": st.integers(1, 64).map(str), "mtp": st.integers(0, 4).map(str),
    "accept": st.floats(0, 0.95).map(repr),
})


@IN_RANGE_FUZZ
@given(st.sampled_from(TINY), st.sampled_from([["--system", "lpx", "--chips", "4"], ["--system", "groq-v1", "--chips", "8"],
                                               ["--system", "h200-hgx", "--gpus", "1"], ["--system", "vr-nvl72"],
                                               ["--system", "h200-hgx", "--gpus", "2", "--tp", "2"]]), IN_RANGE, JSON)
def test_fuzz_estimate_in_range(model, hw, v, js):
    """Values inside every documented range reach the backends: a result, or a one-line reason (no fit)."""
    o = invoke(["estimate", model, *hw, "--isl", v["isl"], "--osl", v["osl"], "--concurrency", v["concurrency"],
                "--mtp", v["mtp"], "--accept", v["accept"], *js])
    check(o)


@IN_RANGE_FUZZ
@given(st.sampled_from(TINY), st.sampled_from(["h200-hgx", "vr-nvl72", "lpx"]), IN_RANGE,
       st.floats(1, 5000).map(repr), JSON)
def test_fuzz_plan_point_in_range(model, system, v, target, js):
    o = invoke(["plan", "point", model, "--system", system, "--context", v["isl"], "--osl", v["osl"],
                "--target-tok-s-user", target, "--mtp", v["mtp"], "--accept", v["accept"], *js])
    check(o)


@FUZZ
@given(st.sampled_from([*TINY, "/bin/sh", "/dev/null", "/etc", "nope.json", str(DATA.parent.parent / "conftest.py")]),
       argv(maybe("--chips", count_text(st.integers(1, 4))), maybe("--steps", SMALL), maybe("--seed", SMALL),
            maybe("--prompt-tokens", SMALL), maybe("--sram-bytes", count_text(st.integers(1, 10**6))),
            maybe("--layout", st.sampled_from(["tp=2,stages=2", "x", ""])), JSON),
       st.sampled_from(["--chips", "--steps", "--seed", "--prompt-tokens", "--sram-bytes"]).flatmap(
           lambda f: st.tuples(st.just(f), BAD_COUNT)))
def test_fuzz_emulate_bad_values(config, opts, bad_opt):
    """Bad values or files in `emulate` are refused before any work (a valid run is test_emulate_cli's job)."""
    o = invoke(["emulate", "--config", config, *opts, *bad_opt])
    check(o)
    assert o.code == 2, f"emulate {bad_opt} was accepted"
