"""Verify a Program: a schedule that fails any check is a compiler bug, never a result.

Structural checks (this module): SRAM regions in bounds and disjoint per chip;
each functional unit runs one instruction at a time; every buffer inside its
region, and buffers sharing bytes never live at the same time; every input
produced exactly once, on the right chip, before it is read (first vector) and
fully arrived before the reader finishes; transfers leave after their source
exists, follow connected links from source to destination, and take at least
the path's hop latency; no link direction carries two transfers in the same
cycle.

Cost and completeness checks (`lpxsim.lpu.verify_work`, needing the op graph
and the chip's rates): every instruction busy at least as long as its work
takes at the unit's rate; every op of the op graph computed over its whole
output; every partial sum reaching its reduction exactly once; the sampled
token leaving the last stage; every weight resident where it is read.

KV residency (`lpxsim.lpu.verify_kv`, needing the op graph): every attention instruction reads only KV its
own chip holds at its cycle (this step's keys written there in time, earlier steps' keys held there when the
step starts, exactly so when the previous step's residency is passed as `kv_held`).

Each class of error has its own prefix (``region:``, ``unit:``, ``buffer:``,
``dependency:``, ``transfer:``, ``link:``, ``cost:``, ``graph:``, ``partial:``,
``token:``, ``weights:``, ``kv:``). The checks work on columns of numpy arrays built in
one pass over the Program; interval overlaps are found with sorted sweeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, islice, repeat
from operator import methodcaller
from typing import TYPE_CHECKING

import numpy as np

from lpxsim.lpu.gcpause import gc_paused
from lpxsim.lpu.memtrim import release_free_memory
from lpxsim.lpu.program import Buffer, InstructionTable, Program, RegionTable
from lpxsim.lpu.verify_kv import KvResidency, check_kv

if TYPE_CHECKING:
    from lpxsim.graph import OpGraph
    from lpxsim.lpu.arch import Arch

STEP_INPUTS = ("tokens",)
MAX_PER_CLASS = 20  # messages kept per error class (the counts are exact)
IDENTITY_MIN_BUFFERS = 0  # programs with at least this many buffers match names by identity (0: all; a test raises it)


@dataclass
class VerifyReport:
    ok: bool
    errors: list[str] = field(default_factory=list)
    link_conflicts: int = 0
    region_overlaps: int = 0
    dependency_errors: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # errors per class
    skipped: list[str] = field(default_factory=list)  # checks that could not run, with the reason

    def add(self, kind: str, msg: str) -> None:
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        if n < MAX_PER_CLASS:
            self.errors.append(f"{kind}: {msg}")
        self.ok = False

    def kinds(self) -> set[str]:
        """The error classes found."""
        return set(self.counts)


def sweep_overlaps(group: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per group id, the number of half-open intervals that start before an earlier one (same group) ends."""
    if len(starts) < 2:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((starts, group))
    return _sweep_sorted(group[order], starts[order], ends[order])


def _sweep_sorted(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """`sweep_overlaps` of intervals sorted by (group, start) already; `s` and `e` (int64) are overwritten."""
    if len(s) < 2:
        return np.zeros(0, dtype=np.int64)
    s, e = s.astype(np.int64, copy=False), e.astype(np.int64, copy=False)
    big = int(max(int(e.max(initial=0)), int(s.max(initial=0)))) + 2
    base = (g - g.min()).astype(np.int64)
    base *= big
    e += base  # each group's intervals shifted past the previous group's (one running maximum for all)
    s += base
    del base
    running = np.maximum.accumulate(e, out=e)
    bad = s[1:] < running[:-1]
    bad &= g[1:] == g[:-1]
    return g[1:][bad]


def index_dtype(count: int) -> type:
    """The integer type of buffer and record indices below `count`: int32 where it holds them (memory)."""
    return np.int32 if count < 1 << 31 else np.int64


def _identity_index(keys: dict[str, object], names, count: int, chunk: int = 1 << 18) -> np.ndarray | None:
    """Position in `keys` of each of the `count` names, matched by object identity; None if a name is not
    one of the key objects (an equal but distinct str, or an undeclared name). The names are looked up
    `chunk` at a time: only the positions (int32 where they fit) are kept whole (peak memory)."""
    kid = np.fromiter(map(id, keys), np.int64, len(keys))
    dtype = index_dtype(len(keys))
    if not count:
        return np.zeros(0, dtype)
    if not len(kid):
        return None
    order = np.argsort(kid, kind="stable").astype(dtype)  # allocation order: nearly sorted already
    kid = kid[order]
    out = np.empty(count, dtype)
    names = iter(names)
    for lo in range(0, count, chunk):
        hi = min(lo + chunk, count)
        q = np.fromiter(map(id, islice(names, hi - lo)), np.int64, hi - lo)
        pos = np.searchsorted(kid, q)
        np.minimum(pos, len(kid) - 1, out=pos)
        if not np.array_equal(kid[pos], q):
            return None
        out[lo:hi] = order[pos]
    return out


def _names(outputs: list[str], inputs: list[str], srcs: list[str], dsts: list[str]):
    """Every buffer name the records use, in the order of the columns i_out, r_buf, t_sbuf, t_dbuf (`inputs`:
    every instruction's inputs, flat)."""
    return chain(outputs, inputs, srcs, dsts)


def _spread(ins: InstructionTable, name: str, of_values) -> np.ndarray:  # noqa: ANN001
    """An array over the instructions from one over coded field `name`'s distinct values: `of_values` maps
    the list of those values to an array (one entry each), which the codes then index."""
    per_value = of_values(getattr(ins, f"{name}_values"))
    return per_value[ins.column(f"{name}_code")] if len(ins) else per_value[:0]


class Columns:
    """The Program as numpy columns, with buffer ids mapped to integers (built once per verify).

    Buffer indices (`i_out`, `r_buf`, `t_sbuf`, `t_dbuf`) and `r_ins` are int32 where they fit (`index_dtype`);
    the names of the buffers (`names`) are listed only when a message needs them (memory)."""

    def __init__(self, p: Program) -> None:
        ins, trs = p.instructions, p.transfers
        n, m, nd = len(ins), len(trs), len(p.buffers)
        # The instructions and transfers are columns already (the transfers' are zero-copy views; their hops
        # are expanded from the distinct routes where checked). Per-instruction values of the coded fields
        # (op, kind, slice, attrs, unit) are found once per distinct value, then spread by the codes.
        self.i_chip, self.i_start, self.i_first, self.i_end = map(
            ins.column, ("chip", "cycle_start", "first_out_cycle", "cycle_end"))
        outputs, inputs = ins.output, ins.input_flat
        srcs, dsts = trs.src_buffer, trs.dst_buffer
        bt = p.buffers  # a BufferTable: its columns, no Buffer values
        self.b_region, self.b_op, self.b_partial = (bt.values_at(k) for k in ("region", "op", "partial"))
        # declared buffers' chip, offset and bytes (the buffer check)
        self.b_chip, self.b_off, b_size = (bt.column(k) for k in ("chip", "offset", "bytes"))
        counts = ins.input_counts()
        nin = len(inputs)
        # buffer ids -> integers: declared buffers first, in order, then any undeclared name where first seen.
        # The compiler uses one str object per buffer id, so names are matched by object identity on sorted
        # addresses (no string hashing, no dict of every buffer); any name that is not the declared key
        # object itself sends the whole mapping through the dict. Both give the same indices (the dict alone
        # below IDENTITY_MIN_BUFFERS: a test compares them).
        self._bid: dict[str, int] | None = None
        self._names: list[str] | None = None
        self._declared = p.buffers
        nout, nq = n + nin, n + nin + 2 * m
        self.idx_dtype = index_dtype(nd + nq)  # every buffer index (undeclared names included) is below nd + nq
        idx = None
        if nd >= IDENTITY_MIN_BUFFERS:
            idx = _identity_index(p.buffers, _names(outputs, inputs, srcs, dsts), nq)
        if idx is None:
            idx = np.fromiter(map(self.bid.get, _names(outputs, inputs, srcs, dsts), repeat(-1)), self.idx_dtype, nq)
            if idx.min(initial=0) < 0:  # names no buffer declares (an error verify reports)
                idx = self._by_name(outputs, inputs, srcs, dsts)
        del outputs, inputs
        self.i_out, self.r_buf, self.t_sbuf, self.t_dbuf = idx[:n], idx[n:nout], idx[nout:nout + m], idx[nout + m:]
        self.nbuf = len(self._bid) if self._bid is not None else nd
        unit_code = {"MXM": 0, "VXM": 1, "SXM": 2, "MEM": 3}
        busy = methodcaller("get", "busy_cycles", -1)
        self.i_busy = _spread(ins, "attrs", lambda v: np.fromiter(map(busy, v), np.int64, len(v)))
        self.i_unit = _spread(ins, "unit", lambda v: np.fromiter(map(unit_code.get, v, repeat(4)), np.int64, len(v)))
        self.r_ins = np.repeat(np.arange(n, dtype=index_dtype(n)), counts)
        self.t_src, self.t_dst, self.t_send, self.t_ser, self.t_arrive, self.t_end = map(
            trs.column, ("src_chip", "dst_chip", "send_cycle", "ser_cycles", "arrive_cycle", "end_cycle"))
        self.t_bytes = trs.column("bytes").astype(np.float64)
        self.trs = trs  # its hops are expanded where checked (`_check_transfers`), then freed (peak memory)
        # bytes of every buffer (undeclared: 0): the declared column itself when every buffer is declared
        if self.nbuf == nd:
            self.b_bytes = b_size
        else:
            self.b_bytes = np.zeros(self.nbuf, np.int64)
            self.b_bytes[:nd] = b_size

    STRUCTURAL = ("b_region", "b_chip", "b_off", "i_start", "i_first", "i_end", "t_send", "t_arrive", "t_end")

    def release(self, *names: str) -> None:
        """Drop the columns `names`, which no later check reads (peak memory); reading one afterwards fails."""
        for name in names:
            delattr(self, name)

    @property
    def names(self) -> list[str]:
        """Every buffer's name by index (declared keys, then undeclared names): listed on first use (messages)."""
        if self._names is None:
            self._names = list(self._bid) if self._bid is not None else list(self._declared)
        return self._names

    def declared_at(self, ks: list[int]) -> list[tuple[str, Buffer]]:
        """(key, Buffer) of the declared buffers at positions `ks`."""
        d = self._declared
        return [(d.ids[k], d.row(k)) for k in ks]

    def declared_indices(self, ks: list[int]) -> list[int]:
        """Buffer index of each declared buffer at positions `ks` (ascending), under its own id."""
        return [self.index(key, b.id, k) for k, (key, b) in zip(ks, self.declared_at(ks), strict=True)]

    def _by_name(self, outputs: list[str], inputs: list[str], srcs: list[str],
                 dsts: list[str]) -> np.ndarray:
        """Buffer indices of every name through the dict, adding undeclared names where first seen."""
        bid = self.bid
        for b in _names(outputs, inputs, srcs, dsts):
            if b not in bid:
                bid[b] = len(bid)
        return np.fromiter(map(bid.__getitem__, _names(outputs, inputs, srcs, dsts)), self.idx_dtype)

    @property
    def bid(self) -> dict[str, int]:
        """Buffer id -> index (built on first use: the identity match needs no dict)."""
        if self._bid is None:
            self._bid = dict(self._declared.index)  # a copy: undeclared names are added to it
        return self._bid

    def index(self, key: str, b_id: str, k: int) -> int:
        """Index of the buffer declared as `key` (position `k`) under its own id `b_id`."""
        return k if b_id is key or b_id == key else self.bid[b_id]

    def producers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per buffer: times written (instructions + transfers), chip, first and end cycle (-1 if none); int32
        where the values fit (memory)."""
        nb = self.nbuf
        writes = np.bincount(np.concatenate([self.i_out, self.t_dbuf]), minlength=nb).astype(index_dtype(nb + 1))
        out = [writes]
        for ins, tr in ((self.i_chip, self.t_dst), (self.i_first, self.t_arrive), (self.i_end, self.t_end)):
            col = np.full(nb, -1, _fit_dtype(ins, tr))
            col[self.i_out] = ins
            col[self.t_dbuf] = tr
            out.append(col)
        return tuple(out)


def _fit_dtype(*arrays: np.ndarray) -> type:
    """int32 if every value of `arrays` fits it, else int64."""
    i32 = np.iinfo(np.int32)
    ok = all(not len(a) or (i32.min <= int(a.min()) and int(a.max()) <= i32.max) for a in arrays)
    return np.int32 if ok else np.int64


class Regions:
    """The Program's regions as columns, and the lookup of a buffer's region by (chip, name).

    A (chip, name) declared twice (an overlap `_check_regions` reports) is one entry, numbered where first
    declared and sized as last declared. Entries are numbered in order of first declaration."""

    def __init__(self, p: Program) -> None:
        t = p.regions if isinstance(p.regions, RegionTable) else RegionTable(p.regions)
        n = len(t)
        self.table = t
        # the table's columns: chips widened (key arithmetic below), the rest zero-copy
        self.chip = t.column("chip").astype(np.int64)
        self.off, self.size = t.column("offset_bytes"), t.column("size_bytes")
        rcode = t.column("name")  # region name -> a code, in order of first appearance
        self.codes = dict(zip(t.names, range(len(t.names)), strict=True))
        self.c0 = int(self.chip.min(initial=0))
        self.nc = max(len(self.codes), 1)
        key = (self.chip - self.c0) * self.nc + rcode
        self.keys, first, inv = np.unique(key, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        last = np.zeros(len(self.keys), np.int64)
        np.maximum.at(last, inv, np.arange(n))
        rank = np.empty(len(self.keys), np.int64)  # sorted key -> entry number (order of first declaration)
        order = np.argsort(first, kind="stable")
        rank[order] = np.arange(len(order))
        self.rank = rank
        self.first = first[order]  # per entry: its first declaration (names in messages)
        self.entry_size = self.size[last[order]]  # per entry: the size last declared

    def __len__(self) -> int:
        return len(self.first)

    def key(self, k: int) -> tuple[int, str]:
        """(chip, name) of entry `k`."""
        j = int(self.first[k])
        return int(self.chip[j]), self.table.names[self.table.name[j]]

    def find(self, chip: np.ndarray, names: list, chunk: int = 1 << 16) -> np.ndarray:
        """Per buffer (its chip and region name): the entry of that name on that chip; -1 if there is none,
        -2 if the buffer names no region. Looked up `chunk` buffers at a time (peak memory)."""
        nb = len(names)
        g = np.empty(nb, np.int64)
        lookup = {**self.codes, "": -2, None: -2}
        span = int(self.chip.max(initial=0)) - self.c0
        for lo in range(0, nb, chunk):
            hi = min(lo + chunk, nb)
            code = np.fromiter(map(lookup.get, names[lo:hi], repeat(-1)), np.int64, hi - lo)
            c = chip[lo:hi] - self.c0
            ok = np.flatnonzero((code >= 0) & (c >= 0) & (c <= span))
            out = np.where(code == -2, -2, -1)
            if len(ok) and len(self.keys):
                q = c[ok] * self.nc + code[ok]
                pos = np.minimum(np.searchsorted(self.keys, q), len(self.keys) - 1)
                hit = self.keys[pos] == q
                out[ok[hit]] = self.rank[pos[hit]]
            g[lo:hi] = out
        return g


def _check_regions(p: Program, rep: VerifyReport) -> Regions:
    reg = Regions(p)
    chip, off, size = reg.chip, reg.off, reg.size
    for k in np.flatnonzero((off < 0) | (size < 0) | (off + size > p.chip_sram_bytes)):
        r = p.regions[k]
        rep.add("region", f"{r.name} on chip {r.chip} spans bytes {r.offset_bytes:,}..{r.end_bytes:,}, "
                          f"outside 0..{p.chip_sram_bytes:,}")
    bad = sweep_overlaps(chip, off, off + size)
    for c, cnt in zip(*np.unique(bad, return_counts=True), strict=True):
        rep.region_overlaps += int(cnt)
        rep.add("region", f"{int(cnt)} overlapping regions on chip {int(c)}")
    return reg


def _check_dependencies(p: Program, rep: VerifyReport, col: Columns, prod) -> None:
    writes, pchip, pfirst, pend = prod
    step_input = np.zeros(col.nbuf, bool)
    fed = np.flatnonzero(np.fromiter(map(STEP_INPUTS.__contains__, col.b_op), bool, len(col.b_op))).tolist()
    step_input[col.declared_indices(fed)] = True  # the step's inputs (nothing in the program writes them)
    for k in np.flatnonzero(writes > 1):
        rep.add("dependency", f"buffer {col.names[k]} written {int(writes[k])} times")
    bad = 0
    incons = np.flatnonzero((col.i_start > col.i_first) | (col.i_first > col.i_end))
    for k in incons:
        rep.add("dependency", f"instruction {p.instructions[k].id} has inconsistent cycles")
    bad += len(incons)
    rb, ri = col.r_buf, col.r_ins
    given = step_input[rb] & (writes[rb] == 0)
    missing = (writes[rb] == 0) & ~given
    elsewhere = ~missing & ~given & (pchip[rb] != col.i_chip[ri])
    early = ~missing & ~given & ~elsewhere & ((pfirst[rb] > col.i_start[ri]) | (pend[rb] > col.i_end[ri]))
    for mask, what in ((missing, "which nothing writes"), (elsewhere, "held by another chip"),
                       (early, "before it is there")):
        for k in np.flatnonzero(mask):
            ins = p.instructions[ri[k]]
            extra = f" ({int(pchip[rb[k]])})" if what == "held by another chip" else ""
            rep.add("dependency", f"{ins.op} on chip {ins.chip} reads {col.names[rb[k]]}, {what}{extra}")
        bad += int(mask.sum())
    sb = col.t_sbuf
    src_given = step_input[sb] & (writes[sb] == 0)
    tbad = ~src_given & ((writes[sb] == 0) | (pchip[sb] != col.t_src) | (pfirst[sb] > col.t_send))
    for k in np.flatnonzero(tbad):
        t = p.transfers[k]
        rep.add("transfer", f"transfer {t.id} sends {t.src_buffer} before it exists on chip {t.src_chip}")
    bad += int(tbad.sum())
    rep.dependency_errors += bad


def _check_units(p: Program, rep: VerifyReport, col: Columns) -> None:
    """A functional unit streams one instruction at a time: the next starts after the previous's busy cycles."""
    nobusy = np.flatnonzero(col.i_busy < 0)
    for k in nobusy:
        rep.add("unit", f"instruction {p.instructions[k].id} ({p.instructions[k].op}) states no busy_cycles")
    busy = np.maximum(col.i_busy, 1)
    group = col.i_chip * 8 + col.i_unit
    bad = sweep_overlaps(group, col.i_start, col.i_start + busy)
    names = ("MXM", "VXM", "SXM", "MEM", "?")
    for g, cnt in zip(*np.unique(bad, return_counts=True), strict=True):
        rep.add("unit", f"{names[int(g) % 8]} on chip {int(g) // 8} runs two instructions at once ({int(cnt)}x)")


def _route_hops(p: Program) -> dict[str, np.ndarray]:
    """The hops of the distinct routes (a few thousand; not of every transfer), each route's hops in order:
    per hop its link (``lid``; 0 where ``unknown``: not one of the Program's links), direction ``d``, the
    chips it goes ``frm`` and ``to``, its latency ``h`` and its offset ``off`` (the latencies before it on
    the route); per route its hop count ``n`` and first hop ``first``."""
    routes = p.transfers.routes
    nr = len(routes)
    nl = max(p.links, default=-1) + 1
    la, lb, hop = np.full(max(nl, 1), -1), np.full(max(nl, 1), -1), np.zeros(max(nl, 1), np.int64)
    for lid, lk in p.links.items():
        la[lid], lb[lid], hop[lid] = lk.a, lk.b, lk.hop_cycles
    n = np.fromiter(map(len, routes), np.int64, nr)
    rh = np.fromiter(chain.from_iterable(chain.from_iterable(routes)), np.int64, 2 * int(n.sum())).reshape(-1, 2)
    lid, d = rh[:, 0], rh[:, 1]
    unknown = (lid < 0) | (lid >= nl)
    unknown[~unknown] = la[lid[~unknown]] < 0
    ok_l = np.where(unknown, 0, lid)
    h = hop[ok_l]
    first = np.cumsum(n) - n
    cum = np.cumsum(h) - h
    off = cum - np.repeat(cum[first[n > 0]], n[n > 0]) if len(h) else cum
    return {"lid": ok_l, "d": d, "unknown": unknown, "frm": np.where(d == 0, la[ok_l], lb[ok_l]),
            "to": np.where(d == 0, lb[ok_l], la[ok_l]), "h": h, "off": off, "n": n, "first": first}


def _check_transfers(p: Program, rep: VerifyReport, col: Columns) -> None:
    """Paths and latencies per distinct route, then per transfer through its route index; the link windows
    expanded per hop for the sweep alone (peak memory)."""
    r = _route_hops(p)
    n, first, unknown, frm, to = r["n"], r["first"], r["unknown"], r["frm"], r["to"]
    nr, nh_all = len(n), len(frm)
    ne = np.flatnonzero(n > 0)
    rr = np.repeat(np.arange(nr), n)  # the route of each hop
    later = np.ones(nh_all, bool)  # hops after the first of their route
    later[first[ne]] = False
    broken = np.zeros(nh_all, bool)  # a hop leaving from somewhere else than where the previous one arrived
    broken[1:] = later[1:] & (frm[1:] != to[:-1]) & ~unknown[1:]
    r_broken = np.bincount(rr[broken], minlength=nr) > 0
    r_unknown = np.bincount(rr[unknown], minlength=nr) > 0
    r_from, r_to = np.full(nr, -1, np.int64), np.full(nr, -1, np.int64)
    r_from_ok, r_to_ok = np.zeros(nr, bool), np.zeros(nr, bool)  # first / last hop on a known link
    last = first[ne] + n[ne] - 1
    r_from[ne], r_from_ok[ne] = frm[first[ne]], ~unknown[first[ne]]
    r_to[ne], r_to_ok[ne] = to[last], ~unknown[last]
    r_path = np.bincount(rr, weights=r["h"], minlength=nr).astype(np.int64)
    del rr, later, broken, frm, to, unknown
    rid = col.trs.column("route")
    nhops = n[rid]
    for k in np.flatnonzero(r_unknown[rid]):
        rep.add("transfer", f"transfer {p.transfers[k].id} uses an unknown link")
    has = nhops > 0
    for k in np.flatnonzero(has & (r_broken[rid] | (r_from_ok[rid] & (r_from[rid] != col.t_src)))):
        rep.add("transfer", f"transfer {p.transfers[k].id} path is not connected")
    for k in np.flatnonzero(has & r_to_ok[rid] & (r_to[rid] != col.t_dst)).tolist():
        t = p.transfers[k]
        rep.add("transfer", f"transfer {t.id} ends at chip {int(r_to[rid[k]])}, not {t.dst_chip}")
    no_path = np.flatnonzero(~has & (col.t_src != col.t_dst))
    for k in no_path:
        rep.add("transfer", f"transfer {p.transfers[k].id} has no links between chips")
    slow = (col.t_arrive < col.t_send + r_path[rid]) | (col.t_end < col.t_arrive)
    for k in np.flatnonzero(slow):
        rep.add("transfer", f"transfer {p.transfers[k].id} arrives faster than its links allow")
    del has, slow
    # link windows: hop i of a transfer holds its link direction from send + the hop latencies before it, for
    # ser_cycles; sorted by (link direction, start) for the sweep, each column made in that order at once
    r_key = r["lid"] * 2 + r["d"]
    total = int(nhops.sum())
    tr = np.repeat(np.arange(len(rid), dtype=index_dtype(len(rid))), nhops)
    hop = np.repeat(first[rid] - (np.cumsum(nhops) - nhops), nhops)  # the route's hop of each transfer hop
    hop += np.arange(total)
    del nhops
    s = col.t_send[tr]
    s += r["off"][hop]
    key = r_key[hop]
    del hop
    order = np.lexsort((s, key))
    key, s, tr = key[order], s[order], tr[order]
    del order
    e = np.add(s, col.t_ser[tr], dtype=np.int64)  # t_ser may be int32: the sum is formed in int64
    del tr
    bad = _sweep_sorted(key, s, e)
    conflicts = 0
    for kk, cnt in zip(*np.unique(bad, return_counts=True), strict=True):
        conflicts += int(cnt)
        rep.add("link", f"link {int(kk) // 2} direction {int(kk) % 2} carries two transfers at once ({int(cnt)}x)")
    rep.link_conflicts = conflicts


def _narrow(a: np.ndarray) -> np.ndarray:
    """`a` as int32 where every value fits, else as it is (memory)."""
    return a.astype(np.int32) if len(a) and _fit_dtype(a) is np.int32 else a


def lifetimes(col: Columns, prod) -> tuple[np.ndarray, np.ndarray]:
    """Per buffer: (cycle it starts being written, cycle after its last read); -1 where nothing writes it."""
    writes, _, first, end = prod
    last = np.full(col.nbuf, -1, np.int64)
    np.maximum.at(last, col.r_buf, col.i_end[col.r_ins])
    np.maximum.at(last, col.t_sbuf, col.t_end)
    np.maximum(end, last, out=last)
    last += 1
    return np.where(writes > 0, first, -1), last


def _check_buffers(p: Program, rep: VerifyReport, col: Columns, prod, regions: Regions) -> None:
    nd = len(col.b_region)  # declared buffers: their ids are 0..nd-1 in `col.bid`
    if col.nbuf > nd:  # read or written, never declared: no bytes, no region, so no memory check covers it
        rep.add("buffer", f"{col.nbuf - nd} buffer(s) used but not declared, e.g. {col.names[nd]}")
    bchip, off, size = col.b_chip, col.b_off, col.b_bytes[:nd]
    g = regions.find(bchip, col.b_region)  # each buffer's region entry (-1: none there; -2: none named)
    bad = np.flatnonzero(g == -1).tolist()
    for _, b in col.declared_at(bad):
        rep.add("buffer", f"{b.id} names region {b.region} not on chip {b.chip}")
    placed = g >= 0
    rsize = np.r_[regions.entry_size, 0]
    outside = placed & ((off < 0) | (off + size > rsize[np.where(placed, g, len(rsize) - 1)]))
    bad = np.flatnonzero(outside).tolist()
    for k, (_, b) in zip(bad, col.declared_at(bad), strict=True):
        rep.add("buffer", f"{b.id} (bytes {b.offset_bytes:,}..{b.offset_bytes + b.bytes:,}) lies outside "
                          f"region {b.region} ({int(regions.entry_size[g[k]]):,} bytes) on chip {b.chip}")
    del outside
    t0, t1 = lifetimes(col, prod)  # after the region lookup: their temporaries never meet (peak memory)
    placed &= t0[:nd] >= 0  # a buffer nothing writes is a dependency or completeness error, not a clash
    idx = np.flatnonzero(placed).astype(index_dtype(nd))
    del placed
    if len(idx) < 2:
        return
    # the live buffers sorted by (region, start); each column replaced by its sorted part in turn (peak memory)
    idx = idx[np.lexsort((t0[idx], g[idx]))]
    g = _narrow(g[idx])
    t0 = _narrow(t0[idx])
    t1 = _narrow(t1[idx])
    hi = _narrow(off[idx] + np.maximum(size[idx], 1))
    lo = _narrow(off[idx])
    del idx
    for k in _clashing_regions(g, lo, hi, t0, t1, is_sorted=True):
        chip, region = regions.key(k)
        rep.add("buffer", f"live buffers share bytes in {region} on chip {chip}")


def _clashing_regions(g: np.ndarray, lo: np.ndarray, hi: np.ndarray, t0: np.ndarray, t1: np.ndarray,
                      chunk: int = 1 << 16, is_sorted: bool = False) -> list[int]:
    """Regions (ascending) holding two buffers that overlap both in bytes and in lifetime.

    Sorted by (region, start), a buffer can only clash with the ones after it that start before it ends:
    those pairs (a few per buffer: the live set is short) are generated and tested exactly, about `chunk`
    pairs at a time (memory)."""
    if not is_sorted:  # `is_sorted`: the caller sorted them by (region, start) already
        order = np.lexsort((t0, g))
        g, lo, hi, t0, t1 = g[order], lo[order], hi[order], t0[order], t1[order]
        del order
    base = int(min(int(t0.min()), int(t1.min())))
    span = int(max(int(t1.max()), int(t0.max()))) - base + 2
    n = len(g)
    # buffers after i (same region) starting before i ends: positions i+1 .. stop[i]-1, found on a key
    # sorted like the buffers, `chunk` buffers at a time; only their count is kept (peak memory)
    key = (g - g.min()).astype(np.int64)
    key *= span
    key -= base
    key += t0
    count = np.empty(n, np.int64)
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        q = key[a:b] - t0[a:b] + np.maximum(t1[a:b], t0[a:b])
        stop = np.searchsorted(key, q, side="left")
        stop -= np.arange(a + 1, b + 1)
        count[a:b] = np.maximum(stop, 0)
    del key
    ends = np.cumsum(count)
    bad_regions: set[int] = set()
    r0 = 0
    while r0 < len(g):
        r1 = max(int(np.searchsorted(ends, (ends[r0 - 1] if r0 else 0) + chunk, side="right")), r0 + 1)
        cnt = count[r0:r1]
        total = int(cnt.sum())
        if total:
            i = np.repeat(np.arange(r0, r1), cnt)
            j = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt) + i + 1
            bad = (lo[i] < hi[j]) & (lo[j] < hi[i]) & (t0[i] < t1[j]) & (t0[j] < t1[i]) & (g[i] == g[j])
            bad_regions.update(np.unique(g[i[bad]]).tolist())
        r0 = r1
    return sorted(bad_regions)


@gc_paused
def verify(p: Program, graph: OpGraph | None = None, arch: Arch | None = None, *,
           kv_held: KvResidency | None = None) -> VerifyReport:
    """Run every check; `ok` is True only if all pass.

    `graph` (the op graph the Program was compiled from) and `arch` (the chip's rates) enable the cost,
    completeness and KV residency checks. Without them they are rebuilt from the catalog (model and system
    names in the Program); a model not in the catalog leaves those checks in `skipped`. `kv_held`: the KV the
    chips hold when the step starts (`verify_kv.kv_after` of the deployment's previous step); without it the
    Program's own KV holdings stand for the earlier steps'.
    """
    rep = VerifyReport(ok=True)
    col = Columns(p)
    release_free_memory()  # each check's scratch is handed back before the next one's (peak memory)
    prod = col.producers()
    regions = _check_regions(p, rep)
    _check_dependencies(p, rep, col, prod)
    release_free_memory()
    _check_units(p, rep, col)
    _check_transfers(p, rep, col)
    release_free_memory()
    _check_buffers(p, rep, col, prod, regions)
    # the cost and completeness checks read the buffers' write counts alone, and fewer columns (peak memory)
    del regions
    prod = (prod[0], None, None, None)
    col.release(*col.STRUCTURAL)
    release_free_memory()
    from lpxsim.lpu.verify_work import check_work, context_for

    graph, arch, why = context_for(p, graph, arch)
    if graph is None or arch is None:
        rep.skipped.append(f"cost, graph, partial, token, weights, kv: {why}")
    else:
        check_work(p, graph, arch, rep, col, prod)
        release_free_memory()
        check_kv(p, graph, rep, kv_held)
    return rep


__all__ = ["Columns", "Regions", "VerifyReport", "lifetimes", "sweep_overlaps", "verify"]
