"""`InstructionTable`: the Program's instructions as columns behave as the list of `Instruction` values they
replace."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from operator import attrgetter
from pathlib import Path

import numpy as np
import pytest

from lpxsim.lpu import Program
from lpxsim.lpu.compiler import _by_chip_and_cycle
from lpxsim.lpu.program import Instruction, InstructionTable

DATA = Path(__file__).parent / "data" / "emulate"
SLICES = ({"cols": (0, 4)}, {"rows": (2, 6), "cols": (0, 8)}, {})
ATTRS = ({"busy_cycles": 4}, {"busy_cycles": 9, "fn": "argmax"})


def _records() -> list[Instruction]:
    return [Instruction(k, k % 3, ("MXM", "VXM")[k % 2], f"op{k // 2}", ("matmul", "reduce", "norm")[k % 3],
                        tuple(f"in{k}.{j}" for j in range(k % 3)), f"out{k}", 10 * (7 - k), 10 * (7 - k) + 3,
                        10 * (7 - k) + 5 + k, SLICES[k % 3], ATTRS[k % 2]) for k in range(7)]


def test_sequence_behaviour() -> None:
    recs = _records()
    t = InstructionTable(recs)
    assert len(t) == 7 and list(t) == recs and t == recs and t == InstructionTable(recs) and t == tuple(recs)
    assert t[3] == recs[3] and t[-1] == recs[-1] and repr(t[2]) == repr(recs[2])
    assert t.id is None  # ids are the positions: no column
    assert type(t[0].cycle_end) is int and type(t[0].chip) is int and t[0].inputs == () and t[2].inputs == recs[2].inputs
    # the slice and attrs dicts are the very objects given (shared by identity); equal strs are kept once
    assert t[1].slice is SLICES[1] and t[3].attrs is ATTRS[1] and len(t.attrs_values) == 2 and len(t.op_values) == 4
    assert isinstance(t[1:5], InstructionTable) and list(t[1:5]) == recs[1:5] and list(t[::-2]) == recs[::-2]
    assert recs[4] in t and t.index(recs[4]) == 4
    with pytest.raises(IndexError):
        t[7]  # noqa: B018
    with pytest.raises(IndexError):
        t[-8]  # noqa: B018
    # item assignment: another number of inputs moves the later instructions' inputs, another id makes a column
    t[2] = dataclasses.replace(recs[2], inputs=("a",), cycle_end=-5, slice={"heads": (0, 1)})
    assert t[2].inputs == ("a",) and t[2].cycle_end == -5 and t != recs and t.id is None
    assert list(t)[3:] == recs[3:] and t[2].slice == {"heads": (0, 1)}
    t[4] = dataclasses.replace(recs[4], id=40)
    assert t[4].id == 40 and [i.id for i in t] == [0, 1, 2, 3, 40, 5, 6]
    t.append(recs[0])
    assert len(t) == 8 and t[7] == recs[0]
    assert InstructionTable() == [] and list(InstructionTable()) == [] and InstructionTable() != recs


def test_append_keeps_arbitrary_ids() -> None:
    recs = [dataclasses.replace(r, id=100 - r.id) for r in _records()]  # e.g. a JSON program's ids
    t = InstructionTable(recs)
    assert list(t) == recs and t.column("id").tolist() == [r.id for r in recs]
    t.extend(_records()[:2])
    assert [i.id for i in t] == [r.id for r in recs] + [0, 1]


def test_pickle_and_deepcopy_keep_the_identity_codes_right() -> None:
    t = InstructionTable(_records())
    for back in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):  # sweep and Dask workers ship results
        assert back == t and back is not t
        assert back[1].slice is back[4].slice  # still one object for the records that shared one
        fresh = {"cols": (0, 4)}  # a new dict (equal to a stored one): a new code, not a stale identity's
        back.append(dataclasses.replace(_records()[0], slice=fresh))
        assert back[-1].slice is fresh and len(back.slice_values) == 4


def test_permute_reorders_every_column() -> None:
    recs = _records()
    t = InstructionTable(recs)
    order = np.array([6, 0, 3, 1, 5, 2, 4])
    t.permute(order)
    assert list(t) == [recs[k] for k in order.tolist()] and t.column("id").tolist() == order.tolist()
    assert [i.inputs for i in t] == [recs[k].inputs for k in order.tolist()]
    t.append(recs[0])  # appends still work after a permutation
    assert t[-1] == recs[0] and len(t) == 8
    # the compiler's sort: (chip, cycle_start, id), with no records built
    u = _by_chip_and_cycle(InstructionTable(recs))
    assert list(u) == sorted(recs, key=attrgetter("chip", "cycle_start", "id"))
    shuffled = [dataclasses.replace(r, id=(3 * r.id) % 7, cycle_start=0) for r in recs]  # ids not positions
    assert list(_by_chip_and_cycle(InstructionTable(shuffled))) == sorted(shuffled, key=attrgetter("chip", "id"))


def test_columns_are_copies() -> None:
    t = InstructionTable(_records())
    end = t.column("cycle_end")
    assert end.dtype == np.int64 and end.tolist() == [r.cycle_end for r in _records()]
    end[0] = 99  # a copy: the table is unchanged, and it can grow
    t.append(_records()[1])
    assert t[0].cycle_end == _records()[0].cycle_end and len(t.column("cycle_end")) == 8
    assert t.input_counts().tolist() == [len(r.inputs) for r in t]
    assert list(t.values("op")) == [r.op for r in t]
    with pytest.raises(KeyError):
        t.column("output")


def test_compiled_program_holds_a_table(tiny_lpx_program: Program) -> None:
    ins = tiny_lpx_program.instructions
    assert isinstance(ins, InstructionTable) and len(ins) > 10
    recs = list(ins)
    assert recs == sorted(recs, key=attrgetter("chip", "cycle_start", "id"))
    assert sorted(i.id for i in recs) == list(range(len(recs)))
    # buffer names are the compiler's str objects (verify matches them by identity)
    keys = set(map(id, tiny_lpx_program.buffers))
    assert all(id(i.output) in keys and all(id(b) in keys for b in i.inputs) for i in recs)
    assert len(ins.slice_values) < len(ins) and len(ins.attrs_values) < len(ins)
    # JSON: the same records as `asdict` of each value, back to an equal table
    d = tiny_lpx_program.to_dict()
    assert d["instructions"] == [dataclasses.asdict(r) for r in recs]
    back = Program.from_dict(d)
    assert isinstance(back.instructions, InstructionTable) and back.instructions == ins
    assert back.to_json() == tiny_lpx_program.to_json()
    # a list given to a Program (corrupted copies in tests) becomes a table
    q = dataclasses.replace(tiny_lpx_program, instructions=recs[:-1])
    assert isinstance(q.instructions, InstructionTable) and list(q.instructions) == recs[:-1]
    assert tiny_lpx_program.makespan_cycles == max([i.cycle_end for i in recs] + [t.end_cycle for t in tiny_lpx_program.transfers])
    assert tiny_lpx_program.chips == sorted({r.chip for r in tiny_lpx_program.regions} | {i.chip for i in recs})


def test_scheduler_instr_returns_the_row() -> None:
    from lpxsim.catalog import get_system
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.schedule import Scheduler
    from lpxsim.specs.topology import chip_graph

    system = get_system("lpx")
    s = Scheduler(arch_for(system), chip_graph(system, 1))
    s.input_ready(s.buffer("x@0", 0, "x", 320))
    for k in range(3):
        s.buffer(f"y{k}@0", 0, "y", 320)
        row = s.instr(0, "VXM", "y", "elementwise", ("x@0",) if k == 0 else ("x@0", f"y{k - 1}@0"), f"y{k}@0", 4)
        assert row == k and s.instructions[row].output == f"y{k}@0" and s.instructions[row].id == k
    assert s.instructions[2].inputs == ("x@0", "y1@0") and s.instructions[1].cycle_start < s.instructions[2].cycle_start
