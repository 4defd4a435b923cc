"""Placement: explicit SRAM regions per chip, and buffer offsets by liveness.

Per chip, in address order: one region per weight slice, one KV region per
layer, an activation region (buffers this chip produces) and a transfer
buffer region (buffers it receives). Buffers share their region's bytes only
when their lifetimes (first write to last read) do not overlap: a first-fit
interval allocator assigns offsets.
"""

from __future__ import annotations

import bisect
import math
from array import array
from operator import itemgetter

import numpy as np

from lpxsim.core.errors import DoesNotFit
from lpxsim.lpu.lowering import ChipUse
from lpxsim.lpu.memtrim import release_free_memory
from lpxsim.lpu.program import BufferTable, Instruction, RegionTable, TransferTable
from lpxsim.lpu.schedule import UNWRITTEN, ReadyTable

ALIGN = 320  # one vector
_NEVER = float("inf")


def _align(n: float) -> int:
    if isinstance(n, int):
        return -(-n // ALIGN) * ALIGN if n > 0 else 0
    return int(math.ceil(max(0.0, n) / ALIGN) * ALIGN)


def last_reads(instructions: list[Instruction], transfers: TransferTable) -> dict[str, int]:
    """Per buffer read by an instruction or a transfer: the cycle its last reader finishes."""
    last: dict[str, int] = {}
    get = last.get
    for ins in instructions:
        e = ins.cycle_end
        for b in ins.inputs:
            if e > get(b, -1):
                last[b] = e
    for b, e in zip(transfers.src_buffer, transfers.end_cycle, strict=True):
        if e > get(b, -1):
            last[b] = e
    return last


def _column(a: array) -> np.ndarray:
    """A zero-copy int64 view of a ready column."""
    return np.frombuffer(a, np.int64)


def _first_fit(items: list[tuple[int, str, int, int, int]], offsets: array) -> int:
    """items (start, id, size, last live cycle, row), sorted here by (start, id): each buffer gets the lowest
    offset no live buffer overlaps (written to ``offsets[row]``), in that order; returns the region size. Live
    intervals never share bytes.

    The live set is short (a few buffers per chip at a time): it is kept sorted by offset and filtered when the
    earliest end among it has passed."""
    items.sort()  # (start, id): ids are unique, so the rows are never compared
    active: list[tuple[int, int, int]] = []  # (offset, end offset, end cycle) sorted by offset
    min_end = _NEVER
    top = 0
    packed = True  # the live buffers tile [0, active[-1] end) without a gap: first fit is the end of the last
    insort = bisect.insort
    for start, _, size, last, row in items:
        end = last + 1
        if min_end <= start:  # drop the ended; the rest's earliest end, and whether they are packed (`_packed`)
            kept = []
            min_end, t, packed = _NEVER, 0, True
            for a in active:
                a_end = a[2]
                if a_end > start:
                    kept.append(a)
                    if a_end < min_end:
                        min_end = a_end
                    if a[0] != t:
                        packed = False
                    t = a[1]
            active = kept
        if packed:
            off = active[-1][1] if active else 0
            active.append((off, off + size, end))
        else:
            off = 0
            for a_off, a_top, _ in active:
                if off + size <= a_off:
                    break
                if a_top > off:
                    off = a_top
            item = (off, off + size, end)
            if off > active[-1][0]:
                active.append(item)
            else:
                insort(active, item)
            packed = _packed(active)
        offsets[row] = off
        if end < min_end:
            min_end = end
        if off + size > top:
            top = off + size
    return top


def _packed(active: list[tuple[int, int, int]]) -> bool:
    """Whether live intervals sorted by offset (pairwise disjoint) tile [0, last end) with no gap."""
    t = 0
    for a_off, a_top, _ in active:
        if a_off != t:
            return False
        t = a_top
    return True


def place(use: dict[int, ChipUse], buffers: BufferTable, ready: ReadyTable, last: dict[str, int] | None,
          sram_bytes: int) -> tuple[RegionTable, BufferTable, dict[int, dict]]:
    """Regions for every chip, the buffers in placement order (a new table, with their regions and offsets),
    and a per-chip byte summary. `buffers` and `ready` (its rows are the buffers' rows) are consumed: their
    index is emptied.

    A buffer lives from its first vector (`ready`) to one cycle after the later of its last vector and its
    last reader (`last`, from `last_reads`; None: the `ReadyTable.last` the scheduler kept, valid when no buffer
    is written twice, `Scheduler.written_once`); one never written lives [0, 1). A buffer an instruction writes
    goes to the chip's activation region, one that arrives (`ReadyTable.arrived`) or is never written to its
    transfer buffer region."""
    n = len(buffers)
    ids = buffers.ids
    if ready.slot is not buffers.index:
        raise ValueError("place: the ready table's rows are not these buffers'")
    # Per buffer as columns (peak memory: a large program has ~5 x 10^5 buffers; only one group's items, the
    # tuples first fit sorts, exist at a time).
    ready.grow(n)
    arrived = np.frombuffer(ready.arrived, np.uint8)[:n]
    known = arrived != UNWRITTEN
    start = np.where(known, _column(ready.first)[:n], 0)
    end = np.where(known, _column(ready.end)[:n], 0)
    recv = arrived != 0  # arrived, or never written
    read = _column(ready.last)[:n] if last is None else np.fromiter(map(last.get, ids, end.tolist()), np.int64, n)
    end = np.where(known, np.maximum(end, read), 0)  # the last live cycle: last vector or last read
    del last, known, arrived, read  # the views of the ready columns first, then the columns
    ready.release()
    del ready
    nbytes = np.frombuffer(buffers.bytes, np.int64)
    size = -(-np.maximum(nbytes, 1) // ALIGN) * ALIGN
    chip = np.frombuffer(buffers.chip, np.int64).copy()
    del nbytes
    # groups (chip, activation before transfer buffers), in placement order; stable: buffer order within each
    order = np.argsort(chip * 2 + recv, kind="stable")
    key = (chip * 2 + recv)[order]
    cuts = np.flatnonzero(np.diff(key)) + 1
    lo, hi = np.r_[0, cuts], np.r_[cuts, n]
    bounds = dict(zip(key[lo].tolist(), zip(lo.tolist(), hi.tolist(), strict=True), strict=True)) if n else {}
    del key, cuts, lo, hi  # bounds: group key (chip * 2 + transfer buffer) -> its span of `order`
    regions = RegionTable()
    placed = array("q")  # rows in placement order (typed: no Python int per buffer)
    offsets = array("q", bytes(8 * n))  # per row
    region_of = np.zeros(n, np.int32)  # per row: its region's name (`BufferTable.name_id`; 0: "")
    summary: dict[int, dict] = {}
    chips = sorted(set(use).union(np.unique(chip).tolist()))
    aligned: dict[float, int] = {}  # _align per distinct size: the chips of a stage hold equal slices
    for c in chips:
        cu = use.get(c, ChipUse())
        off = 0
        totals = {"weights": 0, "kv": 0, "act": 0, "buffer": 0}
        for kind, sizes in (("weights", cu.weights), ("kv", cu.kv)):
            first = off
            r_name: list[str] = []
            r_off: list[int] = []
            r_size: list[int] = []
            for name, nbytes in sorted(sizes.items()):
                size_w = aligned.get(nbytes)
                if size_w is None:
                    size_w = aligned[nbytes] = _align(nbytes)
                if size_w or kind == "weights":
                    r_name.append(name)
                    r_off.append(off)
                    r_size.append(size_w)
                    off += size_w
            regions.add_block(c, kind, r_name, r_off, r_size)
            totals[kind] = off - first
        for kind, grp in (("act", bounds.get(2 * c)), ("buffer", bounds.get(2 * c + 1))):
            if grp:  # each item's size is at least one vector: a region exactly when there are buffers
                sel = order[grp[0]:grp[1]]
                pos = sel.tolist()
                items = list(zip(start[sel].tolist(), map(ids.__getitem__, pos), size[sel].tolist(),
                                 end[sel].tolist(), pos, strict=True))
                rname = f"{kind}@{c}"
                region_size = _align(_first_fit(items, offsets))
                placed.extend(map(itemgetter(4), items))
                region_of[sel] = buffers.name_id(rname)
                regions.add_block(c, kind, (rname,), (off,), (region_size,))
                off += region_size
                totals[kind] = region_size
        if off > sram_bytes:
            raise DoesNotFit(
                "layout",
                f"chip {c} needs {off:,} B (weights {totals['weights']:,}, KV {totals['kv']:,}, "
                f"activations {totals['act']:,}, buffers {totals['buffer']:,}) > {sram_bytes:,} B SRAM",
            )
        summary[c] = {**totals, "used": off}
    # peak memory: the columns, and the old table's index, are freed before the new table is built
    del start, end, size, chip, order, recv
    release_free_memory()  # first fit's per-group lists, before the placed table is built
    return regions, buffers.permuted(placed, region=region_of, offset=offsets, consume=True), summary
