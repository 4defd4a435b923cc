"""Map each graph op onto its stage's chips: slices, collectives, transfers, timed by the Scheduler.

Inside a stage of `tp` chips the split is Megatron-style: the residual stream
is replicated; q/k/v projections split by heads (KV heads replicated when the
split is finer than the KV heads), the gate/up projection by intermediate
columns, o_proj and down by rows (partial sums, all-reduced), experts by
expert ranges (partial sums), logits by vocabulary. A full-attention layer may
also split each stream's KV along the sequence over `kv_seq_split` chips:
each computes attention over its key chunk, the chunks' log-sum-exps are
exchanged (a few bytes) and every chip rescales its own chunk's output before
o_proj, whose all-reduce then also sums over the chunks (exact, flash-decoding
style). Stages hand the residual stream to the next stage chip by chip.

Which chip holds which KV position is a property of the layout, not of the
step: `kv_block`-token blocks are striped round-robin over a layer's holders
(`KvStripe`), so every compiled step of a deployment (prefill, then decode at a
growing context) writes and reads the same positions on the same chips, and
each holder's share is balanced to within a block at any context.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from lpxsim.graph import Op, OpGraph
from lpxsim.lpu.arch import Arch
from lpxsim.lpu.layout import Layout, balanced, heads_split, helper_stages
from lpxsim.lpu.program import Range, Stage, stripe_count
from lpxsim.lpu.schedule import Scheduler
from lpxsim.specs.accounting import kv_elements_per_token
from lpxsim.specs.precision import get_precision

REP, COLS, SUM = "rep", "cols", "sum"
ALLREDUCE_DIRECT_MAX_BYTES = 64 * 1024  # above this, reduce-scatter + all-gather (fewer bytes per link)
HANDOFF_SPLIT_BYTES = 32 * 1024  # above this, a stage hand-off sends slices and all-gathers them


@dataclass
class Dist:
    """How an op's output is spread over chips: kind + per-chip buffer id and column range."""

    kind: str
    bufs: dict[int, str]
    cols: dict[int, Range] = field(default_factory=dict)
    width: int = 0


@dataclass(frozen=True)
class KvStripe:
    """A holder's fixed share of one stream's KV: positions p with (p // block) % count == index."""

    index: int = 0
    count: int = 1
    block: int = 1

    def owned(self, lo: int, hi: int) -> int:
        """Positions of [lo, hi) this share holds."""
        if hi <= lo:
            return 0
        return stripe_count(hi, self.index, self.count, self.block) - stripe_count(lo, self.index, self.count,
                                                                                   self.block)

    def slices(self) -> tuple[dict[str, Range], dict[str, int]]:
        """The Program's slice and attrs entries for this share (none when it is the whole KV)."""
        if self.count == 1:
            return {}, {}
        return {"kv_stripe": (self.index, self.count)}, {"kv_block": self.block}


@dataclass
class AttnSplit:
    """Per chip of a stage: query heads, KV heads, and the KV share of one layer's attention."""

    heads: dict[int, Range]
    kv_heads: dict[int, Range]
    seq_index: dict[int, int]
    seq_shards: int
    parts: dict[int, list[tuple[int, KvStripe]]] = field(default_factory=dict)  # (holder chip, share): own first


@dataclass
class ChipUse:
    """Bytes per chip the placement must provide."""

    weights: dict[str, float] = field(default_factory=dict)  # region name -> bytes
    kv: dict[str, float] = field(default_factory=dict)


class Lowerer:
    """Emits instructions/transfers for every op of `graph` over `stages` of one replica."""

    def __init__(self, graph: OpGraph, arch: Arch, sched: Scheduler, layout: Layout, stages: list[Stage]) -> None:
        self.g, self.arch, self.s, self.layout = graph, arch, sched, layout
        self.m = graph.model
        self.stages = [st for st in stages if st.replica == 0]
        self.wprec = get_precision(graph.weights, "weights")
        self.wb = self.wprec.bytes_per_element
        self.kvb = get_precision(graph.kv, "kv").bytes_per_element
        self.ab = graph.act_bytes_per_element
        self.M = graph.phase.tokens
        self.dist: dict[str, Dist] = {}
        self.use: dict[int, ChipUse] = {}
        self._weight_names: dict[tuple[str, str], str] = {}  # (op, tag) -> its weight region name
        self.attn: dict[int, AttnSplit] = {}
        self.remote_kv: dict[tuple[int, int, int], tuple[str, str]] = {}  # (layer, owner, holder) -> (kv_write, q)
        self.kv_gather: dict[int, bool] = {}  # layer -> its owners gather the helpers' KV (`emit._gathers`)
        self.k_rope: dict[tuple[int, int], str] = {}  # (layer, owner) -> its roped keys alone (shipped to helpers)
        self.mxm_rate = arch.mxm_flops_per_cycle.get(self.wprec.compute) or min(arch.mxm_flops_per_cycle.values())
        self._vb, self._feed = arch.vector_bytes, arch.feed_bytes_per_cycle  # hot in mem_cycles

    # --- helpers ------------------------------------------------------------------------
    def stage_of(self, layer: int) -> Stage:
        L = self.m.num_layers
        for st in self.stages:
            if layer == -1 and st.embed:
                return st
            if layer == L and st.head:
                return st
            if st.layers[0] <= layer < st.layers[1]:
                return st
        raise AssertionError(f"no stage holds layer {layer}")

    def chip_use(self, chip: int) -> ChipUse:
        return self.use.setdefault(chip, ChipUse())

    def add_weight(self, chip: int, op: Op, nbytes: float, tag: str = "") -> None:
        if nbytes > 0:
            name = self._weight_names.get((op.name, tag))
            if name is None:  # one str per region name, shared by the chips holding a slice (memory: ~10^5)
                name = self._weight_names[(op.name, tag)] = f"w:{op.name}{tag}"
            self.chip_use(chip).weights[name] = nbytes

    def mxm_cycles(self, flops: float, rate: float | None = None) -> float:
        """Cycles of `flops` on the MXM at `rate` FLOP/cycle (the weights' compute format by default);
        the work is recorded for the next instruction (`Scheduler.note_work`, inline: the hot path)."""
        rate = rate or self.mxm_rate
        w = self.s._work
        w[1] += flops
        if rate:
            w[2] = rate
        return flops / rate

    def mem_cycles(self, nbytes: float) -> float:
        """Cycles to stream `nbytes` between SRAM and a unit: whole 320-byte vectors at the feed rate."""
        vb = self._vb
        self.s._work[0] += nbytes  # `Scheduler.note_work(nbytes=...)`, inline
        return math.ceil(nbytes / vb) * vb / self._feed

    def vxm_cycles(self, elems: float, nbytes: float) -> float:
        self.s._work[3] += elems  # `Scheduler.note_work(ops=...)`, inline
        return max(elems / self.arch.vxm_ops_per_cycle, self.mem_cycles(nbytes))

    def rep_on(self, name: str, chips: tuple[int, ...]) -> dict[int, str]:
        """Buffers holding op `name`'s full value on each of `chips` (all-reduce / hand-off as needed)."""
        d = self.dist[name]
        if d.kind == SUM:
            d = self.allreduce(name)
        elif d.kind == COLS:
            d = self.allgather(name)
        missing = [c for c in chips if c not in d.bufs]
        if not missing:
            return {c: d.bufs[c] for c in chips}
        srcs = sorted(d.bufs)
        nbytes0 = self.s.buffers.bytes_of(d.bufs[srcs[0]])
        if (len(missing) == len(chips) == len(srcs) > 1 and nbytes0 > HANDOFF_SPLIT_BYTES
                and d.width >= len(chips)):
            return self._split_handoff(name, d, srcs, list(chips))
        for i, c in enumerate(missing):
            src = srcs[i % len(srcs)] if len(srcs) != len(chips) else srcs[chips.index(c)]
            buf = d.bufs[src]
            nbytes = self.s.buffers.bytes_of(buf)
            dst = self.s.buffer(f"{name}@{c}<{src}", c, name, nbytes)
            self.s.send(src, c, buf, dst, nbytes)
            d.bufs[c] = dst
        return {c: d.bufs[c] for c in chips}

    def _split_handoff(self, name: str, d: Dist, srcs: list[int], dsts: list[int]) -> dict[int, str]:
        """Large stage hand-off: chip j sends column slice j to its counterpart, then an all-gather."""
        n, width = len(dsts), d.width
        row_bytes = self.s.buffers.bytes_of(d.bufs[srcs[0]]) / width
        bufs, cols = {}, {}
        for i, (src, dst) in enumerate(zip(srcs, dsts, strict=True)):
            lo, hi = balanced(width, n, i)
            part = (hi - lo) * row_bytes
            bid = self.s.buffer(f"{name}#h@{dst}<{src}", dst, name, part, cols=(lo, hi))
            self.s.send(src, dst, d.bufs[src], bid, part)
            bufs[dst], cols[dst] = bid, (lo, hi)
        out = self._gather(name, Dist(COLS, bufs, cols, width), dsts)
        d.bufs.update(out.bufs)
        return {c: d.bufs[c] for c in dsts}

    # --- collectives --------------------------------------------------------------------
    def _node_groups(self, chips: list[int]) -> list[list[int]]:
        cpn = self.s.graph.topology.chips_per_node
        groups: dict[int, list[int]] = {}
        for c in chips:
            groups.setdefault(c // cpn, []).append(c)
        return list(groups.values())

    def _reduce_local(self, name: str, chip: int, inputs: tuple[str, ...], out: str, nbytes: float,
                      partial_out: bool) -> None:
        self.s.buffer(out, chip, name, nbytes, partial="sum" if partial_out else None)
        elems = nbytes / self.ab * len(inputs)
        self.s.instr(chip, "VXM", name, "reduce", inputs, out, self.vxm_cycles(elems, nbytes * len(inputs)))

    def allreduce(self, name: str) -> Dist:
        """Sum the partials of `name` onto every chip that holds one (direct, RS+AG, or by node)."""
        d = self.dist[name]
        chips = sorted(d.bufs)
        nbytes = float(self.s.buffers.bytes_of(d.bufs[chips[0]]))
        groups = self._node_groups(chips)
        if len(chips) == 1:
            out = Dist(REP, dict(d.bufs), width=d.width)
        elif len(groups) == 1 and nbytes > ALLREDUCE_DIRECT_MAX_BYTES and d.width >= len(chips):
            out = self._rs_ag(name, d, chips, nbytes)
        else:
            level = self._direct_level(name, d.bufs, groups, nbytes, "n", partial_out=len(groups) > 1)
            if len(groups) > 1:
                cpn = self.s.graph.topology.chips_per_node
                rails: dict[int, list[int]] = {}
                for c in chips:
                    rails.setdefault(c % cpn, []).append(c)
                level = self._direct_level(name, level, list(rails.values()), nbytes, "r", partial_out=False)
            out = Dist(REP, level, width=d.width)
        self.dist[name] = out
        return out

    def _direct_level(self, name: str, bufs: dict[int, str], groups: list[list[int]], nbytes: float, tag: str,
                      partial_out: bool) -> dict[int, str]:
        """Every chip sends its partial to every peer of its group; each sums what it holds."""
        out: dict[int, str] = {}
        s = self.s
        declared, size = s.buffers, int(math.ceil(nbytes))
        op_v, form = declared.name_id(name), declared.form_id(None, "sum")
        for grp in groups:
            strs = [str(c) for c in grp]
            recv = [[bufs[c]] for c in grp]  # per chip of the group: its own partial, then what it receives
            sends = []
            for src, ss in zip(grp, strs, strict=True):
                sb = bufs[src]
                pre = f"{name}#{tag}{ss}@"  # buffer ids f"{name}#{tag}{src}@{dst}", built from their parts
                for dst, ds, got in zip(grp, strs, recv, strict=True):
                    if src != dst:
                        bid = pre + ds
                        sends.append((src, dst, sb, bid))
                        got.append(bid)
            # the received partials, declared together (`Scheduler.buffer` for each, in order)
            declared.add_many([t[3] for t in sends], [t[1] for t in sends], size, op_v, form)
            s.send_many(sends, nbytes)
            for c, got in zip(grp, recv, strict=True):
                if len(grp) == 1:
                    out[c] = bufs[c]
                    continue
                bid = f"{name}@{c}" if not partial_out else f"{name}#{tag}sum@{c}"
                self._reduce_local(name, c, tuple(got), bid, nbytes, partial_out)
                out[c] = bid
        return out

    def _rs_ag(self, name: str, d: Dist, chips: list[int], nbytes: float) -> Dist:
        """Reduce-scatter (chip i sums column slice i) then all-gather and concatenate."""
        n, width = len(chips), d.width
        rows = self.s.buffers.bytes_of(d.bufs[chips[0]]) / max(width, 1)
        slices = {c: balanced(width, n, i) for i, c in enumerate(chips)}
        red: dict[int, str] = {}
        declared = self.s.buffers
        for c in chips:
            lo, hi = slices[c]
            part = (hi - lo) * rows
            ins = [d.bufs[c]]
            sends = []
            size, cols = int(math.ceil(part)), (lo, hi)
            for src in chips:
                if src != c:
                    bid = f"{name}#rs{src}@{c}"
                    sends.append((src, c, d.bufs[src], bid))
                    ins.append(bid)
            declared.add_many(ins[1:], [c] * len(sends), size, declared.name_id(name),
                              declared.form_id(cols, "sum"))  # `Scheduler.buffer` for each peer's slice, in order
            self.s.send_many(sends, part)  # equal-sized slices: one batch (the same transfers as `send` each)
            out = self.s.buffer(f"{name}#cols@{c}", c, name, part, cols=(lo, hi))
            self.s.instr(c, "VXM", name, "reduce", tuple(ins), out,
                         self.vxm_cycles(part / self.ab * n, part * n), attrs={"cols": (lo, hi)})
            red[c] = out
        return self._gather(name, Dist(COLS, red, slices, width), chips)

    def _gather(self, name: str, d: Dist, chips: list[int]) -> Dist:
        out: dict[int, str] = {}
        s = self.s
        declared = s.buffers
        attrs = {"parts": tuple(d.cols[src] for src in chips)}  # every chip's concat: one object
        # per source, once (not once per destination): its buffer, bytes and the declared form of its slice
        op_v = declared.name_id(name)
        srcs = [(src, d.bufs[src], declared.bytes_of(d.bufs[src]), declared.form_id(d.cols[src]), f"{name}#ag{src}@")
                for src in chips]
        total = sum(nb for _, _, nb, _, _ in srcs)  # every chip's concat holds every slice
        for c in chips:
            ins = []
            run: list[tuple[int, int, str, str]] = []  # consecutive sends of equal size: one send_many batch
            run_bytes = -1
            cs = str(c)
            for src, sbuf, nbytes, form, pre in srcs:
                if src == c:
                    ins.append(sbuf)
                else:
                    bid = pre + cs
                    declared.add_row(bid, c, nbytes, op_v, form)  # `Scheduler.buffer`
                    if nbytes != run_bytes and run:
                        s.send_many(run, run_bytes)
                        run = []
                    run_bytes = nbytes
                    run.append((src, c, sbuf, bid))
                    ins.append(bid)
            if run:
                s.send_many(run, run_bytes)
            bid = self.s.buffer(f"{name}@{c}", c, name, total)
            self.s.instr(c, "VXM", name, "concat", tuple(ins), bid, self.vxm_cycles(0, total), attrs=attrs)
            out[c] = bid
        return Dist(REP, out, width=d.width)

    def allgather(self, name: str) -> Dist:
        d = self.dist[name]
        chips = sorted(d.bufs)
        if len(chips) == 1 or all(d.cols[c] == (0, d.width) for c in chips):
            out = Dist(REP, dict(d.bufs), width=d.width)
        else:
            out = self._gather(name, d, chips)
        self.dist[name] = out
        return out

    # --- attention split ----------------------------------------------------------------
    def attn_split(self, layer: int) -> AttnSplit:
        if layer in self.attn:
            return self.attn[layer]
        a = self.m.layers[layer].attention
        chips = self.stage_of(layer).chips
        tp = len(chips)
        want = self.layout.kv_seq_split if a.window is None else 1
        h_par, seq = heads_split(tp, a.num_heads, want)
        kvh = 1 if a.kind == "mla" else a.num_kv_heads
        group = max(1, a.num_heads // kvh)
        heads, kv_heads, seq_index = {}, {}, {}
        for j, c in enumerate(chips):
            t, s = divmod(j, seq)
            h0, h1 = balanced(a.num_heads, h_par, t)
            heads[c] = (h0, h1)
            kv_heads[c] = (0, 1) if a.kind == "mla" else (h0 // group, (max(h1, h0 + 1) - 1) // group + 1)
            seq_index[c] = s
        sp = AttnSplit(heads, kv_heads, seq_index, seq)
        st = self.stage_of(layer)
        idx = self.stages.index(st)
        spread = helper_stages(idx, len(self.stages), self.layout.kv_spread) if a.window is None else []
        count = seq * (1 + len(spread))  # holders of one head group's KV: the sequence shards and their helpers
        for j, c in enumerate(chips):
            holders = [c] + [self.stages[h].chips[j] for h in spread]
            sp.parts[c] = [(h, KvStripe(i * seq + seq_index[c], count, self.layout.kv_block))
                           for i, h in enumerate(holders)]
        self.attn[layer] = sp
        return sp


@functools.lru_cache(maxsize=1 << 14)
def attended_in_share(context: int, new: int, window: int | None, share: KvStripe) -> tuple[float, int]:
    """(query-key pairs, distinct keys) of `share` for `new` causal positions after `context`. Memoised (a
    pure function of integers): every layer of a kind asks the same shares the same question, and a prefill
    chunk's answer costs a few numpy calls."""
    i, n, b = share.index, share.count, share.block
    if new == 1:  # a decode row: the same sums on scalars, without numpy's per-call cost
        end = context + 1
        start = 0 if window is None else max(0, end - window)
        over = stripe_count(end, i, n, b) - stripe_count(start, i, n, b)
        return float(over), share.owned(start, end)
    ends = np.arange(context + 1, context + new + 1, dtype=np.int64)  # keys visible to each new row: [start, end)
    starts = np.zeros_like(ends) if window is None else np.maximum(0, ends - window)
    over = stripe_count(ends, i, n, b) - stripe_count(starts, i, n, b)
    return float(np.sum(over)), share.owned(int(starts[0]), int(ends[-1]))


def kv_token_bytes(op: Op, graph: OpGraph, kv_heads: int, kvb: float) -> float:
    """KV bytes per token for `kv_heads` of this layer's cache."""
    a = graph.model.layers[op.layer].attention
    per = kv_elements_per_token(a, graph.kv_layout)
    total_heads = 1 if a.kind == "mla" else a.num_kv_heads
    return per * kvb * kv_heads / total_heads


def ceil_div(a: float, b: float) -> int:
    return int(math.ceil(a / b))
