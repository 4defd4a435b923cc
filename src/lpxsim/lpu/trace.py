"""Chrome trace-event JSON of a Program, for ui.perfetto.dev or chrome://tracing.

Tracks (every one holds complete "X" events that never overlap, so a viewer never has to guess nesting):
- per chip, one thread per functional unit (MEM, MXM, VXM, SXM): each instruction's *busy* cycles only
  (``attrs["busy_cycles"]`` from its start; the verifier's unit check guarantees no overlap);
- per chip and unit, "latency" lanes: each instruction from its first input vector to its last output vector
  (``cycle_start`` .. ``cycle_end``). Pipelined instructions overlap in time, so they are dealt onto as many
  lanes as the deepest overlap needs (greedy interval partitioning: the first lane free at the span's start);
- per chip, "sends" lanes: each transfer it sends, from send to its last vector's arrival (lanes as above);
- a "links" process with one thread per used link direction: the cycles each transfer holds that link
  (its serialisation; the verifier's link check guarantees no overlap), with a flow arrow from a transfer's
  first link slice to the instruction that reads it on the destination chip.

Times are microseconds (the format's unit) of the Program's global clock, quantised to whole nanoseconds
first (``ts = ns / 1000``), so slices adjacent in cycles stay adjacent, never overlapping, after a viewer
rounds them.
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

from lpxsim.lpu.program import Instruction, Program

UNITS = ("MEM", "MXM", "VXM", "SXM")
LINK_PID = 1_000_000  # process id of the "links" group
LATENCY_TID = 100  # latency lanes of unit u on a chip: tid LATENCY_TID * (u + 1) + lane
TRANSFER_TID = 100_000  # a chip's "sends" lanes: tid TRANSFER_TID + lane


def lanes(spans: list[tuple[int, int]]) -> list[int]:
    """A lane per half-open span such that spans on one lane never overlap (fewest lanes, greedy by start)."""
    order = sorted(range(len(spans)), key=lambda k: spans[k])
    free: list[tuple[int, int]] = []  # (end of the lane's last span, lane)
    out = [0] * len(spans)
    n = 0
    for k in order:
        s, e = spans[k]
        if free and free[0][0] <= s:
            _, lane = heapq.heappop(free)
        else:
            lane, n = n, n + 1
        out[k] = lane
        heapq.heappush(free, (e, lane))
    return out


def _busy(ins: Instruction) -> int:
    return max(1, int(ins.attrs.get("busy_cycles", 1)))


def trace_events(p: Program) -> dict:
    """The trace as a dict: metadata, busy slices, latency and transfer lanes, flow arrows."""
    ns_per_cycle = 1e9 / p.clock_hz

    def ns(cycle: float) -> int:
        return round(cycle * ns_per_cycle)

    def x(name: str, cat: str, pid: int, tid: int, c0: int, c1: int, args: dict) -> dict:
        a, b = ns(c0), ns(max(c1, c0 + 1))
        return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": a / 1000.0,
                "dur": (b - a) / 1000.0, "args": args}

    def thread(pid: int, tid: int, name: str) -> dict:
        return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}

    ev: list[dict] = []
    for chip in p.chips:
        ev.append({"ph": "M", "name": "process_name", "pid": chip, "args": {"name": f"chip {chip}"}})
        ev.extend(thread(chip, t, u) for t, u in enumerate(UNITS))
    first_reader: dict[str, Instruction] = {}
    per_unit: dict[tuple[int, int], list[Instruction]] = {}
    for ins in p.instructions:
        u = UNITS.index(ins.unit)
        ev.append(x(f"{ins.op} [{ins.kind}]", ins.unit, ins.chip, u, ins.cycle_start, ins.cycle_start + _busy(ins),
                    {"instruction": ins.id, "output": ins.output, "busy_cycles": _busy(ins),
                     "first_out_us": ns(ins.first_out_cycle) / 1000.0, "end_us": ns(ins.cycle_end) / 1000.0,
                     "slice": {k: list(v) for k, v in ins.slice.items()}}))
        per_unit.setdefault((ins.chip, u), []).append(ins)
        for b in ins.inputs:
            first_reader.setdefault(b, ins)
    for (chip, u), lst in sorted(per_unit.items()):
        spans = [(ns(i.cycle_start), ns(max(i.cycle_end, i.cycle_start + 1))) for i in lst]
        lane = lanes(spans)
        for k in range(max(lane) + 1):
            ev.append(thread(chip, LATENCY_TID * (u + 1) + k, f"{UNITS[u]} latency {k}"))
        for i, k in zip(lst, lane, strict=True):
            ev.append(x(f"{i.op} [{i.kind}]", "latency", chip, LATENCY_TID * (u + 1) + k, i.cycle_start,
                        i.cycle_end, {"instruction": i.id, "first_out_us": ns(i.first_out_cycle) / 1000.0}))
    hop = {lid: lk.hop_cycles for lid, lk in p.links.items()}
    used: dict[tuple[int, int], int] = {}
    ev.append({"ph": "M", "name": "process_name", "pid": LINK_PID, "args": {"name": "links"}})
    for t in p.transfers:
        windows = t.link_windows(hop)
        for lid, d, s, e in windows:
            key = (lid, d)
            if key not in used:
                used[key] = len(used)
                lk = p.links[lid]
                a, b = (lk.a, lk.b) if d == 0 else (lk.b, lk.a)
                ev.append(thread(LINK_PID, used[key], f"{lk.cls} {a}->{b}"))
            ev.append(x(t.src_buffer, "link", LINK_PID, used[key], s, e, {"bytes": t.bytes, "transfer": t.id}))
        reader = first_reader.get(t.dst_buffer)
        if windows and reader is not None:
            lid, d, s, _ = windows[0]
            ev.append({"ph": "s", "name": "transfer", "cat": "flow", "id": t.id, "pid": LINK_PID,
                       "tid": used[(lid, d)], "ts": ns(s) / 1000.0})
            ev.append({"ph": "f", "bp": "e", "name": "transfer", "cat": "flow", "id": t.id, "pid": reader.chip,
                       "tid": UNITS.index(reader.unit), "ts": ns(reader.cycle_start) / 1000.0})
    sends: dict[int, list] = {}
    for t in p.transfers:
        sends.setdefault(t.src_chip, []).append(t)
    for chip, lst in sorted(sends.items()):
        lane = lanes([(ns(t.send_cycle), ns(max(t.end_cycle, t.send_cycle + 1))) for t in lst])
        for k in range(max(lane) + 1):
            ev.append(thread(chip, TRANSFER_TID + k, f"sends {k}"))
        for t, k in zip(lst, lane, strict=True):
            ev.append(x(f"{t.src_buffer} -> chip {t.dst_chip}", "transfer", chip, TRANSFER_TID + k, t.send_cycle,
                        t.end_cycle, {"bytes": t.bytes, "transfer": t.id, "arrive_us": ns(t.arrive_cycle) / 1000.0}))
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "metadata": {"model": p.model, "system": p.system, "clock_hz": p.clock_hz}}


def write_trace(p: Program, path: str | Path, field: str = "trace") -> Path:
    """Write the trace atomically (`lpxsim.core.outputs`: a temporary file, then a rename; never over a
    device, a FIFO or a folder; `-` is stdout)."""
    from lpxsim.core.outputs import atomic_write_text

    return atomic_write_text(path, json.dumps(trace_events(p), separators=(",", ":")), field)
