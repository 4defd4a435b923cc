"""Per-op emission: each graph op becomes instructions (with slices) on its stage's chips."""

from __future__ import annotations

from lpxsim.graph import Op
from lpxsim.lpu.emit_gather import gathers, key_rope, kv_read, stripe_rows
from lpxsim.lpu.layout import balanced
from lpxsim.lpu.lowering import COLS, REP, SUM, Dist, KvStripe, Lowerer, attended_in_share, kv_token_bytes
from lpxsim.lpu.memtrim import release_free_memory
from lpxsim.lpu.program import Buffer

# Freed heap handed back to the system every this many ops: emitting frees many short-lived lists, dicts and
# grown arrays whose pages glibc keeps (holes below the heap top), ~35 MB of a large program's peak RSS; a trim
# costs ~3 ms (docs/benchmarks.md, issue 10).
TRIM_EVERY_OPS = 128
HEAD_Q = ("q_proj", "q_b_proj")
HEAD_KV = ("k_proj", "v_proj")
REPLICATED = ("q_a_proj", "kv_a_proj")


def emit_all(lw: Lowerer) -> None:
    """Emit every op of the graph in order, then the sampled token's return to the embedding chips. An op's
    distribution (`Lowerer.dist`) is dropped once its last consumer is emitted (peak memory: a large program
    has ~10^4 ops of ~10^2 chips each); the sampled token's is read at the end."""
    ops = lw.g.ops
    last_use = {x: k for k, op in enumerate(ops) for x in op.inputs}
    for k, op in enumerate(ops):
        handler = HANDLERS.get(op.kind)
        if handler is None:
            raise AssertionError(f"no LPU lowering for op kind {op.kind}")
        handler(lw, op)
        for x in op.inputs:
            if last_use[x] == k and x != "sample":
                lw.dist.pop(x, None)
        if k % TRIM_EVERY_OPS == TRIM_EVERY_OPS - 1:
            release_free_memory()
    _return_token(lw)


class _AttrsOf:
    """An op's attrs with a KV share's (`KvStripe.slices`) merged in: one dict object per content, so that
    the scheduler's `_shared_attrs` finds consecutive instructions' attrs by identity."""

    def __init__(self, op: Op) -> None:
        self.base, self.made = dict(op.attrs), {}

    def __call__(self, extra: dict) -> dict:
        key = tuple(extra.items())
        at = self.made.get(key)
        if at is None:
            at = self.made[key] = {**self.base, **extra}
        return at


def _suffix(op: Op) -> str:
    return op.name.split(".", 1)[1] if "." in op.name else op.name


def _emit_embed(lw: Lowerer, op: Op) -> None:
    if op.attrs.get("hidden_in"):  # an FFN-only program (AFD): the hidden state arrives at the first stage
        st, h = lw.stage_of(0), lw.m.hidden_size
        bufs = {c: lw.s.buffer(f"{op.name}@{c}", c, op.name, lw.M * h * lw.ab) for c in st.chips}
        for b in bufs.values():
            lw.s.input_ready(b, 0)
        lw.dist[op.name] = Dist(REP, bufs, width=h)
        return
    st = lw.stage_of(-1)
    V, h = lw.m.vocab_size, lw.m.hidden_size
    bufs, n = {}, len(st.chips)
    attrs = {"weight": op.weight, **dict(op.attrs)}  # one object for every chip (`Scheduler._shared_attrs`)
    for i, c in enumerate(st.chips):
        lo, hi = balanced(V, n, i)
        tok = lw.s.buffer(f"tokens@{c}", c, "tokens", 4 * lw.M)
        lw.s.input_ready(tok, 0)
        out = lw.s.buffer(f"{op.name}@{c}" if n == 1 else f"{op.name}#p@{c}", c, op.name, lw.M * h * lw.ab,
                          partial=None if n == 1 else "sum")
        if lw.m.tie_embeddings is False or not st.head:
            lw.add_weight(c, op, (hi - lo) * h * lw.wb)
        lw.s.instr(c, "MEM", op.name, "embed", (tok,), out, lw.mem_cycles(lw.M * h * lw.wb),
                   {"vocab": (lo, hi)}, attrs)
        bufs[c] = out
    lw.dist[op.name] = Dist(SUM if n > 1 else REP, bufs, width=h)


def _emit_norm(lw: Lowerer, op: Op) -> None:
    st = lw.stage_of(op.layer)
    src = op.inputs[0]
    width = op.shape[1]
    per_head = op.attrs.get("per_head")
    d = lw.dist[src]
    attrs = {"weight": op.weight, **dict(op.attrs)}  # one object for every chip (`Scheduler._shared_attrs`)
    if per_head and d.kind == COLS:
        bufs, cols = {}, {}
        for c, b in d.bufs.items():
            lo, hi = d.cols[c]
            out = lw.s.buffer(f"{op.name}@{c}", c, op.name, lw.M * (hi - lo) * lw.ab, cols=(lo, hi))
            if op.weight:
                lw.add_weight(c, op, per_head * lw.wb)
            lw.s.instr(c, "VXM", op.name, "norm", (b,), out, lw.vxm_cycles(4 * lw.M * (hi - lo), lw.M * (hi - lo) * lw.ab),
                       {"cols": (lo, hi)}, attrs)
            bufs[c], cols[c] = out, (lo, hi)
        lw.dist[op.name] = Dist(COLS, bufs, cols, width)
        return
    ins = lw.rep_on(src, st.chips)
    bufs = {}
    for c in st.chips:
        out = lw.s.buffer(f"{op.name}@{c}", c, op.name, lw.M * width * lw.ab)
        if op.weight:
            lw.add_weight(c, op, op.weight_bytes)
        lw.s.instr(c, "VXM", op.name, "norm", (ins[c],), out, lw.vxm_cycles(4 * lw.M * width, 2 * lw.M * width * lw.ab),
                   {}, attrs)
        bufs[c] = out
    lw.dist[op.name] = Dist(REP, bufs, width=width)


def _matmul_instr(lw: Lowerer, op: Op, c: int, src: str, rows: tuple[int, int], cols: tuple[int, int],
                  out_bytes: float, partial: bool, extra: dict | None = None, per_head: int = 1,
                  attrs: dict | None = None) -> str:
    """One matmul instruction; `attrs`: the op's attrs with its weight (built here when not given: callers
    pass one object for every chip of the op, `Scheduler._shared_attrs`), plus `extra`."""
    M = op.shape[0]
    k, n = rows[1] - rows[0], cols[1] - cols[0]
    wbytes = k * n * lw.wb * per_head
    flops = 2.0 * M * k * n * per_head
    out = lw.s.buffer(f"{op.name}#p@{c}" if partial else f"{op.name}@{c}", c, op.name, out_bytes,
                      cols=cols, partial="sum" if partial else None)
    lw.add_weight(c, op, wbytes)
    dur = max(lw.mem_cycles(wbytes + M * k * per_head * lw.ab), lw.mxm_cycles(flops))
    slc = {"rows": rows, "cols": cols}
    if attrs is None or extra:
        attrs = {"weight": op.weight, **dict(op.attrs), **(extra or {})}
    lw.s.instr(c, "MXM", op.name, "matmul", (src,), out, dur, slc, attrs)
    return out


def _emit_matmul(lw: Lowerer, op: Op) -> None:
    st = lw.stage_of(op.layer)
    chips, n = st.chips, len(st.chips)
    M, K, N = op.shape
    suf = _suffix(op)
    if op.attrs.get("per_head"):
        return _emit_per_head(lw, op)
    d_in = lw.dist[op.inputs[0]]
    attrs = {"weight": op.weight, **dict(op.attrs)}  # one object for every chip (`Scheduler._shared_attrs`)
    if d_in.kind in (COLS, SUM) and op.name.endswith(("o_proj", "down")):
        bufs = {}
        for c in chips:
            rows = d_in.cols[c] if d_in.kind == COLS or c in d_in.cols else (0, K)
            partial = rows != (0, K) or d_in.kind == SUM
            bufs[c] = _matmul_instr(lw, op, c, d_in.bufs[c], rows, (0, N), M * N * lw.ab, partial, attrs=attrs)
        full = all(lw.s.buffers.partial_of(b) is None for b in bufs.values())
        lw.dist[op.name] = Dist(REP if full else SUM, bufs, width=N)
        return
    ins = lw.rep_on(op.inputs[0], chips)
    fused = op.attrs.get("fused") == ("gate", "up")
    if suf in REPLICATED or n == 1:
        # whole op on each chip; fused gate_up columns index the intermediate width (program.py)
        width = N // 2 if fused else N
        bufs = {c: _matmul_instr(lw, op, c, ins[c], (0, K), (0, width), M * N * lw.ab, False,
                                 per_head=2 if fused else 1, attrs=attrs) for c in chips}
        lw.dist[op.name] = Dist(REP, bufs, {c: (0, width) for c in chips}, width)
        return
    cols: dict[int, tuple[int, int]] = {}
    if suf in HEAD_Q or suf in HEAD_KV:
        sp = lw.attn_split(op.layer)
        hd = op.attrs.get("head_dim") or lw.m.layers[op.layer].attention.head_dim
        rng = sp.heads if suf in HEAD_Q else sp.kv_heads
        cols = {c: (rng[c][0] * hd, rng[c][1] * hd) for c in chips}
    elif fused:
        cols = {c: balanced(N // 2, n, i) for i, c in enumerate(chips)}
    else:
        cols = {c: balanced(N, n, i) for i, c in enumerate(chips)}
    bufs = {}
    for c in chips:
        lo, hi = cols[c]
        width = 2 * (hi - lo) if fused else hi - lo
        bufs[c] = _matmul_instr(lw, op, c, ins[c], (0, K), (lo, hi), M * width * lw.ab, False,
                                per_head=2 if fused else 1, attrs=attrs)
    lw.dist[op.name] = Dist(COLS, bufs, cols, N // 2 if fused else N)


def _emit_per_head(lw: Lowerer, op: Op) -> None:
    """MLA absorption: per-head [k, n] products on the chip's heads."""
    st = lw.stage_of(op.layer)
    d_in = lw.dist[op.inputs[0]]
    sp = lw.attn_split(op.layer)
    M, k, n = op.shape
    bufs, cols = {}, {}
    for c in st.chips:
        h0, h1 = sp.heads[c]
        src = d_in.bufs[c] if c in d_in.bufs else lw.rep_on(op.inputs[0], (c,))[c]
        partial = d_in.kind == SUM
        out = _matmul_instr(lw, op, c, src, (0, k), (h0 * n, h1 * n), M * (h1 - h0) * n * lw.ab, partial,
                            {"heads_slice": (h0, h1)}, per_head=h1 - h0)
        bufs[c], cols[c] = out, (h0 * n, h1 * n)
    lw.dist[op.name] = Dist(SUM if d_in.kind == SUM else COLS, bufs, cols, op.attrs.get("heads", 1) * n)


def _emit_rope(lw: Lowerer, op: Op) -> None:
    st = lw.stage_of(op.layer)
    sp = lw.attn_split(op.layer)
    dq, dk = lw.dist[op.inputs[0]], lw.dist[op.inputs[1]]
    bufs, cols = {}, {}
    base, by_cols = dict(op.attrs), {}  # one attrs object per (q, k) columns (`Scheduler._shared_attrs`)
    gather = gathers(lw, op)
    for c in st.chips:
        q = dq.bufs[c] if c in dq.bufs else lw.rep_on(op.inputs[0], (c,))[c]
        k = dk.bufs[c] if c in dk.bufs else lw.rep_on(op.inputs[1], (c,))[c]
        qc = dq.cols.get(c, (0, dq.width))
        kc = dk.cols.get(c, (0, dk.width))
        width = (qc[1] - qc[0]) + (kc[1] - kc[0])
        out = lw.s.buffer(f"{op.name}@{c}", c, op.name, lw.M * width * lw.ab, cols=qc, heads=sp.heads[c])
        attrs = by_cols.get((qc, kc))
        if attrs is None:
            attrs = by_cols[(qc, kc)] = {**base, "q_cols": qc, "k_cols": kc}
        lw.s.instr(c, "VXM", op.name, "rope", (q, k), out, lw.vxm_cycles(3 * lw.M * width, 2 * lw.M * width * lw.ab),
                   {"heads": sp.heads[c], "kv_heads": sp.kv_heads[c]}, attrs)
        bufs[c], cols[c] = out, qc
        if gather and len(sp.parts[c]) > 1:  # the keys alone, for the helpers to store (`emit_gather`)
            key_rope(lw, op, c, q, k, base)
    lw.dist[op.name] = Dist(COLS, bufs, cols, dq.width)


def _emit_kv_write(lw: Lowerer, op: Op) -> None:
    """Each holder of a KV share writes the new positions it owns (helpers get the inputs by C2C)."""
    st = lw.stage_of(op.layer)
    sp = lw.attn_split(op.layer)
    bufs = {}
    ph = lw.g.phase
    window = op.attrs.get("window")
    attrs_of = _AttrsOf(op)
    ends = [ctx + ph.new_tokens for ctx in ph.contexts]
    first = [0 if window is None else max(0, ctx - window) for ctx in ph.contexts]  # oldest key kept
    counted: dict[KvStripe, tuple[int, int]] = {}  # share -> (positions written, positions stored)
    for c in st.chips:
        ins = []
        for src in op.inputs:
            d = lw.dist[src]
            ins.append(d.bufs[c] if c in d.bufs else lw.rep_on(src, (c,))[c])
        k0, k1 = sp.kv_heads[c]
        per_tok = kv_token_bytes(op, lw.g, k1 - k0, lw.kvb)
        for holder, share in sp.parts[c]:
            ws = counted.get(share)
            if ws is None:
                ws = counted[share] = (sum(share.owned(ctx, end) for ctx, end in zip(ph.contexts, ends, strict=True)),
                                       sum(share.owned(lo, end) for lo, end in zip(first, ends, strict=True)))
            written, stored = ws
            slc, attrs = share.slices()
            hins = tuple(ins)
            if holder != c:
                keys = lw.k_rope.get((op.layer, c))  # a gathering prefill ships the rows it owns, no queries
                src = ins if keys is None else [stripe_rows(lw, c, b, share) for b in (keys, *ins[1:])]
                hins = tuple(_ship(lw, b, c, holder) for b in src)
            region = f"kv:L{op.layer}" if holder == c else f"kv:L{op.layer}<{c}"
            lw.chip_use(holder).kv[region] = stored * per_tok
            out = lw.s.buffer(f"{op.name}@{holder}" if holder == c else f"{op.name}@{holder}<{c}", holder,
                              op.name, 0)
            lw.s.instr(holder, "MEM", op.name, "kv_write", hins, out, lw.mem_cycles(written * per_tok),
                       {"kv_heads": (k0, k1), **slc}, attrs_of(attrs))
            if holder == c:
                bufs[c] = out
            else:
                lw.remote_kv[(op.layer, c, holder)] = (out, hins[0])
    lw.dist[op.name] = Dist(REP, bufs)


def _ship(lw: Lowerer, buf: str, src: int, dst: int) -> str:
    """Copy a buffer to another chip (helper KV holders), once."""
    key = f"{buf}>{dst}"
    if key not in lw.s.buffers:
        b = lw.s.buffers[buf]  # `dataclasses.replace(b, id=key, chip=dst)`, without its per-call field walk
        lw.s.buffers[key] = Buffer(key, dst, b.op, b.cols, b.partial, b.bytes, b.region, b.heads, b.lse_shape,
                                   b.offset_bytes)
        lw.s.send(src, dst, buf, key, b.bytes)
    return key


def _attend(lw: Lowerer, op: Op, chip: int, owner: int, q: str, kvw: str, share: KvStripe, partial: bool,
            attrs_of: _AttrsOf, gathered: tuple[str, ...] = (), kv_from: tuple[KvStripe, ...] = ()):
    """One attention instruction on `chip` over its KV share `share` for `owner`'s heads: (its output, its row
    in the scheduler's instructions, its duration). `gathered`: buffers of helpers' stripes `kv_from[1:]` that
    with the chip's own stripe `kv_from[0]` make up `share` (`emit_gather`)."""
    sp = lw.attn_split(op.layer)
    a = lw.m.layers[op.layer].attention
    ph = lw.g.phase
    qk_dim, v_dim = (a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank) if a.kind == "mla" else (a.head_dim, a.v_head_dim)
    rate = lw.arch.mxm_flops_per_cycle.get("bf16") or lw.mxm_rate
    h0, h1 = sp.heads[owner]
    k0, k1 = sp.kv_heads[owner]
    pairs = nkeys = 0.0
    for ctx in ph.contexts:
        p, k = attended_in_share(ctx, ph.new_tokens, a.window, share)
        pairs += p
        nkeys += k
    kv_bytes = nkeys * kv_token_bytes(op, lw.g, k1 - k0, lw.kvb)
    flops = 2.0 * (h1 - h0) * (qk_dim + v_dim) * pairs
    dur = max(lw.mem_cycles(kv_bytes), lw.mxm_cycles(flops, rate)) + lw.vxm_cycles(3 * pairs * (h1 - h0), 0)
    width = lw.M * (h1 - h0) * v_dim * lw.ab
    name = f"{op.name}#lse@{chip}" if partial else f"{op.name}@{chip}"
    if chip != owner:
        name = f"{op.name}#lse@{chip}<{owner}"
    out = lw.s.buffer(name, chip, op.name, width, cols=(h0 * v_dim, h1 * v_dim), partial="lse" if partial else None,
                      heads=(h0, h1), lse_shape=(lw.M, h1 - h0) if partial else ())
    slc, attrs = share.slices()
    if kv_from:
        attrs = {**attrs, "kv_block": share.block, "kv_from": tuple((s.index, s.count) for s in kv_from)}
    row = lw.s.instr(chip, "MXM", op.name, "attention", (q, kvw, *gathered), out, dur,
                     {"heads": (h0, h1), "kv_heads": (k0, k1), **slc}, attrs_of(attrs),
                     extra_latency=lw.arch.vxm_latency, needs_all=True)
    return out, row, dur


def _emit_attention(lw: Lowerer, op: Op) -> None:
    st = lw.stage_of(op.layer)
    sp = lw.attn_split(op.layer)
    a = lw.m.layers[op.layer].attention
    q, kvw = lw.dist[op.inputs[0]], lw.dist[op.inputs[1]]
    v_dim = a.kv_lora_rank if a.kind == "mla" else a.v_head_dim
    split = sp.seq_shards > 1
    outs, cols, stats_ready = {}, {}, {}
    attrs_of, merge = _AttrsOf(op), {"mode": "merge"}  # one attrs object per content (`Scheduler._shared_attrs`)
    for c in st.chips:
        h0, h1 = sp.heads[c]
        cols[c] = (h0 * v_dim, h1 * v_dim)
        helpers = sp.parts[c][1:]
        if helpers and gathers(lw, op):  # the owner attends over its own and its helpers' stripes (`emit_gather`)
            fetched = tuple(_ship(lw, kv_read(lw, op, holder, c, lw.remote_kv[(op.layer, c, holder)][0], keys,
                                              attrs_of(keys.slices()[1])), holder, c)
                            for holder, keys in helpers)
            union = KvStripe(sp.seq_index[c], sp.seq_shards, lw.layout.kv_block)
            own, row, _ = _attend(lw, op, c, c, q.bufs[c], kvw.bufs[c], union, split, attrs_of, fetched,
                                  tuple(share for _, share in sp.parts[c]))
            stats_ready[c] = lw.s.instructions.first_out_cycle[row]
            outs[c] = own
            continue
        own, row, dur = _attend(lw, op, c, c, q.bufs[c], kvw.bufs[c], sp.parts[c][0][1], split or bool(helpers),
                                attrs_of)
        # the log-sum-exp is final with the output (needs_all)
        stats_ready[c] = lw.s.instructions.first_out_cycle[row]
        if helpers:
            parts = [own]
            for holder, keys in helpers:
                wrote, q_remote = lw.remote_kv[(op.layer, c, holder)]
                rem, _, _ = _attend(lw, op, holder, c, q_remote, wrote, keys, True, attrs_of)
                back = lw.s.buffer(f"{op.name}#lse@{c}<{holder}", c, op.name, lw.s.buffers.bytes_of(rem),
                                   cols=cols[c], partial="lse", heads=(h0, h1), lse_shape=(lw.M, h1 - h0))
                lw.s.send(holder, c, rem, back, lw.s.buffers.bytes_of(rem) + 4 * lw.M * (h1 - h0))
                parts.append(back)
            merged = lw.s.buffer(f"{op.name}#m@{c}" if split else f"{op.name}@{c}", c, op.name,
                                 lw.s.buffers.bytes_of(own), cols=cols[c], partial="lse" if split else None,
                                 heads=(h0, h1), lse_shape=(lw.M, h1 - h0) if split else ())
            mi = lw.s.instr(c, "VXM", op.name, "combine", tuple(parts), merged,
                            lw.vxm_cycles(lw.M * (h1 - h0) * (v_dim + 4) * len(parts), 0),
                            {"heads": (h0, h1)}, merge)
            own = merged
            stats_ready[c] = lw.s.instructions.first_out_cycle[mi]
        outs[c] = own
    if not split:
        lw.dist[op.name] = Dist(COLS, outs, cols, a.num_heads * v_dim)
        return
    _combine(lw, op, st.chips, sp, outs, cols, stats_ready, a.num_heads * v_dim)


def _combine(lw: Lowerer, op: Op, chips: tuple[int, ...], sp, outs, cols, stats_ready, width) -> None:
    """Exchange log-sum-exps among chips sharing heads; each rescales its own chunk's output."""
    groups: dict[tuple[int, int], list[int]] = {}
    for c in chips:
        groups.setdefault(sp.heads[c], []).append(c)
    res = {}
    for heads, grp in groups.items():
        nh = heads[1] - heads[0]
        sbytes = 4.0 * lw.M * nh
        for c in grp:
            ins = [outs[c]]
            sends = []
            for src in grp:
                if src != c:
                    bid = lw.s.buffer(f"{op.name}#stats{src}@{c}", c, op.name, sbytes, partial="lse", heads=heads,
                                      lse_shape=(lw.M, nh))
                    sends.append((src, c, outs[src], bid))
                    ins.append(bid)
            lw.s.send_many(sends, sbytes, complete_at=stats_ready)  # each source's statistics final then
            out = lw.s.buffer(f"{op.name}#p@{c}", c, op.name, lw.s.buffers.bytes_of(outs[c]), cols=cols[c],
                              partial="sum", heads=heads)
            lw.s.instr(c, "VXM", op.name, "combine", tuple(ins), out,
                       lw.vxm_cycles(lw.M * nh * (len(grp) + 4), lw.s.buffers.bytes_of(outs[c])),
                       {"heads": heads}, {"mode": "rescale", "stats_only": tuple(ins[1:])})
            res[c] = out
    lw.dist[op.name] = Dist(SUM, res, cols, width)


def _emit_pointwise(lw: Lowerer, op: Op) -> None:
    st = lw.stage_of(op.layer)
    ds = [lw.dist[i] for i in op.inputs]
    width = op.shape[1]
    attrs = dict(op.attrs)  # one object for every chip (`Scheduler._shared_attrs`)
    if all(d.kind == SUM for d in ds) or (len(ds) == 1 and ds[0].kind == COLS):
        kind = ds[0].kind
        bufs, cols = {}, {}
        for c in st.chips:
            ins = tuple(d.bufs[c] for d in ds)
            cc = ds[0].cols.get(c, (0, width))
            if op.attrs.get("gated"):
                cc = ds[0].cols[c]
            w = cc[1] - cc[0] if kind == COLS else width
            out = lw.s.buffer(f"{op.name}#p@{c}" if kind == SUM else f"{op.name}@{c}", c, op.name,
                              lw.M * w * lw.ab, cols=cc if kind == COLS else None,
                              partial="sum" if kind == SUM else None)
            lw.s.instr(c, "VXM", op.name, op.kind, ins, out, lw.vxm_cycles(2 * lw.M * w, 3 * lw.M * w * lw.ab),
                       {"cols": cc} if kind == COLS else {}, attrs)
            bufs[c], cols[c] = out, cc
        lw.dist[op.name] = Dist(kind, bufs, cols if kind == COLS else {}, width)
        return
    ins = [lw.rep_on(i, st.chips) for i in op.inputs]
    bufs = {}
    for c in st.chips:
        out = lw.s.buffer(f"{op.name}@{c}", c, op.name, lw.M * width * lw.ab)
        lw.s.instr(c, "VXM", op.name, op.kind, tuple(i[c] for i in ins), out,
                   lw.vxm_cycles(2 * lw.M * width, 3 * lw.M * width * lw.ab), {}, attrs)
        bufs[c] = out
    lw.dist[op.name] = Dist(REP, bufs, width=width)


def _emit_router(lw: Lowerer, op: Op) -> None:
    st = lw.stage_of(op.layer)
    ins = lw.rep_on(op.inputs[0], st.chips)
    bufs = {}
    attrs = {"weight": op.weight, **dict(op.attrs)}  # one object for every chip (`Scheduler._shared_attrs`)
    for c in st.chips:
        out = lw.s.buffer(f"{op.name}@{c}", c, op.name, op.act_out_bytes)
        lw.add_weight(c, op, op.weight_bytes)
        dur = max(lw.mem_cycles(op.weight_bytes), lw.mxm_cycles(op.flops))
        lw.s.instr(c, "MXM", op.name, "router", (ins[c],), out, dur, {}, attrs,
                   extra_latency=lw.arch.vxm_latency)
        bufs[c] = out
    lw.dist[op.name] = Dist(REP, bufs)


def _emit_experts(lw: Lowerer, op: Op) -> None:
    """Experts split in contiguous ranges; the static schedule budgets the worst case on each chip."""
    st = lw.stage_of(op.layer)
    x = lw.rep_on(op.inputs[0], st.chips)
    r = lw.rep_on(op.inputs[1], st.chips)
    E, k = op.attrs["num_experts"], op.attrs["top_k"]
    ebytes, eparams = op.attrs["expert_bytes"], op.attrs["expert_params"]
    n, h = len(st.chips), lw.m.hidden_size
    bufs = {}
    attrs = {"weight": op.weight, **dict(op.attrs)}  # one object for every chip (`Scheduler._shared_attrs`)
    for i, c in enumerate(st.chips):
        lo, hi = balanced(E, n, i)
        lw.add_weight(c, op, (hi - lo) * ebytes)
        active = min(hi - lo, k * lw.M)  # worst case: every routed choice lands here
        flops = 2.0 * min(lw.M * k, lw.M * (hi - lo)) * eparams
        dur = max(lw.mem_cycles(active * ebytes), lw.mxm_cycles(flops))
        partial = (lo, hi) != (0, E)
        out = lw.s.buffer(f"{op.name}#p@{c}" if partial else f"{op.name}@{c}", c, op.name, lw.M * h * lw.ab,
                          partial="sum" if partial else None)
        lw.s.instr(c, "MXM", op.name, "experts", (x[c], r[c]), out, dur, {"experts": (lo, hi)},
                   attrs, extra_latency=lw.arch.mxm_latency)
        bufs[c] = out
    lw.dist[op.name] = Dist(SUM if n > 1 else REP, bufs, width=h)


def _emit_sample(lw: Lowerer, op: Op) -> None:
    st = lw.stage_of(op.layer)
    d = lw.dist[op.inputs[0]]
    rows = op.shape[0]
    root = st.chips[0]
    parts = []
    attrs = dict(op.attrs)  # one object for every chip (`Scheduler._shared_attrs`)
    for c in st.chips:
        lo, hi = d.cols.get(c, (0, lw.m.vocab_size))
        out = lw.s.buffer(f"{op.name}#p@{c}", c, op.name, 8 * rows, cols=(lo, hi), partial="argmax")
        lw.s.instr(c, "VXM", op.name, "sample", (d.bufs[c],), out, lw.vxm_cycles(rows * (hi - lo), rows * (hi - lo) * 4),
                   {"vocab": (lo, hi)}, attrs)
        if c != root:
            bid = lw.s.buffer(f"{op.name}#p{c}@{root}", root, op.name, 8 * rows, cols=(lo, hi), partial="argmax")
            lw.s.send(c, root, out, bid, 8 * rows)
            parts.append(bid)
        else:
            parts.insert(0, out)
    final = lw.s.buffer(f"{op.name}@{root}", root, op.name, 4 * rows)
    lw.s.instr(root, "VXM", op.name, "reduce", tuple(parts), final, lw.vxm_cycles(2 * len(parts) * rows, 0),
               {}, {"fn": "argmax"})
    lw.dist[op.name] = Dist(REP, {root: final})


def _return_token(lw: Lowerer) -> None:
    """The sampled token goes back to every embedding chip: the loop the next step waits on."""
    if lw.g.phase.kind == "prefill" and lw.g.phase.new_tokens > 1 or "sample" not in lw.dist:
        return  # a prefill chunk, or an FFN-only program (no head): nothing loops back
    emb = lw.stage_of(-1)
    d = lw.dist["sample"]
    (root, buf), = d.bufs.items()
    for c in emb.chips:
        if c != root:
            bid = lw.s.buffer(f"next_tokens@{c}", c, "sample", 4 * lw.M)
            lw.s.send(root, c, buf, bid, 4 * lw.M)


HANDLERS = {
    "embed": _emit_embed,
    "norm": _emit_norm,
    "matmul": _emit_matmul,
    "rope": _emit_rope,
    "kv_write": _emit_kv_write,
    "attention": _emit_attention,
    "elementwise": _emit_pointwise,
    "residual": _emit_pointwise,
    "router": _emit_router,
    "experts": _emit_experts,
    "sample": _emit_sample,
}
