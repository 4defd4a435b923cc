"""The numerics of one Program instruction on one chip: a graph op restricted to its slice, or a collective.

Every function takes the instruction, its input buffers (declared `Buffer`
plus the `Value` the chip holds) and a `StepContext`, and returns the output
`data` and `meta`. Nothing here looks at chip numbers or layouts: the slice,
the buffers' column ranges and the chip's own KV cache are all there is, so a
wrong slice gives wrong numbers and a slice whose input is not on the chip
raises an EmulationError.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lpxsim.graph import Op, OpGraph
from lpxsim.lpu.emulate import kernels as K
from lpxsim.lpu.emulate.state import ChipState, EmulationError, KVSlot, Value
from lpxsim.lpu.program import Buffer, Instruction, stripe_positions

F32 = np.float32
Arg = tuple[Buffer, Value]


@dataclass
class StepContext:
    """What every instruction of one step may read besides its inputs: the graph, weights and token ids."""

    graph: OpGraph
    weights: Mapping[str, np.ndarray]
    token_ids: np.ndarray
    positions: np.ndarray  # absolute position of each row, sequence-major


def _fail(ins: Instruction, msg: str) -> EmulationError:
    return EmulationError(ins.op, ins.chip, ins.cycle_start, msg)


def _span(r: tuple[int, int] | None, full: int) -> tuple[int, int]:
    return (0, full) if r is None else (int(r[0]), int(r[1]))


def _slice(ins: Instruction, key: str, full: int) -> tuple[int, int]:
    """The instruction's `key` slice, which must lie inside the op's `full` extent."""
    lo, hi = _span(ins.slice.get(key), full)
    if not 0 <= lo <= hi <= full:  # empty is allowed: e.g. more chips than experts
        raise _fail(ins, f"slice {key}={lo}:{hi} is outside the op's extent 0:{full}")
    return lo, hi


def take_cols(ins: Instruction, arg: Arg, lo: int, hi: int, width: int) -> np.ndarray:
    """Columns lo:hi of the op output that `arg` holds a piece of; error if the buffer does not hold them."""
    buf, val = arg
    a, b = _span(buf.cols, width)
    if lo < a or hi > b:
        raise _fail(ins, f"needs columns {lo}:{hi} of {buf.op!r} but buffer {buf.id!r} holds {a}:{b}")
    return val.data[:, lo - a : hi - a]


def _input(ins: Instruction, args: list[Arg], op_name: str) -> Arg:
    for arg in args:
        if arg[0].op == op_name:
            return arg
    raise _fail(ins, f"has no input buffer holding {op_name!r}")


def _final(ins: Instruction, arg: Arg) -> None:
    if arg[0].partial is not None:
        raise _fail(ins, f"consumes {arg[0].partial!r} partial {arg[0].id!r} of {arg[0].op!r} without a reduce")


def op_width(graph: OpGraph, name: str) -> int:
    """Columns of an op's output (gate_up: the intermediate width, its buffers hold gate and up halves)."""
    op = graph.op(name)
    if op.kind == "matmul":
        return op.shape[2] // 2 if op.attrs.get("fused") else op.shape[2]
    if op.kind == "attention":
        a = graph.model.layers[op.layer].attention
        return a.num_heads * a.v_head_dim
    return op.shape[1] if len(op.shape) > 1 else 0


# --- graph op kinds ----------------------------------------------------------------------
def run_matmul(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    M, Kd, N = op.shape
    fused = bool(op.attrs.get("fused"))
    width = N // 2 if fused else N
    klo, khi = _slice(ins, "rows", Kd)
    nlo, nhi = _slice(ins, "vocab" if "vocab" in ins.slice else "cols", width)
    arg = _input(ins, args, op.inputs[0])
    if arg[0].partial not in (None, "sum"):
        _final(ins, arg)
    x = take_cols(ins, arg, klo, khi, Kd)
    if op.attrs.get("last_only") and x.shape[0] == ctx.graph.phase.tokens:
        n = ctx.graph.phase.new_tokens
        x = x[n - 1 :: n]
    W = ctx.weights[op.weight]
    if fused:
        y = np.concatenate([x @ W[nlo:nhi, klo:khi].T, x @ W[width + nlo : width + nhi, klo:khi].T], axis=-1)
    else:
        y = x @ W[nlo:nhi, klo:khi].T
    y = y.astype(F32)
    if (klo, khi) != (0, Kd) or arg[0].partial == "sum":  # one addend (linear in x); soft-cap waits for the reduce
        return y, {"partial": "sum", "cols": (nlo, nhi)}
    return K.softcap(y, op.attrs.get("softcap")), {"cols": (nlo, nhi)}


def run_norm(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    arg = _input(ins, args, op.inputs[0])
    _final(ins, arg)
    per_head = int(op.attrs.get("per_head", 0) or 0)
    a, b = _span(arg[0].cols, op.shape[1])
    if per_head and (a % per_head or b % per_head):
        raise _fail(ins, f"normalises columns {a}:{b}, which split a head of {per_head}")
    w = ctx.weights[op.weight] if op.weight else None
    if w is not None and not per_head:
        w = w[a:b]
    return K.rms_norm(arg[1].data, w, op.attrs["eps"], per_head), {}


def run_rope(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    at, D = op.attrs, int(op.attrs["head_dim"])
    H, KVH = int(at["heads"]), int(at["kv_heads"])
    q_arg, k_arg = _input(ins, args, op.inputs[0]), _input(ins, args, op.inputs[1])
    _final(ins, q_arg)
    _final(ins, k_arg)
    if "heads" in ins.slice:
        h0, h1 = (x * D for x in _slice(ins, "heads", H))
    else:
        h0, h1 = _span(q_arg[0].cols, H * D)
    if "kv_heads" in ins.slice:
        k0, k1 = (x * D for x in _slice(ins, "kv_heads", KVH))
    else:
        k0, k1 = _span(k_arg[0].cols, KVH * D)
    q = take_cols(ins, q_arg, h0, h1, H * D)
    k = take_cols(ins, k_arg, k0, k1, KVH * D)
    inv = K.rope_inv_freq(D, float(at["theta"]), float(at["partial"]), str(at.get("rope_type", "default")))
    cos, sin = K.rope_cos_sin(ctx.positions, inv)
    M = q.shape[0]
    qr = K.apply_rope(q.reshape(M, -1, D), cos, sin).reshape(M, -1)
    kr = K.apply_rope(k.reshape(M, -1, D), cos, sin).reshape(M, -1)
    return np.concatenate([qr, kr], axis=-1), {"q_cols": (h0, h1), "k_cols": (k0, k1)}


def _rope_part(ins: Instruction, arg: Arg, part: str, lo: int, hi: int) -> np.ndarray:
    """Columns lo:hi (of q or k) from a rope buffer laid out [q cols | k cols]."""
    meta = arg[1].meta
    q0, q1 = meta["q_cols"]
    a, b = meta[f"{part}_cols"]
    if lo < a or hi > b:
        raise _fail(ins, f"needs {part} columns {lo}:{hi} but rope buffer {arg[0].id!r} holds {a}:{b}")
    base = 0 if part == "q" else q1 - q0
    return arg[1].data[:, base + lo - a : base + hi - a]


def _kv_share(ins: Instruction) -> tuple[int, int, int, int, int]:
    """(lo, hi, stripe index, stripe count, block) of the KV positions this instruction's chip holds."""
    s0, s1 = _span(ins.slice.get("kv_seq"), 1 << 62)
    idx, count = _span(ins.slice.get("kv_stripe"), 1)
    block = int(ins.attrs.get("kv_block", 1))
    if count < 1 or not 0 <= idx < count or block < 1:
        raise _fail(ins, f"holds KV stripe {idx} of {count} in blocks of {block}, which is no share")
    return s0, s1, idx, count, block


def _owned_keys(ins: Instruction, lo: int, hi: int) -> tuple[np.ndarray, bool]:
    """Key positions of [lo, hi) the chip holds, and whether its share may leave keys out (an "lse" partial)."""
    s0, s1, idx, count, block = _kv_share(ins)
    keys = stripe_positions(max(lo, s0), min(hi, s1), idx, count, block)
    return keys, count > 1 or max(lo, s0) > lo or min(hi, s1) < hi


def run_kv_write(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext, chip: ChipState) -> Any:
    attn = ctx.graph.model.layers[op.layer].attention
    D, Dv, KVH = attn.head_dim, attn.v_head_dim, attn.num_kv_heads
    h0, h1 = _slice(ins, "kv_heads", KVH)
    s0, s1, idx, count, block = _kv_share(ins)
    r_arg, v_arg = _input(ins, args, op.inputs[0]), _input(ins, args, op.inputs[1])
    _final(ins, v_arg)
    k = _rope_part(ins, r_arg, "k", h0 * D, h1 * D)
    v = take_cols(ins, v_arg, h0 * Dv, h1 * Dv, KVH * Dv)
    n = ctx.graph.phase.new_tokens
    rows = r_arg[1].meta.get("rows")  # inputs of a stripe's rows only (`run_copy`): the same rows in both
    if rows is None and "rows" not in v_arg[1].meta:
        rows = np.arange(len(ctx.positions))
    elif rows is None or not np.array_equal(rows, v_arg[1].meta.get("rows", rows[:0])):
        raise _fail(ins, "stores keys and values of different rows")
    for j_row, row in enumerate(rows.tolist()):
        pos = ctx.positions[row]
        if s0 <= pos < s1 and (pos // block) % count == idx:
            for j, head in enumerate(range(h0, h1)):
                chip.slot(op.layer, row // n, head, D, Dv).write(
                    int(pos), k[j_row, j * D : (j + 1) * D], v[j_row, j * Dv : (j + 1) * Dv])
    return None, {}


def run_kv_read(ins: Instruction, args: list[Arg], ctx: StepContext, chip: ChipState) -> tuple[Any, dict, None]:
    """The chip's KV of its share (``kv_stripe``, ``kv_heads``), every position up to each stream's step end:
    ``{(sequence, kv head): (positions, k, v)}``, for another chip's attention (``attrs["kv_from"]``)."""
    op = ctx.graph.op(ins.op)
    attn = ctx.graph.model.layers[op.layer].attention
    h0, h1 = _slice(ins, "kv_heads", attn.num_kv_heads)
    n, out = ctx.graph.phase.new_tokens, {}
    for s, c in enumerate(ctx.graph.phase.contexts):
        keys, _ = _owned_keys(ins, 0, c + n)
        for head in range(h0, h1):
            slot = chip.kv.get((op.layer, s, head)) or KVSlot.empty(attn.head_dim, attn.v_head_dim)
            if not slot.holds(keys):
                raise _fail(ins, f"reads KV of layer {op.layer} sequence {s} kv head {head} positions "
                                 f"{keys[:1].tolist()}..{keys[-1:].tolist()} this chip does not hold")
            out[(s, head)] = (keys, slot.k[keys].copy(), slot.v[keys].copy())
    return out, {}, None


def _gathered_slot(ins: Instruction, own: KVSlot | None, parts: list[Arg], seq: int, head: int, d: int,
                   dv: int) -> KVSlot:
    """The chip's own slot with the KV gathered from other chips' ``kv_read`` outputs laid over it."""
    slot = KVSlot.empty(d, dv) if own is None else KVSlot(own.k.copy(), own.v.copy(), own.have.copy())
    for buf, val in parts:
        got = val.data.get((seq, head)) if isinstance(val.data, dict) else None
        if got is None:
            raise _fail(ins, f"gathers {buf.id!r}, which holds no KV of sequence {seq} kv head {head}")
        for pos, k, v in zip(*got, strict=True):
            slot.write(int(pos), k, v)
    return slot


def run_attention(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext, chip: ChipState) -> Any:
    attn = ctx.graph.model.layers[op.layer].attention
    D, H, KVH = attn.head_dim, attn.num_heads, attn.num_kv_heads
    group = H // KVH
    h0, h1 = _slice(ins, "heads", H)
    q = _rope_part(ins, _input(ins, args, op.inputs[0]), "q", h0 * D, h1 * D)
    ph, window = ctx.graph.phase, op.attrs.get("window")
    n, outs, lses, partial = ph.new_tokens, [], [], False
    gathered = [a for a in args if a[0].op == op.name] if ins.attrs.get("kv_from") else []  # `run_kv_read`'s
    for s, c in enumerate(ph.contexts):
        rows = slice(s * n, (s + 1) * n)
        q_pos = ctx.positions[rows]
        lo = 0 if window is None else max(0, int(q_pos.min()) - window + 1)
        keys, cut = _owned_keys(ins, lo, c + n)
        partial |= cut
        kv0, kv1 = h0 // group, (h1 - 1) // group + 1
        ks, vs = [], []
        for head in range(kv0, kv1):
            slot = chip.kv.get((op.layer, s, head))
            if gathered:
                slot = _gathered_slot(ins, slot, gathered, s, head, D, attn.v_head_dim)
            if slot is None and len(keys) == 0:  # a share with no key in range yet: nothing to read
                slot = KVSlot.empty(D, attn.v_head_dim)
            if slot is None or not slot.holds(keys):
                raise _fail(ins, f"reads KV of layer {op.layer} sequence {s} kv head {head} positions "
                                 f"{keys[:1].tolist()}..{keys[-1:].tolist()} this chip does not hold")
            ks.append(slot.k[keys])
            vs.append(slot.v[keys])
        qh = q[rows].reshape(n, h1 - h0, D)
        # query head h uses kv head h // group; this chip's heads start at h0, its kv heads at kv0
        sel = np.array([(h // group) - kv0 for h in range(h0, h1)])
        k_arr, v_arr = np.stack(ks)[sel], np.stack(vs)[sel]
        o, lse = K.attention_lse(qh, k_arr, v_arr, q_pos, keys, window, op.attrs.get("scale"), 1)
        outs.append(o)
        lses.append(lse)
    o, lse = np.concatenate(outs), np.concatenate(lses)
    return ((o, lse) if partial else o), {"heads": (h0, h1), "partial": "lse" if partial else None}


def _add(ins: Instruction, args: list[Arg], width: int) -> Any:
    """Sum of final values, or of "sum" partials (addition is linear); never a mix of the two."""
    kinds = {a[0].partial for a in args}
    if len(kinds) != 1 or not kinds <= {None, "sum"}:
        raise _fail(ins, f"adds buffers that are partials of different kinds {sorted(map(str, kinds))}")
    if len({_span(a[0].cols, width) for a in args}) != 1:
        raise _fail(ins, f"adds buffers holding different columns {[a[0].cols for a in args]}")
    total = np.sum([a[1].data for a in args], axis=0, dtype=F32)
    return total, ({"partial": "sum"} if kinds == {"sum"} else {})


def run_elementwise(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    if op.attrs.get("fn") == "add":
        return _add(ins, args, op.shape[1])
    for arg in args:
        _final(ins, arg)
    x = args[0][1].data
    return (K.gated(x, op.attrs["fn"]) if op.attrs.get("gated") else K.activation(x, op.attrs["fn"])), {}


def run_residual(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    return _add(ins, [_input(ins, args, op.inputs[0]), _input(ins, args, op.inputs[1])], op.shape[1])


def run_router(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    arg = _input(ins, args, op.inputs[0])
    _final(ins, arg)
    x = take_cols(ins, arg, 0, op.shape[1], op.shape[1])
    logits = (x @ ctx.weights[op.weight].T).astype(F32)
    return K.softmax_topk(logits, int(op.attrs["top_k"]), bool(op.attrs.get("renormalize", True))), {}


def run_experts(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    x_arg, r_arg = _input(ins, args, op.inputs[0]), _input(ins, args, op.inputs[1])
    _final(ins, x_arg)
    x = take_cols(ins, x_arg, 0, x_arg[1].data.shape[1], x_arg[1].data.shape[1])
    gates, idx = r_arg[1].data
    e0, e1 = _slice(ins, "experts", int(op.attrs["num_experts"]))
    gu, dn = ctx.weights[f"{op.weight}.gate_up_proj"], ctx.weights[f"{op.weight}.down_proj"]
    out = np.zeros_like(x)
    for e in np.unique(idx):
        if e0 <= e < e1:
            rows, slot = np.nonzero(idx == e)
            y = K.expert_ffn(x[rows], gu[e], dn[e], op.attrs["fn"])
            np.add.at(out, rows, y * gates[rows, slot][:, None])
    return out.astype(F32), ({} if (e0, e1) == (0, int(op.attrs["num_experts"])) else {"partial": "sum"})


def run_embed(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    table = ctx.weights[op.weight]
    v0, v1 = _slice(ins, "vocab", table.shape[0])
    c0, c1 = _slice(ins, "cols", table.shape[1])
    ids = ctx.token_ids
    inside = (ids >= v0) & (ids < v1)
    out = np.zeros((len(ids), c1 - c0), F32)
    out[inside] = table[ids[inside], c0:c1] * F32(op.attrs.get("scale", 1.0))
    return out, ({} if (v0, v1) == (0, table.shape[0]) else {"partial": "sum"})


def run_sample(ins: Instruction, op: Op, args: list[Arg], ctx: StepContext) -> Any:
    """Greedy choice over the whole vocabulary, or over a vocab slice as an (max logit, token) "argmax" partial."""
    arg = _input(ins, args, op.inputs[0])
    _final(ins, arg)
    V = op.shape[1]
    lo, hi = _slice(ins, "vocab", V)
    logits = take_cols(ins, arg, lo, hi, V)
    best = np.argmax(logits, axis=-1)
    if "vocab" not in ins.slice:
        return best.astype(np.int64), {}
    return (logits[np.arange(len(best)), best], (best + lo).astype(np.int64)), {"partial": "argmax"}


# --- collectives -------------------------------------------------------------------------
def _partials(ins: Instruction, args: list[Arg], partial: str) -> None:
    if not args:
        raise _fail(ins, "has no inputs")
    for buf, _ in args:
        if buf.op != ins.op or buf.partial != partial:
            raise _fail(ins, f"expects {partial!r} partials of {ins.op!r}, got {buf.id!r} ({buf.op}, {buf.partial})")


def run_reduce(ins: Instruction, args: list[Arg], ctx: StepContext, out: Buffer) -> tuple[Any, dict, Any]:
    """Sum of "sum" partials over the output's columns, or the best of "argmax" partials.

    The sum is final unless the output is declared a "sum" partial itself (the
    first level of a two-level all-reduce). Soft-capped logits are capped after
    the final sum.
    """
    if ins.attrs.get("fn") == "argmax":
        _partials(ins, args, "argmax")
        vals = np.stack([v.data[0] for _, v in args])
        idx = np.stack([v.data[1] for _, v in args])
        # the largest logit; on ties the lowest token index
        order = np.argsort(idx, axis=0, kind="stable")
        vals_s, idx_s = np.take_along_axis(vals, order, 0), np.take_along_axis(idx, order, 0)
        pick = np.argmax(vals_s, axis=0)
        return idx_s[pick, np.arange(idx.shape[1])], {}, None
    _partials(ins, args, "sum")
    width = op_width(ctx.graph, ins.op)
    lo, hi = _span(out.cols, width)
    total = np.sum([take_cols(ins, a, lo, hi, width) for a in args], axis=0, dtype=F32)
    op = ctx.graph.op(ins.op)
    if out.partial is None and op.kind == "matmul" and op.attrs.get("softcap"):
        total = K.softcap(total, op.attrs["softcap"])
    return total, {}, out.partial


def run_concat(ins: Instruction, args: list[Arg], ctx: StepContext, out: Buffer) -> tuple[Any, dict, None]:
    """Place column ranges side by side; the parts must tile a contiguous range with no gap or overlap."""
    width = op_width(ctx.graph, ins.op)
    parts = sorted(args, key=lambda a: _span(a[0].cols, width))
    for buf, _ in parts:
        if buf.op != ins.op or buf.partial is not None:
            raise _fail(ins, f"concatenates {buf.id!r} ({buf.op}, partial {buf.partial})")
    spans = [_span(b.cols, width) for b, _ in parts]
    for (_, b), (c, _) in zip(spans, spans[1:], strict=False):
        if b != c:
            raise _fail(ins, f"concatenates column ranges {spans} that are not contiguous")
    return np.concatenate([v.data for _, v in parts], axis=1), {"cols": (spans[0][0], spans[-1][1])}, None


def run_combine(ins: Instruction, args: list[Arg], ctx: StepContext, out: Buffer) -> tuple[Any, dict, Any]:
    """Split-K attention over key chunks.

    Plain: merge all chunks' (o, lse) into the final output. ``mode="rescale"``:
    the inputs are this chip's own chunk plus the other chunks' statistics
    (``attrs["stats_only"]``); the output is the own chunk rescaled by
    exp(lse_own - lse_all), a "sum" partial that a later reduce (after o_proj,
    which is linear) completes.
    """
    _partials(ins, args, "lse")
    op = ctx.graph.op(ins.op)
    dv = ctx.graph.model.layers[op.layer].attention.v_head_dim
    if len({a[0].heads for a in args}) != 1:
        raise _fail(ins, f"combines chunks of different heads {[a[0].heads for a in args]}")
    if ins.attrs.get("mode") != "rescale":
        if any(v.data[0] is None for _, v in args):
            raise _fail(ins, "merges a chunk of which only the softmax statistics were sent")
        o, lse = K.merge_lse([v.data for _, v in args], dv)
        if out.partial == "lse":  # KV helpers' chunks folded into this chip's own: still one chunk of a split
            return (o, lse), {}, "lse"
        return o, {}, None
    stats = set(ins.attrs.get("stats_only", ()))
    own = [a for a in args if a[0].id not in stats]
    if len(own) != 1:
        raise _fail(ins, f"rescale needs exactly one own chunk, got {len(own)}")
    o_own, lse_own = own[0][1].data
    if o_own is None:
        raise _fail(ins, f"rescales {own[0][0].id!r}, of which only statistics are on this chip")
    lses = np.stack([v.data[1] for _, v in args])
    mx = lses.max(axis=0)
    safe = np.where(np.isfinite(mx), mx, F32(0.0))
    total = np.log(np.exp(lses - safe[None], dtype=F32).sum(axis=0)) + safe
    with np.errstate(invalid="ignore"):
        scale = np.where(np.isfinite(lse_own), np.exp(lse_own - total, dtype=F32), F32(0.0))
    M, h = lse_own.shape
    o = (o_own.reshape(M, h, dv) * scale[..., None]).reshape(M, h * dv).astype(F32)
    return o, {}, "sum"


def run_copy(ins: Instruction, args: list[Arg], ctx: StepContext, out: Buffer) -> tuple[Any, dict, Any]:
    """The input; with a ``kv_stripe`` slice, only its rows at the new positions that stripe owns (their
    rows of the step kept in ``meta["rows"]``, for the kv_write that stores them)."""
    if len(args) != 1:
        raise _fail(ins, f"copies {len(args)} buffers")
    buf, val = args[0]
    if "kv_stripe" not in ins.slice:
        return val.data, dict(val.meta), buf.partial
    if "rows" in val.meta or not isinstance(val.data, np.ndarray) or buf.partial is not None:
        raise _fail(ins, f"takes a stripe's rows of {buf.id!r}, which is not a whole step's final rows")
    _, _, idx, count, block = _kv_share(ins)
    rows = np.flatnonzero((ctx.positions // block) % count == idx)
    return val.data[rows], {**val.meta, "rows": rows}, None


COLLECTIVES = {"reduce": run_reduce, "concat": run_concat, "combine": run_combine, "copy": run_copy}
