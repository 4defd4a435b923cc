"""`TransferTable`: the Program's transfers as columns behave as the list of `Transfer` values they replace."""

from __future__ import annotations

import dataclasses
import pickle
from itertools import chain
from pathlib import Path

import numpy as np
import pytest

from lpxsim.lpu import Program
from lpxsim.lpu.program import Transfer, TransferTable

DATA = Path(__file__).parent / "data" / "emulate"


def _records() -> list[Transfer]:
    r1, r2 = ((0, 0), (3, 1)), ((5, 1),)
    return [Transfer(k, k % 3, 7 - k % 3, f"s{k}", f"d{k}", 100 * k + 1, r1 if k % 2 else r2, 10 * k, 4, 10 * k + 9,
                     10 * k + 12) for k in range(7)]


def test_sequence_behaviour() -> None:
    recs = _records()
    t = TransferTable(recs)
    assert len(t) == 7 and list(t) == recs and t == recs and t == TransferTable(recs)
    assert t[3] == recs[3] and t[-1] == recs[-1] and repr(t[2]) == repr(recs[2])
    assert type(t[0].send_cycle) is int and t[0].links is t[2].links  # Python ints; one shared tuple per route
    assert len(t.routes) == 2
    assert isinstance(t[1:5], TransferTable) and list(t[1:5]) == recs[1:5] and list(t[::-2]) == recs[::-2]
    assert recs[4] in t and t.index(recs[4]) == 4
    with pytest.raises(IndexError):
        t[7]  # noqa: B018
    t[2] = dataclasses.replace(recs[2], send_cycle=-5, links=[[9, 0]])  # lists (e.g. JSON) become int tuples
    assert t[2].send_cycle == -5 and t[2].links == ((9, 0),) and t != recs
    t.append(recs[0])
    assert len(t) == 8 and t[7] == recs[0]
    assert TransferTable() == [] and list(TransferTable()) == []
    back = pickle.loads(pickle.dumps(t))  # sweep and Dask workers ship results between processes
    assert back == t and back is not t


def test_columns_are_views_and_writes_after_them_work() -> None:
    t = TransferTable(_records())
    end = t.column("end_cycle")
    assert end.dtype == np.int64 and end.tolist() == [r.end_cycle for r in _records()]
    assert np.shares_memory(end, t.column("end_cycle"))  # zero-copy: both view the table's storage
    t.append(_records()[1])  # an array with live views cannot grow: the table copies, the view keeps its values
    t[0] = dataclasses.replace(t[0], end_cycle=99)
    assert len(end) == 7 and end[0] == 12 and t.column("end_cycle")[0] == 99 and len(t.column("end_cycle")) == 8
    with pytest.raises(KeyError):
        t.column("src_buffer")


def test_hops_expand_routes_like_the_records() -> None:
    t = TransferTable(_records())
    t.append(dataclasses.replace(_records()[0], links=()))
    link, d, tr, nhops = t.hops()
    want = [(lid, dd, k) for k, r in enumerate(t) for lid, dd in r.links]
    assert list(zip(link.tolist(), d.tolist(), tr.tolist(), strict=True)) == want
    assert nhops.tolist() == [len(r.links) for r in t]


def test_compiled_program_holds_a_table(tiny_lpx_program: Program) -> None:
    trs = tiny_lpx_program.transfers
    assert isinstance(trs, TransferTable) and len(trs) > 10
    assert len(trs.routes) < len(trs) and trs.column("id").tolist() == list(range(len(trs)))
    link, _, _, nhops = trs.hops()
    assert link.tolist() == [lid for r in trs for lid, _ in r.links] and nhops.sum() == len(link)
    # JSON: the same records as `asdict` of each value, back to an equal table
    d = tiny_lpx_program.to_dict()
    assert d["transfers"] == [dataclasses.asdict(r) for r in trs]
    back = Program.from_dict(d)
    assert back.transfers == trs and back.to_json() == tiny_lpx_program.to_json()
    # a list given to a Program (corrupted copies in tests) becomes a table
    q = dataclasses.replace(tiny_lpx_program, transfers=list(trs)[:-1])
    assert isinstance(q.transfers, TransferTable) and list(q.transfers) == list(trs)[:-1]
    assert tiny_lpx_program.makespan_cycles == max(chain((i.cycle_end for i in tiny_lpx_program.instructions), (r.end_cycle for r in trs)))


def test_bounded_columns_are_four_bytes_and_cycles_eight() -> None:
    t = TransferTable(_records())
    for name in ("id", "src_chip", "dst_chip", "bytes", "ser_cycles", "route"):
        assert t.column(name).dtype == np.int32, name
    for name in ("send_cycle", "arrive_cycle", "end_cycle"):
        assert t.column(name).dtype == np.int64, name
    assert t.column("bytes").tolist() == [r.bytes for r in _records()]


@pytest.mark.parametrize("how", ["extend", "append", "add", "add_many", "setitem"])
def test_values_past_int32_widen_the_column(how: str) -> None:
    """A JSON-loaded (possibly corrupted) program may hold any int: that column becomes int64, nothing is lost."""
    recs = _records()
    big = dataclasses.replace(recs[3], bytes=2**40, ser_cycles=-(2**33), send_cycle=2**62)
    t = TransferTable(recs[:3])
    t.column("bytes")  # a live view: the writes below must copy first
    if how == "extend":
        t.extend([big, recs[4]])
    elif how == "append":
        t.append(big)
    elif how == "add":
        t.add(big.id, big.src_chip, big.dst_chip, big.src_buffer, big.dst_buffer, big.bytes, t.route_id(big.links),
              big.send_cycle, big.ser_cycles, big.arrive_cycle, big.end_cycle)
    elif how == "add_many":  # iterators, as the Scheduler passes some columns
        t.add_many(iter([big.id]), [big.src_chip], [big.dst_chip], [big.src_buffer], [big.dst_buffer],
                   iter([big.bytes]), [t.route_id(big.links)], [big.send_cycle], iter([big.ser_cycles]),
                   [big.arrive_cycle], [big.end_cycle])
    else:
        t.append(recs[3])
        t[3] = big
    assert t[3] == big and list(t)[:3] == recs[:3] and len(t.src_buffer) == len(t)
    assert t.column("bytes").dtype == np.int64 and t.column("ser_cycles").dtype == np.int64
    assert t.column("src_chip").dtype == np.int32 and t.column("bytes")[3] == 2**40
    assert Program.from_dict({**_empty_program_dict(), "transfers": [dataclasses.asdict(r) for r in t]}).transfers == t


def _empty_program_dict() -> dict:
    return {"system": "lpx", "model": "m", "phase": {}, "weights": "bf16", "kv": "bf16", "kv_layout": "x",
            "clock_hz": 1e9, "chip_sram_bytes": 1, "layout": {"tp": 1, "stages": 1, "replicas": 1, "kv_seq_split": 1,
                                                              "micro_batches": 1, "stage_list": []},
            "regions": [], "buffers": [], "instructions": [], "transfers": [], "links": []}


def test_link_windows_past_int32_cycles_still_clash(tiny_lpx_program: Program) -> None:
    """Verify's link windows are formed in int64 from the int32 serialisation column: a window reaching past
    2^31 cycles is not cut short (it would miss this clash)."""
    from lpxsim.lpu import verify

    trs = list(tiny_lpx_program.transfers)
    k = next(k for k, t in enumerate(trs) if t.links)
    j = next(j for j, t in enumerate(trs) if j != k and t.links and t.links[0] == trs[k].links[0])
    t0 = 2**32
    trs[k] = dataclasses.replace(trs[k], send_cycle=t0, ser_cycles=2**31 - 1, arrive_cycle=t0 + 2**31,
                                 end_cycle=t0 + 2**31)
    trs[j] = dataclasses.replace(trs[j], send_cycle=t0 + 1_000, arrive_cycle=t0 + 2**31 + 5,
                                 end_cycle=t0 + 2**31 + 5)
    q = dataclasses.replace(tiny_lpx_program, transfers=trs)
    assert q.transfers.column("ser_cycles").dtype == np.int32
    rep = verify(q)
    assert rep.link_conflicts >= 1 and "link" in rep.kinds(), rep.errors[:5]
