"""Fuzz every input file kind: config.json, fleet / workload / demand YAML, traces in every format.

Each case writes a mutated (or broken, or binary) file and reads it the way the CLI does; many run
the CLI itself in-process. The promise (issue 15): a bad file is one UserError naming the field,
never a traceback, a hang or a blow-up. Files start from the shipped tiny configs and examples, so a
case that survives validation stays cheap (milliseconds).
"""

from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from analytic_double import use_double
from fuzz_harness import FUZZ, bounded, check, invoke
from lpxsim.core.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "emulate"
TINY = DATA / "llama_tiny.json"
CONFIGS = [json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))]

# Values a mutated field may take: wrong types, NaN/inf, negative, huge; a few right-looking ones.
LEAF = st.one_of(
    st.sampled_from([None, True, False, 0, 1, 2, 3, 7, -1, -(10**13), 10**13, 2**63, 10**400, 0.5, -0.5, 1e-300,
                     1e300, math.nan, math.inf, -math.inf, "", "x", "1e5", "nan", "full_attention", "sliding"]),
    st.integers(-5, 64), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
    st.floats(0.01, 100), st.integers(1, 16),  # plausible values, so cases also get past validation
)
VALUE = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                     max_leaves=6)


def _paths(obj, prefix=()):
    """Every (path) to a leaf or container inside nested dicts/lists."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw, base):
    """`base` with 1-3 edits: a field replaced by a drawn value, deleted, or an unknown key added."""
    doc = copy.deepcopy(draw(st.sampled_from(base)) if isinstance(base, list) else base)
    for _ in range(draw(st.integers(1, 2))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        action = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
        if action == "set":
            parent[path[-1]] = draw(VALUE)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "num_layers", "rate", "x"]))] = draw(VALUE)
    return doc


def _write_json(path: Path, doc) -> None:
    text = json.dumps(doc, allow_nan=True, default=str) if not isinstance(doc, bytes) else None
    path.write_bytes(doc if isinstance(doc, bytes) else text.encode())


def _write_yaml(path: Path, doc) -> None:
    if isinstance(doc, bytes):
        path.write_bytes(doc)
        return
    try:
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    except (yaml.YAMLError, ValueError):  # e.g. 10**400 as a float key: write it as JSON (YAML 1.2 subset)
        path.write_text(json.dumps(doc, default=str))


BROKEN = st.sampled_from([b"", b"\x00\x01\x02\xff\xfe", b"\xff" * 64, b"{", b"[1, 2]", b"null", b"42",
                          b"key: [unclosed", b"\x1f\x8b\x08\x00broken-gzip", "é: ü".encode("latin-1"),
                          b"a: 1\n" * 3 + b"\t- bad", b"---\n- a\n- b\n"])


def _one_line_user_error(fn) -> None:
    """`fn()` succeeds or raises a UserError whose message is one line naming a field."""
    try:
        with bounded():
            fn()
    except UserError as e:
        assert e.field and "\n" not in str(e), repr(e)


# --- config.json -------------------------------------------------------------------------------------


@FUZZ
@given(st.one_of(mutated(CONFIGS), BROKEN), st.sampled_from(["model", "capacity", "compile", "estimate"]))
def test_fuzz_config_json(tmp_path_factory, doc, cmd):
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    _write_json(path, doc)
    extra = {"model": ["--json"], "capacity": ["--json", "--context", "1000"],
             "compile": ["--chips", "4", "--context", "256", "--json"],
             "estimate": ["--system", "h200-hgx", "--gpus", "1", "--isl", "128", "--osl", "8", "--json"]}[cmd]
    check(invoke([cmd, str(path), *extra]), allow_exit_1=cmd == "compile")


# --- workload YAML -----------------------------------------------------------------------------------

WORKLOADS = [
    {"name": "w", "kind": "synthetic", "num_requests": 3, "arrival": {"process": "poisson", "rate": 5.0},
     "isl": {"kind": "uniform", "low": 50, "high": 200}, "osl": 8, "slo": {"ttft_s": 1.0, "tpot_s": 0.1}},
    {"name": "g", "kind": "synthetic", "num_requests": 3, "arrival": {"process": "gamma", "rate": 2.0, "cv": 0.5},
     "isl": {"kind": "lognormal", "median": 100, "sigma": 0.5, "max": 400}, "osl": {"kind": "fixed", "value": 4},
     "shared_prefix": {"tokens": 64, "groups": 2}, "hash_block_tokens": 16,
     "classes": [{"name": "a", "weight": 1}, {"name": "b", "weight": 2}]},
    {"name": "c", "kind": "synthetic", "num_requests": 4, "arrival": {"process": "closed", "concurrency": 2},
     "isl": 64, "osl": {"kind": "exponential", "mean": 4, "min": 1}, "acceptance": {"kind": "beta", "a": 2, "b": 2}},
    {"name": "ag", "kind": "agentic", "num_requests": 2, "arrival": {"process": "closed", "concurrency": 1},
     "osl": 4, "session": {"turns": 2, "first_isl": 64, "tool_tokens": 16, "think_s": {"kind": "normal", "mean": 0.1,
                                                                                       "sigma": 0.05, "min": 0}}},
    {"name": "t", "kind": "trace", "trace": "tracelab", "num_requests": 3, "rate_scale": 2.0, "trace_jitter_s": 0.1},
]
FLEET = ROOT / "examples" / "fleets" / "rubin-alone.yaml"


def _tiny_fleet(tmp: Path) -> Path:
    doc = yaml.safe_load(FLEET.read_text())
    for p in doc["pools"]:
        p["model"] = str(TINY)
        p["workers"] = 1
    path = tmp / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@FUZZ
@given(st.one_of(mutated(WORKLOADS), BROKEN))
def test_fuzz_workload_yaml(tmp_path_factory, doc):
    tmp = tmp_path_factory.mktemp("wl")
    path = tmp / "workload.yaml"
    _write_yaml(path, doc)
    check(invoke(["simulate", "--fleet", str(_tiny_fleet(tmp)), "--workload", str(path), "--duration", "30",
                  "--json"]))


# --- fleet YAML ---------------------------------------------------------------------------------------

FLEETS = []
for _name in ("rubin-alone", "lpx-alone", "rubin-lpx-pd", "routed-mix"):
    _doc = yaml.safe_load((ROOT / "examples" / "fleets" / f"{_name}.yaml").read_text())
    for _p in _doc["pools"]:
        _p["model"] = str(TINY)
        _p["workers"] = 1
    FLEETS.append(_doc)


@FUZZ
@given(st.one_of(mutated(FLEETS), BROKEN))
def test_fuzz_fleet_yaml(tmp_path_factory, doc):
    tmp = tmp_path_factory.mktemp("fl")
    path = tmp / "fleet.yaml"
    _write_yaml(path, doc)
    wl = tmp / "wl.yaml"
    wl.write_text(yaml.safe_dump(WORKLOADS[0]))
    with pytest.MonkeyPatch.context() as mp:  # the fleets include LPX pools: the test double prices them
        use_double(mp)
        check(invoke(["simulate", "--fleet", str(path), "--workload", str(wl), "--json"]))


# --- demand YAML --------------------------------------------------------------------------------------

DEMAND = yaml.safe_load((ROOT / "examples" / "plans" / "mixed-demand.yaml").read_text())


@FUZZ
@given(st.one_of(mutated(DEMAND), BROKEN))
def test_fuzz_demand_yaml(tmp_path_factory, doc):
    """Every mutated demand file is read (one line or a spec); the CLI refuses the broken ones."""
    from lpxsim.plan.fleet import load_demand

    path = tmp_path_factory.mktemp("dm") / "demand.yaml"
    _write_yaml(path, doc)
    _one_line_user_error(lambda: load_demand(path))
    # Through the CLI, stopped after the file is read (an unknown candidate system), so a valid
    # demand costs nothing; a bad file must still be the one-line error.
    check(invoke(["plan", "fleet", "--demand", str(path), "--systems", "no-such-system", "--json"]))


# --- traces -------------------------------------------------------------------------------------------

CELL = st.one_of(st.integers(-3, 5000), st.sampled_from(["", "x", "nan", "inf", "-1", "1e400", "1e13", None, True]),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3))
FORMATS = {
    "azure.csv": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burst.csv": ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"),
    "tracelab.csv": ("session_id", "t_input_ready_s", "input_tokens_total", "output_tokens"),
    "mooncake.jsonl": ("timestamp", "input_length", "output_length", "hash_ids"),
    "tracelab.jsonl": ("session_id", "t_input_ready_s", "input_tokens_total", "output_tokens"),
}
GOOD = {"TIMESTAMP": st.sampled_from(["2023-11-16 18:15:46.6805900", "2023-11-16 18:16:00", "not a date"]),
        "hash_ids": st.one_of(st.lists(st.integers(0, 9), max_size=3), CELL)}


@st.composite
def trace_file(draw):
    """(file name, bytes) of a small trace in one of the supported formats, rows possibly broken."""
    name = draw(st.sampled_from(sorted(FORMATS)))
    cols = list(FORMATS[name])
    if draw(st.booleans()):  # drop or rename a column
        i = draw(st.integers(0, len(cols) - 1))
        cols[i] = draw(st.sampled_from([cols[i], "bogus"]))
    rows = []
    for _ in range(draw(st.integers(0, 5))):
        row = {c: draw(GOOD.get(c, st.integers(0, 3000)) | CELL) if draw(st.integers(0, 4)) == 0
               else draw(GOOD.get(c, st.integers(1, 3000))) for c in cols}
        if draw(st.integers(0, 6)) == 0 and row:  # a row missing a key
            row.pop(draw(st.sampled_from(sorted(row))))
        rows.append(row)
    if name.endswith(".jsonl"):
        lines = [json.dumps(r, default=str) for r in rows]
        if draw(st.integers(0, 5)) == 0:
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["{bad json", "[1,2]", "null", "7"])))
        data = ("\n".join(lines) + "\n").encode()
    else:
        head = ",".join(cols)
        data = ("\n".join([head] + [",".join("" if r.get(c) is None else str(r.get(c)) for c in cols) for r in rows])
                + "\n").encode()
    if draw(st.integers(0, 6)) == 0:
        data = draw(BROKEN)
    if draw(st.booleans()):
        return name + ".gz", gzip.compress(data) if draw(st.integers(0, 5)) else data
    return name, data


@FUZZ
@given(trace_file())
def test_fuzz_trace_files(tmp_path_factory, spec):
    from lpxsim.serving.traces import load_trace

    name, data = spec
    path = tmp_path_factory.mktemp("tr") / name
    path.write_bytes(data)
    _one_line_user_error(lambda: load_trace(str(path)))


@FUZZ
@given(trace_file())
def test_fuzz_trace_files_through_simulate(tmp_path_factory, spec):
    name, data = spec
    tmp = tmp_path_factory.mktemp("trs")
    path = tmp / name
    path.write_bytes(data)
    check(invoke(["simulate", "--fleet", str(_tiny_fleet(tmp)), "--trace", str(path), "--json"]))
