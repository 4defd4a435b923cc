"""`RegionTable`: the Program's regions as columns behave as the list of `Region` values they replace."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lpxsim.lpu import Program
from lpxsim.lpu.program import Region, RegionTable
from lpxsim.lpu.verify import Regions

DATA = Path(__file__).parent / "data" / "emulate"


def _records() -> list[Region]:
    return [Region(k % 3, f"w:L{k % 2}.q", "weights", 320 * k, 320) for k in range(5)] + [
        Region(1, "kv:L0", "kv", 5_000, 640), Region(2, "act@2", "act", 7_000, 0), Region(0, "odd", "other", 1, 2)]


def test_sequence_behaviour() -> None:
    recs = _records()
    t = RegionTable(recs)
    assert len(t) == 8 and list(t) == recs and t == recs and t == tuple(recs) and t == RegionTable(recs)
    assert t[3] == recs[3] and t[-1] == recs[-1] and repr(t[2]) == repr(recs[2])
    assert type(t[0].offset_bytes) is int and t[0].end_bytes == 320
    assert t.names == ["w:L0.q", "w:L1.q", "kv:L0", "act@2", "odd"]  # each name once, in order of first use
    assert t[0].name is t[2].name and t[-1].kind == "other"
    assert isinstance(t[1:5], RegionTable) and list(t[1:5]) == recs[1:5] and list(t[::-2]) == recs[::-2]
    assert recs[4] in t and t.index(recs[4]) == 4
    with pytest.raises(IndexError):
        t[8]  # noqa: B018
    t[-2] = dataclasses.replace(recs[-2], name="intruder", size_bytes=-5)
    assert t[6] == Region(2, "intruder", "act", 7_000, -5) and t != recs
    t.append(recs[0])
    assert len(t) == 9 and t[8] == recs[0]
    assert RegionTable() == [] and list(RegionTable()) == [] and t != 3
    back = pickle.loads(pickle.dumps(t))
    assert back == t and back is not t
    with pytest.raises(TypeError):
        t[0:1] = recs[:1]


def test_columns_are_typed_views_and_writes_after_them_work() -> None:
    t = RegionTable(_records())
    chip, off = t.column("chip"), t.column("offset_bytes")
    assert chip.dtype == np.int32 and off.dtype == np.int64 and t.column("kind").dtype == np.int8
    assert chip.tolist() == [r.chip for r in _records()] and np.shares_memory(off, t.column("offset_bytes"))
    assert [t.names[k] for k in t.column("name").tolist()] == [r.name for r in _records()]
    t.append(_records()[1])  # a column with live views cannot grow: the table copies, the views keep their values
    t[0] = dataclasses.replace(t[0], offset_bytes=99)
    assert len(off) == 8 and off[0] == 0 and t.column("offset_bytes")[0] == 99 and len(t.column("chip")) == 9
    with pytest.raises(KeyError):
        t.column("end_bytes")


def test_values_past_int32_widen_the_column() -> None:
    """A JSON-loaded (possibly corrupted) program may hold any int: the column becomes int64, nothing is lost."""
    recs = _records() + [Region(2**40, "far", "act", 0, 1)]
    t = RegionTable(recs)
    assert t == recs and t.column("chip").dtype == np.int64 and t.column("chip")[-1] == 2**40
    u = RegionTable(_records())
    u.column("chip")
    u[1] = dataclasses.replace(u[1], chip=-(2**35))
    u.append(Region(3, "x", "kv", 0, 1))
    assert u[1].chip == -(2**35) and u[-1].chip == 3 and u.column("chip").dtype == np.int64


def test_compiled_program_holds_a_table(tiny_lpx_program: Program) -> None:
    regs = tiny_lpx_program.regions
    assert isinstance(regs, RegionTable) and len(regs) > 10
    assert len(regs.names) < len(regs)  # weight names repeat on every chip of a stage: kept once
    assert tiny_lpx_program.chips == sorted({r.chip for r in regs} | {i.chip for i in tiny_lpx_program.instructions})
    d = tiny_lpx_program.to_dict()  # JSON: the same records as `asdict` of each value, back to an equal table
    assert d["regions"] == [dataclasses.asdict(r) for r in regs]
    back = Program.from_dict(d)
    assert isinstance(back.regions, RegionTable) and back.regions == regs and back.to_json() == tiny_lpx_program.to_json()
    q = dataclasses.replace(tiny_lpx_program, regions=list(regs)[:-1])  # a list given to a Program becomes a table
    assert isinstance(q.regions, RegionTable) and list(q.regions) == list(regs)[:-1]


def test_verify_reads_the_columns_without_copies(tiny_lpx_program: Program) -> None:
    reg = Regions(tiny_lpx_program)
    regs = tiny_lpx_program.regions
    assert np.shares_memory(reg.off, regs.column("offset_bytes"))
    assert np.shares_memory(reg.size, regs.column("size_bytes"))
    assert [reg.key(k) for k in range(len(reg))] == [(r.chip, r.name) for r in regs]
    listed = Regions(SimpleNamespace(regions=list(regs)))  # a plain list still works
    assert listed.key(len(listed) - 1) == reg.key(len(reg) - 1)
