"""`BufferTable`: the Program's buffers as columns behave as the ``dict[str, Buffer]`` they replace."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest

from lpxsim.lpu import Program
from lpxsim.lpu.program import Buffer, BufferTable

DATA = Path(__file__).parent / "data" / "emulate"


def _buffers() -> dict[str, Buffer]:
    return {f"b{k}": Buffer(f"b{k}", k % 3, f"op{k % 2}", (0, 64 * k) if k % 2 else None, "sum" if k % 3 else None,
                            320 * k + 1, f"act@{k % 3}" if k > 2 else "", (k, k + 1) if k == 4 else None,
                            (2, 8) if k == 5 else (), 640 * k) for k in range(7)}


def test_mapping_behaviour() -> None:
    d = _buffers()
    t = BufferTable(d)
    assert len(t) == 7 and list(t) == list(d) and dict(t.items()) == d
    assert t == d and d == t and t == BufferTable(d)  # both ways, as dicts compare
    assert t["b4"] == d["b4"] and "b4" in t and "nope" not in t and t.get("nope") is None
    assert type(t["b3"].bytes) is int and t["b5"].lse_shape == (2, 8) and t["b4"].heads == (4, 5)
    assert t.bytes_of("b3") == 961 and t.partial_of("b1") == "sum" and t.partial_of("b0") is None
    assert t != {**d, "b2": dataclasses.replace(d["b2"], offset_bytes=1)}
    with pytest.raises(KeyError):
        t["nope"]


def test_assignment_keeps_the_position_and_deletion_closes_the_gap() -> None:
    d = _buffers()
    t = BufferTable(d)
    t["b2"] = dataclasses.replace(d["b2"], chip=9, region="buffer@9", offset_bytes=320)
    d["b2"] = t["b2"]
    assert list(t) == list(d) and t["b2"].chip == 9 and t == d
    t["new"] = Buffer("new", 1, "x")
    del t["b1"]
    del d["b1"]
    d["new"] = Buffer("new", 1, "x")
    assert list(t) == list(d) and t == d and t.index == {k: i for i, k in enumerate(d)}


def test_a_value_under_another_key_keeps_its_own_id() -> None:
    """A hand-made (or corrupted) mapping may hold a Buffer whose id is not its key: both are kept."""
    d = _buffers()
    d["b3"] = dataclasses.replace(d["b3"], id="other")
    t = BufferTable(d)
    assert t["b3"].id == "other" and list(t) == list(d) and t == d
    p = t.permuted([3, 0, 1, 2, 4, 5, 6])
    assert p["b3"].id == "other" and list(p)[0] == "b3"


def test_add_many_and_declared_twice() -> None:
    t = BufferTable()
    t.add_many(["x@1", "x@2"], [1, 2], 640, t.name_id("ar"), t.form_id((0, 8), "sum"))
    assert t["x@2"] == Buffer("x@2", 2, "ar", (0, 8), "sum", 640)
    assert t.add("y", 0, "ar", 4) == 2 and t.row(2) == Buffer("y", 0, "ar", bytes=4)
    with pytest.raises(KeyError, match="declared twice"):
        t.add("y", 1, "ar", 4)


def test_permuted_rows_with_new_regions_and_offsets() -> None:
    d = _buffers()
    t = BufferTable(d)
    order = [6, 2, 0, 5, 1, 4, 3]
    region = [t.name_id(f"r{k}") for k in range(7)]
    p = t.permuted(order, region=region, offset=list(range(100, 107)))
    want = {f"b{k}": dataclasses.replace(d[f"b{k}"], region=f"r{k}", offset_bytes=100 + k) for k in order}
    assert p._index is None and list(p) == list(want)  # the key index: built on first use
    assert p == want and p.index["b6"] == 0
    assert np.array_equal(p.column("bytes"), [want[k].bytes for k in want])
    assert p.values_at("partial") == [want[k].partial for k in want] and len(t.forms) < len(t)  # shared forms


def test_program_json_pickle_and_replace(tiny_lpx_program: Program) -> None:
    p = tiny_lpx_program
    assert isinstance(p.buffers, BufferTable) and len(p.buffers) > 50
    q = Program.from_json(p.to_json())
    assert isinstance(q.buffers, BufferTable) and q.buffers == p.buffers and q.to_json() == p.to_json()
    assert pickle.loads(pickle.dumps(p.buffers)) == p.buffers
    plain = dict(p.buffers.items())
    assert dataclasses.replace(p, buffers=plain).buffers == p.buffers  # a dict given to a Program: a table
