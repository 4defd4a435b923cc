"""Cost and completeness checks of a Program against the op graph it was compiled from.

- ``cost``: every instruction is busy at least as long as its work takes at its
  unit's peak rate: the bytes it must stream from SRAM (its weight slice, its KV
  share, its largest input) over the chip's SRAM bandwidth, and its FLOPs over
  the fastest MXM format. A transfer occupies its links at least its bytes over
  the slowest link of its path. The work comes from the op graph's own totals
  scaled to the instruction's slice, never from the compiler's timing code.
- ``graph``: every op of the op graph is computed (by non-collective
  instructions) over its whole output; no chip computes a piece twice;
  attention (never replicated) covers each (head, key share) exactly once.
- ``partial``: every partial buffer is read (reaches a reduction); every final
  reduction sums each partial of its op exactly once.
- ``token``: the sampled token reaches every embedding chip (the next step's input).
- ``weights``: every weight an instruction reads is resident, in full for its
  slice, in a weight region of the chip it runs on.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Mapping
from itertools import count, repeat
from typing import TYPE_CHECKING

import numpy as np

from lpxsim.core.errors import UserError
from lpxsim.lpu.memtrim import release_free_memory
from lpxsim.lpu.program import (
    COLLECTIVE_KINDS,
    Instruction,
    InstructionTable,
    Program,
    Range,
    TransferTable,
    stripe_count,
)
from lpxsim.lpu.verify import _spread, index_dtype

if TYPE_CHECKING:
    from lpxsim.graph import Op, OpGraph
    from lpxsim.lpu.arch import Arch
    from lpxsim.lpu.verify import Columns, VerifyReport

SLACK_CYCLES = 1.0  # integer rounding of cycle counts
LEAF_EXCLUDED = ("reduce", "concat", "copy")  # producers that pass partials on rather than create them


def context_for(p: Program, graph: OpGraph | None, arch: Arch | None) -> tuple[OpGraph | None, Arch | None, str]:
    """The op graph and chip rates for `p`: the ones given, else rebuilt from the catalog by name."""
    why = ""
    if arch is None:
        from lpxsim.catalog import get_system
        from lpxsim.lpu.arch import arch_for

        try:
            arch = arch_for(get_system(p.system)).with_sram(p.chip_sram_bytes)
        except UserError as e:
            why = f"system {p.system!r} not in the catalog ({e})"
    if graph is None:
        from lpxsim.catalog import get_model
        from lpxsim.graph import Phase, lower

        try:
            m = get_model(p.model)
        except UserError:
            return None, arch, why or f"model {p.model!r} is not in the catalog (pass graph= to verify)"
        ph = Phase(p.phase["kind"], tuple(p.phase["contexts"]), int(p.phase["new_tokens"]))
        graph = lower(m, ph, weights=p.weights, kv=p.kv, kv_layout=p.kv_layout)
    return graph, arch, why


# --- work of one instruction ------------------------------------------------------------------
def _width(r) -> int:
    return int(r[1] - r[0])


def _matmul_frac(ins: Instruction, op: Op) -> float:
    """The share of the matmul's weights and FLOPs in this instruction's rows x cols slice."""
    k_full, n_full = _matmul_extent(op)
    rows = ins.slice.get("rows", (0, k_full))
    cols = ins.slice.get("cols", (0, n_full))
    return _width(rows) / max(k_full, 1) * _width(cols) / max(n_full, 1)


def _matmul_extent(op: Op) -> tuple[int, int]:
    """(weight rows, output columns) as the Program's slices index them (program.py)."""
    _, k, n = op.shape[:3]
    if op.attrs.get("per_head"):
        return k, int(op.attrs["heads"]) * n
    if op.attrs.get("fused") == ("gate", "up"):
        return k, n // 2
    return k, n


class _Keys:
    """Keys a KV share holds and query-key pairs it serves, per (contexts, new, window, share): cached."""

    def __init__(self, contexts: tuple[int, ...], new: int) -> None:
        ctx = np.asarray(contexts, dtype=np.int64)[:, None]
        self.ends = ctx + np.arange(1, new + 1, dtype=np.int64)[None, :]  # keys visible: [start, end)
        self.ctx = ctx[:, 0]
        self.new = new
        self.cache: dict[tuple, tuple[float, float, float]] = {}

    def share(self, window: int | None, stripe: tuple[int, int], block: int, seq) -> tuple[float, float, float]:
        """(query-key pairs, distinct keys read, new positions written) of one share."""
        key = (window, stripe, block, seq)
        if key not in self.cache:
            ends = self.ends
            starts = np.zeros_like(ends) if window is None else np.maximum(0, ends - window)
            w_lo, w_hi = self.ctx, self.ctx + self.new
            if seq is not None:
                starts, ends = np.maximum(starts, seq[0]), np.minimum(ends, seq[1])
                w_lo, w_hi = np.maximum(w_lo, seq[0]), np.minimum(w_hi, seq[1])
            i, n = stripe

            def owned(lo, hi):
                return np.where(hi > lo, stripe_count(hi, i, n, block) - stripe_count(lo, i, n, block), 0)

            pairs = float(owned(starts, ends).sum())
            keys = float(owned(starts[:, 0], ends[:, -1]).sum()) if ends.size else 0.0
            written = float(owned(w_lo, w_hi).sum())
            self.cache[key] = (pairs, keys, written)
        return self.cache[key]


def _share_of(ins: Instruction) -> tuple[tuple[int, int], int, tuple[int, int] | None]:
    stripe = tuple(ins.slice.get("kv_stripe", (0, 1)))
    return (int(stripe[0]), int(stripe[1])), int(ins.attrs.get("kv_block", 1)), ins.slice.get("kv_seq")


def _kv_heads(graph: OpGraph, layer: int) -> tuple[int, int]:
    a = graph.model.layers[layer].attention
    return a.num_heads, 1 if a.kind == "mla" else a.num_kv_heads


def instruction_work(ins: Instruction, op: Op, graph: OpGraph, keys: _Keys, p: Program) -> tuple[float, float]:
    """(bytes the instruction must stream through SRAM, FLOPs it must compute) for its slice."""
    kind = ins.kind
    if kind == "matmul":
        f = _matmul_frac(ins, op)
        return f * op.weight_bytes, f * op.flops
    if kind == "router":
        return op.weight_bytes, op.flops
    if kind == "experts":
        lo, hi = ins.slice.get("experts", (0, op.attrs["num_experts"]))
        M, k = op.tokens, op.attrs["top_k"]
        active = min(hi - lo, k * M)  # the static schedule budgets the worst case
        return active * op.attrs["expert_bytes"], 2.0 * min(M * k, M * (hi - lo)) * op.attrs["expert_params"]
    if kind == "embed":
        lo, hi = ins.slice.get("vocab", (0, graph.model.vocab_size))
        return min(op.tokens, hi - lo) * op.weight_bytes / max(op.tokens, 1), 0.0
    if kind in ("attention", "kv_write", "kv_read"):
        H, KVH = _kv_heads(graph, op.layer)
        k0, k1 = ins.slice.get("kv_heads", (0, KVH))
        window = op.attrs.get("window")
        pairs, nkeys, written = keys.share(window, *_share_of(ins))
        kvw = op if kind == "kv_write" else graph.op(op.inputs[1])
        per_key = kvw.kv_write_bytes / max(kvw.tokens, 1) * (k1 - k0) / KVH
        if kind == "kv_write":
            return written * per_key, 0.0
        if kind == "kv_read":  # the keys of its share the attention it serves reads (`program`)
            return nkeys * per_key, 0.0
        h0, h1 = ins.slice.get("heads", (0, H))
        attended = float(op.attrs.get("attended_keys") or 0.0)
        per_pair = op.flops / (H * attended) if attended > 0 else 0.0
        return nkeys * per_key, pairs * (h1 - h0) * per_pair
    # vector kinds: at least one full input streams through (its bytes)
    return max((p.buffers[b].bytes for b in ins.inputs if b in p.buffers), default=0), 0.0


_SLICE_WORK = ("matmul", "router", "experts", "embed", "attention", "kv_write", "kv_read")  # not the inputs' bytes


def slowest_link(trs: TransferTable, bpc: np.ndarray) -> np.ndarray:
    """Per transfer, the bytes per cycle of the slowest link on its route among the links `bpc` knows (ids
    0..len-1; inf: none): taken per distinct route (a few thousand), then indexed by each transfer's route,
    with no per-hop arrays (peak memory)."""
    nl = len(bpc)
    r_slow = np.full(len(trs.routes), np.inf)
    for r, route in enumerate(trs.routes):
        for lid, _ in route:
            if 0 <= lid < nl and bpc[lid] < r_slow[r]:
                r_slow[r] = bpc[lid]
    return r_slow[trs.column("route")] if len(r_slow) else np.full(len(trs), np.inf)


def _check_cost(p: Program, graph: OpGraph, arch: Arch, rep: VerifyReport, col: Columns,
                ops: dict[str, Op], ic: _InsCodes) -> None:
    mem = arch.mem_bytes_per_cycle
    mxm = max(arch.mxm_flops_per_cycle.values())
    keys = _Keys(tuple(p.phase["contexts"]), int(p.phase["new_tokens"]))
    n = len(p.instructions)
    nbytes = np.zeros(n)  # vector and collective kinds: their largest input streams through
    np.maximum.at(nbytes, col.r_ins, col.b_bytes[col.r_buf].astype(np.float64))
    flops = np.zeros(n)
    ins_list = p.instructions
    # MXM and MEM (weights, KV, FLOPs) of an op in the graph (an op outside it is the graph check's error)
    base = ((col.i_unit == 0) | (col.i_unit == 3)) & (ic.op >= 0) & (~ic.collective | ic.kind_in(("kv_read",)))
    slice_work = ic.kind_in(_SLICE_WORK)
    sel = np.flatnonzero(base & slice_work)
    mm = sel[ic.kind[sel] == ic.kinds.get("matmul", -1)]
    if len(mm):  # matmuls: their slice's share of the op's weights and FLOPs, all at once
        f = _matmul_fracs(ins_list, ic, mm)
        nbytes[mm], flops[mm] = f * ic.attr_of("weight_bytes")[ic.op[mm]], f * ic.attr_of("flops")[ic.op[mm]]
        sel = np.setdiff1d(sel, mm, assume_unique=True)
    if len(sel):  # the work depends on the slice and attrs alone: once per (op, kind, slice, attrs) object
        reps, inv = _group(sel, ic.op, ic.kind, ic.slice, ic.attrs)
        work = np.array([instruction_work(i, ops[i.op], graph, keys, p)
                         for i in map(ins_list.__getitem__, reps.tolist())], dtype=np.float64).reshape(-1, 2)
        nbytes[sel], flops[sel] = work[inv, 0], work[inv, 1]
    for k in np.flatnonzero(base & ~slice_work).tolist():
        ins = ins_list[k]
        nbytes[k], flops[k] = instruction_work(ins, ops[ins.op], graph, keys, p)
    bound = np.maximum(nbytes / mem, flops / mxm)
    for k in np.flatnonzero(col.i_busy + SLACK_CYCLES < bound):
        ins = p.instructions[k]
        rep.add("cost", f"{ins.unit} instruction {ins.id} on chip {ins.chip} ({ins.op} {ins.kind}) is busy "
                        f"{int(col.i_busy[k]):,} cycles, less than its work: {bound[k]:,.0f} cycles "
                        f"({nbytes[k]:,.0f} B at {mem:,.0f} B/cycle, {flops[k]:,.0f} FLOP at {mxm:,.0f}/cycle)")
    if not p.transfers:
        return
    nl = max(p.links, default=-1) + 1
    bpc = np.full(nl, np.inf)
    for lid, lk in p.links.items():
        bpc[lid] = lk.bytes_per_cycle
    slowest = slowest_link(col.trs, bpc)
    need = np.where(np.isfinite(slowest), col.t_bytes / slowest, 0.0)
    for k in np.flatnonzero(col.t_ser + SLACK_CYCLES < need):
        t = p.transfers[k]
        rep.add("cost", f"transfer {t.id} ({t.src_buffer} -> chip {t.dst_chip}) holds its links {t.ser_cycles:,} "
                        f"cycles, less than its {t.bytes:,} B need: {need[k]:,.0f} cycles")


# --- graph equivalence -----------------------------------------------------------------------
def _boxes(s: Mapping[str, Range], op: Op,
           graph: OpGraph) -> tuple[tuple[int, int, int, int], tuple[int, int], str]:
    """(x0, x1, y0, y1) of the op's output an instruction of slice `s` computes, the full (X, Y), and the axis
    names."""
    kind = op.kind
    if kind == "matmul":
        K, N = _matmul_extent(op)
        r, c = s.get("rows", (0, K)), s.get("cols", (0, N))
        return (r[0], r[1], c[0], c[1]), (K, N), "rows x cols"
    if kind in ("attention", "kv_write", "kv_read"):
        H, KVH = _kv_heads(graph, op.layer)
        full = H if kind == "attention" else KVH
        h = s.get("heads" if kind == "attention" else "kv_heads", (0, full))
        i, n = tuple(s.get("kv_stripe", (0, 1)))
        scale = 720720  # divisible by every stripe count up to 16 and most beyond: shares as integer ranges
        if scale % n:
            scale = n * 720720
        return (h[0], h[1], i * scale // n, (i + 1) * scale // n), (full, scale), "heads x key share"
    if kind == "rope":
        H, _ = _kv_heads(graph, op.layer)
        h = s.get("heads", (0, H))
        return (h[0], h[1], 0, 1), (H, 1), "heads"
    if kind == "experts":
        E = int(op.attrs["num_experts"])
        e = s.get("experts", (0, E))
        return (e[0], e[1], 0, 1), (E, 1), "experts"
    if kind in ("embed", "sample"):
        V = graph.model.vocab_size
        v = s.get("vocab", (0, V))
        return (v[0], v[1], 0, 1), (V, 1), "vocab"
    W = int(op.shape[1]) if len(op.shape) > 1 else 1
    c = s.get("cols", (0, W))
    return (c[0], c[1], 0, 1), (W, 1), "cols"


def _multiplicity(b: np.ndarray, full: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coverage count on the grid cut by every box edge: (counts[x, y], x cuts, y cuts)."""
    xs = np.unique(np.r_[b[:, 0], b[:, 1], 0, full[0]])
    ys = np.unique(np.r_[b[:, 2], b[:, 3], 0, full[1]])
    g = np.zeros((len(xs), len(ys)), np.int64)
    ix0, ix1 = np.searchsorted(xs, b[:, 0]), np.searchsorted(xs, b[:, 1])
    iy0, iy1 = np.searchsorted(ys, b[:, 2]), np.searchsorted(ys, b[:, 3])
    np.add.at(g, (ix0, iy0), 1)
    np.add.at(g, (ix1, iy0), -1)
    np.add.at(g, (ix0, iy1), -1)
    np.add.at(g, (ix1, iy1), 1)
    return g.cumsum(0).cumsum(1)[:-1, :-1], xs, ys


def _gap_1d(lo: list[int], hi: list[int], full: int) -> tuple[int, int] | None:
    """The first part of [0, full) no interval covers, or None."""
    cur = 0
    for a, z in sorted(zip(lo, hi, strict=True)):
        if a > cur:
            return cur, a
        cur = max(cur, z)
    return None if cur >= full else (cur, full)


def _check_graph(p: Program, graph: OpGraph, rep: VerifyReport, ic: _InsCodes, chips: np.ndarray) -> None:
    ins_list = p.instructions
    computed = ~ic.collective
    for k in np.flatnonzero(computed & (ic.op < 0)).tolist():
        ins = ins_list[k]
        rep.add("graph", f"instruction {ins.id} on chip {ins.chip} computes {ins.op}, which is not in the op graph")
    sel = np.flatnonzero(computed & (ic.op >= 0))
    sel = sel[np.argsort(ic.op[sel], kind="stable")]  # by op, each op's instructions in program order
    bounds = np.searchsorted(ic.op[sel], np.arange(len(ic.ops) + 1)).tolist()
    is_mm = ic.op_kind_is("matmul")[ic.op[sel]]
    mm_box = np.zeros((len(sel), 4), np.int64)  # matmuls: (rows, cols) boxes from their slices, all at once
    if is_mm.any():
        mm_box[is_mm] = _matmul_boxes(ins_list, ic, sel[is_mm])
    # (the other rows of mm_box get the other ops' boxes: only matmul rows are read below)
    clean = _clean_ops(ins_list, graph, ic, sel, is_mm, mm_box, chips)
    for op in graph.ops:
        c = ic.codes[op.name]
        if clean[c]:  # passes every test below (found on arrays)
            continue
        a, z = bounds[c], bounds[c + 1]
        members = sel[a:z].tolist()
        if not members and op.attrs.get("hidden_in"):  # the FFN side's input: received from the attention side
            continue
        if not members:
            rep.add("graph", f"op {op.name} ({op.kind}) of the op graph is never computed")
            continue
        if op.kind == "matmul" and is_mm[a]:  # `_boxes` of a matmul, from the arrays
            boxes = list(map(tuple, mm_box[a:z].tolist()))
            full, axes = _matmul_extent(op), "rows x cols"
        else:
            memo: dict[int, tuple] = {}  # equal boxes for the same slice object (the compiler shares equal slices)
            slices = map(ins_list.value, repeat("slice"), members)
            got = [memo.get(id(s)) or memo.setdefault(id(s), _boxes(s, op, graph)) for s in slices]
            full, axes = got[0][1], got[0][2]
            boxes = [g[0] for g in got]
        lst = members  # instruction indices
        X, Y = full
        bad = next((k for k, (x0, x1, y0, y1) in enumerate(boxes)
                    if x0 < 0 or y0 < 0 or x1 > X or y1 > Y or x1 < x0), None)
        if bad is not None:
            x0, x1, y0, y1 = boxes[bad]
            ins = ins_list[lst[bad]]
            rep.add("graph", f"op {op.name}: instruction {ins.id} on chip {ins.chip} computes {axes} "
                             f"{x0}:{x1} x {y0}:{y1}, outside its output {full}")
            continue
        if len(boxes) == 1 and boxes[0] == (0, X, 0, Y):
            continue
        keep = [k for k, b in enumerate(boxes) if b[1] > b[0]]  # an empty slice (more chips than experts)
        boxes, lst = [boxes[k] for k in keep], [lst[k] for k in keep]
        x_full = all(b[0] == 0 and b[1] == X for b in boxes)
        y_full = all(b[2] == 0 and b[3] == Y for b in boxes)
        if op.kind != "attention" and (x_full or y_full):  # a split along one axis (the common case)
            ax = 2 if x_full else 0
            gap = _gap_1d([b[ax] for b in boxes], [b[ax + 1] for b in boxes], full[ax // 2])
            if gap is not None:
                name = axes.split(" x ")[-1 if x_full else 0]
                rep.add("graph", f"op {op.name} leaves part of its output uncomputed: {name} {gap[0]}:{gap[1]}")
                continue
        else:
            cnt, xs, ys = _multiplicity(np.array(boxes, dtype=np.int64).reshape(-1, 4), full)
            if (cnt == 0).any():
                ix, iy = (int(v[0]) for v in np.nonzero(cnt == 0))
                rep.add("graph", f"op {op.name} leaves part of its output uncomputed: {axes} "
                                 f"{xs[ix]}:{xs[ix + 1]} x {ys[iy]}:{ys[iy + 1]}")
                continue
            if op.kind == "attention" and cnt.max() > 1:
                rep.add("graph", f"op {op.name} computes some (head, key share) {int(cnt.max())} times")
                continue
        chip_list = chips[lst].tolist()
        if len(set(chip_list)) == len(chip_list):
            continue
        b = np.array(boxes, dtype=np.int64).reshape(-1, 4)
        on = np.array(chip_list)
        uniq, counts = np.unique(on, return_counts=True)
        for c in uniq[counts > 1]:
            cc, _, _ = _multiplicity(b[on == c], full)
            if cc.max() > 1:
                rep.add("graph", f"op {op.name} computes part of its output twice on chip {int(c)}")


def _clean_ops(ins_list: InstructionTable, graph: OpGraph, ic: _InsCodes, sel: np.ndarray, is_mm: np.ndarray,
               box: np.ndarray, chips: np.ndarray) -> np.ndarray:
    """Per op code: does the op pass `_check_graph` for certain, by its common cases on arrays (every box inside
    the output; one box over it all, or boxes split along one axis leaving no gap; no chip twice)? An op not
    found clean here (attention, 2-D splits, any error) is checked one by one.

    `sel`: the computing instructions sorted by op code (program order within an op); `box`: the matmuls'
    boxes (rows of `is_mm`); its other rows are filled here from `_boxes`, once per (op, slice object)."""
    nops = len(ic.ops)
    sg = ic.op[sel]
    full = np.zeros((len(sel), 2), np.int64)  # each member's (X, Y): its op's, as its first member's `_boxes`
    ext = {}
    for c in np.unique(sg[is_mm]).tolist():
        ext[c] = _matmul_extent(ic.ops[c])
    if ext:
        codes = np.fromiter(ext, np.int64, len(ext))
        ext_a = np.zeros((nops, 2), np.int64)
        ext_a[codes] = np.array(list(ext.values()), np.int64).reshape(-1, 2)
        full[is_mm] = ext_a[sg[is_mm]]
    nm = np.flatnonzero(~is_mm)
    if len(nm):
        reps, inv = _group(sel[nm], ic.op, ic.slice)
        got = [_boxes(ins_list.value("slice", k), ic.ops[ic.op[k]], graph) for k in reps.tolist()]
        box[nm] = np.array([g[0] for g in got], np.int64).reshape(-1, 4)[inv]
        full[nm] = np.array([g[1] for g in got], np.int64).reshape(-1, 2)[inv]
    starts = np.searchsorted(sg, np.arange(nops))
    count = np.bincount(sg, minlength=nops)
    has = count > 0
    first = np.where(has, np.minimum(starts, max(len(sg) - 1, 0)), 0)
    X, Y = (full[first, 0][sg], full[first, 1][sg]) if len(sg) else (full[:, 0], full[:, 1])  # the op's (X, Y)
    x0, x1, y0, y1 = box.T
    bad = (x0 < 0) | (y0 < 0) | (x1 > X) | (y1 > Y) | (x1 < x0)
    op_bad = np.bincount(sg[bad], minlength=nops) > 0
    whole = (x0 == 0) & (x1 == X) & (y0 == 0) & (y1 == Y)
    single = has & (count == 1) & (np.bincount(sg[whole], minlength=nops) == 1)
    kept = x1 > x0
    nkept = np.bincount(sg[kept], minlength=nops)
    x_full = np.bincount(sg[kept & ~((x0 == 0) & (x1 == X))], minlength=nops) == 0
    y_full = np.bincount(sg[kept & ~((y0 == 0) & (y1 == Y))], minlength=nops) == 0
    attention = np.array([op.kind == "attention" for op in ic.ops], bool)
    split = has & ~op_bad & ~single & ~attention & (nkept > 0) & (x_full | y_full)
    # one-axis splits: no gap along the other axis (kept boxes by (op, lo, hi); each op's running end)
    m = np.flatnonzero(kept & split[sg])
    gap = np.zeros(nops, bool)
    dup = np.zeros(nops, bool)
    if len(m):
        g = sg[m]
        along_y = x_full[g]
        lo = np.where(along_y, y0[m], x0[m])
        hi = np.where(along_y, y1[m], x1[m])
        f = np.where(along_y, Y[m], X[m])
        o = np.lexsort((hi, lo, g))
        g, lo, hi, f = g[o], lo[o], hi[o], f[o]
        seg = np.r_[True, g[1:] != g[:-1]]
        rank = np.cumsum(seg) - 1
        big = int(hi.max(initial=0)) + 1
        shift = rank * big
        run = np.maximum.accumulate(hi + shift) - shift  # each op's running end
        prev = np.where(seg, 0, np.r_[0, run[:-1]])
        gap[g[lo > prev]] = True
        end = np.r_[seg[1:], True]
        gap[g[end & (run < f)]] = True
        # no chip computes two of the op's kept boxes
        c = chips[sel[m]]
        o = np.lexsort((c, sg[m]))
        gc, cc = sg[m][o], c[o]
        dup[gc[1:][(gc[1:] == gc[:-1]) & (cc[1:] == cc[:-1])]] = True
    return (single & ~op_bad) | (split & ~gap & ~dup)


# --- partial sums ------------------------------------------------------------------------------
def _check_partials(p: Program, rep: VerifyReport, col: Columns, prod, ic: _InsCodes) -> None:
    """Every partial is read; every final reduction reaches each leaf partial sum of its op exactly once.

    The leaves a reduction reaches are found for all reductions at once on arrays (walking back through
    transfers and pass-on instructions, counting paths); a reduction found wanting (or in a cycle) is walked
    again one by one (`_reduction_errors`) for its messages."""
    writes = prod[0]
    nb, ins_list = col.nbuf, p.instructions
    n = len(ins_list)
    read = np.zeros(nb, bool)
    read[col.r_buf] = True
    read[col.t_sbuf] = True
    made_by = np.full(nb, -1, index_dtype(n))  # instruction index writing each buffer
    made_by[col.i_out] = np.arange(n)
    sent_from = np.full(nb, -1, col.idx_dtype)  # source buffer of the transfer writing it
    sent_from[col.t_dbuf] = col.t_sbuf
    passes = np.zeros(n + 1, bool)  # reduce/concat/copy: pass partials on (index -1: no producer)
    passes[:-1] = ic.kind_in(LEAF_EXCLUDED)
    nd = len(col.b_partial)  # declared buffers: buffer k of the Program has id k in `col.bid`
    pcode = np.zeros(nb, np.int8)  # 0: final value, 1: sum, 2: argmax, 3: any other partial
    pcode[:nd] = np.fromiter(map(_PARTIAL_CODE.get, col.b_partial, repeat(3)), np.int8, nd)
    unread = (pcode[:nd] != 0) & (writes[:nd] > 0) & ~read[:nd]
    unread = np.flatnonzero(unread).tolist()
    for _, b in col.declared_at(unread):
        rep.add("partial", f"partial {b.partial} {b.id} of op {b.op} on chip {b.chip} never reaches a reduction")
    is_leaf = np.zeros(nb, bool)
    is_leaf[:nd] = ((pcode[:nd] == 1) | (pcode[:nd] == 2)) & (made_by[:nd] >= 0) & ~passes[made_by[:nd]]
    leaf_idx = np.flatnonzero(is_leaf)
    groups: dict[tuple[str, str], int] = {}
    gid = np.full(nb, -1, col.idx_dtype)  # leaf buffer -> its (op, partial) group
    b_op, b_partial = col.b_op, col.b_partial
    gid[leaf_idx] = [groups.setdefault((b_op[k], b_partial[k]), len(groups)) for k in leaf_idx.tolist()]
    want_size = np.bincount(gid[leaf_idx], minlength=len(groups))
    has_leaves = {o for o, _ in groups}
    # the final reductions (rows) and their (op, kind) group
    i_out = col.i_out
    red = np.flatnonzero(ic.kind == ic.kinds.get("reduce", -1))
    o = i_out[red]
    red = red[(o < nd) & (pcode[np.minimum(o, nb - 1)] == 0)]  # not undeclared (a dependency error) nor a partial
    # the op's name and whether the reduction is an argmax: per op code and per attrs object
    names = list(ic.codes)
    leafy_op = np.array([name in has_leaves for name in names] + [False], bool)
    _, first, ainv = np.unique(ic.attrs[red], return_index=True, return_inverse=True)
    argmax = np.array([ins_list.value("attrs", k).get("fn") == "argmax" for k in red[first].tolist()], bool)
    argmax = argmax.reshape(-1)[ainv.reshape(-1)] if len(red) else np.zeros(0, bool)
    code = ic.op[red]
    keep = leafy_op[code] | (code < 0)  # an op outside the graph: by name below
    red, code, argmax = red[keep], code[keep], argmax[keep]
    inside = code >= 0
    rg = np.full(len(red), -1, np.int64)  # each reduction's (op, kind) group of leaves
    pair, pinv = np.unique(code[inside] * 2 + argmax[inside], return_inverse=True)
    rg[inside] = np.array([groups.get((names[q // 2], "argmax" if q % 2 else "sum"), -1) for q in pair.tolist()],
                          np.int64)[pinv.reshape(-1)]
    for j in np.flatnonzero(~inside).tolist():
        name = ins_list[red[j]].op
        inside[j] = name in has_leaves
        rg[j] = groups.get((name, "argmax" if argmax[j] else "sum"), -1)
    rows, rg = red[inside].tolist(), rg[inside]
    if not rows:
        return
    ptr = np.r_[0, np.cumsum(np.bincount(col.r_ins, minlength=n))]
    r_buf = col.r_buf
    start = made_by[i_out[np.array(rows)]]  # the instruction writing the reduction's output (itself, normally)
    width = int(want_size.max(initial=0))
    pos = np.zeros(nb, col.idx_dtype)  # a leaf's rank within its group
    order = leaf_idx[np.argsort(gid[leaf_idx], kind="stable")]
    pos[order] = np.arange(len(order)) - np.repeat(np.cumsum(want_size) - want_size, want_size)
    graph = (sent_from, made_by, passes, r_buf, ptr)
    bad = np.zeros(len(rows), bool)
    block = max(1, min(2048, (1 << 21) // max(width, 1)))  # rows at a time (memory: their paths, their grid)
    for lo in range(0, len(rows), block):
        hi = min(lo + block, len(rows))
        bad[lo:hi] = _reductions_wanting(start[lo:hi], rg[lo:hi], graph, gid, pos, want_size, width, nb)
    if not bad.any():
        return
    leaves: dict[tuple[str, str], set[int]] = defaultdict(set)
    for k in leaf_idx.tolist():
        leaves[(b_op[k], b_partial[k])].add(k)
    walk = (sent_from.tolist(), made_by.tolist(), passes.tolist(), r_buf.tolist(), ptr.tolist())
    for row in np.flatnonzero(bad).tolist():
        _reduction_errors(ins_list[rows[row]], int(start[row]), leaves, walk, col.names, rep)


_PARTIAL_CODE = {None: 0, "sum": 1, "argmax": 2}


def _reductions_wanting(start: np.ndarray, rg: np.ndarray, graph: tuple, gid: np.ndarray, pos: np.ndarray,
                        want_size: np.ndarray, width: int, nb: int) -> np.ndarray:
    """Per reduction (instruction `start`, leaf group `rg`): does it miss a leaf of its group, reach a
    buffer by more than one path, or not resolve (a cycle)? Paths are expanded back through copies and
    pass-on instructions, all reductions at once, and counted per (reduction, leaf) on a dense grid."""
    sent_from, made_by, passes, r_buf, ptr = graph
    rows = len(start)
    cnt = ptr[start + 1] - ptr[start]
    er = np.repeat(np.arange(rows), cnt)  # (row, buffer) pairs, one per path
    eb = r_buf[np.repeat(ptr[start] - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))]
    done_r, done_b = [], []
    bad = np.zeros(rows, bool)
    for _ in range(64):
        if not len(er):
            break
        src = sent_from[eb]
        mk = made_by[eb]
        copy = src >= 0
        expand = ~copy & passes[mk]
        leafy = ~copy & ~expand
        done_r.append(er[leafy])
        done_b.append(eb[leafy])
        xm = mk[expand]
        xc = ptr[xm + 1] - ptr[xm]
        xr = np.repeat(er[expand], xc)
        xb = r_buf[np.repeat(ptr[xm] - np.cumsum(xc) + xc, xc) + np.arange(int(xc.sum()))]
        er = np.concatenate([er[copy], xr])
        eb = np.concatenate([src[copy], xb])
        if len(er) > 20_000_000:  # path explosion (a corrupted program): walked one by one instead
            break
    bad[er] = True  # still unresolved: a cycle or an explosion
    fr, fb = np.concatenate(done_r), np.concatenate(done_b)
    in_want = (gid[fb] == rg[fr]) & (rg[fr] >= 0)
    grid = np.bincount(fr[in_want] * width + pos[fb[in_want]], minlength=rows * width).reshape(rows, width)
    bad |= grid.max(axis=1, initial=0) > 1
    bad |= (rg >= 0) & (grid.sum(axis=1) < want_size[np.maximum(rg, 0)])
    other = ~in_want  # terminals outside the group: only being reached twice matters
    key, times = np.unique(fr[other] * nb + fb[other], return_counts=True)
    bad[key[times > 1] // nb] = True
    return bad


def _reduction_errors(ins: Instruction, k0: int, leaves: dict[tuple[str, str], set[int]], walk: tuple,
                      names: list[str], rep: VerifyReport) -> None:
    """The messages of one reduction (instruction `k0` writes its output): partial sums it misses, or
    counts more than once."""
    sent, made, pass_l, rbuf, ptr = walk
    kind = "argmax" if ins.attrs.get("fn") == "argmax" else "sum"
    want = leaves.get((ins.op, kind), set())
    memo: dict[int, tuple[frozenset[int], bool]] = {}
    sets = [_leaf_set(k, memo, sent, made, pass_l, rbuf, ptr) for k in rbuf[ptr[k0]:ptr[k0 + 1]]]
    got = frozenset().union(*(x[0] for x in sets))
    if all(x[1] for x in sets) and len(got) == sum(len(x[0]) for x in sets):  # every leaf reached once
        missing, twice = sorted(names[k] for k in want - got), []
    else:  # some leaf reached twice: count each path (the error's details)
        found = _leaf_counts(rbuf[ptr[k0]:ptr[k0 + 1]], sent, made, pass_l, rbuf, ptr)
        missing = sorted(names[k] for k in want - set(found))
        twice = sorted(names[k] for k, n in found.items() if n > 1)
    if missing:
        rep.add("partial", f"reduction of op {ins.op} on chip {ins.chip} misses {len(missing)} of {len(want)} "
                           f"partial sums (e.g. {missing[0]})")
    if twice:
        rep.add("partial", f"reduction of op {ins.op} on chip {ins.chip} counts partial sum {twice[0]} "
                           f"more than once")


def _leaf_counts(start: list[int], sent: list[int], made: list[int], pass_l: list[bool], rbuf: list[int],
                 ptr: list[int]) -> dict[int, int]:
    """Leaf partials (buffer -> paths) a reduction over buffers `start` reaches, walking back through
    transfers and pass-on instructions (reduce / concat / copy of partials)."""
    found: dict[int, int] = {}
    stack = list(start)
    while stack:
        k = stack.pop()
        if sent[k] >= 0:
            stack.append(sent[k])
        elif made[k] >= 0 and pass_l[made[k]]:
            stack.extend(rbuf[ptr[made[k]]:ptr[made[k] + 1]])
        else:
            found[k] = found.get(k, 0) + 1
    return found


def _leaf_set(k0: int, memo: dict[int, tuple[frozenset[int], bool]], sent: list[int], made: list[int],
              pass_l: list[bool], rbuf: list[int], ptr: list[int]) -> tuple[frozenset[int], bool]:
    """`_leaf_counts([k0])` as (leaves, every one reached by exactly one path), memoised per buffer: the
    levels of a hierarchical all-reduce share their partial sums, so each is walked once, not per reader."""
    if k0 in memo:
        return memo[k0]
    stack, entered = [k0], set()
    while stack:
        k = stack[-1]
        if k in memo:
            stack.pop()
            continue
        if sent[k] >= 0:
            kids = [sent[k]]
        elif made[k] >= 0 and pass_l[made[k]]:
            kids = rbuf[ptr[made[k]]:ptr[made[k] + 1]]
        else:
            memo[k] = (frozenset((k,)), True)
            stack.pop()
            continue
        todo = []
        for c in kids:  # leaves and copies of leaves resolved here rather than through the stack
            if c in memo:
                continue
            src = sent[c]
            if src < 0:
                if made[c] < 0 or not pass_l[made[c]]:
                    memo[c] = (frozenset((c,)), True)
                    continue
            elif sent[src] < 0 and (made[src] < 0 or not pass_l[made[src]]):
                x = memo.get(src)
                if x is None:
                    x = memo[src] = (frozenset((src,)), True)
                memo[c] = x
                continue
            todo.append(c)
        if todo:
            if k in entered:  # a cycle: no well-defined leaves (the dependency check reports it)
                memo[k] = (frozenset(), False)
                stack.pop()
            else:
                entered.add(k)
                stack.extend(todo)
            continue
        parts = [memo[c] for c in kids]
        if len(parts) == 1:
            memo[k] = parts[0]
        else:
            u = frozenset().union(*(x[0] for x in parts))
            memo[k] = (u, all(x[1] for x in parts) and len(u) == sum(len(x[0]) for x in parts))
        stack.pop()
    return memo[k0]


# --- the sampled token -----------------------------------------------------------------------
def _check_token(p: Program, graph: OpGraph, rep: VerifyReport, col: Columns, prod) -> None:
    ph = p.phase
    if "sample" not in {op.name for op in graph.ops}:
        return
    writes = prod[0]
    have: set[int] = set()
    nd = len(col.b_op)
    sample = np.flatnonzero(np.fromiter(map(operator.eq, col.b_op, repeat("sample")), bool, nd)).tolist()
    for k, (key, b) in zip(sample, col.declared_at(sample), strict=True):
        if b.partial is None and writes[col.index(key, b.id, k)]:
            have.add(b.chip)
    if not have:
        rep.add("token", "the sampled token is never produced (no final sample buffer)")
        return
    if ph["kind"] == "prefill" and int(ph["new_tokens"]) > 1:
        return  # a prefill chunk's sample is not the next step's input
    emb = [st for st in p.layout.stage_list if st.embed and st.replica == 0]
    for st in emb:
        for c in st.chips:
            if c not in have:
                rep.add("token", f"the sampled token never leaves the last stage for embedding chip {c} "
                                 f"(the next step's input)")


# --- weights -------------------------------------------------------------------------------------
def weight_need(ins: Instruction, op: Op, graph: OpGraph) -> float:
    """Bytes of `op.weight` this instruction's slice reads."""
    if op.kind == "matmul":
        return _matmul_frac(ins, op) * op.weight_bytes
    if op.kind == "experts":
        lo, hi = ins.slice.get("experts", (0, op.attrs["num_experts"]))
        return (hi - lo) * op.attrs["expert_bytes"]
    if op.kind == "embed":
        lo, hi = ins.slice.get("vocab", (0, graph.model.vocab_size))
        return (hi - lo) * op.weight_bytes / max(op.tokens, 1)
    if op.kind == "norm" and op.attrs.get("per_head"):
        return op.weight_bytes * op.attrs["per_head"] / max(op.shape[1], 1)
    return op.weight_bytes


def _check_weights(p: Program, graph: OpGraph, rep: VerifyReport, ops: dict[str, Op], ic: _InsCodes,
                   chips: np.ndarray) -> None:
    # the weight regions: the weight each holds, found once per region name (names repeat on every chip)
    regs = p.regions
    w_kind = np.array([k == "weights" for k in regs.kinds], bool)
    w_mask = w_kind[regs.column("kind")]
    w_names = regs.column("name")[w_mask].tolist()  # each weight region's name code, then the weight it holds
    holds: dict[int, str | None] = {}  # region name code -> the weight it holds (None: none)
    for code in set(w_names):
        name = regs.names[code]
        nm = name[2:] if name.startswith("w:") else name
        op = ops.get(nm) or ops.get(nm.split("#", 1)[0])
        holds[code] = op.weight if op is not None and op.weight else None
    r_w = list(map(holds.__getitem__, w_names))
    r_chip = regs.column("chip")[w_mask].astype(np.int64)
    r_size = regs.column("size_bytes")[w_mask]
    ins_list = p.instructions
    cand = np.flatnonzero((ic.op >= 0) & ~ic.collective)
    if not len(cand):
        return
    # the weight read: once per attrs object (the compiler shares equal ones)
    _, first, ainv = np.unique(ic.attrs[cand], return_index=True, return_inverse=True)
    w_of = [ins_list.value("attrs", k).get("weight") or None for k in cand[first].tolist()]
    wcode = dict(zip(dict.fromkeys(w for w in w_of if w is not None), count()))
    gw = np.fromiter(map(wcode.get, w_of, repeat(-1)), np.int64, len(w_of))[ainv.reshape(-1)]
    cand, gw = cand[gw >= 0], gw[gw >= 0]
    if not len(cand):
        return
    weight = list(wcode)
    # the bytes needed: matmuls at once from their slices; other ops once per (op, slice object)
    need = np.zeros(len(cand))
    needs: list[float | None] = [None] * len(cand)  # the Python figure where one was computed (messages)
    is_mm = ic.op_kind_is("matmul")[ic.op[cand]]
    mm = cand[is_mm]
    if len(mm):
        need[is_mm] = _matmul_fracs(ins_list, ic, mm) * ic.attr_of("weight_bytes")[ic.op[mm]]
    rest = np.flatnonzero(~is_mm)
    if len(rest):
        reps, inv = _group(cand[rest], ic.op, ic.slice)
        got = [weight_need(ins_list[k], ic.ops[ic.op[k]], graph) for k in reps.tolist()]
        need[rest] = np.array(got, np.float64)[inv]
        for j, g in zip(rest.tolist(), inv.tolist(), strict=True):
            needs[j] = got[g]
    nw = max(len(wcode), 1)
    # bytes each chip holds of each weight read (summed in region order), looked up per instruction on the
    # (chip, weight) code
    rw = np.fromiter(map(wcode.get, r_w, repeat(-1)), np.int64, len(r_w))
    keep = rw >= 0
    hk, hinv = np.unique(r_chip[keep] * nw + rw[keep], return_inverse=True)
    hv = np.bincount(hinv.reshape(-1), weights=r_size[keep].astype(np.float64), minlength=len(hk))
    q = chips[cand] * nw + gw
    pos = np.minimum(np.searchsorted(hk, q), max(len(hk) - 1, 0))
    have = np.where(hk[pos] == q, hv[pos], 0.0) if len(hk) else np.zeros(len(q))
    missing = (need > 0) & (have <= 0)
    short = ~missing & (have + 1 < need)
    for j in np.flatnonzero(missing | short).tolist():  # in instruction order; the figures as Python numbers
        ins = ins_list[cand[j]]
        w = weight[gw[j]]
        need_b = needs[j] if needs[j] is not None else float(need[j])
        if missing[j]:
            rep.add("weights", f"{ins.op} on chip {ins.chip} reads weight {w}, which no weight region there holds")
        else:
            rep.add("weights", f"{ins.op} on chip {ins.chip} reads {need_b:,.0f} B of weight {w}; its chip holds "
                               f"{float(have[j]):,.0f} B")


class _InsCodes:
    """Per instruction, integer codes to group equal work: op (index in the graph's ops, -1 if not there),
    kind, and the identities of its slice and attrs dicts (the compiler shares equal ones)."""

    def __init__(self, ins: InstructionTable, ops: dict[str, Op]) -> None:
        self.codes = code = dict(zip(ops, count()))  # op name -> its code
        self.op = _spread(ins, "op", lambda v: np.fromiter(map(code.get, v, repeat(-1)), np.int64, len(v)))
        # kinds numbered in order of first use (the table's kind codes, renumbered)
        kc = ins.column("kind_code")
        used, first = np.unique(kc, return_index=True)
        used = used[np.argsort(first)].tolist()
        self.kinds = {ins.kind_values[c]: j for j, c in enumerate(used)}
        lut = np.full(len(ins.kind_values), -1, np.int64)
        lut[used] = np.arange(len(used))
        self.kind = lut[kc]
        self.slice = _spread(ins, "slice", lambda v: np.fromiter(map(id, v), np.int64, len(v)))
        self.attrs = _spread(ins, "attrs", lambda v: np.fromiter(map(id, v), np.int64, len(v)))
        self.collective = self.kind_in(COLLECTIVE_KINDS)
        self.ops = list(ops.values())  # by code
        self._attr: dict[str, np.ndarray] = {}

    def attr_of(self, name: str) -> np.ndarray:
        """An op attribute (`weight_bytes`, `flops`) by op code, as float64."""
        if name not in self._attr:
            self._attr[name] = np.array([getattr(op, name) for op in self.ops], np.float64)
        return self._attr[name]

    def op_kind_is(self, kind: str) -> np.ndarray:
        """Per op code: is the op of this kind."""
        return np.array([op.kind == kind for op in self.ops], bool)

    def kind_in(self, kinds: tuple[str, ...]) -> np.ndarray:
        """Mask of the instructions whose kind is one of `kinds`."""
        return np.isin(self.kind, [self.kinds[k] for k in kinds if k in self.kinds])


def _matmul_extents_and_slices(ins_list: InstructionTable, ic: _InsCodes,
                               idx: np.ndarray) -> tuple[np.ndarray, list[dict], np.ndarray]:
    """For the matmul instructions `idx`: each one's op (K, N) extent (computed once per op), the distinct
    slice objects among them, and each instruction's position in that list."""
    uo, oinv = np.unique(ic.op[idx], return_inverse=True)
    ext = np.array([_matmul_extent(ic.ops[c]) for c in uo.tolist()], np.int64).reshape(-1, 2)[oinv.reshape(-1)]
    _, first, sinv = np.unique(ic.slice[idx], return_index=True, return_inverse=True)
    return ext, [ins_list.value("slice", k) for k in idx[first].tolist()], sinv.reshape(-1)


def _matmul_fracs(ins_list: InstructionTable, ic: _InsCodes, idx: np.ndarray) -> np.ndarray:
    """`_matmul_frac` of the instructions `idx` (their ops matmuls), once per op and per slice object: the same
    float operations in the same order."""
    ext, slices, sinv = _matmul_extents_and_slices(ins_list, ic, idx)
    k_full, n_full = ext[:, 0], ext[:, 1]
    dims = []  # per slice object: (has rows, rows width, has cols, cols width)
    for sl in slices:
        has_r, has_c = "rows" in sl, "cols" in sl
        dims.append((has_r, _width(sl["rows"]) if has_r else 0, has_c, _width(sl["cols"]) if has_c else 0))
    d = np.array(dims, np.int64).reshape(-1, 4)[sinv]
    rows = np.where(d[:, 0] > 0, d[:, 1], k_full)
    cols = np.where(d[:, 2] > 0, d[:, 3], n_full)
    return rows / np.maximum(k_full, 1) * cols / np.maximum(n_full, 1)


def _matmul_boxes(ins_list: InstructionTable, ic: _InsCodes, idx: np.ndarray) -> np.ndarray:
    """`_boxes` (rows x cols) of the matmul instructions `idx`, once per op and per slice object."""
    ext, slices, sinv = _matmul_extents_and_slices(ins_list, ic, idx)
    dims = []  # per slice object: has rows, rows, has cols, cols
    for sl in slices:
        r, c = sl.get("rows", (0, 0)), sl.get("cols", (0, 0))
        dims.append(("rows" in sl, r[0], r[1], "cols" in sl, c[0], c[1]))
    d = np.array(dims, np.int64).reshape(-1, 6)[sinv]
    out = np.empty((len(idx), 4), np.int64)
    out[:, 0] = np.where(d[:, 0] > 0, d[:, 1], 0)
    out[:, 1] = np.where(d[:, 0] > 0, d[:, 2], ext[:, 0])
    out[:, 2] = np.where(d[:, 3] > 0, d[:, 4], 0)
    out[:, 3] = np.where(d[:, 3] > 0, d[:, 5], ext[:, 1])
    return out


def _group(idx: np.ndarray, *cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions `idx` grouped on equal values in every column: (first position of each group, the group of
    each position)."""
    code = np.zeros(len(idx), np.int64)
    size = 1
    for c in cols:
        u, inv = np.unique(c[idx], return_inverse=True)
        if size * len(u) >= 1 << 62:  # keep the combined code in int64
            size_u, code = np.unique(code, return_inverse=True)
            size = len(size_u)
        code = code * len(u) + inv.reshape(-1)
        size *= len(u)
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    return idx[first], inv.reshape(-1)


def check_work(p: Program, graph: OpGraph, arch: Arch, rep: VerifyReport, col: Columns, prod) -> None:
    """Cost, graph equivalence, partial sums, the sampled token and weight residency (module doc)."""
    ops = {op.name: op for op in graph.ops}
    ic = _InsCodes(p.instructions, ops)
    _check_cost(p, graph, arch, rep, col, ops, ic)
    release_free_memory()  # each check's scratch is handed back before the next one's (peak memory)
    _check_graph(p, graph, rep, ic, col.i_chip)
    release_free_memory()
    _check_partials(p, rep, col, prod, ic)
    _check_token(p, graph, rep, col, prod)
    release_free_memory()
    _check_weights(p, graph, rep, ops, ic, col.i_chip)
