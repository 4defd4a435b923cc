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
from dataclasses import dataclass, field
from typing import Any

from lpxsim.lpu.arch import Arch
from lpxsim.lpu.program import Buffer, Instruction, Link, Partial, Range, Transfer, Unit
from lpxsim.specs.topology import ChipGraph

DRAIN = ("stream_transit", "superlane_stagger", "pipeline_depth", "sram_access")  # what a last vector crosses


@dataclass(slots=True)
class Ready:
    """When a buffer's first and last vectors are available on its chip (and the provenance nodes of
    those two times, for the critical-path breakdown)."""

    first: int
    end: int
    first_node: int = -1
    end_node: int = -1


class Provenance:
    """Why each scheduled time is what it is: a node per time, with its parent node and the mechanisms
    (cycles each) that separate the two. Walking back from the step's last event gives the critical
    path, and summing its mechanisms gives a breakdown that adds up to the makespan exactly."""

    __slots__ = ("time", "parent", "comp")

    def __init__(self) -> None:
        self.time: list[int] = []
        self.parent: list[int] = []
        self.comp: list[tuple[tuple[str, int], ...]] = []

    def node(self, time: int, parent: int = -1, comp: tuple[tuple[str, int], ...] = ()) -> int:
        self.time.append(time)
        self.parent.append(parent)
        self.comp.append(comp)
        return len(self.time) - 1

    def after(self, parent: int, time: int, mech: str) -> int:
        """A node `time` whose excess over `parent`'s time is attributed to `mech`."""
        if parent < 0:
            return self.node(time, -1, ((mech, time),) if time else ())
        d = time - self.time[parent]
        return parent if d == 0 else self.node(time, parent, ((mech, d),))

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
    instructions: list[Instruction] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    buffers: dict[str, Buffer] = field(default_factory=dict)
    ready: dict[str, Ready] = field(default_factory=dict)
    links: dict[int, Link] = field(default_factory=dict)
    _link_ids: dict[tuple[int, int], int] = field(default_factory=dict)
    _link_free: dict[tuple[int, int], int] = field(default_factory=dict)
    _unit_free: dict[tuple[int, str], int] = field(default_factory=dict)
    _routes: dict[tuple[int, int], tuple[tuple[int, int], ...]] = field(default_factory=dict)
    _unit_node: dict[tuple[int, str], int] = field(default_factory=dict)
    _link_node: dict[tuple[int, int], int] = field(default_factory=dict)
    prov: Provenance = field(default_factory=Provenance)
    last_node: int = -1  # provenance node of the latest end so far (the step's critical path ends there)
    last_end: int = 0
    _route_info: dict = field(default_factory=dict)  # hops -> (slowest link's bytes/cycle, ((link, dir), hop))
    _work: list = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])  # bytes, flops, flop rate, VXM ops
    _lat: dict = field(default_factory=dict)  # (unit, extra) -> (parts, latency, drain parts, drain cycles)

    # --- buffers ----------------------------------------------------------------------
    def buffer(self, bid: str, chip: int, op: str, nbytes: float, cols: Range | None = None,
               partial: Partial = None, heads: Range | None = None, lse_shape: tuple[int, ...] = ()) -> str:
        self.buffers[bid] = Buffer(id=bid, chip=chip, op=op, cols=cols, partial=partial,
                                   bytes=int(math.ceil(nbytes)), heads=heads, lse_shape=lse_shape)
        return bid

    def input_ready(self, bid: str, first: int = 0) -> None:
        """Mark a buffer as present from cycle `first` (step inputs such as token ids)."""
        n = self.prov.node(first)
        self.ready[bid] = Ready(first, first, n, n)

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

    def _end(self, end: int, node: int) -> None:
        if end > self.last_end or self.last_node < 0:
            self.last_end, self.last_node = end, node

    def instr(self, chip: int, unit: Unit, op: str, kind: str, inputs: tuple[str, ...], output: str,
              duration: float, slc: dict[str, Range] | None = None, attrs: dict[str, Any] | None = None,
              extra_latency: int = 0, needs_all: bool = False) -> Instruction:
        """Schedule one instruction; `output` must already be declared with `buffer`.

        First output: start + issue + sync + stream transit + superlane stagger + pipeline depth + SRAM
        access (+ the fitted residual); last output: no earlier than `duration` (its vectors at the unit's
        rate) after that, nor before the inputs' last vectors have drained through the same pipeline.
        `needs_all`: no output exists before the whole work is done (attention: the softmax and the weighted
        sum need every key of the chip's share), so the first output comes `duration` later and the last
        right after it."""
        a, pv = self.arch, self.prov
        key = (chip, unit)
        start = self._unit_free.get(key, 0)
        snode = self._unit_node.get(key, -1)
        drain_in, dnode = -1, -1
        for b in inputs:
            rd = self.ready[b]
            if rd.first > start or snode < 0 and rd.first >= start:
                start, snode = rd.first, rd.first_node
            if rd.end > drain_in:
                drain_in, dnode = rd.end, rd.end_node
        lk = (unit, extra_latency)
        cached = self._lat.get(lk)
        if cached is None:
            parts = a.latency_parts(unit)
            if extra_latency:
                parts = (*parts, ("pipeline_depth", int(extra_latency)))
            drain = tuple(p for p in parts if p[0] in DRAIN)
            cached = self._lat[lk] = (parts, sum(c for _, c in parts), drain, sum(c for _, c in drain))
        parts, lat, drain, drain_cycles = cached
        dur = max(1, int(math.ceil(duration)))
        first_out = start + lat
        drain_end = drain_in + drain_cycles if inputs else -1
        if needs_all:
            first_out = start + lat + dur
            fnode = pv.node(first_out, snode, (*parts, ("vector_count", dur)))
            if drain_end > first_out:
                first_out, fnode = drain_end, pv.node(drain_end, dnode, drain)
            end, enode = first_out + 1, pv.node(first_out + 1, fnode, (("vector_count", 1),))
        else:
            fnode = pv.node(first_out, snode, parts)
            end = first_out + dur
            if drain_end > end:
                end, enode = drain_end, pv.node(drain_end, dnode, drain)
            else:
                enode = pv.node(end, fnode, (("vector_count", dur),))
        self._unit_free[key] = start + dur
        self._unit_node[key] = pv.node(start + dur, snode, (("vector_count", dur),))
        w = self._work
        work = {"work_bytes": w[0], "work_flops": w[1], "work_ops": w[3]}
        if w[2]:
            work["work_flop_rate"] = w[2]
        self._work = [0.0, 0.0, 0.0, 0.0]
        ins = Instruction(id=len(self.instructions), chip=chip, unit=unit, op=op, kind=kind, inputs=inputs,
                          output=output, cycle_start=start, first_out_cycle=first_out, cycle_end=end,
                          slice=dict(slc or {}), attrs={**(attrs or {}), "busy_cycles": dur, **work})
        self.instructions.append(ins)
        self.ready[output] = Ready(first_out, end, fnode, enode)
        self._end(end, enode)
        return ins

    # --- links and transfers ----------------------------------------------------------
    def _link(self, a: int, b: int) -> tuple[int, int]:
        key = (min(a, b), max(a, b))
        lid = self._link_ids.get(key)
        if lid is None:
            role = self.graph.link_role(a, b)
            if role is None:
                raise AssertionError(f"route uses a missing link {a}-{b}")
            cls = self.graph.topology.links[role]
            lid = len(self._link_ids)
            self._link_ids[key] = lid
            self.links[lid] = Link(id=lid, a=key[0], b=key[1], cls=role,
                                   bytes_per_cycle=cls.bandwidth_Bps / self.arch.clock_hz,
                                   hop_cycles=self.arch.cycles(float(cls.latency_s)))
        return lid, 0 if a == key[0] else 1

    def route(self, src: int, dst: int) -> tuple[tuple[int, int], ...]:
        key = (src, dst)
        if key not in self._routes:
            path = self.graph.route(src, dst)
            self._routes[key] = tuple(self._link(a, b) for a, b in zip(path, path[1:], strict=False))
        return self._routes[key]

    def send(self, src_chip: int, dst_chip: int, src_buffer: str, dst_buffer: str, nbytes: float,
             not_before: int | None = None, complete_at: int | None = None) -> Transfer:
        """Reserve links for copying `src_buffer` to a new buffer on `dst_chip` (declared by the caller).

        `complete_at`: the cycle the bytes sent are all present, when they are only part of the source
        (e.g. the log-sum-exp statistics, final after the K half of an attention).
        """
        hops = self.route(src_chip, dst_chip)
        info = self._route_info.get(hops)
        if info is None:
            info = self._route_info[hops] = (min(self.links[lid].bytes_per_cycle for lid, _ in hops),
                                             tuple(((lid, d), self.links[lid].hop_cycles) for lid, d in hops))
        bpc, keyed = info
        pv = self.prov
        rd = self.ready[src_buffer]
        if complete_at is not None:
            t = max(rd.first, complete_at)
            n = pv.after(rd.first_node, t, "vector_count")
            rd = Ready(t, t, n, n)
        want, wnode = rd.first, rd.first_node
        if not_before is not None and not_before > want:
            want, wnode = not_before, pv.after(wnode, not_before, "sync")
        nbytes = max(float(nbytes), 1.0)
        ser = max(1, int(math.ceil(nbytes / bpc)))
        vec = max(1, int(math.ceil(min(nbytes, self.arch.vector_bytes) / bpc)))
        setup = self.arch.link_setup
        # A link sends one block of `ser` cycles; when the producer streams slower than the link,
        # start late enough that every vector exists when its turn on the wire comes.
        occupy = ser
        if rd.end - ser + vec > want:
            want = rd.end - ser + vec
            wnode = pv.after(rd.first_node, want, "vector_count")  # waiting for the producer's vectors
        send, snode = want, wnode
        offset = 0
        lf = self._link_free
        for k, hc in keyed:
            free = lf.get(k, 0) - offset
            if free > send:
                send = free
            offset += hc
        if send > want:
            snode = pv.node(send, wnode, (("c2c_wait", send - want),))
        t = send
        for k, hc in keyed:
            lf[k] = t + occupy
            t += hc
        hop = t - send
        path_lat = hop + setup
        arrive = send + path_lat + vec
        end = send + path_lat + occupy
        lat_parts = (("c2c_hop", hop),) + ((("c2c_setup", setup),) if setup else ())
        anode = pv.node(arrive, snode, (*lat_parts, ("c2c_serialisation", vec)))
        enode = pv.node(end, snode, (*lat_parts, ("c2c_serialisation", occupy)))
        tr = Transfer(id=len(self.transfers), src_chip=src_chip, dst_chip=dst_chip, src_buffer=src_buffer,
                      dst_buffer=dst_buffer, bytes=int(math.ceil(nbytes)), links=hops, send_cycle=send,
                      ser_cycles=occupy, arrive_cycle=arrive, end_cycle=end)
        self.transfers.append(tr)
        self.ready[dst_buffer] = Ready(arrive, end, anode, enode)
        self._end(end, enode)
        return tr
