"""Chrome trace-event JSON of a Program: one track per chip unit and per busy link (ui.perfetto.dev)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from lpxsim.lpu.program import Program

UNITS = ("MEM", "MXM", "VXM", "SXM")
LINK_PID = 1_000_000  # process id of the "links" group


def trace_events(p: Program) -> dict:
    """The trace as a dict: complete ("X") events in microseconds, named processes and threads."""
    us = 1e6 / p.clock_hz
    ev: list[dict] = []
    for chip in p.chips:
        ev.append({"ph": "M", "name": "process_name", "pid": chip, "args": {"name": f"chip {chip}"}})
        for t, u in enumerate(UNITS):
            ev.append({"ph": "M", "name": "thread_name", "pid": chip, "tid": t, "args": {"name": u}})
    for ins in p.instructions:
        ev.append({"ph": "X", "name": f"{ins.op} [{ins.kind}]", "cat": ins.unit, "pid": ins.chip,
                   "tid": UNITS.index(ins.unit), "ts": ins.cycle_start * us,
                   "dur": max(ins.cycle_end - ins.cycle_start, 1) * us,
                   "args": {"output": ins.output, "first_out_us": ins.first_out_cycle * us,
                            "slice": {k: list(v) for k, v in ins.slice.items()}}})
    hop = {lid: lk.hop_cycles for lid, lk in p.links.items()}
    used: dict[tuple[int, int], int] = {}
    ev.append({"ph": "M", "name": "process_name", "pid": LINK_PID, "args": {"name": "links"}})
    for t in p.transfers:
        for lid, d, s, e in t.link_windows(hop):
            key = (lid, d)
            if key not in used:
                used[key] = len(used)
                lk = p.links[lid]
                a, b = (lk.a, lk.b) if d == 0 else (lk.b, lk.a)
                ev.append({"ph": "M", "name": "thread_name", "pid": LINK_PID, "tid": used[key],
                           "args": {"name": f"{lk.cls} {a}->{b}"}})
            ev.append({"ph": "X", "name": t.src_buffer, "cat": "link", "pid": LINK_PID, "tid": used[key],
                       "ts": s * us, "dur": max(e - s, 1) * us, "args": {"bytes": t.bytes, "transfer": t.id}})
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
