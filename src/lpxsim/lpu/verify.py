"""Verify a Program: a schedule that fails any check is a compiler bug, never a result.

Checks: SRAM regions in bounds and disjoint per chip; each functional unit
runs one instruction at a time; every buffer inside its
region, and buffers sharing bytes never live at the same time; every input
produced exactly once, on the right chip, before it is read (first vector)
and fully arrived before the reader finishes; transfers leave after their
source exists, follow connected links from source to destination, and take
at least the path's hop latency; no link direction carries two transfers in
the same cycle. Interval checks use numpy, not per-cycle loops.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from lpxsim.lpu.program import Program

STEP_INPUTS = ("tokens",)


@dataclass
class VerifyReport:
    ok: bool
    errors: list[str] = field(default_factory=list)
    link_conflicts: int = 0
    region_overlaps: int = 0
    dependency_errors: int = 0

    def add(self, kind: str, msg: str) -> None:
        self.errors.append(f"{kind}: {msg}")
        self.ok = False


def _overlaps(starts: np.ndarray, ends: np.ndarray) -> int:
    """Number of adjacent overlaps among half-open intervals after sorting by start."""
    if len(starts) < 2:
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    running = np.maximum.accumulate(e)[:-1]
    return int(np.count_nonzero(s[1:] < running))


def _check_regions(p: Program, rep: VerifyReport) -> dict[tuple[int, str], tuple[int, int]]:
    by_chip: dict[int, list] = defaultdict(list)
    index = {}
    for r in p.regions:
        by_chip[r.chip].append(r)
        index[(r.chip, r.name)] = (r.offset_bytes, r.size_bytes)
        if r.offset_bytes < 0 or r.size_bytes < 0 or r.end_bytes > p.chip_sram_bytes:
            rep.add("region", f"{r.name} on chip {r.chip} outside 0..{p.chip_sram_bytes}")
    for chip, regs in by_chip.items():
        n = _overlaps(np.array([r.offset_bytes for r in regs]), np.array([r.end_bytes for r in regs]))
        if n:
            rep.region_overlaps += n
            rep.add("region", f"{n} overlapping regions on chip {chip}")
    return index


def _producers(p: Program, rep: VerifyReport) -> dict[str, tuple[int, int, int]]:
    """buffer -> (chip, first cycle, end cycle) of the one instruction or transfer that writes it."""
    prod: dict[str, tuple[int, int, int]] = {}
    for ins in p.instructions:
        if ins.output in prod:
            rep.add("dependency", f"buffer {ins.output} written twice")
        prod[ins.output] = (ins.chip, ins.first_out_cycle, ins.cycle_end)
    for t in p.transfers:
        if t.dst_buffer in prod:
            rep.add("dependency", f"buffer {t.dst_buffer} written twice")
        prod[t.dst_buffer] = (t.dst_chip, t.arrive_cycle, t.end_cycle)
    for bid, b in p.buffers.items():
        if bid not in prod and b.op in STEP_INPUTS:
            prod[bid] = (b.chip, 0, 0)
    return prod


def _check_dependencies(p: Program, rep: VerifyReport, prod: dict[str, tuple[int, int, int]]) -> None:
    bad = 0
    for ins in p.instructions:
        if ins.cycle_start > ins.first_out_cycle or ins.first_out_cycle > ins.cycle_end:
            bad += 1
            rep.add("dependency", f"instruction {ins.id} has inconsistent cycles")
        for b in ins.inputs:
            src = prod.get(b)
            if src is None:
                bad += 1
                rep.add("dependency", f"{ins.op} on chip {ins.chip} reads {b}, which nothing writes")
            elif src[0] != ins.chip:
                bad += 1
                rep.add("dependency", f"{ins.op} on chip {ins.chip} reads {b} held by chip {src[0]}")
            elif src[1] > ins.cycle_start or src[2] > ins.cycle_end:
                bad += 1
                rep.add("dependency", f"{ins.op} on chip {ins.chip} reads {b} before it is there")
    for t in p.transfers:
        src = prod.get(t.src_buffer)
        if src is None or src[0] != t.src_chip or src[1] > t.send_cycle:
            bad += 1
            rep.add("transfer", f"transfer {t.id} sends {t.src_buffer} before it exists on chip {t.src_chip}")
    rep.dependency_errors += bad


def _check_units(p: Program, rep: VerifyReport) -> None:
    """A functional unit streams one instruction at a time: the next starts after the previous's busy cycles."""
    by_unit: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    for ins in p.instructions:
        by_unit[(ins.chip, ins.unit)].append((ins.cycle_start, int(ins.attrs.get("busy_cycles", 1))))
    for key, items in by_unit.items():
        arr = np.array(items, dtype=np.int64)
        n = _overlaps(arr[:, 0], arr[:, 0] + arr[:, 1])
        if n:
            rep.add("unit", f"{key[1]} on chip {key[0]} runs two instructions at once ({n}x)")


def _check_transfers(p: Program, rep: VerifyReport) -> None:
    hop = {lid: lk.hop_cycles for lid, lk in p.links.items()}
    windows: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for t in p.transfers:
        at = t.src_chip
        for lid, d in t.links:
            lk = p.links.get(lid)
            if lk is None:
                rep.add("transfer", f"transfer {t.id} uses unknown link {lid}")
                break
            a, b = (lk.a, lk.b) if d == 0 else (lk.b, lk.a)
            if a != at:
                rep.add("transfer", f"transfer {t.id} path is not connected at chip {at}")
                break
            at = b
        else:
            if at != t.dst_chip:
                rep.add("transfer", f"transfer {t.id} ends at chip {at}, not {t.dst_chip}")
        path = sum(hop.get(lid, 0) for lid, _ in t.links)
        if t.arrive_cycle < t.send_cycle + path or t.end_cycle < t.arrive_cycle:
            rep.add("transfer", f"transfer {t.id} arrives faster than its links allow")
        for lid, d, s, e in t.link_windows(hop):
            windows[(lid, d)].append((s, e))
    conflicts = 0
    for key, w in windows.items():
        arr = np.array(w, dtype=np.int64)
        n = _overlaps(arr[:, 0], arr[:, 1])
        if n:
            conflicts += n
            rep.add("link", f"link {key[0]} direction {key[1]} carries two transfers at once ({n}x)")
    rep.link_conflicts = conflicts


def _check_buffers(p: Program, rep: VerifyReport, regions: dict[tuple[int, str], tuple[int, int]]) -> None:
    from lpxsim.lpu.place import lifetimes
    from lpxsim.lpu.schedule import Ready

    ready = {}
    for ins in p.instructions:
        ready[ins.output] = Ready(ins.first_out_cycle, ins.cycle_end)
    for t in p.transfers:
        ready[t.dst_buffer] = Ready(t.arrive_cycle, t.end_cycle)
    life = lifetimes(p.instructions, p.transfers, ready)
    groups: dict[tuple[int, str], list] = defaultdict(list)
    for b in p.buffers.values():
        if not b.region:
            continue
        reg = regions.get((b.chip, b.region))
        if reg is None:
            rep.add("buffer", f"{b.id} names region {b.region} not on chip {b.chip}")
            continue
        if b.offset_bytes < 0 or b.offset_bytes + b.bytes > reg[1]:
            rep.add("buffer", f"{b.id} lies outside region {b.region}")
        s, e = life.get(b.id, (0, 1))
        groups[(b.chip, b.region)].append((b.offset_bytes, b.offset_bytes + max(b.bytes, 1), s, e))
    for key, items in groups.items():
        if _clash(items):
            rep.add("buffer", f"live buffers share bytes in {key[1]} on chip {key[0]}")


def _clash(items: list[tuple[int, int, int, int]]) -> bool:
    """Sweep over time: does any buffer share bytes with one still live when it is written?"""
    active: list[tuple[int, int, int]] = []  # (end time, lo, hi)
    for lo, hi, t0, t1 in sorted(items, key=lambda x: x[2]):
        active = [a for a in active if a[0] > t0]
        for _, a_lo, a_hi in active:
            if lo < a_hi and a_lo < hi:
                return True
        active.append((t1, lo, hi))
    return False


def verify(p: Program) -> VerifyReport:
    """Run every check; `ok` is True only if all pass."""
    rep = VerifyReport(ok=True)
    regions = _check_regions(p, rep)
    prod = _producers(p, rep)
    _check_dependencies(p, rep, prod)
    _check_units(p, rep)
    _check_transfers(p, rep)
    _check_buffers(p, rep, regions)
    return rep
