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
from hypothesis import given, settings
from hypothesis import strategies as st

from analytic_double import use_double
from fuzz_harness import (
    FUZZ,
    JUNK,
    bounded,
    check,
    config_type_errors,
    deep_json,
    deep_yaml,
    huge_int,
    invoke,
    long_path,
    non_utf8,
)
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


# --- issue 30: every input file kind, through the CLI, for each new kind of bad file ------------------------
# Each test draws fresh cases of one kind (depth, digits, bytes, sizes, names) for every file a command
# reads; the promise: exit 2 with one line naming the option that gave the file (or success).

def _input_kinds(tmp: Path) -> dict[str, tuple[str, object]]:
    """kind -> (file name, argv builder taking the path): every command option that reads a data file."""
    fleet, wl = _tiny_fleet(tmp), tmp / "wl.yaml"
    wl.write_text(yaml.safe_dump(WORKLOADS[0]))
    return {
        "model": ("config.json", lambda p: ["model", p, "--json"]),
        "config": ("config.json", lambda p: ["emulate", "--config", p, "--chips", "2", "--steps", "1", "--json"]),
        "costs": ("costs.yaml", lambda p: ["estimate", str(TINY), "--system", "h200-hgx", "--gpus", "1", "--isl", "64",
                                           "--osl", "4", "--costs", p, "--json"]),
        "fleet": ("fleet.yaml", lambda p: ["simulate", "--fleet", p, "--workload", str(wl), "--json"]),
        "workload": ("workload.yaml", lambda p: ["simulate", "--fleet", str(fleet), "--workload", p, "--json"]),
        "demand": ("demand.yaml", lambda p: ["plan", "fleet", "--demand", p, "--systems", "no-such-system", "--json"]),
        "trace": ("trace.jsonl", lambda p: ["simulate", "--fleet", str(fleet), "--trace", p, "--json"]),
    }


KINDS = st.sampled_from(["model", "config", "costs", "fleet", "workload", "demand", "trace"])


def _refused_naming(o, field: str) -> None:
    check(o)
    assert o.code == 2, f"lpxsim {' '.join(o.argv)[:200]} was accepted"
    line = o.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {field}"), line


def _run_kind(tmp_path_factory, kind: str, data: bytes | str, name: str | None = None):
    tmp = tmp_path_factory.mktemp(kind)
    fname, build = _input_kinds(tmp)[kind]
    path = tmp / (name or fname)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return invoke(build(str(path)))


@FUZZ
@given(KINDS, st.data())
def test_fuzz_deep_nesting_in_every_input(tmp_path_factory, kind, data):
    """JSON or YAML nested past the depth cap (33 .. 200K levels): one line, never a RecursionError."""
    text = data.draw(deep_json()) if kind in ("model", "config", "trace") else data.draw(deep_yaml())
    if kind == "trace":
        text = text.replace("\n", " ") + "\n"
    field = "model" if kind == "model" else kind
    _refused_naming(_run_kind(tmp_path_factory, kind, text), field)


@st.composite
def _with_huge_int(draw, kind: str) -> str:
    """A file of `kind` with an integer past Python's digit limit at a drawn field (or a new one)."""
    n = draw(huge_int())
    if kind in ("model", "config"):
        doc = json.loads(TINY.read_text())
        key = draw(st.sampled_from([*sorted(doc), "bogus"]))
        return json.dumps({k: v for k, v in doc.items() if k != key})[:-1] + f', "{key}": {n}}}'
    if kind == "trace":
        return '{"timestamp": 0, "input_length": ' + n + ', "output_length": 4}\n'
    key = draw(st.sampled_from(["rate", "workers", "num_requests", "capex_usd", "bogus", "osl", "isl"]))
    base = {"costs": "usd_per_kwh: 0.1\n", "fleet": FLEET.read_text(), "workload": yaml.safe_dump(WORKLOADS[0]),
            "demand": yaml.safe_dump(DEMAND)}[kind]
    return base + f"{key}: {n}\n" if draw(st.booleans()) else f"{key}: [{n}]\n" + base


@FUZZ
@given(KINDS, st.data())
def test_fuzz_integers_past_the_digit_limit(tmp_path_factory, kind, data):
    """An integer literal of 4,301 .. 60,000 digits in any input file: one line naming the option."""
    field = "model" if kind == "model" else kind
    _refused_naming(_run_kind(tmp_path_factory, kind, data.draw(_with_huge_int(kind))), field)


@FUZZ
@given(KINDS, non_utf8())
def test_fuzz_binary_and_non_utf8_inputs(tmp_path_factory, kind, data):
    """Binary, Latin-1, UTF-16/32 or truncated UTF-8 in any input file (costs files included)."""
    field = "model" if kind == "model" else kind
    _refused_naming(_run_kind(tmp_path_factory, kind, data), field)


@settings(FUZZ, max_examples=30)
@given(KINDS, st.integers(1, 8 * 1024**2), st.booleans())
def test_fuzz_oversized_inputs(tmp_path_factory, kind, extra, gz):
    """A file over its kind's size cap (a sparse file: no disk used) is refused before it is read;
    costs files have the cap of every other text input."""
    from lpxsim.core import inputs

    tmp = tmp_path_factory.mktemp("big")
    fname, build = _input_kinds(tmp)[kind]
    cap = inputs.TRACE_FILE_MAX_BYTES if kind == "trace" else inputs.TEXT_FILE_MAX_BYTES
    path = tmp / fname
    with open(path, "wb") as f:
        f.write(b"{" if kind in ("model", "config") else b"a: ")
        f.truncate(cap + extra)
    o = invoke(build(str(path)))
    _refused_naming(o, "model" if kind == "model" else kind)
    assert "bytes" in o.stderr


@st.composite
def gzip_bomb(draw, cap: int) -> bytes:
    """A gzip stream that inflates past `cap`: zeros, one repeated CSV row, or a JSONL row repeated."""
    import zlib

    unit = draw(st.sampled_from([b"\0" * 4096, b"TIMESTAMP,ContextTokens,GeneratedTokens\n",
                                 b'{"timestamp": 1, "input_length": 10, "output_length": 5}\n']))
    size = draw(st.integers(cap + 1, 6 * cap))
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip container
    chunk = unit * max(1, 65536 // len(unit))
    out, written = [], 0
    while written < size:
        out.append(comp.compress(chunk))
        written += len(chunk)
    out.append(comp.flush())
    return b"".join(out)


BOMB_CAP = 256 * 1024  # the test lowers the cap so each bomb is small; the cap's own value is a constant


@settings(FUZZ, max_examples=40)
@given(st.data(), st.sampled_from(["trace.csv.gz", "trace.jsonl.gz", "t.csv.gz"]))
def test_fuzz_gzip_traces_are_capped_after_decompression(tmp_path_factory, monkeypatch, data, name):
    from lpxsim.core import inputs

    monkeypatch.setattr(inputs, "TRACE_FILE_MAX_BYTES", BOMB_CAP)
    bomb = data.draw(gzip_bomb(BOMB_CAP))
    assert len(bomb) < BOMB_CAP  # small on disk: only the decompressed size is over the cap
    o = _run_kind(tmp_path_factory, "trace", bomb, name)
    _refused_naming(o, "trace")
    assert "when decompressed" in o.stderr


@pytest.mark.heavy
def test_a_one_gib_gzip_bomb_is_refused_at_the_real_cap(tmp_path):
    """The issue's case at the shipped cap: 1 GiB inflated from ~1 MB is refused once the cap is passed."""
    import zlib

    comp, path = zlib.compressobj(9, zlib.DEFLATED, 31), tmp_path / "bomb.csv.gz"
    with open(path, "wb") as f:
        zeros = b"0" * 1024**2
        for _ in range(1024):
            f.write(comp.compress(zeros))
        f.write(comp.flush())
    o = invoke(["simulate", "--fleet", "rubin-alone", "--trace", str(path), "--json"])
    _refused_naming(o, "trace")


@FUZZ
@given(config_type_errors(), st.sampled_from(["model", "capacity", "estimate"]), st.booleans())
def test_fuzz_config_fields_of_the_wrong_type(tmp_path_factory, field_value, cmd, nested):
    """A true/false or text field of config.json given another type ("yes", 1, a list) is refused by name."""
    field, value = field_value
    doc = json.loads(TINY.read_text())
    if nested:  # a multimodal wrapper: the text model under text_config
        doc = {"model_type": "wrapper", "text_config": doc}
        (doc["text_config"] if field != "tie_word_embeddings" else doc)[field] = value
    else:
        doc[field] = value
    path = tmp_path_factory.mktemp("types") / "config.json"
    path.write_text(json.dumps(doc, allow_nan=True))
    extra = {"model": [], "capacity": ["--context", "100"], "estimate": ["--system", "h200-hgx", "--gpus", "1"]}[cmd]
    _refused_naming(invoke([cmd, str(path), *extra, "--json"]), f"config.{field}")


@FUZZ
@given(KINDS, st.data())
def test_fuzz_input_paths_longer_than_name_max(tmp_path_factory, kind, data):
    """An input path with a component over NAME_MAX (255 bytes): one line naming the option."""
    tmp = tmp_path_factory.mktemp("long")
    _, build = _input_kinds(tmp)[kind]
    path = data.draw(long_path(str(tmp)))
    o = invoke(build(path))
    _refused_naming(o, "model" if kind == "model" else kind)


# --- validate --rows CSV (issue 28: a user's own InferenceX-format measurements) ----------------------

def _rows_base() -> list[dict]:
    from lpxsim.engine.validation import calibration_rows

    rows = calibration_rows()
    h200 = [r for r in rows if r["hardware"] == "H200" and r["conc"] == "4"][:1]
    # and the H200 row served disaggregated: a prefill and a decode pool of TP8 each (InferenceX's pool columns)
    pools = {f"{side}_{c}": v for side in ("prefill", "decode") for c, v in (("tp", "8"), ("ep", "1"), ("workers", "1"),
                                                                             ("dp_attention", "false"))}
    return (h200 + [r for r in rows if r["hardware"] == "B200" and r["precision"] == "fp4" and r["conc"] == "8"][:1]
            + [dict(h200[0], disagg="true", **pools)])


ROWS_BASE = _rows_base()
ROW_COLUMNS = ("hardware", "framework", "precision", "tp", "ep", "dp_attention", "isl", "osl", "conc",
               "tpot_median_s", "ttft_median_s", "output_tput_per_gpu", "spec_method", "disagg", "model",
               "prefill_tp", "prefill_ep", "prefill_workers", "prefill_dp_attention", "decode_tp", "decode_ep",
               "decode_workers", "decode_dp_attention")
ROW_VALUES = st.one_of(JUNK, st.sampled_from(["true", "false", "1", "0", "yes", "H200", "MI300X", "TPU", "sglang",
                                              "trt", "vllm", "atom", "fp8", "fp4", "int3", "mtp", "eagle",
                                              "8.0", "4", "1024", "100000", "0.02", "1e-9"]),
                       st.text(max_size=5))


@st.composite
def rows_file(draw) -> bytes:
    """A rows CSV from two calibration rows with one to three cells changed, a column dropped or a broken line."""
    rows = [dict(r) for r in ROWS_BASE]
    cols = list(rows[0])
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["set", "set", "set", "drop", "ragged"]))
        if action == "set":
            draw(st.sampled_from(rows))[draw(st.sampled_from(ROW_COLUMNS))] = draw(ROW_VALUES)
        elif action == "drop":
            c = draw(st.sampled_from(ROW_COLUMNS))
            cols = [x for x in cols if x != c]
        else:  # a row with too few or too many cells
            rows.append({cols[0]: draw(ROW_VALUES)} if draw(st.booleans()) else {**rows[0], None: "extra"})
    lines = [",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) + ("," + r[None] if None in r else "")
                                for r in rows]
    return ("\n".join(lines) + "\n").encode()


@settings(FUZZ, max_examples=100)
@given(st.one_of(rows_file(), BROKEN))
def test_fuzz_validate_rows_files(tmp_path_factory, data):
    """`lpxsim validate --rows FILE`: every row replays, is left out by name, or the file is refused in one line
    naming the field (its first bad value), never a traceback."""
    path = tmp_path_factory.mktemp("rows") / "rows.csv"
    path.write_bytes(data)
    check(invoke(["validate", "--rows", str(path), "--json"], time_limit_s=60))
