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
from itertools import repeat
from operator import attrgetter, itemgetter

import numpy as np

from lpxsim.errors import DoesNotFit
from lpxsim.lpu.lowering import ChipUse
from lpxsim.lpu.program import Buffer, Instruction, RegionTable, TransferTable
from lpxsim.lpu.schedule import ReadyTable

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


def _first_fit(items: list[tuple[int, str, int, int, Buffer]], region: str) -> int:
    """items (start, id, size, last live cycle, buffer), sorted here by (start, id): each buffer gets `region` and the
    lowest offset no live buffer overlaps, in that order; returns the region size. Live intervals never share
    bytes.

    The live set is short (a few buffers per chip at a time): it is kept sorted by offset and filtered when the
    earliest end among it has passed."""
    items.sort()  # (start, id): ids are unique, so the buffers themselves are never compared
    active: list[tuple[int, int, int]] = []  # (offset, end offset, end cycle) sorted by offset
    min_end = _NEVER
    top = 0
    packed = True  # the live buffers tile [0, active[-1] end) without a gap: first fit is the end of the last
    insort = bisect.insort
    for start, _, size, last, b in items:
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
        b.region = region
        b.offset_bytes = off
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


def place(use: dict[int, ChipUse], buffers: dict[str, Buffer], ready: ReadyTable, last: dict[str, int] | None,
          sram_bytes: int) -> tuple[RegionTable, dict[str, Buffer], dict[int, dict]]:
    """Regions for every chip, the buffers in placement order, and a per-chip byte summary. `ready` is
    consumed (its `slot` emptied); `buffers` is not changed, but its values are (their region and offset).

    A buffer lives from its first vector (`ready`) to one cycle after the later of its last vector and its
    last reader (`last`, from `last_reads`; None: the `ReadyTable.last` the scheduler kept, valid when no buffer
    is written twice, `Scheduler.written_once`); one never written lives [0, 1). A buffer an instruction writes
    goes to the chip's activation region, one that arrives (`ReadyTable.arrived`) or is never written to its
    transfer buffer region.
    Each placed buffer is given its region and offset in place (not copied: a large program has ~10^6)."""
    n = len(buffers)
    ids, bufs = list(buffers), list(buffers.values())
    # Per buffer as columns (peak memory: a large program has ~5 x 10^5 buffers; only one group's items, the
    # tuples first fit sorts, exist at a time).
    slot = ready.slot
    if len(slot) == n and list(slot) == ids:  # written in declaration order (the scheduler's usual case): the
        # rows in order, with no lookup by id (~0.4 us each on 5 x 10^5 scattered strings)
        rows = np.fromiter(slot.values(), np.int64, n)
        slot.clear()
    else:  # each slot popped as it is read
        rows = np.fromiter(map(slot.pop, ids, repeat(-1, n)), np.int64, n)
    del slot
    known = rows >= 0
    if ready.rows():
        r = np.where(known, rows, 0)
        start = np.where(known, _column(ready.first)[r], 0)
        end = np.where(known, _column(ready.end)[r], 0)
        recv = ~known | (np.frombuffer(ready.arrived, np.uint8)[r] != 0)
        read = _column(ready.last)[r] if last is None else np.fromiter(map(last.get, ids, end.tolist()), np.int64, n)
        end = np.where(known, np.maximum(end, read), 0)  # the last live cycle: last vector or last read
    else:
        start = end = np.zeros(n, np.int64)
        recv = np.ones(n, bool)
    del ready, last, rows, known
    nbytes = np.fromiter(map(attrgetter("bytes"), bufs), np.int64, n)
    size = -(-np.maximum(nbytes, 1) // ALIGN) * ALIGN
    chip = np.fromiter(map(attrgetter("chip"), bufs), np.int64, n)
    # groups (chip, activation before transfer buffers), in placement order; stable: buffer order within each
    order = np.argsort(chip * 2 + recv, kind="stable")
    key = (chip * 2 + recv)[order]
    cuts = np.flatnonzero(np.diff(key)) + 1
    lo, hi = np.r_[0, cuts], np.r_[cuts, n]
    bounds = dict(zip(key[lo].tolist(), zip(lo.tolist(), hi.tolist(), strict=True), strict=True)) if n else {}
    del nbytes, key, cuts, lo, hi  # bounds: group key (chip * 2 + transfer buffer) -> its span of `order`
    regions = RegionTable()
    placed_ids: list[str] = []  # buffer ids and buffers in placement order
    placed_bufs: list[Buffer] = []
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
                                 end[sel].tolist(), map(bufs.__getitem__, pos), strict=True))
                rname = f"{kind}@{c}"
                region_size = _align(_first_fit(items, rname))
                placed_ids.extend(map(itemgetter(1), items))
                placed_bufs.extend(map(itemgetter(4), items))
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
    # peak memory: the columns, and `buffers` when the caller handed it over unnamed, are freed before the new dict
    del ids, bufs, start, end, size, chip, order, recv, buffers
    new_bufs = dict(zip(placed_ids, placed_bufs, strict=True))  # built in C: a Python loop of ~10^5 inserts costs more
    return regions, new_bufs, summary

