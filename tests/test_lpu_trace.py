"""The Perfetto/Chrome trace: valid trace-event JSON, busy-only unit tracks that never overlap.

Perfetto's trace processor (the `perfetto` package) needs a `trace_processor_shell` binary it downloads on
first use; offline that download fails, so the file is checked here against the Chrome trace-event format
(https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU) instead.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from lpxsim.lpu import compile_program
from lpxsim.lpu.trace import LINK_PID, UNITS, lanes, trace_events, write_trace
from lpxsim.specs.model import ModelSpec

DATA = Path(__file__).parent / "data" / "emulate"
PHASES = {"X", "M", "b", "e", "s", "f"}  # the phases this writer uses


def _program(layout: str = "tp=4,stages=2,kvsplit=2", name: str = "llama_tiny"):
    m = ModelSpec.from_path(DATA / f"{name}.json")
    return compile_program(m, "lpx", chips=8, context=40, concurrency=2, layout=layout,
                           chip_sram_bytes=400_000, weights="bf16").program


def validate_chrome_trace(doc: dict) -> list[str]:
    """Problems with `doc` as Chrome trace-event JSON (object form); empty when valid."""
    errs: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["top level must be an object with a traceEvents list"]
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        errs.append("displayTimeUnit must be ms or ns")
    open_async: dict[tuple, int] = defaultdict(int)
    flows: dict[tuple, list[str]] = defaultdict(list)
    for k, e in enumerate(doc["traceEvents"]):
        ph = e.get("ph")
        if ph not in PHASES:
            errs.append(f"event {k}: unknown phase {ph!r}")
            continue
        if not isinstance(e.get("name"), str) or not isinstance(e.get("pid"), int):
            errs.append(f"event {k}: name (string) and pid (int) are required")
        if ph == "M":
            if e["name"] not in ("process_name", "thread_name", "process_sort_index", "thread_sort_index") \
                    or "name" not in e.get("args", {}):
                errs.append(f"event {k}: metadata needs a known name and args.name")
            continue
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
            errs.append(f"event {k}: ts must be a non-negative number")
        if "tid" in e and not isinstance(e["tid"], int):
            errs.append(f"event {k}: tid must be an int")
        if ph == "X" and (not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0 or "tid" not in e):
            errs.append(f"event {k}: complete events need tid and dur >= 0")
        if ph in ("b", "e"):
            if "cat" not in e or "id" not in e:
                errs.append(f"event {k}: async events need cat and id")
            key = (e.get("cat"), e.get("id"), e.get("name"))
            open_async[key] += 1 if ph == "b" else -1
            if open_async[key] < 0:
                errs.append(f"event {k}: async end before its begin")
        if ph in ("s", "f"):
            flows[(e.get("cat"), e.get("id"))].append(ph)
            if ph == "f" and e.get("bp") not in (None, "e"):
                errs.append(f"event {k}: flow end binding point must be 'e'")
    errs += [f"async span {key} never ends" for key, n in open_async.items() if n]
    errs += [f"flow {key} is not one start then one end" for key, v in flows.items() if v != ["s", "f"]]
    return errs


def _slices_by_track(doc: dict) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Per (pid, tid): X slices as whole nanoseconds (how a viewer reads the microsecond floats)."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            s = round(e["ts"] * 1000)
            out[(e["pid"], e["tid"])].append((s, s + round(e["dur"] * 1000)))
    return out


def _overlaps(slices: list[tuple[int, int]]) -> int:
    slices = sorted(slices)
    return sum(1 for (_, e0), (s1, _) in zip(slices, slices[1:], strict=False) if s1 < e0)


@pytest.mark.parametrize("layout", ["tp=4,stages=2,kvsplit=2", "tp=8,stages=1,kvsplit=4", "tp=2,stages=2"])
def test_trace_is_chrome_trace_format_and_no_track_overlaps(layout: str, tmp_path: Path) -> None:
    p = _program(layout)
    doc = json.loads(write_trace(p, tmp_path / "t.json").read_text())
    assert validate_chrome_trace(doc) == []
    tracks = _slices_by_track(doc)
    unit_tracks = {k: v for k, v in tracks.items() if k[0] != LINK_PID and k[1] < len(UNITS)}
    assert len(unit_tracks) >= len(p.chips) and all(_overlaps(v) == 0 for v in unit_tracks.values())
    assert all(_overlaps(v) == 0 for v in tracks.values())  # latency lanes, links and transfer lanes too
    assert not list(tmp_path.glob(".*tmp"))


def test_unit_slices_are_busy_time_latency_and_transfers_on_their_own_tracks() -> None:
    p = _program()
    doc = trace_events(p)
    by_id = {i.id: i for i in p.instructions}
    ev = doc["traceEvents"]
    busy = [e for e in ev if e["ph"] == "X" and e["cat"] in UNITS]
    assert len(busy) == len(p.instructions)
    ns = 1e9 / p.clock_hz
    for e in busy:
        ins = by_id[e["args"]["instruction"]]
        assert e["tid"] == UNITS.index(ins.unit)
        assert round(e["dur"] * 1000) == round((ins.cycle_start + ins.attrs["busy_cycles"]) * ns) - round(
            ins.cycle_start * ns)
    # latency runs to the last output vector: later than the busy end for pipelined units, on other tracks
    lat = [e for e in ev if e["ph"] == "X" and e["cat"] == "latency"]
    assert sorted(e["args"]["instruction"] for e in lat) == sorted(by_id)
    assert all(e["tid"] >= len(UNITS) for e in lat)
    longer = sum(e["dur"] > round(by_id[e["args"]["instruction"]].attrs["busy_cycles"] * ns) / 1000 for e in lat)
    assert longer > len(lat) // 2
    # every transfer once on its sender's lanes; transfers someone reads get a flow arrow to the reader
    spans = [e for e in ev if e["ph"] == "X" and e["cat"] == "transfer"]
    assert sorted(e["args"]["transfer"] for e in spans) == sorted(t.id for t in p.transfers)
    src = {t.id: t.src_chip for t in p.transfers}
    assert all(e["pid"] == src[e["args"]["transfer"]] and e["tid"] >= len(UNITS) for e in spans)
    assert any(e["ph"] == "f" for e in ev)


def test_lanes_are_few_and_disjoint() -> None:
    spans = [(0, 10), (5, 15), (10, 20), (12, 13), (20, 30)]
    got = lanes(spans)
    assert max(got) + 1 == 3  # (5,15), (10,20) and (12,13) overlap at 12
    for k in set(got):
        assert _overlaps([s for s, g in zip(spans, got, strict=True) if g == k]) == 0
    assert lanes([]) == []


def test_the_old_trace_shape_would_fail_the_overlap_check() -> None:
    """Negative control: slices spanning start..end (latency included), as before issue 13, do overlap."""
    p = _program()
    old = defaultdict(list)
    for i in p.instructions:
        old[(i.chip, i.unit)].append((i.cycle_start, i.cycle_end))
    assert sum(_overlaps(v) for v in old.values()) > 0


def test_validator_rejects_broken_traces() -> None:
    assert validate_chrome_trace({"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "ts": 0}]})
    assert validate_chrome_trace({"traceEvents": [{"ph": "b", "name": "a", "cat": "c", "id": 1, "pid": 0,
                                                   "ts": 0}]})
    assert validate_chrome_trace({"traceEvents": [{"ph": "Q", "name": "a", "pid": 0, "ts": 0}]})
    assert validate_chrome_trace([]) != []
