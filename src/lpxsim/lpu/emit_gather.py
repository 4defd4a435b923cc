"""Prefill attention on a KV-spread layout: the owner gathers its helpers' KV stripes and attends itself.

On a `kv_spread` layout each full-attention KV head group is striped over the owner chip and its helpers in
other stages (`lowering.AttnSplit.parts`). A decode row is cheap to ship, so decode sends the query to every
holder, each attends over the stripe it holds and sends back its ``(o, lse)`` (`emit._emit_attention`). A
prefill sub-chunk has hundreds of query rows: shipped to 15 helpers, the rows and the partial outputs they send
back are ~8 KB each per row and head group (Gemma 4 31B, 8 query heads of 512 over one KV head), while a
helper holds one 32nd of the context at 2 KB per position. Where the helpers' stripes are fewer bytes than the
outputs they would send back, the owner gathers them instead:

1. the owner ropes its keys once more without the queries (a ``rope`` over no query head), takes from them
   and from the values the rows of the new positions each helper owns (a ``copy`` of one stripe's rows) and
   ships those; the helper stores them (its ``kv_write``, as in decode: the layout fixes where every
   position lives);
2. each helper reads its whole stripe of each stream, up to the step's end (a ``kv_read`` on its own chip,
   after its ``kv_write``) and sends it to the owner;
3. the owner attends once over the union of its own stripe and the gathered ones: the same key share an
   unspread layout's chip would read (``kv_stripe`` = the sequence shard), with ``attrs["kv_from"]`` naming
   the stripes in order: its own store first, then one per gathered input.

Every read is of KV its chip holds: `verify_kv` checks each ``kv_read`` and the owner's own-store read, and
that the gathered stripes are the ones ``kv_from`` names and tile the attention's share.
"""

from __future__ import annotations

from lpxsim.graph import Op
from lpxsim.lpu.lowering import KvStripe, Lowerer, kv_token_bytes


def gathers(lw: Lowerer, op: Op) -> bool:
    """Whether this step's owners gather their helpers' KV for `op`'s layer (module doc): a prefill (a decode
    or verify ships its few rows), of a layer with helpers, where on every owner the stripes gathered are no
    more bytes than the partial outputs the helpers would send back (so the owner receives no more either)."""
    layer = op.layer
    got = lw.kv_gather.get(layer)
    if got is not None:
        return got
    a = lw.m.layers[layer].attention
    ph = lw.g.phase
    got = False
    if ph.kind == "prefill" and a.kind != "mla":
        sp = lw.attn_split(layer)
        got = any(len(p) > 1 for p in sp.parts.values())
        for c, parts in sp.parts.items():
            h0, h1 = sp.heads[c]
            k0, k1 = sp.kv_heads[c]
            per_tok = kv_token_bytes(op, lw.g, k1 - k0, lw.kvb)
            keys = sum(share.owned(0, ctx + ph.new_tokens) for _, share in parts[1:] for ctx in ph.contexts)
            back = (len(parts) - 1) * lw.M * (h1 - h0) * a.v_head_dim * lw.ab
            if keys * per_tok > back:
                got = False
                break
    lw.kv_gather[layer] = got
    return got


def key_rope(lw: Lowerer, op: Op, chip: int, q: str, k: str, attrs: dict) -> str:
    """Rope `chip`'s keys alone (no query head), the buffer its helpers store from (module doc, step 1)."""
    sp = lw.attn_split(op.layer)
    d = int(op.attrs["head_dim"])
    h0 = sp.heads[chip][0]
    k0, k1 = sp.kv_heads[chip]
    width = (k1 - k0) * d
    out = lw.s.buffer(f"{op.name}#k@{chip}", chip, op.name, lw.M * width * lw.ab, cols=(h0 * d, h0 * d),
                      heads=(h0, h0))
    lw.s.instr(chip, "VXM", op.name, "rope", (q, k), out, lw.vxm_cycles(3 * lw.M * width, 2 * lw.M * width * lw.ab),
               {"heads": (h0, h0), "kv_heads": (k0, k1)}, {**attrs, "q_cols": (h0 * d, h0 * d), "k_cols": (k0 * d, k1 * d)})
    lw.k_rope[(op.layer, chip)] = out
    return out


def stripe_rows(lw: Lowerer, chip: int, buf: str, share: KvStripe) -> str:
    """The rows of `buf` (on `chip`) at the step's new positions that `share` owns: all a helper stores of a
    prefill's keys or values, and all that travels to it (module doc, step 1)."""
    b = lw.s.buffers[buf]
    ph = lw.g.phase
    rows = sum(share.owned(ctx, ctx + ph.new_tokens) for ctx in ph.contexts)
    nbytes = lw.s.buffers.bytes_of(buf) * rows / lw.M
    out = lw.s.buffer(f"{buf}#s{share.index}", chip, b.op, nbytes, cols=b.cols, heads=b.heads)
    slc, attrs = share.slices()
    # the input streams through the unit whole (rows of a stripe are strided)
    lw.s.instr(chip, "VXM", b.op, "copy", (buf,), out, lw.vxm_cycles(0, lw.s.buffers.bytes_of(buf)), slc, attrs)
    return out


def kv_read(lw: Lowerer, op: Op, holder: int, owner: int, wrote: str, share: KvStripe, attrs: dict) -> str:
    """`holder` reads its stripe `share` of `owner`'s KV heads, every position up to the step's end, after its
    own kv_write of this step (`wrote`): the buffer it sends the owner (module doc, step 2). `attrs`: the
    op's attrs with the share's (one object per content, `emit._AttrsOf`)."""
    sp = lw.attn_split(op.layer)
    k0, k1 = sp.kv_heads[owner]
    ph = lw.g.phase
    keys = sum(share.owned(0, ctx + ph.new_tokens) for ctx in ph.contexts)
    nbytes = keys * kv_token_bytes(op, lw.g, k1 - k0, lw.kvb)
    out = lw.s.buffer(f"{op.name}#kv@{holder}<{owner}", holder, op.name, nbytes)
    slc, _ = share.slices()
    lw.s.instr(holder, "MEM", op.name, "kv_read", (wrote,), out, lw.mem_cycles(nbytes), {"kv_heads": (k0, k1), **slc},
               attrs)
    return out
