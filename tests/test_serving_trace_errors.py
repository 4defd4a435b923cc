"""The trace loaders' error paths (issue 15): each bad file is one UserError naming the column or line."""

from __future__ import annotations

import gzip
import json

import pytest

from lpxsim.core.errors import UserError
from lpxsim.serving.traces import load_trace

MOONCAKE = {"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1, 2]}


def _jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return str(path)


@pytest.mark.parametrize("rows, field, words", [
    ([MOONCAKE, "{not json"], "trace", "line 2 is not valid JSON"),
    ([MOONCAKE, "[1, 2]"], "trace", "line 2: expected a JSON object"),
    ([{"a": 1, "b": 2}], "trace", "unrecognised JSONL keys ['a', 'b']"),
    ([MOONCAKE, {"timestamp": 5, "input_length": 7}], "trace.output_length", "row 2 lacks output_length"),
    ([MOONCAKE, {**MOONCAKE, "input_length": "many"}], "trace.input_length", "row 2: expected a whole number"),
    ([MOONCAKE, {**MOONCAKE, "timestamp": None}], "trace.timestamp", "row 2"),
    ([{**MOONCAKE, "output_length": 1e30}], "trace.output tokens", "row 1: expected a number in 0..1e+07"),
    ([{**MOONCAKE, "hash_ids": "abc"}], "trace.hash_ids", "row 1: expected a list of integers"),
])
def test_bad_jsonl_rows(tmp_path, rows, field, words):
    with pytest.raises(UserError) as e:
        load_trace(_jsonl(tmp_path / "t.jsonl", rows))
    assert e.value.field == field and words in e.value.message, str(e.value)


@pytest.mark.parametrize("name, data, words", [
    ("empty.jsonl", b"", "has no rows"),
    ("blank.jsonl", b"\n\n", "has no rows"),
    ("empty.csv", b"", "not a readable CSV"),
    ("header.csv", b"TIMESTAMP,ContextTokens,GeneratedTokens\n", "has no rows"),
    ("binary.jsonl", b"\xff\xfe\x00garbage", "not UTF-8 text"),
    ("broken.jsonl.gz", b"\x1f\x8b\x08\x00 not really gzip", "cannot be read"),
    ("cols.csv", b"a,b\n1,2\n", "unrecognised columns ['a', 'b']"),
    ("azure.csv", b"TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,5\n", "expected date-time stamps"),
    ("azure.csv", b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,ten,5\n", "row 1: expected a number"),
    ("burst.csv", b"Timestamp,Request tokens,Response tokens\n0,10,many\n", "row 1: expected a number"),
    ("lab.csv", b"session_id,t_input_ready_s,input_tokens_total,output_tokens\na,inf,10,5\n", "row 1"),
])
def test_bad_files(tmp_path, name, data, words):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(UserError) as e:
        load_trace(str(p))
    assert e.value.field.startswith("trace") and words in e.value.message, str(e.value)
    assert "\n" not in str(e.value)


def test_good_files_in_every_format_still_load(tmp_path):
    """The checks refuse only bad files: one small good file per format loads with its values."""
    rows = [MOONCAKE, {**MOONCAKE, "timestamp": 2000, "input_length": 7, "output_length": 0}]
    df = load_trace(_jsonl(tmp_path / "m.jsonl", rows))
    assert df["arrival_s"].tolist() == [0.0, 2.0] and df["isl"].tolist() == [100, 7] and df["osl"].tolist() == [10, 1]
    gz = tmp_path / "m.jsonl.gz"
    gz.write_bytes(gzip.compress((tmp_path / "m.jsonl").read_bytes()))
    assert load_trace(str(gz)).equals(df)
    (tmp_path / "b.csv").write_text("Timestamp,Request tokens,Response tokens,Session ID\n5,10,0,a\n7,20,3,b\n9,30,4,b\n")
    b = load_trace(str(tmp_path / "b.csv"))
    assert b["arrival_s"].tolist() == [0.0, 2.0] and b["session"].tolist() == [0, 0]  # the failed call dropped
