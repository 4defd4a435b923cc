"""KV residency: every attention instruction reads only KV that its own chip holds when it runs.

KV is the one input of an instruction that is not a buffer of the step: a chip keeps it between steps. A
holding is ``(chip, layer, KV head, stripe index, stripe count, block)`` (the stripe is ``kv_stripe`` and
``attrs["kv_block"]``, see `lpxsim.lpu.program`); under a holding a chip has stored, per sequence of the
step, intervals of positions (of which it keeps those its stripe owns). An attention instruction on chip
``c`` over heads ``h0:h1`` reads, for each sequence, the keys of its share in the causal (or sliding)
window, and ``kv_seq`` when it bounds them:

- the keys written in this step (positions ``context .. context + new``) must be stored under the same
  holding by a ``kv_write`` on chip ``c`` whose first vector is in place when the attention starts and
  whose last is in place before it ends;
- the keys of earlier steps (positions before ``context``) must be held by chip ``c`` when the step starts:
  `KvResidency` says what the chips hold. Passed from the previous step of the same deployment
  (`kv_after`), it is checked exactly; without it, the Program's own ``kv_write`` holdings stand for the
  deployment's (a layout fixes where each position lives, so every step of a deployment writes the same
  holdings), which checks that each attention reads only KV its own chip stores.

An attention that gathers its helpers' stripes (``attrs["kv_from"]``, `lpxsim.lpu.emit_gather`) reads the
first stripe from its own chip's store, checked as above; each other stripe must arrive in its inputs from a
``kv_read`` of that stripe (of the same layer, covering its KV heads), itself a read checked as above on the
chip that runs it, and the stripes together must make up the attention's ``kv_stripe`` share.

Errors are reported as the ``kv`` class. Only the positions a holding's stripe owns count: a share with no
owned key in a range needs nothing there.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import TYPE_CHECKING

import numpy as np

from lpxsim.lpu.program import Program, stripe_count

if TYPE_CHECKING:
    from lpxsim.graph import OpGraph
    from lpxsim.lpu.verify import VerifyReport

Holding = tuple[int, int, int, int, int, int]  # (chip, layer, kv head, stripe index, stripe count, block)
Span = tuple[int, int]  # half-open positions [lo, hi)
UNBOUNDED = (0, math.inf)


@dataclass
class KvResidency:
    """What the chips hold when a step starts: per holding, per sequence, merged position intervals."""

    held: dict[Holding, dict[int, list[Span]]] = field(default_factory=dict)

    def add(self, key: Holding, seq: int, span: Span) -> None:
        if span[1] > span[0]:
            per = self.held.setdefault(key, {})
            per[seq] = _merge([*per.get(seq, []), span])

    def spans(self, key: Holding, seq: int) -> list[Span]:
        return self.held.get(key, {}).get(seq, [])

    def copy(self) -> KvResidency:
        return KvResidency({k: {s: list(v) for s, v in per.items()} for k, per in self.held.items()})


@dataclass
class _Write:
    """One kv_write instruction: its KV heads, its position bound and its cycles."""

    heads: Span
    bound: Span
    first_out: int
    end: int


@dataclass
class _Read:
    """One attention instruction: what it reads and when."""

    k: int  # its row in the instruction table
    chip: int
    op: str
    layer: int
    kv_heads: Span
    stripe: tuple[int, int, int]  # (index, count, block)
    bound: Span
    start: int
    end: int
    gathered: tuple | None = None  # ((index, count) stripe, input buffer) per gathered part (`attrs["kv_from"]`)


def _merge(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _owned(lo: float, hi: float, stripe: tuple[int, int, int]) -> int:
    """Positions of [lo, hi) that the stripe (index, count, block) owns."""
    if hi <= lo:
        return 0
    i, n, b = stripe
    return int(stripe_count(int(hi), i, n, b)) - int(stripe_count(int(lo), i, n, b))


def _uncovered(want: Span, have: list[Span], stripe: tuple[int, int, int]) -> Span | None:
    """The first sub-interval of `want` outside the (merged, sorted) `have` that holds a position the stripe
    owns; None when every owned position of `want` is covered."""
    lo, hi = want
    for a, b in have:
        if a > lo and _owned(lo, min(a, hi), stripe):
            return lo, min(a, hi)
        lo = max(lo, b)
        if lo >= hi:
            return None
    return (lo, hi) if _owned(lo, hi, stripe) else None


def _kv_rows(p: Program, graph: OpGraph) -> tuple[dict[tuple, list[_Write]], list[_Read]]:
    """The kv_write instructions by (chip, layer, stripe) and the attention instructions, from their rows."""
    ins = p.instructions
    kinds = ins.kind_values
    wanted = [j for j, k in enumerate(kinds) if k in ("kv_write", "attention", "kv_read")]
    if not wanted:
        return {}, []
    rows = np.flatnonzero(np.isin(ins.column("kind_code"), wanted)).tolist()
    layer_of = {op.name: op.layer for op in graph.ops if op.kind in ("kv_write", "attention")}
    writes: dict[tuple, list[_Write]] = defaultdict(list)
    reads: list[_Read] = []
    for k in rows:
        kind, op, slc, attrs = (ins.value(f, k) for f in ("kind", "op", "slice", "attrs"))
        layer = layer_of.get(op)
        if layer is None:  # an instruction naming no KV op of the graph: the graph check reports it
            continue
        stripe = (*tuple(slc.get("kv_stripe", (0, 1))), int(attrs.get("kv_block", 1)))
        bound = tuple(slc["kv_seq"]) if "kv_seq" in slc else UNBOUNDED
        heads = tuple(slc["kv_heads"]) if "kv_heads" in slc else (0, _kv_head_count(graph, layer))
        if kind == "kv_write":  # no kv_heads slice: every KV head of the layer
            writes[(ins.chip[k], layer, stripe)].append(_Write(heads, bound, ins.first_out_cycle[k], ins.cycle_end[k]))
            continue
        parts = attrs.get("kv_from")
        if kind == "attention":
            heads = _heads_read(graph, layer, slc)
        if parts is not None:  # its own store holds the first stripe; the others arrive as inputs
            stripe = (*tuple(parts[0]), stripe[2])
            got = ins.input_flat[(ins.input_end[k - 1] if k else 0) + 2:ins.input_end[k]]
            parts = tuple(zip_longest((tuple(x) for x in parts[1:]), got))  # a None on either side: a mismatch
        reads.append(_Read(k, ins.chip[k], op, layer, heads, stripe, bound, ins.cycle_start[k], ins.cycle_end[k],
                           parts))
    return writes, reads


def _kv_head_count(graph: OpGraph, layer: int) -> int:
    a = graph.model.layers[layer].attention
    return 1 if a.kind == "mla" else a.num_kv_heads


def _heads_read(graph: OpGraph, layer: int, slc) -> Span:  # noqa: ANN001
    """The KV heads an attention over query heads ``slice["heads"]`` reads (query head h uses h // group)."""
    a = graph.model.layers[layer].attention
    group = max(1, a.num_heads // _kv_head_count(graph, layer))
    h0, h1 = slc.get("heads", (0, a.num_heads))
    return h0 // group, (max(h1, h0 + 1) - 1) // group + 1


def _windows(graph: OpGraph, layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sequence of the step: the first key any new row attends to, the context, and the end of its keys."""
    ph = graph.phase
    ctx = np.asarray(ph.contexts, dtype=np.int64)
    window = graph.model.layers[layer].attention.window
    first = np.zeros_like(ctx) if window is None else np.maximum(0, ctx - window + 1)
    return first, ctx, ctx + ph.new_tokens


def _check_gathered(p: Program, reads: list[_Read], rep: VerifyReport) -> None:
    """Each gathering attention's stripes come from kv_reads of those stripes and make up its share."""
    gathering = [r for r in reads if r.gathered is not None]
    if not gathering:
        return
    by_out = {p.instructions.output[r.k]: r for r in reads if p.instructions.kind_values[
        p.instructions.kind_code[r.k]] == "kv_read"}
    src = {t.dst_buffer: t.src_buffer for t in p.transfers}
    for r in gathering:
        slc = p.instructions.value("slice", r.k)
        index, count = tuple(slc.get("kv_stripe", (0, 1)))
        if any(stripe is None for stripe, _ in r.gathered):
            rep.add("kv", f"{r.op} on chip {r.chip} reads more gathered inputs than its kv_from names")
            continue
        parts = [r.stripe[:2], *(g[0] for g in r.gathered)]
        n = parts[0][1]
        want = {index + count * j for j in range(n // count)} if n % count == 0 else set()
        if {i for i, m in parts if m == n} != want or len(parts) != len(want):
            rep.add("kv", f"{r.op} on chip {r.chip} gathers KV stripes {parts}, which do not make up its share "
                          f"(stripe {index} of {count})")
            continue
        for stripe, buf in r.gathered:
            origin = buf
            while origin in src:
                origin = src[origin]
            kr = by_out.get(origin)
            if kr is None or kr.stripe[:2] != stripe or kr.layer != r.layer or kr.stripe[2] != r.stripe[2] \
                    or not (kr.kv_heads[0] <= r.kv_heads[0] and r.kv_heads[1] <= kr.kv_heads[1]):
                rep.add("kv", f"{r.op} on chip {r.chip} reads stripe {stripe[0]} of {stripe[1]} from {buf!r}, "
                              "which no kv_read of that stripe and its KV heads produced")


def check_kv(p: Program, graph: OpGraph, rep: VerifyReport, kv_held: KvResidency | None = None) -> None:
    """Report (class ``kv``) every attention that reads KV its chip does not hold at its cycle (module doc)."""
    writes, reads = _kv_rows(p, graph)
    _check_gathered(p, reads, rep)
    windows: dict[int, tuple] = {}
    for r in reads:
        if r.layer not in windows:
            windows[r.layer] = _windows(graph, r.layer)
        first, ctx, end = windows[r.layer]
        entries = writes.get((r.chip, r.layer, r.stripe), [])
        for h in range(*r.kv_heads):
            mine = [w for w in entries if w.heads[0] <= h < w.heads[1]]
            timely = _merge([w.bound for w in mine if w.first_out <= r.start and w.end <= r.end])
            if kv_held is None and timely[:1] == [UNBOUNDED]:  # the usual case: every position, in time
                continue
            stored = _merge([w.bound for w in mine])
            for s in range(len(ctx)):
                lo, hi = max(int(first[s]), r.bound[0]), min(int(end[s]), r.bound[1])
                new = (max(lo, int(ctx[s])), hi)
                gap = _uncovered(new, timely, r.stripe)
                if gap is not None:
                    how = "before it is written" if _uncovered(gap, stored, r.stripe) is None else \
                        "which no kv_write on its chip stores"
                    rep.add("kv", _message(r, h, s, gap, how))
                    break
                past = (lo, min(hi, int(ctx[s])))
                have = stored if kv_held is None else kv_held.spans((r.chip, r.layer, h, *r.stripe), s)
                gap = _uncovered(past, have, r.stripe)
                if gap is not None:
                    rep.add("kv", _message(r, h, s, gap, "which its chip does not hold"))
                    break


def _message(r: _Read, head: int, seq: int, gap: Span, how: str) -> str:
    i, n, b = r.stripe
    share = f" (stripe {i} of {n}, blocks of {b})" if n > 1 else ""
    hi = "end" if gap[1] == math.inf else f"{int(gap[1]) - 1}"
    return (f"{r.op} on chip {r.chip} at cycle {r.start} reads KV of layer {r.layer} kv head {head} sequence {seq} "
            f"positions {int(gap[0])}..{hi}{share}, {how}")


def kv_after(p: Program, graph: OpGraph, kv_held: KvResidency | None = None) -> KvResidency:
    """What the chips hold after step `p`: `kv_held` (nothing when None) plus every kv_write of the step."""
    out = KvResidency() if kv_held is None else kv_held.copy()
    writes, _ = _kv_rows(p, graph)
    ctx = np.asarray(graph.phase.contexts, dtype=np.int64)
    end = ctx + graph.phase.new_tokens
    for (chip, layer, stripe), entries in writes.items():
        for w in entries:
            for h in range(*w.heads):
                for s in range(len(ctx)):
                    span = (max(int(ctx[s]), w.bound[0]), min(int(end[s]), w.bound[1]))
                    out.add((chip, layer, h, *stripe), s, span)
    return out


__all__ = ["KvResidency", "check_kv", "kv_after"]
