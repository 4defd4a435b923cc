"""The scheduler: one global clock, functional units per chip, links reserved cycle by cycle.

Instructions are scheduled greedily in program (topological) order. Each one
starts when its unit is free and the first vector of every input is available
(vector streaming); its first output vector appears `latency` cycles later and
its last one no earlier than `duration` after that, nor before its inputs'
last vectors have passed through. Transfers are source-routed over the
topology's shortest path; a transfer holds each link direction for its
serialisation time, offset by the hop latency along the path, and is placed at
the earliest cycle at which all its links are free (no run-time arbitration).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from lpxsim.lpu.arch import Arch
from lpxsim.lpu.program import BufferTable, InstructionTable, Link, Partial, Range, TransferTable, Unit
from lpxsim.specs.topology import ChipGraph

DRAIN = ("stream_transit", "superlane_stagger", "pipeline_depth", "sram_access")  # what a last vector crosses
VC1 = (("vector_count", 1),)
_UNSET = object()  # `Scheduler._last_attrs` before any instruction (None is a valid attrs argument)
_EMPTY: dict = {}  # the slice of instructions without one (shared: instruction slices are read-only values)


_PATHS: list[tuple[Any, int, dict[tuple[int, int], tuple[int, ...]]]] = []  # the last few chip graphs routed
_PATHS_KEPT = 4


def chip_paths(graph: ChipGraph) -> dict[tuple[int, int], tuple[int, ...]]:
    """The memo of `graph.route` (chip paths, a pure function of the topology and the rack count) shared by
    every compile on an equal chip graph in this process: a step model compiles many shapes on one
    deployment, and a large one routes ~10^5 chip pairs."""
    topo, racks = graph.topology, graph.racks
    for k, (t, r, paths) in enumerate(_PATHS):
        if r == racks and (t is topo or t == topo):
            if k:
                _PATHS.insert(0, _PATHS.pop(k))
            return paths
    paths: dict[tuple[int, int], tuple[int, ...]] = {}
    _PATHS.insert(0, (topo, racks, paths))
    del _PATHS[_PATHS_KEPT:]
    return paths


UNWRITTEN = 2  # `ReadyTable.arrived` of a buffer declared but not written yet
_GROW_ROWS = 4096  # ready rows added at a time (a row per declared buffer; growing one call per buffer costs CPU)


class ReadyTable:
    """When each buffer's first and last vectors are available on its chip, as columns with a row per declared
    buffer: row k is the buffer at row k of the `BufferTable` whose `index` is `slot` (shared, not copied).

    A row holds the two times, the provenance nodes of those times (for the critical-path breakdown), `last`:
    the latest end of an instruction or transfer that has read the buffer so far (-1: none; kept as the reads
    are scheduled, so placement needs no pass over the program for the buffers' lifetimes), and `arrived`: 1
    when the buffer arrived by a transfer or is a step input (placement puts it in the chip's transfer buffer
    region), 0 when an instruction of its chip wrote it, `UNWRITTEN` (2) before any write. A second write of a
    buffer replaces its row's times and counts in `rewritten`. Columns aligned with the buffers, not an object
    or a dict entry per buffer: a large program has ~5 x 10^5 buffers (peak memory). Rows are added `_GROW_ROWS` at
    a time (`grow`); there may be more rows than buffers."""

    __slots__ = ("slot", "first", "end", "first_node", "end_node", "last", "arrived", "cols", "rewritten")

    def __init__(self, slot: dict[str, int] | None = None) -> None:
        self.slot: dict[str, int] = {} if slot is None else slot
        self.first = array("q")
        self.end = array("q")
        self.first_node = array("i")  # provenance node ids (`Provenance.parent`: 4 bytes)
        self.end_node = array("i")
        self.last = array("q")
        self.arrived = bytearray()
        self.rewritten = 0
        # all of the above in one tuple: the scheduler's hot path unpacks it instead of reading seven attributes
        self.cols = (self.slot, self.first, self.end, self.first_node, self.end_node, self.last, self.arrived)

    def grow(self, rows: int = 0) -> None:
        """Rows (unwritten) for at least every buffer declared so far and `rows` in all."""
        n = max(len(self.slot), rows)
        add = n - len(self.first)
        if add > 0:
            add = max(add, _GROW_ROWS)
            for col in (self.first, self.end, self.first_node, self.end_node, self.last):
                col.extend(array(col.typecode, (-1,)) * add)  # one block copy, not an element at a time
            self.arrived.extend(bytes((UNWRITTEN,)) * add)

    def add(self, bid: str, first: int, end: int, first_node: int = -1, end_node: int = -1,
            arrived: bool = False) -> int:
        """Write the row of declared buffer `bid` (KeyError if undeclared), not yet read; returns its index."""
        k = self.slot[bid]
        if k >= len(self.first):
            self.grow()
        if self.arrived[k] != UNWRITTEN:
            self.rewritten += 1
        self.first[k], self.end[k], self.first_node[k], self.end_node[k] = first, end, first_node, end_node
        self.last[k] = -1
        self.arrived[k] = 1 if arrived else 0
        return k

    def release(self) -> None:
        """Empty the columns in place (the reader is done with them; a caller may still hold the table)."""
        for col in (self.first, self.end, self.first_node, self.end_node, self.last, self.arrived):
            del col[:]

    def written(self, k: int) -> bool:
        """Whether the buffer at row `k` has been written."""
        return k < len(self.arrived) and self.arrived[k] != UNWRITTEN

    def __len__(self) -> int:
        """Buffers written (a buffer written twice counts once)."""
        return len(self.arrived) - self.arrived.count(UNWRITTEN)

    def times(self) -> dict[str, tuple[int, int]]:
        """(first, end) of each buffer written."""
        f, e = self.first, self.end
        return {b: (f[k], e[k]) for b, k in self.slot.items() if self.written(k)}

    def last_reads(self) -> dict[str, int]:
        """The end of the last read of each buffer read so far (what `place.last_reads` finds by a pass)."""
        la = self.last
        return {b: la[k] for b, k in self.slot.items() if self.written(k) and la[k] >= 0}


class Provenance:
    """Why each scheduled time is what it is: a node per time, with its parent node and the mechanisms
    (cycles each) that separate the two. Walking back from the step's last event gives the critical
    path, and summing its mechanisms gives a breakdown that adds up to the makespan exactly."""

    __slots__ = ("time", "parent", "comp", "_one", "_vc")

    def __init__(self) -> None:
        self.time = array("q")  # typed: a large step has ~10^6 nodes, and no Python int each
        self.parent = array("i")  # node ids: 4 bytes (a step with 2^31 nodes would not fit in memory anyway)
        self.comp: list[tuple[tuple[str, int], ...]] = []
        self._one: dict[tuple[str, int], tuple[tuple[str, int]]] = {}  # shared ((mech, cycles),) tuples
        self._vc: dict[int, tuple[tuple[str, int]]] = {}  # cycles -> the shared (("vector_count", cycles),)

    def one(self, mech: str, cycles: int) -> tuple[tuple[str, int]]:
        """The mechanism tuple ``((mech, cycles),)``, shared between nodes (a large step has ~10^6)."""
        t = self._one.get((mech, cycles))
        if t is None:
            t = self._one[(mech, cycles)] = ((mech, cycles),)
        return t

    def node(self, time: int, parent: int = -1, comp: tuple[tuple[str, int], ...] = ()) -> int:
        self.time.append(time)
        self.parent.append(parent)
        self.comp.append(comp)
        return len(self.time) - 1

    def after(self, parent: int, time: int, mech: str) -> int:
        """A node `time` whose excess over `parent`'s time is attributed to `mech`."""
        if parent < 0:
            return self.node(time, -1, self.one(mech, time) if time else ())
        d = time - self.time[parent]
        return parent if d == 0 else self.node(time, parent, self.one(mech, d))

    def breakdown(self, node: int) -> dict[str, int]:
        """Cycles per mechanism along the chain ending at `node` (sums to its time)."""
        out: dict[str, int] = {}
        n = node
        while n >= 0:
            for m, c in self.comp[n]:
                out[m] = out.get(m, 0) + c
            p = self.parent[n]
            if p < 0:  # a root: whatever its mechanisms leave of its time came before the step started
                rest = self.time[n] - sum(c for _, c in self.comp[n])
                if rest:
                    out["start"] = out.get("start", 0) + rest
            n = p
        return out


@dataclass
class Scheduler:
    """Accumulates instructions, transfers and link reservations on one global clock."""

    arch: Arch
    graph: ChipGraph
    instructions: InstructionTable = field(default_factory=InstructionTable)  # written column by column
    transfers: TransferTable = field(default_factory=TransferTable)  # written column by column (no records)
    buffers: BufferTable = field(default_factory=BufferTable)
    ready: ReadyTable = field(default_factory=ReadyTable)  # rows aligned with `buffers` (`__post_init__`)
    links: dict[int, Link] = field(default_factory=dict)
    _link_ids: dict[tuple[int, int], int] = field(default_factory=dict)
    _link_free: dict[int, int] = field(default_factory=dict)  # link id * 2 + direction -> first free cycle
    _unit: dict[tuple[int, str], tuple[int, int]] = field(default_factory=dict)  # (chip, unit) -> (free, its node)
    _routes: dict[tuple[int, int], tuple[tuple[int, int], ...]] = field(default_factory=dict)
    _hops: dict = field(default_factory=dict)  # the routes' (link, direction) and (key, hop cycles) tuples, shared
    _link_node: dict[tuple[int, int], int] = field(default_factory=dict)
    prov: Provenance = field(default_factory=Provenance)
    last_node: int = -1  # provenance node of the latest end so far (the step's critical path ends there)
    last_end: int = 0
    _send_info: dict = field(default_factory=dict)  # (src, dst) -> (hops, slowest bytes/cycle, ((link*2+dir, hop)),
    #                                                  route index in `transfers`)
    _work: list = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])  # bytes, flops, flop rate, VXM ops
    _lat: dict = field(default_factory=dict)  # (unit, extra) -> (parts, latency, drain parts, drain cycles)
    _exchange_info: dict = field(default_factory=dict)  # bytes -> src -> dst -> route, serialisation, mechanisms
    _comps: dict = field(default_factory=dict)  # shared provenance mechanism tuples (memory: ~10^6 nodes)
    _attrs: dict = field(default_factory=dict)  # attrs content -> work and busy key -> shared attrs (`_shared_attrs`)
    _last_attrs: Any = _UNSET  # the last attrs object `_shared_attrs` was given, and its entry in `_attrs`
    _last_shared: Any = None
    _slices: dict = field(default_factory=dict)  # shared instruction slices, by their items
    _chip_paths: dict | None = None  # (src, dst) -> chip path, shared by the compiles of one chip graph
    _role_rates: dict = field(default_factory=dict)  # link role -> (bytes per cycle, hop cycles)

    def __post_init__(self) -> None:
        if self.ready.slot is not self.buffers.index:  # the ready rows are the buffers' rows
            if len(self.ready.slot) or len(self.ready.first):
                raise ValueError("a Scheduler's ready table must be empty or the buffers' own")
            self.ready = ReadyTable(self.buffers.index)

    # --- buffers ----------------------------------------------------------------------
    def buffer(self, bid: str, chip: int, op: str, nbytes: float, cols: Range | None = None,
               partial: Partial = None, heads: Range | None = None, lse_shape: tuple[int, ...] = ()) -> str:
        self.buffers.add(bid, chip, op, int(math.ceil(nbytes)), cols, partial, heads, lse_shape)
        return bid

    def take_ready(self) -> ReadyTable:
        """The ready times (and last reads) of every buffer, handed over: the scheduler forgets them
        (placement reads them once; a large program has ~5 x 10^5)."""
        out, self.ready = self.ready, ReadyTable(self.buffers.index)
        return out

    def take_buffers(self) -> BufferTable:
        """The declared buffers, handed over (placement rebuilds them in placement order; ~5 x 10^5). The ready
        table keeps their index until it is taken too."""
        out, self.buffers = self.buffers, BufferTable()
        return out

    def finish(self) -> None:
        """The program is scheduled: free the state only further scheduling reads (routes, link and unit free
        times, shared attrs and slices), to lower the compile's peak memory. Scheduling anything after this
        fails (the unit and link free times are gone, not reset)."""
        self._send_info, self._exchange_info, self._routes, self._link_node, self._hops = {}, {}, {}, {}, {}
        self._attrs, self._slices, self._comps, self._lat = {}, {}, {}, {}
        self._last_attrs, self._last_shared = _UNSET, None
        self._unit = self._link_free = None  # type: ignore[assignment]

    def written_once(self) -> bool:
        """Whether no buffer was written twice (each ready row is then the only one of its buffer, and its
        `last` covers every read of the buffer); a program that writes one twice fails `verify`."""
        return not self.ready.rewritten

    def input_ready(self, bid: str, first: int = 0) -> None:
        """Mark a buffer as present from cycle `first` (step inputs such as token ids)."""
        n = self.prov.node(first)
        self.ready.add(bid, first, first, n, n, arrived=True)

    # --- work -------------------------------------------------------------------------
    def note_work(self, nbytes: float = 0.0, flops: float = 0.0, flop_rate: float = 0.0, ops: float = 0.0) -> None:
        """Add to the work of the next instruction (bytes streamed to/from SRAM, MXM FLOPs at `flop_rate`
        FLOP/cycle, VXM element ops); `instr` records it in the instruction's attrs and starts afresh."""
        w = self._work
        w[0] += nbytes
        w[1] += flops
        if flop_rate:
            w[2] = flop_rate
        w[3] += ops

    # --- instructions ---------------------------------------------------------------
    def latency(self, unit: Unit) -> int:
        """Cycles from an instruction's start to its first output vector (all mechanisms)."""
        return sum(c for _, c in self.arch.latency_parts(unit))

    def instr(self, chip: int, unit: Unit, op: str, kind: str, inputs: tuple[str, ...], output: str,
              duration: float, slc: dict[str, Range] | None = None, attrs: dict[str, Any] | None = None,
              extra_latency: int = 0, needs_all: bool = False) -> int:
        """Schedule one instruction; `output` must already be declared with `buffer`. Returns its row in
        `instructions` (its id).

        First output: start + issue + sync + stream transit + superlane stagger + pipeline depth + SRAM
        access (+ the fitted residual); last output: no earlier than `duration` (its vectors at the unit's
        rate) after that, nor before the inputs' last vectors have drained through the same pipeline.
        `needs_all`: no output exists before the whole work is done (attention: the softmax and the weighted
        sum need every key of the chip's share), so the first output comes `duration` later and the last
        right after it."""
        pv = self.prov
        key = (chip, unit)
        uf = self._unit.get(key)
        start, snode = (0, -1) if uf is None else uf
        drain_in, dnode = -1, -1
        slot, r_first, r_end, r_fnode, r_enode, r_last, r_arrived = self.ready.cols
        n_in = len(inputs)
        if n_in == 1:  # most instructions: no list built
            rows: tuple | list = (slot[inputs[0]],)
        elif n_in == 2:
            rows = (slot[inputs[0]], slot[inputs[1]])
        else:
            rows = [slot[b] for b in inputs]
        for k in rows:
            t = r_first[k]
            if t < 0:  # an unwritten row (valid times are >= 0)
                raise KeyError(f"{chip}:{op}: input {inputs[rows.index(k)]} is read before it is written")
            if t > start or snode < 0 and t >= start:
                start, snode = t, r_fnode[k]
            t = r_end[k]
            if t > drain_in:
                drain_in, dnode = t, r_enode[k]
        lk = (unit, extra_latency)
        cached = self._lat.get(lk)
        if cached is None:
            parts = self.arch.latency_parts(unit)
            if extra_latency:
                parts = (*parts, ("pipeline_depth", int(extra_latency)))
            drain = tuple(p for p in parts if p[0] in DRAIN)
            cached = self._lat[lk] = (parts, sum(c for _, c in parts), drain, sum(c for _, c in drain))
        parts, lat, drain, drain_cycles = cached
        dur = int(math.ceil(duration))  # int(): a numpy integer's __ceil__ may return a numpy integer
        if dur < 1:
            dur = 1
        first_out = start + lat
        drain_end = drain_in + drain_cycles if n_in else -1
        # provenance nodes, appended inline (the scheduler's hottest path); equal mechanism tuples are shared
        pt, pp, pc = pv.time, pv.parent, pv.comp
        vc = pv._vc.get(dur)
        if vc is None:
            vc = pv._vc[dur] = pv.one("vector_count", dur)
        if needs_all:
            first_out = start + lat + dur
            fnode = len(pt)
            pt.append(first_out), pp.append(snode), pc.append((*parts, ("vector_count", dur)))
            if drain_end > first_out:
                first_out, fnode = drain_end, len(pt)
                pt.append(drain_end), pp.append(dnode), pc.append(drain)
            end, enode = first_out + 1, len(pt)
            pt.append(end), pp.append(fnode), pc.append(VC1)
        else:
            fnode = len(pt)
            pt.append(first_out), pp.append(snode), pc.append(parts)
            end = first_out + dur
            enode = len(pt)
            if drain_end > end:
                end = drain_end
                pt.append(drain_end), pp.append(dnode), pc.append(drain)
            else:
                pt.append(end), pp.append(fnode), pc.append(vc)
        for k in rows:  # the inputs' last reads
            if end > r_last[k]:
                r_last[k] = end
        self._unit[key] = (start + dur, len(pt))
        pt.append(start + dur), pp.append(snode), pc.append(vc)
        at = self._shared_attrs(attrs, dur)
        sl = _EMPTY
        if slc:
            skey = tuple(slc.items())
            sl = self._slices.get(skey)
            if sl is None:
                sl = self._slices[skey] = dict(slc)
        row = self.instructions.add(chip, unit, op, kind, inputs, output, start, first_out, end, sl, at)
        k = slot[output]  # ReadyTable.add, inline (the hot path)
        if k >= len(r_first):
            self.ready.grow()
        if r_arrived[k] != UNWRITTEN:
            self.ready.rewritten += 1
        r_first[k], r_end[k], r_fnode[k], r_enode[k], r_last[k], r_arrived[k] = first_out, end, fnode, enode, -1, 0
        if end > self.last_end or self.last_node < 0:
            self.last_end, self.last_node = end, enode
        return row

    def _shared_attrs(self, attrs: dict[str, Any] | None, dur: int) -> dict[str, Any]:
        """The instruction's attrs (with its busy cycles and the work noted since the last instruction, which
        starts afresh), one dict shared by every instruction with equal attrs: the TP peers of a layer's op,
        and its repeats over layers (memory: ~10^5 instructions). Keyed with the values' types too, so that
        e.g. 1 and 1.0 stay distinct. The attrs' key is remembered for the last attrs object passed (a caller
        passes one object to an op's instructions on every chip); it holds that object, so the identity test
        cannot be fooled by a new dict at a freed one's address (callers never mutate a dict once passed)."""
        if attrs is self._last_attrs:
            shared = self._last_shared
        else:
            content = (tuple(attrs.items()), tuple(map(type, attrs.values()))) if attrs else ()
            try:
                shared = self._attrs.get(content)
                if shared is None:
                    shared = self._attrs[content] = {}
            except TypeError:  # an unhashable attribute value: not shared
                shared = None
            self._last_attrs, self._last_shared = attrs, shared
        w = self._work
        self._work = [0.0, 0.0, 0.0, 0.0]
        key = (dur, w[0], w[1], w[2], type(w[2]), w[3])
        at = None if shared is None else shared.get(key)
        if at is None:
            at = dict(attrs) if attrs else {}
            at["busy_cycles"] = dur
            at["work_bytes"], at["work_flops"], at["work_ops"] = w[0], w[1], w[3]
            if w[2]:
                at["work_flop_rate"] = w[2]
            if shared is not None:
                shared[key] = at
        return at

    # --- links and transfers ----------------------------------------------------------
    def _link(self, a: int, b: int) -> tuple[int, int]:
        key = (min(a, b), max(a, b))
        lid = self._link_ids.get(key)
        if lid is None:
            role = self.graph.link_role(a, b)
            if role is None:
                raise AssertionError(f"route uses a missing link {a}-{b}")
            rates = self._role_rates.get(role)
            if rates is None:
                cls = self.graph.topology.links[role]
                rates = self._role_rates[role] = (cls.bandwidth_Bps / self.arch.clock_hz,
                                                  self.arch.cycles(float(cls.latency_s)))
            lid = len(self._link_ids)
            self._link_ids[key] = lid
            self.links[lid] = Link(lid, key[0], key[1], role, rates[0], rates[1])
        return lid, 0 if a == key[0] else 1

    def route(self, src: int, dst: int) -> tuple[tuple[int, int], ...]:
        key = (src, dst)
        if key not in self._routes:
            paths = self._chip_paths
            if paths is None:
                paths = self._chip_paths = chip_paths(self.graph)
            path = paths.get(key)
            if path is None:
                path = paths[key] = tuple(self.graph.route(src, dst))
            ids, hops, shared = self._link_ids, [], self._hops
            for a, b in zip(path, path[1:], strict=False):  # `_link`, with the known links looked up inline
                lid = ids.get((a, b) if a < b else (b, a))
                hop = self._link(a, b) if lid is None else (lid, 0 if a < b else 1)
                hops.append(shared.setdefault(hop, hop))  # one (link, direction) tuple per link direction
            self._routes[key] = tuple(hops)
        return self._routes[key]

    def _link_comps(self, hop: int, setup: int, vec: int, occupy: int) -> tuple[tuple, tuple]:
        """Provenance mechanisms of a transfer's arrival and end nodes (shared between equal transfers)."""
        key = ("c2c", hop, setup, vec, occupy)
        out = self._comps.get(key)
        if out is None:
            lat = (("c2c_hop", hop), ("c2c_setup", setup)) if setup else (("c2c_hop", hop),)
            out = self._comps[key] = ((*lat, ("c2c_serialisation", vec)), (*lat, ("c2c_serialisation", occupy)))
        return out

    def _path(self, src: int, dst: int) -> tuple:
        """(hops, slowest link's bytes/cycle, (link id * 2 + direction, hop cycles) per hop, the route's index in
        the transfer table) of a route, cached (the integer is the link direction's key in `_link_free`: cheaper
        to hash than a pair)."""
        info = self._send_info.get((src, dst))
        if info is None:
            hops = self.route(src, dst)
            links = [self.links[lid] for lid, _ in hops]
            shared = self._hops
            keyed = [(2 * lid + d, ln.hop_cycles) for (lid, d), ln in zip(hops, links, strict=True)]
            info = self._send_info[(src, dst)] = (
                hops, min([ln.bytes_per_cycle for ln in links]),
                tuple([shared.setdefault(k, k) for k in keyed]),  # shared per link direction, as the hops are
                self.transfers.route_id(hops))
        return info

    def send(self, src_chip: int, dst_chip: int, src_buffer: str, dst_buffer: str, nbytes: float,
             not_before: int | None = None, complete_at: int | None = None) -> int:
        """Reserve links for copying `src_buffer` to a new buffer on `dst_chip` (declared by the caller); returns
        the transfer's index in `transfers`.

        `complete_at`: the cycle the bytes sent are all present, when they are only part of the source
        (e.g. the log-sum-exp statistics, final after the K half of an attention).
        """
        info = self._send_info.get((src_chip, dst_chip)) or self._path(src_chip, dst_chip)
        hops, bpc, keyed, rid = info
        pv = self.prov
        rt = self.ready
        src_row = rt.slot[src_buffer]
        if not rt.written(src_row):
            raise KeyError(f"{src_buffer} is sent before it is written")
        first, fnode, rend = rt.first[src_row], rt.first_node[src_row], rt.end[src_row]
        if complete_at is not None:
            first = max(first, complete_at)
            fnode = pv.after(fnode, first, "vector_count")
            rend = first
        want, wnode = first, fnode
        if not_before is not None and not_before > want:
            want, wnode = not_before, pv.after(wnode, not_before, "sync")
        nbytes = max(float(nbytes), 1.0)
        ser = max(1, math.ceil(nbytes / bpc))
        vec = max(1, math.ceil(min(nbytes, self.arch.vector_bytes) / bpc))
        setup = self.arch.link_setup
        # A link sends one block of `ser` cycles; when the producer streams slower than the link,
        # start late enough that every vector exists when its turn on the wire comes.
        occupy = ser
        if rend - ser + vec > want:
            want = rend - ser + vec
            wnode = pv.after(fnode, want, "vector_count")  # waiting for the producer's vectors
        send, snode = want, wnode
        offset = 0
        lf = self._link_free
        for k, hc in keyed:
            free = lf.get(k, 0) - offset
            if free > send:
                send = free
            offset += hc
        if send > want:
            snode = pv.node(send, wnode, pv.one("c2c_wait", send - want))
        t = send
        for k, hc in keyed:
            lf[k] = t + occupy
            t += hc
        hop = t - send
        path_lat = hop + setup
        arrive = send + path_lat + vec
        end = send + path_lat + occupy
        comps = self._link_comps(hop, setup, vec, occupy)
        pt, pp, pc = pv.time, pv.parent, pv.comp
        anode = len(pt)
        pt.append(arrive), pp.append(snode), pc.append(comps[0])
        enode = anode + 1
        pt.append(end), pp.append(snode), pc.append(comps[1])
        k = len(self.transfers)
        self.transfers.add(k, src_chip, dst_chip, src_buffer, dst_buffer, math.ceil(nbytes), rid, send, occupy, arrive,
                           end)
        if end > rt.last[src_row]:
            rt.last[src_row] = end
        rt.add(dst_buffer, arrive, end, anode, enode, arrived=True)
        if end > self.last_end or self.last_node < 0:
            self.last_end, self.last_node = end, enode
        return k

    def send_many(self, sends: list[tuple[int, int, str, str]], nbytes: float,
                  complete_at: dict[int, int] | None = None) -> None:
        """`send(src, dst, src_buffer, dst_buffer, nbytes, complete_at=complete_at[src])` (or without
        `complete_at`) for each of `sends` in order (all-reduce
        exchanges: tens of thousands of equal-sized partials), with the per-route and per-source work
        hoisted out of the loop. Same transfers, link reservations, ready times and critical-path breakdown
        as the loop (a source's wait for its last vectors is one provenance node shared by its sends over
        equally fast routes: equal time, parent and mechanisms, so every chain sums the same). Each destination's
        ready row is written as its send is scheduled, so a later send of the same call may forward it."""
        nbytes = max(float(nbytes), 1.0)
        vb, setup = self.arch.vector_bytes, self.arch.link_setup
        nb_int = math.ceil(nbytes)
        pv = self.prov
        pt, pp, pc = pv.time, pv.parent, pv.comp
        pta, ppa, pca = pt.append, pp.append, pc.append
        lf, rt, table = self._link_free, self.ready, self.transfers
        slot, r_first, r_end, r_fnode, r_enode, r_last, r_arrived = rt.cols[:7]
        nrows = len(r_first)
        rewritten = 0
        # the columns that vary per send, added to the table (with the others, from `sends`) after the loop
        c_route: list[int] = []
        c_send: list[int] = []
        c_ser: list[int] = []
        c_arrive: list[int] = []
        c_end: list[int] = []
        cra, csa, cza, caa, cea = c_route.append, c_send.append, c_ser.append, c_arrive.append, c_end.append
        last_end, last_node = self.last_end, self.last_node
        by_src = self._exchange_info.get(nbytes)
        if by_src is None:
            by_src = self._exchange_info[nbytes] = {}
        one = pv.one
        prev_buf, prev_src = None, None
        per_dst: dict = {}
        waits: dict = {}
        ntr = len(table)
        try:
            for src_chip, dst_chip, src_buffer, dst_buffer in sends:
                if src_chip != prev_src:
                    per_dst = by_src.get(src_chip)
                    if per_dst is None:
                        per_dst = by_src[src_chip] = {}
                    prev_src = src_chip
                if src_buffer is not prev_buf:
                    src_row = slot[src_buffer]
                    if src_row >= nrows or r_arrived[src_row] == UNWRITTEN:
                        raise KeyError(f"{src_buffer} is sent before it is written")
                    rfirst, rfnode, rend = r_first[src_row], r_fnode[src_row], r_end[src_row]
                    if complete_at is not None:  # the bytes sent are final at complete_at (as in `send`)
                        ca = complete_at[src_chip]
                        if ca > rfirst:
                            rfirst = ca
                        rfnode = pv.after(rfnode, rfirst, "vector_count")
                        rend = rfirst
                    waits = {}
                    prev_buf = src_buffer
                info = per_dst.get(dst_chip)
                if info is None:
                    _, bpc, keyed, rid = self._path(src_chip, dst_chip)
                    ser = max(1, math.ceil(nbytes / bpc))
                    vec = max(1, math.ceil(min(nbytes, vb) / bpc))
                    hop = sum(hc for _, hc in keyed)
                    info = per_dst[dst_chip] = (rid, keyed, ser, vec, self._link_comps(hop, setup, vec, ser), hop + setup,
                                                keyed[0][0] if len(keyed) == 1 else None, ser - vec)
                rid, keyed, ser, vec, comps, path_lat, k1, lag = info
                want, wnode = rfirst, rfnode
                if rend - lag > want:  # the producer streams slower than the link: wait for its last vectors
                    w = waits.get(lag)
                    if w is None:
                        want = rend - lag
                        if wnode < 0:  # Provenance.after, inline
                            wnode = len(pt)
                            pta(want), ppa(-1), pca(one("vector_count", want) if want else ())
                        else:
                            d = want - pt[wnode]
                            if d:
                                pta(want), ppa(wnode), pca(one("vector_count", d))
                                wnode = len(pt) - 1
                        waits[lag] = (want, wnode)
                    else:
                        want, wnode = w
                send, snode = want, wnode
                if k1 is not None:  # one hop (a node's all-to-all)
                    free = lf.get(k1, 0)
                    if free > send:
                        send = free
                    lf[k1] = send + ser
                else:
                    offset = 0
                    for k, hc in keyed:
                        free = lf.get(k, 0) - offset
                        if free > send:
                            send = free
                        offset += hc
                    t = send
                    for k, hc in keyed:
                        lf[k] = t + ser
                        t += hc
                if send > want:
                    snode = len(pt)
                    pta(send), ppa(wnode), pca(one("c2c_wait", send - want))
                arrive = send + path_lat + vec
                end = send + path_lat + ser
                anode = len(pt)
                pta(arrive), ppa(snode), pca(comps[0])
                pta(end), ppa(snode), pca(comps[1])
                cra(rid), csa(send), cza(ser), caa(arrive), cea(end)
                if end > r_last[src_row]:
                    r_last[src_row] = end
                k = slot[dst_buffer]  # ReadyTable.add, inline: arrived at `arrive`, whole at `end`
                if k >= nrows:
                    rt.grow()
                    nrows = len(r_first)
                if r_arrived[k] != UNWRITTEN:
                    rewritten += 1
                    if dst_buffer == prev_buf:  # its cached times are stale
                        prev_buf = None
                r_first[k], r_end[k], r_fnode[k], r_enode[k], r_last[k], r_arrived[k] = arrive, end, anode, anode + 1, -1, 1
                if end > last_end or last_node < 0:
                    last_end, last_node = end, anode + 1
        finally:  # the records of the sends scheduled (all of them unless one failed)
            n = len(c_send)
            src_c, dst_c, sbuf_c, dbuf_c = zip(*islice(sends, n), strict=True) if n else ((), (), (), ())
            table.add_many(range(ntr, ntr + n), src_c, dst_c, sbuf_c, dbuf_c, [nb_int] * n, c_route, c_send,
                           c_ser, c_arrive, c_end)
            rt.rewritten += rewritten
        self.last_end, self.last_node = last_end, last_node
