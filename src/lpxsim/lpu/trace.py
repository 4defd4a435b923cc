"""Chrome trace-event JSON of a Program, for ui.perfetto.dev or chrome://tracing.

Tracks:
- one process per chip, one thread per functional unit (MEM, MXM, VXM, SXM): complete ("X") events
  covering each instruction's *busy* cycles only (``attrs["busy_cycles"]`` from its start), so events on a
  unit track never overlap (the verifier's unit check guarantees it);
- per chip, an async track "latency": each instruction from its first input vector to its last output
  vector (``cycle_start`` .. ``cycle_end``); pipelined instructions overlap there, which async tracks allow;
- one process "links", one thread per used link direction: X events for the cycles each transfer holds
  that link (its serialisation), again never overlapping;
- an async track "transfers" in the links process: each transfer from send to its last vector's arrival,
  with a flow event from its link slice to the consumer's unit slice on the destination chip.

Times are microseconds (the format's unit) of the Program's global clock, quantised to whole
nanoseconds first (``ts = ns / 1000``), so that slices adjacent in cycles stay adjacent, never overlapping,
after a viewer rounds them.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from lpxsim.lpu.program import Program

UNITS = ("MEM", "MXM", "VXM", "SXM")
LINK_PID = 1_000_000  # process id of the "links" group


def _busy(ins) -> int:
    return max(1, int(ins.attrs.get("busy_cycles", 1)))


def trace_events(p: Program) -> dict:
    """The trace as a dict: metadata, busy slices, async latency/transfer spans and flow arrows."""
    ns_per_cycle = 1e9 / p.clock_hz

    def us(cycle: float) -> float:
        return round(cycle * ns_per_cycle) / 1000.0

    def dur(c0: float, c1: float) -> float:
        return (round(c1 * ns_per_cycle) - round(c0 * ns_per_cycle)) / 1000.0

    ev: list[dict] = []
    for chip in p.chips:
        ev.append({"ph": "M", "name": "process_name", "pid": chip, "args": {"name": f"chip {chip}"}})
        for t, u in enumerate(UNITS):
            ev.append({"ph": "M", "name": "thread_name", "pid": chip, "tid": t, "args": {"name": u}})
    first_reader: dict[str, object] = {}
    for ins in p.instructions:
        tid = UNITS.index(ins.unit)
        ev.append({"ph": "X", "name": f"{ins.op} [{ins.kind}]", "cat": ins.unit, "pid": ins.chip, "tid": tid,
                   "ts": us(ins.cycle_start), "dur": dur(ins.cycle_start, ins.cycle_start + _busy(ins)),
                   "args": {"instruction": ins.id, "output": ins.output, "busy_cycles": _busy(ins),
                            "first_out_us": us(ins.first_out_cycle), "end_us": us(ins.cycle_end),
                            "slice": {k: list(v) for k, v in ins.slice.items()}}})
        span = {"name": f"{ins.op} [{ins.kind}]", "cat": "latency", "id": f"i{ins.id}", "pid": ins.chip,
                "tid": tid}
        ev.append({**span, "ph": "b", "ts": us(ins.cycle_start), "args": {"unit": ins.unit}})
        ev.append({**span, "ph": "e", "ts": us(max(ins.cycle_end, ins.cycle_start + 1))})
        for b in ins.inputs:
            first_reader.setdefault(b, ins)
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
                ev.append({"ph": "M", "name": "thread_name", "pid": LINK_PID, "tid": used[key],
                           "args": {"name": f"{lk.cls} {a}->{b}"}})
            ev.append({"ph": "X", "name": t.src_buffer, "cat": "link", "pid": LINK_PID, "tid": used[key],
                       "ts": us(s), "dur": dur(s, max(e, s + 1)), "args": {"bytes": t.bytes, "transfer": t.id}})
        span = {"name": f"{t.src_buffer} {t.src_chip}->{t.dst_chip}", "cat": "transfer", "id": f"t{t.id}",
                "pid": LINK_PID, "tid": 0}
        ev.append({**span, "ph": "b", "ts": us(t.send_cycle), "args": {"bytes": t.bytes}})
        ev.append({**span, "ph": "e", "ts": us(max(t.end_cycle, t.send_cycle + 1))})
        reader = first_reader.get(t.dst_buffer)
        if windows and reader is not None:
            lid, d, s, _ = windows[0]
            ev.append({"ph": "s", "name": "transfer", "cat": "flow", "id": t.id, "pid": LINK_PID,
                       "tid": used[(lid, d)], "ts": us(s)})
            ev.append({"ph": "f", "bp": "e", "name": "transfer", "cat": "flow", "id": t.id, "pid": reader.chip,
                       "tid": UNITS.index(reader.unit), "ts": us(reader.cycle_start)})
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "metadata": {"model": p.model, "system": p.system, "clock_hz": p.clock_hz}}


def write_trace(p: Program, path: str | Path) -> Path:
    """Write the trace atomically (temporary file in the same folder, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(trace_events(p), fh, separators=(",", ":"))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
