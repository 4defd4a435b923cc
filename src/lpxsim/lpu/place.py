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
from collections import defaultdict
from itertools import chain
from operator import itemgetter

from lpxsim.errors import DoesNotFit
from lpxsim.lpu.lowering import ChipUse
from lpxsim.lpu.program import Buffer, Instruction, Region, TransferTable
from lpxsim.lpu.schedule import Ready

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
        if min_end <= start:
            active = [a for a in active if a[2] > start]
            min_end = min([a[2] for a in active], default=_NEVER)
            packed = _packed(active)
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


def place(use: dict[int, ChipUse], buffers: dict[str, Buffer], ready: dict[str, Ready], last: dict[str, int] | None,
          sram_bytes: int) -> tuple[list[Region], dict[str, Buffer], dict[int, dict]]:
    """Regions for every chip, the buffers in placement order, and a per-chip byte summary. `ready` is
    consumed (emptied).

    A buffer lives from its first vector (`ready`) to one cycle after the later of its last vector and its
    last reader (`last`, from `last_reads`; None: the `Ready.last` the scheduler kept, valid when no buffer is
    written twice, `Scheduler.written_once`); one never written lives [0, 1). A buffer an instruction writes
    (`Ready`) goes to the chip's activation region, one that arrives (`Arrived`) or is never written to its
    transfer buffer region.
    Each placed buffer is given its region and offset in place (not copied: a large program has ~10^6)."""
    per_chip: dict[int, list[tuple[int, str, int, int, Buffer]]] = defaultdict(list)  # (start, id, size, last, buffer)
    recv_chip: dict[int, list[tuple[int, str, int, int, Buffer]]] = defaultdict(list)
    # Peak memory (the compile's highest point is here): each ready entry is popped as it is read, so the
    # entries are freed as the items grow; an item holds its buffer's last live cycle (end - 1: an int the
    # entry already had) and one shared int per distinct aligned size.
    rpop = ready.pop
    lget = last.get if last is not None else None
    sizes: dict[int, int] = {}
    for bid, b in buffers.items():
        rd = rpop(bid, None)
        if rd is None:
            s, e, to = 0, 0, recv_chip
        else:
            s, e = rd.first, rd.end
            r = rd.last if lget is None else lget(bid, e)
            if r > e:
                e = r
            to = per_chip if type(rd) is Ready else recv_chip
        nb = b.bytes
        size = sizes.get(nb)
        if size is None:
            size = sizes[nb] = -(-max(nb, 1) // ALIGN) * ALIGN
        to[b.chip].append((s, bid, size, e, b))
    del ready, last, rpop, lget  # read into the items: freed here when the caller passed them without a name
    regions: list[Region] = []
    placed: list[list[tuple[int, str, int, int, Buffer]]] = []  # item lists in placement order
    summary: dict[int, dict] = {}
    chips = sorted(set(use) | set(per_chip) | set(recv_chip))
    for c in chips:
        cu = use.get(c, ChipUse())
        off = 0
        totals = {"weights": 0, "kv": 0, "act": 0, "buffer": 0}
        for name, nbytes in sorted(cu.weights.items()):
            size = _align(nbytes)
            regions.append(Region(c, name, "weights", off, size))
            off += size
            totals["weights"] += size
        for name, nbytes in sorted(cu.kv.items()):
            size = _align(nbytes)
            if size:
                regions.append(Region(c, name, "kv", off, size))
                off += size
                totals["kv"] += size
        for kind, items in (("act", per_chip.get(c)), ("buffer", recv_chip.get(c))):
            if items:  # each item's size is at least one vector: a region exactly when there are buffers
                rname = f"{kind}@{c}"
                size = _align(_first_fit(items, rname))
                placed.append(items)
                regions.append(Region(c, rname, kind, off, size))  # type: ignore[arg-type]
                off += size
                totals[kind] = size
        if off > sram_bytes:
            raise DoesNotFit(
                "layout",
                f"chip {c} needs {off:,} B (weights {totals['weights']:,}, KV {totals['kv']:,}, "
                f"activations {totals['act']:,}, buffers {totals['buffer']:,}) > {sram_bytes:,} B SRAM",
            )
        summary[c] = {**totals, "used": off}
    ids, bufs = map(itemgetter(1), chain.from_iterable(placed)), map(itemgetter(4), chain.from_iterable(placed))
    new_bufs = dict(zip(ids, bufs, strict=True))  # built in C: a Python loop of ~10^5 inserts costs more
    if len(new_bufs) != len(buffers):  # its keys are buffers' keys: equal sizes mean every buffer is there
        for bid, b in buffers.items():
            new_bufs.setdefault(bid, b)
    return regions, new_bufs, summary

