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


@dataclass
class Ready:
    """When a buffer's first and last vectors are available on its chip."""

    first: int
    end: int


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

    # --- buffers ----------------------------------------------------------------------
    def buffer(self, bid: str, chip: int, op: str, nbytes: float, cols: Range | None = None,
               partial: Partial = None, heads: Range | None = None, lse_shape: tuple[int, ...] = ()) -> str:
        self.buffers[bid] = Buffer(id=bid, chip=chip, op=op, cols=cols, partial=partial,
                                   bytes=int(math.ceil(nbytes)), heads=heads, lse_shape=lse_shape)
        return bid

    def input_ready(self, bid: str, first: int = 0) -> None:
        """Mark a buffer as present from cycle `first` (step inputs such as token ids)."""
        self.ready[bid] = Ready(first, first)

    # --- instructions -----------------------------------------------------------------
    def latency(self, unit: Unit) -> int:
        a = self.arch
        base = {"MXM": a.mxm_latency, "VXM": a.vxm_latency, "SXM": a.sxm_latency, "MEM": a.mem_latency}[unit]
        return base + a.op_overhead

    def instr(self, chip: int, unit: Unit, op: str, kind: str, inputs: tuple[str, ...], output: str,
              duration: float, slc: dict[str, Range] | None = None, attrs: dict[str, Any] | None = None,
              extra_latency: int = 0) -> Instruction:
        """Schedule one instruction; `output` must already be declared with `buffer`."""
        firsts = [self.ready[b].first for b in inputs]
        ends = [self.ready[b].end for b in inputs]
        start = max([self._unit_free.get((chip, unit), 0), *firsts])
        lat = self.latency(unit) + extra_latency
        dur = max(1, int(math.ceil(duration)))
        first_out = start + lat
        end = max(first_out + dur, max(ends, default=0) + lat - self.arch.op_overhead)
        self._unit_free[(chip, unit)] = start + dur
        ins = Instruction(id=len(self.instructions), chip=chip, unit=unit, op=op, kind=kind, inputs=inputs,
                          output=output, cycle_start=start, first_out_cycle=first_out, cycle_end=end,
                          slice=dict(slc or {}), attrs={**(attrs or {}), "busy_cycles": dur})
        self.instructions.append(ins)
        self.ready[output] = Ready(first_out, end)
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
        rd = self.ready[src_buffer]
        if complete_at is not None:
            rd = Ready(max(rd.first, complete_at), max(rd.first, complete_at))
        want = rd.first if not_before is None else max(rd.first, not_before)
        nbytes = max(float(nbytes), 1.0)
        bpc = min(self.links[lid].bytes_per_cycle for lid, _ in hops)
        ser = max(1, int(math.ceil(nbytes / bpc)))
        vec = max(1, int(math.ceil(min(nbytes, self.arch.vector_bytes) / bpc)))
        setup = self.arch.link_setup
        # A link sends one block of `ser` cycles; when the producer streams slower than the link,
        # start late enough that every vector exists when its turn on the wire comes.
        occupy = ser
        want = max(want, rd.end - ser + vec)
        send = want
        offset = 0
        for lid, d in hops:
            send = max(send, self._link_free.get((lid, d), 0) - offset)
            offset += self.links[lid].hop_cycles
        t = send
        for lid, d in hops:
            self._link_free[(lid, d)] = t + occupy
            t += self.links[lid].hop_cycles
        path_lat = t - send + setup
        arrive = send + path_lat + vec
        end = send + path_lat + occupy
        tr = Transfer(id=len(self.transfers), src_chip=src_chip, dst_chip=dst_chip, src_buffer=src_buffer,
                      dst_buffer=dst_buffer, bytes=int(math.ceil(nbytes)), links=hops, send_cycle=send,
                      ser_cycles=occupy, arrive_cycle=arrive, end_cycle=end)
        self.transfers.append(tr)
        self.ready[dst_buffer] = Ready(arrive, end)
        return tr
